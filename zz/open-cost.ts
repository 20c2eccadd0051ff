import { openEmbeddedLake } from "../src/open/open-lake.js";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
const dir = mkdtempSync(path.join(tmpdir(), "oc-"));
for (let i = 0; i < 3; i++) { const l = await openEmbeddedLake(path.join(dir, "lake"+i)); await l.close(); }
const c0 = process.cpuUsage(); const t0 = Date.now();
for (let i = 0; i < 20; i++) { const l = await openEmbeddedLake(path.join(dir, "lake"+i)); await l.query("SELECT 1").catch(() => undefined); await l.close(); }
const c = process.cpuUsage(c0); console.log("per open+close", ((c.user + c.system) / 1000 / 20).toFixed(1), "ms cpu", ((Date.now() - t0) / 20).toFixed(1), "ms wall");
