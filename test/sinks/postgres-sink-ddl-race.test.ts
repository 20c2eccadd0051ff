// Two syncs that send to one PostgreSQL schema for the first time at the same moment (two pipelines' first runs, each
// its own target table): each sink creates the schema and the schema's state table where they are missing. PostgreSQL's
// CREATE ... IF NOT EXISTS is not safe against another session creating the same object: the loser fails with
// 'duplicate key value violates unique constraint "pg_namespace_nspname_index"' (or pg_type's), and its sync with it.
import { describe, expect, it } from "vitest";
import { PostgresSink } from "../../src/sinks/postgres/postgres-sink.js";
import type { SinkLayout, SinkMode } from "../../src/sinks/sink.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { TEST_SOURCE } from "../support/sink-runs.js";

const postgres = usePostgres("ddl_race");

const layoutOf = (lakeTable: string, mode: SinkMode): SinkLayout => ({
  lakeTable,
  source: TEST_SOURCE,
  columns: [
    { name: "id", type: "BIGINT", nullable: false },
    { name: "day", type: "VARCHAR", nullable: false },
  ],
  partitionKeys: ["day"],
  mode,
  primaryKey: mode === "upsert" ? ["id"] : [],
});

describe.runIf(postgresAvailable())("PostgreSQL sinks preparing new targets in one new schema at once", () => {
  it.each(["partition_replace", "upsert"] as const)("%s: every sink prepares; the schema, its state table and each target are made once", async (mode) => {
    // A fresh database each round: the race is on the first creation of the schema and its state table.
    for (let round = 0; round < 6; round += 1) {
      const { url, query } = await postgres.database();
      const sinks = ["orders", "refunds", "events"].map(
        (table) => new PostgresSink({ kind: "postgres", url, maskedUrl: url, schema: "lake", table, mode, primaryKey: mode === "upsert" ? ["id"] : [], hardDelete: false }),
      );
      try {
        const prepared = await Promise.allSettled(sinks.map((sink, i) => sink.prepare(layoutOf(["orders", "refunds", "events"][i]!, mode))));
        expect(prepared.map((p) => (p.status === "rejected" ? String(p.reason) : "prepared"))).toEqual(["prepared", "prepared", "prepared"]);
      } finally {
        for (const sink of sinks) await sink.close();
      }
      const tables = await query<{ name: string }>("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'lake' AND table_name NOT LIKE '%\\_p\\_%' ORDER BY 1");
      expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(["events", "lakeswap_state", "orders", "refunds"]));
    }
  });
});
