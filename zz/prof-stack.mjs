import fs from "node:fs";
const [dir, name] = process.argv.slice(2);
const files = fs.readdirSync(dir).map((f) => `${dir}/${f}`);
const stacks = new Map();
for (const file of files) {
  const p = JSON.parse(fs.readFileSync(file, "utf8"));
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const dt = new Map();
  for (let i = 0; i < p.samples.length; i++) dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  for (const [id, t] of dt) {
    const n = nodes.get(id);
    if (n.callFrame.functionName !== name) continue;
    const chain = [];
    for (let q = parent.get(id); q !== undefined && chain.length < 8; q = parent.get(q)) { const f = nodes.get(q).callFrame; chain.push(`${f.functionName || "anon"}:${f.lineNumber}`); }
    const key = chain.join(" < ");
    stacks.set(key, (stacks.get(key) ?? 0) + t);
  }
}
[...stacks].sort((a, b) => b[1] - a[1]).slice(0, 10).forEach(([k, v]) => console.log((v / 1000 / files.length).toFixed(1).padStart(7), k));
