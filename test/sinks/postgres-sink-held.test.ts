import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { publishSync } from "../../src/lake/operations/publish.js";
import { openSink } from "../../src/sinks/open-sink.js";
import { tempDir } from "../support/lake-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";

// The sink x held syncs: a sink only ever receives published rows. An all_or_nothing sync that fails sends nothing;
// one that passes sends at its end, after the publication; a --hold sync sends nothing, and the first sync after
// its publication sends what it published.

const postgres = usePostgres("held");

const CONFIG = `datasets:
  orders:
    source: {format: csv, path: delivery.csv}
    columns: {order_id: BIGINT, amount: "DECIMAL(10,2)", day: VARCHAR}
    partition: {d: day}
    publish: all_or_nothing
    audits:
      - range: {amount: {max: 500}}
    sinks:
      postgres: {url: "\${DATABASE_URL}", table: shop.orders, mode: partition_replace}
`;

describe.skipIf(!postgresAvailable())("PostgreSQL sink x held syncs", () => {
  it("receives only published rows: nothing from a held all_or_nothing sync, all of a passing one, a --hold sync's after its publication", async () => {
    const { url, query } = await postgres.database();
    process.env.DATABASE_URL = url;
    const { dir, cleanup } = tempDir("lakeswap-sink-held-");
    postgres.onCleanup(cleanup);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
    const lake = await openEmbeddedLake(path.join(dir, "lake"));
    postgres.onCleanup(() => lake.close());
    const sync = (rows: string, options: { hold?: boolean } = {}) => {
      writeFileSync(path.join(dir, "delivery.csv"), `order_id,amount,day\n${rows}\n`);
      return new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml")), { openSink, ...options }).sync();
    };
    const target = async () => (await query<{ r: string }>("SELECT concat_ws(' ', order_id, amount, d) AS r FROM shop.orders ORDER BY order_id").catch(() => [])).map((row) => row.r);

    const first = await sync("1,10.00,a\n2,20.00,b");
    expect(first.held).toBeUndefined();
    expect(await target()).toEqual(["1 10.00 a", "2 20.00 b"]);

    // Day b fails its audit: nothing of the sync moves, and the sink gets nothing (day a's change included).
    const failing = await sync("1,11.00,a\n2,900.00,b");
    expect(failing.held?.status).toBe("held");
    expect(failing.sinks).toEqual([]);
    expect(await target()).toEqual(["1 10.00 a", "2 20.00 b"]);

    const passing = await sync("1,11.00,a\n2,21.00,b");
    expect(passing.held).toBeUndefined();
    expect(passing.sinks.filter((s) => s.action === "sent").map((s) => s.partition).sort()).toEqual(["d=a", "d=b"]);
    expect(await target()).toEqual(["1 11.00 a", "2 21.00 b"]);

    const held = await sync("1,12.00,a\n2,21.00,b", { hold: true });
    expect(held.sinks).toEqual([]);
    expect(await target()).toEqual(["1 11.00 a", "2 21.00 b"]);
    await publishSync(lake, held.syncId);
    const after = await sync("1,12.00,a\n2,21.00,b");
    expect(after.totals.built).toBe(0);
    expect(after.sinks.filter((s) => s.action === "sent").map((s) => s.partition)).toEqual(["d=a"]);
    expect(await target()).toEqual(["1 12.00 a", "2 21.00 b"]);
  });
});
