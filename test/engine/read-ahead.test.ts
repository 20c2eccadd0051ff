// A delivery named before it is landed (Landing.identify, given the request it is to be landed with) is hashed on a
// thread of its own while its CSV scan (src/landing/duckdb/csv-stream.ts) is read ahead on the JavaScript thread;
// landing takes that scan only where the files are still as they were before it. Both must change nothing of what
// lands: the same id, rows, bad rows and signatures as a landing that reads the files one step after the other.
import { statSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeliveryIds } from "../../src/landing/duckdb/delivery-identity.js";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import type { LandRequest, LandedDelivery } from "../../src/landing/landing.js";
import { METADATA_FOLDERS, TEMP_PREFIX } from "../../src/lake/layout.js";
import { partitionPath } from "../../src/model/partition.js";
import { LocalStore } from "../../src/store/local-store.js";
import { embeddedBackend, inputFile, tempDir } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders, shuffled } from "../support/pipeline-fixture.js";

let workspace: ReturnType<typeof tempDir>;
/** Every delivery it identifies with a request is hashed on a thread and scanned ahead, however small. */
let ahead: DuckDbLanding;
/** The landing as it reads a delivery it was not asked to identify first. */
let plain: DuckDbLanding;
beforeAll(() => {
  workspace = tempDir("lakeswap-read-ahead-");
  const store = new LocalStore(path.join(workspace.dir, "lake"), { folders: METADATA_FOLDERS });
  ahead = new DuckDbLanding(store, { stagingPrefix: TEMP_PREFIX, hashThreadMinBytes: 0 });
  plain = new DuckDbLanding(store, { stagingPrefix: TEMP_PREFIX });
});
afterAll(async () => {
  await ahead.close();
  await plain.close();
  workspace.cleanup();
});

const file = (text: string | Buffer, name?: string): string => inputFile(workspace.dir, text, name);

const columns: LandRequest["columns"] = [
  { name: "id", type: "BIGINT", nullable: false },
  { name: "note", type: "VARCHAR", nullable: true },
  { name: "day", type: "VARCHAR", nullable: false },
];
const request = (files: string[], extra: Partial<LandRequest> = {}): LandRequest => ({
  files, format: "csv", header: true, delimiter: ",", columns, partition: [{ key: "p", expression: "day" }], signatureColumns: ["id", "note"], ...extra,
});

/** What a landing found, as a user sees it (or the error it refused the delivery with). */
function outcome(delivery: LandedDelivery) {
  return {
    id: delivery.id,
    counts: [delivery.rowsRead, delivery.rowsLoaded, delivery.rowsRejected],
    rejects: delivery.firstRejects.map((r) => [path.basename(r.file), r.line, r.reason, r.raw]),
    partitions: delivery.partitions.map((p) => `${partitionPath(p.partition)} ${p.rows} ${p.signature}`),
  };
}

async function landWith(landing: DuckDbLanding, req: LandRequest, identifyFirst: boolean) {
  try {
    if (identifyFirst) await landing.identify(req.files, undefined, req);
    const delivery = await landing.land(req);
    try {
      return outcome(delivery);
    } finally {
      await landing.releaseLanding(delivery);
    }
  } catch (error) {
    return { error: String((error as Error).message) };
  }
}

describe("a delivery identified with the request it is landed with", () => {
  it("is named the same on the hashing thread as on the JavaScript thread, whatever the order, size or number of its files", async () => {
    const big = Buffer.alloc(9 * 1024 * 1024 + 17, "id,note,day\n1,a,x\n");
    const files = [file(big, "b.csv"), file("", "a.csv"), file("id,note,day\n2,b,y\n", "c.csv")];
    const onThread = await new DeliveryIds().idOf(files, true, true);
    const here = await new DeliveryIds().idOf(files, true, false);
    expect(onThread.id).toBe(here.id);
    expect((await new DeliveryIds().idOf([files[2]!, files[0]!, files[1]!], true, true)).id, "the files sorted before hashing").toBe(here.id);
    expect((await new DeliveryIds().idOf([files[0]!], true, true)).id, "another set of files").not.toBe(here.id);
    // Through the port: with the read ahead (on the thread) and without, the same id; landing names it so too.
    const req = request(files);
    expect((await ahead.identify(req.files, undefined, req)).id).toBe(here.id);
    expect((await plain.identify(req.files)).id).toBe(here.id);
  });

  it("lands what a landing without the read ahead lands: clean, quoted, CRLF, bad rows, an empty last field, a missing column", async () => {
    const deliveries = [
      [file("id,note,day\n1,a,2026-11-01\n2,b,2026-11-02\n3,,2026-11-02\n")],
      [file('id,note,day\n1,"a,b",2026-11-01\n2,"two\nlines",2026-11-01\n3,"say ""hi""",2026-11-02\n')],
      [file("id,note,day\r\n1,a,2026-11-01\r\n2,\"c\r\nd\",2026-11-01\r\n")],
      [file('id,note,day\n1,a,2026-11-01\nx,b,2026-11-01\n3,c"d,2026-11-01\n4,e,../up\n5,f,2026-11-01,extra\n')],
      [file("id,note,day\n1,a,2026-11-01,\n2,b,2026-11-01\n")],
      [file("id,day\n1,2026-11-01\n")],
      [file("id,note,day\n1,a,2026-11-01\n"), file("id,note,day\n2,b,2026-11-03\nbad,c,2026-11-03\n")],
    ];
    for (const files of deliveries) {
      const req = request(files);
      const expected = await landWith(plain, req, false);
      expect(await landWith(ahead, req, true), files.map((f) => path.basename(f)).join(", ")).toEqual(expected);
      // Identified with a read ahead by the plain landing too (a delivery below the size for a thread: no read ahead).
      expect(await landWith(plain, req, true)).toEqual(expected);
    }
  });

  it("scans again a file that changed after it was read ahead, even to the same size and modification time", async () => {
    // Read ahead without a quote; then a stray quote, which only the exact reader may judge (a bad row), is written in.
    const before = "id,note,day\n1,ab,2026-11-01\n2,cxd,2026-11-01\n";
    const after = 'id,note,day\n1,ab,2026-11-01\n2,c"d,2026-11-01\n';
    expect(after.length).toBe(before.length);
    const changed = file(before);
    const { mtime } = statSync(changed);
    const req = request([changed]);
    await ahead.identify(req.files, undefined, req);
    writeFileSync(changed, after);
    utimesSync(changed, mtime, mtime);
    const landed = await landWith(ahead, req, false);
    const fresh = await landWith(plain, request([file(after)]), false);
    expect(landed).toMatchObject({ counts: [2, 1, 1] });
    expect((landed as { rejects: unknown[] }).rejects).toEqual((fresh as { rejects: unknown[] }).rejects.map((r) => [path.basename(changed), ...(r as unknown[]).slice(1)]));
  });
});

describe("a sync of a CSV delivery large enough to be hashed on a thread (16 MB)", () => {
  it("loads it, builds nothing for the same rows in other bytes, and rebuilds exactly the day a changed row is in", async () => {
    const ws = new PipelineWorkspace();
    const backend = await embeddedBackend();
    const lake = await backend.open();
    try {
      const rows = orders(20, 13_000);
      const first = ws.delivery(rows);
      expect(statSync(first).size, "above the size from which a delivery is hashed on a thread").toBeGreaterThan(16 * 1024 * 1024);
      const loaded = await ws.pipeline(lake, { inputs: [first] }).sync();
      expect(loaded.totals).toMatchObject({ built: 41, failed: 0 });
      expect(loaded.loads[0]).toMatchObject({ rowsRead: rows.length, rowsLoaded: rows.length });

      const resend = await ws.pipeline(lake, { inputs: [ws.delivery(shuffled(rows))] }).sync();
      expect(resend.totals).toMatchObject({ built: 0, failed: 0, skipped: 41 });

      // Row 5,000 is one of the first day's completed orders (its id is not unique: the same on other days).
      const changed = rows.map((r, i) => (i === 5_000 ? { ...r, amount: "12345.67" } : r));
      const rebuilt = await ws.pipeline(lake, { inputs: [ws.delivery(shuffled(changed, 2))] }).sync();
      const day = rows[5_000]!.ts.slice(0, 10);
      expect(rebuilt.partitions.filter((p) => p.action === "build").map((p) => `${p.layer} ${p.partition}`).sort()).toEqual(
        [`analytics month=${day.slice(0, 7)}`, `raw day=${day}`, `stage day=${day}`].sort(),
      );
      const amount = await lake.query(`SELECT day, CAST(amount AS VARCHAR) FROM orders_raw WHERE order_id = ${rows[5_000]!.id} AND amount > 10000`);
      expect(amount.rows).toEqual([[day, "12345.67"]]);
    } finally {
      await lake.close();
      await backend.cleanup();
      ws.cleanup();
    }
  }, 120_000);
});
