/**
 * The Landing port's contract (src/landing/landing.ts), run against every adapter and the stores it writes to: a
 * delivery lands once (rows read, loaded and refused, a signature per partition), a bad row is kept apart with its
 * line and reason, a signature depends on the rows only (not their order, format or spelling), and the runs it
 * writes hold exactly the landed rows, as their own footers say.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Catalog } from "../../src/catalog/catalog.js";
import { runLocation } from "../../src/lake/layout.js";
import { MAX_KNOWN_BAD_LINES, type LandRequest, type LandedDelivery, type Landing } from "../../src/landing/landing.js";
import { partitionPath } from "../../src/model/partition.js";
import { defineTable } from "../../src/model/table.js";
import type { ObjectStore } from "../../src/store/object-store.js";
import { eachFixture, type Fixture, type FixtureFactory } from "./fixture.js";

/** A fresh landing over a lake of its own: the store its runs go to, and the catalog whose layout places them. */
export interface LandingFixture extends Fixture {
  readonly landing: Landing;
  readonly store: ObjectStore;
  readonly catalog: Catalog;
}

const COLUMNS = [
  { name: "id", type: "BIGINT", nullable: false },
  { name: "amount", type: "DECIMAL(10,2)", nullable: true },
  { name: "day", type: "VARCHAR", nullable: false },
];
const TABLE = defineTable({ name: "orders_raw", columns: COLUMNS.map(({ name, type }) => ({ name, type })), partitionKeys: ["p"] });
const request = (files: string[], format: LandRequest["format"]): LandRequest => ({
  files, format, header: true, delimiter: ",", columns: COLUMNS, partition: [{ key: "p", expression: "day" }], signatureColumns: ["id", "amount"],
});
/** `p=... -> rows:signature` of a landed delivery. */
const signatures = (delivery: LandedDelivery): Record<string, string> =>
  Object.fromEntries(delivery.partitions.map((p) => [partitionPath(p.partition), `${p.rows}:${p.signature}`]));

/** Registers the landing contract for the adapter `name`. */
export function landingContract(name: string, factory: FixtureFactory<LandingFixture>): void {
  describe(`the landing contract: ${name}`, () => {
    const fixture = eachFixture(factory);
    const landing = (): Landing => fixture().landing;
    let dir = "";
    const landed: LandedDelivery[] = [];
    beforeEach(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "lakeswap-landing-contract-"));
    });
    afterEach(async () => {
      for (const delivery of landed.splice(0).reverse()) await landing().releaseLanding(delivery);
      await rm(dir, { recursive: true, force: true });
    });
    const file = async (name: string, text: string): Promise<string> => {
      const where = path.join(dir, name);
      await writeFile(where, text);
      return where;
    };
    const land = async (req: LandRequest): Promise<LandedDelivery> => {
      const delivery = await landing().land(req);
      landed.push(delivery);
      return delivery;
    };

    it("lands a delivery: every row read and loaded, a signature per partition; the same files again get the same id", async () => {
      const csv = await file("a.csv", "id,amount,day\n1,10.50,2026-11-01\n2,3.00,2026-11-01\n3,7.25,2026-11-02\n");
      const delivery = await land(request([csv], "csv"));
      expect(delivery).toMatchObject({ files: [csv], rowsRead: 3, rowsLoaded: 3, rowsRejected: 0 });
      expect(delivery.partitions.map((p) => [partitionPath(p.partition), p.rows])).toEqual([
        ["p=2026-11-01", 2],
        ["p=2026-11-02", 1],
      ]);
      expect(new Set(delivery.partitions.map((p) => p.signature)).size, "each partition signed").toBe(2);
      expect((await landing().identify([csv])).id).toBe(delivery.id);
    });

    it("keeps bad rows apart with their line and reason, and lands the rest", async () => {
      const csv = await file("bad.csv", "id,amount,day\n1,10.50,2026-11-01\nnot-a-number,1.00,2026-11-01\n3,12.345,2026-11-01\n4,1.00,../up\n5,2.00,2026-11-01\n");
      const delivery = await land(request([csv], "csv"));
      expect(delivery).toMatchObject({ rowsRead: 5, rowsLoaded: 2, rowsRejected: 3 });
      expect(delivery.partitions.map((p) => [partitionPath(p.partition), p.rows])).toEqual([["p=2026-11-01", 2]]);
      const rejects = [...delivery.firstRejects].sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
      expect(rejects.map((r) => [r.line, r.raw])).toEqual([
        [3, "not-a-number,1.00,2026-11-01"],
        [4, "3,12.345,2026-11-01"],
        [5, "4,1.00,../up"],
      ]);
      expect(rejects[0]!.reason).toMatch(/column id/);
      // A value that does not fit its declared type exactly is refused, never rounded.
      expect(rejects[1]!.reason).toMatch(/column amount/);
      expect(rejects[2]!.reason).toMatch(/unsafe value '\.\.\/up'/);
    });

    it("with fileParts, keeps the bad rows by file, each file named by its own name and bytes (as a delivery of it alone)", async () => {
      const good = await file("good.csv", "id,amount,day\n1,10.50,2026-11-01\n");
      const bad = await file("bad.csv", "id,amount,day\nx,1.00,2026-11-01\n2,2.00,2026-11-01\ny,3.00,2026-11-01\n");
      const delivery = await land({ ...request([good, bad], "csv"), fileParts: true });
      // Its bad rows' lines too (the header is line 1), which an append keeps to tell a bad row fixed in place later.
      expect(delivery.rejectedFiles).toEqual([{ file: bad, id: (await landing().identify([bad])).id, rows: 2, digest: expect.stringMatching(/^[0-9a-f]{32}$/), lines: [2, 4] }]);
      // The same bytes under another name are another file; the same file beside others, the same.
      const renamed = await file("bad2.csv", "id,amount,day\nx,1.00,2026-11-01\n2,2.00,2026-11-01\ny,3.00,2026-11-01\n");
      const alone = await land({ ...request([bad], "csv"), fileParts: true });
      expect(alone.rejectedFiles?.[0]).toEqual(delivery.rejectedFiles?.[0]);
      expect(alone.rejectedFiles?.[0]?.id).toBe(alone.id);
      const other = await land({ ...request([renamed], "csv"), fileParts: true });
      expect(other.rejectedFiles?.[0]?.id).not.toBe(alone.rejectedFiles?.[0]?.id);
      // Past MAX_KNOWN_BAD_LINES bad rows in a file, their lines are not kept (an append then takes a fix of one as a new file).
      const many = await file("many.csv", `id,amount,day\n${Array.from({ length: MAX_KNOWN_BAD_LINES + 1 }, (_, i) => `x${i},1.00,2026-11-01`).join("\n")}\n`);
      const [manyBad] = (await land({ ...request([many], "csv"), fileParts: true })).rejectedFiles ?? [];
      expect([manyBad?.rows, manyBad?.lines]).toEqual([MAX_KNOWN_BAD_LINES + 1, undefined]);
      // Without fileParts (every write mode but append) there are none.
      expect((await land(request([bad], "csv"))).rejectedFiles).toBeUndefined();
    });

    it("signs the rows, not the bytes: the same rows in another order, format and spelling sign the same; other rows do not", async () => {
      const csv = await file("one.csv", "id,amount,day\n1,10.50,2026-11-01\n2,3.00,2026-11-01\n3,7.25,2026-11-02\n");
      const shuffled = await file("two.csv", 'id,amount,day\n3,7.250,2026-11-02\n"2",3,2026-11-01\n1,10.5,"2026-11-01"\n');
      const jsonl = await file("three.jsonl", '{"day":"2026-11-02","id":3,"amount":7.25}\n{"id":1,"amount":"10.50","day":"2026-11-01"}\n{"id":2,"amount":3.0,"day":"2026-11-01"}\n');
      const changed = await file("four.csv", "id,amount,day\n1,10.50,2026-11-01\n2,3.01,2026-11-01\n3,7.25,2026-11-02\n");
      const first = signatures(await land(request([csv], "csv")));
      expect(signatures(await land(request([shuffled], "csv")))).toEqual(first);
      expect(signatures(await land(request([jsonl], "jsonl")))).toEqual(first);
      const other = signatures(await land(request([changed], "csv")));
      expect(other["p=2026-11-02"]).toBe(first["p=2026-11-02"]);
      expect(other["p=2026-11-01"]).not.toBe(first["p=2026-11-01"]);
    });

    it("writes the runs of the partitions asked for into the store, whose footers count the landed rows", async () => {
      const csv = await file("a.csv", "id,amount,day\n1,10.50,2026-11-01\n2,3.00,2026-11-01\n3,7.25,2026-11-02\n");
      const delivery = await land(request([csv], "csv"));
      const { catalog, store } = fixture();
      const runId = "20261101T000000Z-aaaaaa";
      const runs = delivery.partitions.map((p) => ({ partition: p.partition, runId, runPrefix: runLocation(catalog, TABLE, p.partition, runId) }));
      const results = await landing().writeLandedRuns({ table: TABLE, delivery, runs });
      expect(results).toHaveLength(2);
      for (const [i, result] of results.entries()) {
        const listed = await store.list(runs[i]!.runPrefix);
        expect(listed.map((o) => o.key).sort()).toEqual(result.files.map((f) => f.key).sort());
        const counts = await landing().countFileRows(result.files);
        expect(counts.reduce((a, b) => a + b, 0)).toBe(delivery.partitions[i]!.rows);
      }
    });
  });
}
