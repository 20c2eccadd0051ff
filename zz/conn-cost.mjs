import { DuckDBInstance } from "@duckdb/node-api";
const inst = await DuckDBInstance.create(":memory:");
for (let i = 0; i < 50; i++) { const c = await inst.connect(); c.closeSync(); }
let t0 = performance.now(); const c0 = process.cpuUsage();
for (let i = 0; i < 200; i++) { const c = await inst.connect(); await c.run("SELECT 1"); c.closeSync(); }
const c = process.cpuUsage(c0); console.log("connect+run+close", ((performance.now() - t0) / 200).toFixed(3), "ms wall", ((c.user + c.system) / 1000 / 200).toFixed(3), "ms cpu");
const conn = await inst.connect();
t0 = performance.now();
for (let i = 0; i < 200; i++) { await conn.run("SELECT 1"); }
console.log("run only", ((performance.now() - t0) / 200).toFixed(3), "ms wall");
t0 = performance.now();
for (let i = 0; i < 200; i++) { const c = await inst.connect(); c.closeSync(); }
console.log("connect+close", ((performance.now() - t0) / 200).toFixed(3), "ms wall");
