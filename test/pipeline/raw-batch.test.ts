import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { BACKEND_FACTORIES, selectedBackends, tempDir } from "../support/lake-fixture.js";

// The raw layer is written in one pass: every changed partition's run, under multi-key Hive paths and values
// with dots and dashes; unchanged partitions keep their runs.

const CONFIG = `datasets:
  readings:
    source: {format: csv, path: readings.csv}
    columns:
      sensor: {type: VARCHAR, nullable: false}
      value: DOUBLE
      ts: TIMESTAMP
    partition:
      p_year: strftime(ts, '%Y')
      p_month: strftime(ts, '%m')
      site: sensor
`;

function csv(rows: readonly (readonly [string, number, string])[]): string {
  return `sensor,value,ts\n${rows.map(([s, v, t]) => `${s},${v},${t}`).join("\n")}\n`;
}

describe.each(selectedBackends())("raw runs written in one pass, on the %s backend", (backendName) => {
  it("lands multi-key partitions whole, and rewrites only the partitions whose content changed", async () => {
    const backend = await BACKEND_FACTORIES[backendName]!();
    const { dir, cleanup } = tempDir("lakeswap-raw-batch-");
    const lake = await backend.open();
    try {
      writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
      const file = path.join(dir, "readings.csv");
      const sync = () => new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml")), { inputs: [file] }).sync();
      const rows: [string, number, string][] = [];
      for (const site of ["north-1", "v2.south", "east_3"]) {
        for (const month of ["01", "02", "11"]) for (let i = 0; i < 4; i += 1) rows.push([site, i + 0.5, `2026-${month}-0${i + 1} 10:00:00`]);
      }
      writeFileSync(file, csv(rows));
      const first = await sync();
      expect(first.totals).toMatchObject({ built: 9, failed: 0, rows: 36 });
      const counts = await lake.query("SELECT p_year, p_month, site, count(*) AS n, sum(value) AS v FROM readings_raw GROUP BY p_year, p_month, site ORDER BY p_year, p_month, site");
      // Athena answers in text, DuckDB in values: compared as text and numbers.
      expect(counts.rows.map(([y, m, s, n, v]) => [String(y), String(m), String(s), Number(n), Number(v)])).toEqual(
        ["01", "02", "11"].flatMap((m) => ["east_3", "north-1", "v2.south"].map((site) => ["2026", m, site, 4, 8])),
      );
      const runs = new Map(first.partitions.map((p) => [p.partition, p.run]));

      // One reading changes: only its partition gets a new run; the others keep theirs.
      writeFileSync(file, csv(rows.map((r) => (r[0] === "v2.south" && r[2].startsWith("2026-02-02") ? [r[0], 99, r[2]] : r))));
      const second = await sync();
      const built = second.partitions.filter((p) => p.action === "build");
      expect(built.map((p) => `${p.partition} ${p.reason}`)).toEqual(["p_year=2026/p_month=02/site=v2.south content changed"]);
      for (const p of second.partitions.filter((q) => q.action === "skip")) expect((await lake.pointer("readings_raw", p.partition))?.runId).toBe(runs.get(p.partition));
      const changed = await lake.query("SELECT sum(value) FROM readings_raw WHERE p_month = '02' AND site = 'v2.south'");
      expect(Number(changed.rows[0]?.[0])).toBe(8 - 1.5 + 99);
    } finally {
      await lake.close();
      cleanup();
      await backend.cleanup();
    }
  });
});
