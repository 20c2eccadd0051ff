import { spawn } from "node:child_process";
import { GlueClient, GetTableCommand, GetPartitionsCommand, GetTablesCommand } from "@aws-sdk/client-glue";
import { GlueCatalog } from "../src/catalog/glue-catalog.js";
import { defineTable } from "../src/model/table.js";
import { makePartition } from "../src/model/partition.js";
import { newRunIdAfter } from "../src/model/run-id.js";

const server = spawn("moto_server", ["-p", "5077"], { stdio: "ignore" });
await new Promise((r) => setTimeout(r, 2500));
try {
  const client = new GlueClient({ endpoint: "http://127.0.0.1:5077", region: "us-east-1", credentials: { accessKeyId: "a", secretAccessKey: "b" } });
  const catalog = new GlueCatalog(client, { database: "lakedb", uriOf: (k) => `s3://bucket/p/${k}` });
  await catalog.open();
  const cols = [{ name: "id", type: "BIGINT", nullable: false }, { name: "amount", type: "DECIMAL(10,2)", nullable: true }];
  const byDay = defineTable({ name: "orders", columns: cols, partitionKeys: ["day"], compression: "snappy" } as never);
  await catalog.createTable(byDay);
  let run = newRunIdAfter(undefined);
  const days = ["2026-10-30", "2026-11-01"];
  await catalog.movePointers(byDay, days.map((d) => ({ partition: makePartition([["day", d]]), runId: (run = newRunIdAfter(run)), location: `orders/day=${d}/run=${run}/`, kind: "swap" as const })));
  const byMonth = defineTable({ ...byDay, partitionKeys: ["month"], layout: "orders__layout_1a2b3c", replacedLayout: "orders" } as never);
  await catalog.createLayout(byMonth);
  await catalog.movePointers(byMonth, ["2026-10", "2026-11"].map((m) => ({ partition: makePartition([["month", m]]), runId: (run = newRunIdAfter(run)), location: `orders__layout_1a2b3c/month=${m}/run=${run}/`, kind: "swap" as const })));
  console.log("tables before switch", (await catalog.listTables()).map((t) => `${t.name} ${t.partitionKeys} ${t.layout}`));
  await catalog.updateTable(byMonth);
  const view = (await client.send(new GetTableCommand({ DatabaseName: "lakedb", Name: "orders" }))).Table!;
  console.log("view", view.TableType, JSON.stringify(view.PartitionKeys), view.ViewOriginalText?.slice(0, 40), view.StorageDescriptor?.Columns?.map((c) => c.Name));
  console.log("getTable", (await catalog.getTable("orders"))?.layout, "listTables", (await catalog.listTables()).map((t) => t.name));
  console.log("layout pointers", (await catalog.listPointers(byMonth)).map((p) => p.partition.values.join()));
  console.log("old pointers while view", (await catalog.listPointers(byDay)).map((p) => p.partition.values.join()));
  await catalog.removePointers(byDay, [makePartition([["day", days[0]!]])]);
  // add a column in the layout
  const wider = defineTable({ ...byMonth, columns: [...cols, { name: "note", type: "VARCHAR", nullable: true }] } as never);
  await catalog.updateTable(wider);
  const parts = (await client.send(new GetPartitionsCommand({ DatabaseName: "lakedb", TableName: "orders__layout_1a2b3c" }))).Partitions!;
  console.log("layout partition columns", parts.map((p) => p.StorageDescriptor?.Columns?.map((c) => c.Name).join("|")));
  // back
  await catalog.updateTable(byDay);
  const back = (await client.send(new GetTableCommand({ DatabaseName: "lakedb", Name: "orders" }))).Table!;
  console.log("back", back.TableType, JSON.stringify(back.PartitionKeys), back.ViewOriginalText, back.Parameters);
  console.log("old pointers back", (await catalog.listPointers(byDay)).map((p) => `${p.partition.values.join()} ${p.runId}`));
  await catalog.dropLayout(byMonth);
  await catalog.dropTable("orders");
  console.log("left", (await client.send(new GetTablesCommand({ DatabaseName: "lakedb" }))).TableList?.map((t) => t.Name));
} finally {
  server.kill();
}
