import fs from "node:fs";
const files = fs.readdirSync(process.argv[2]).map((f) => `${process.argv[2]}/${f}`);
const byFn = new Map(), byFile = new Map(); let total = 0;
for (const file of files) {
  const p = JSON.parse(fs.readFileSync(file, "utf8"));
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const dt = new Map();
  for (let i = 0; i < p.samples.length; i++) dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  for (const [id, t] of dt) {
    const n = nodes.get(id); const cf = n.callFrame;
    const key = `${cf.functionName || "(anon)"} ${cf.url.split("/").slice(-2).join("/")}:${cf.lineNumber}`;
    byFn.set(key, (byFn.get(key) ?? 0) + t); total += t;
    const f = cf.url.split("/").slice(-2).join("/") || cf.functionName;
    byFile.set(f, (byFile.get(f) ?? 0) + t);
  }
  console.log(file, (p.endTime - p.startTime) / 1000, "ms");
}
const show = (m, n) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).forEach(([k, v]) => console.log((v / 1000 / files.length).toFixed(1).padStart(8), k));
console.log("total per profile", (total / 1000 / files.length).toFixed(1)); show(byFile, 15); console.log("--"); show(byFn, 30);
