// Two writers that declare a new table at the same moment (two first syncs of one config, started together): each
// reads "no such table", then both create it. Found by the model test on S3 + Glue: the second CreateTable failed with
// Glue's AlreadyExistsException and the sync died with exit 1 ("Table already exists."). On the embedded lake the
// second definition was written over the first, whatever it said.
import { afterEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { LakeswapError } from "../../src/model/errors.js";
import { defineTable } from "../../src/model/table.js";
import { BACKEND_FACTORIES, selectedBackends, type TestBackend } from "../support/lake-fixture.js";

const COLUMNS = [
  { name: "id", type: "BIGINT" },
  { name: "amount", type: "DECIMAL(10,2)" },
];
const ORDERS = defineTable({ name: "orders", columns: COLUMNS, partitionKeys: ["day"] });
/** The same table with one column more: a change in place when it comes second, refused when it comes first. */
const WIDER = defineTable({ name: "orders", columns: [...COLUMNS, { name: "coupon", type: "VARCHAR" }], partitionKeys: ["day"] });

describe.each(selectedBackends())("two writers declaring a new table at once on the %s backend", (backendName) => {
  let backend: TestBackend;
  const lakes: Lake[] = [];

  afterEach(async () => {
    for (const lake of lakes.splice(0)) await lake.close();
    await backend.cleanup();
  });

  /** Two lakes on one backend, as two processes have; each has read that the table does not exist yet. */
  async function twoWriters(): Promise<[Lake, Lake]> {
    backend = await BACKEND_FACTORIES[backendName]!();
    const [a, b] = [await backend.open(), await backend.open()];
    lakes.push(a, b);
    return [a, b];
  }

  it("with the same definition: both succeed, and the table is declared once as they declared it", async () => {
    for (let round = 0; round < 3; round += 1) {
      const [a, b] = await twoWriters();
      const results = await Promise.allSettled([a.createTable(ORDERS), b.createTable(ORDERS)]);
      expect(results.map((r) => (r.status === "rejected" ? String(r.reason) : "ok"))).toEqual(["ok", "ok"]);
      expect(await a.table("orders")).toEqual(ORDERS);
      for (const lake of lakes.splice(0)) await lake.close();
      await backend.cleanup();
    }
    backend = await BACKEND_FACTORIES[backendName]!();
  });

  // The race above, made certain: the second writer read "no such table" before the first created it (its own read,
  // passed as a sync passes the reads of its declared tables). Its catalog then finds the other's table where it
  // creates its own; that once ended the declaration with "already exists with a different definition".
  it("a declaration made on a read from before the other's creation is judged against what that one created", async () => {
    const [a, b] = await twoWriters();
    await a.createTable(ORDERS);
    expect((await b.createTable(WIDER, { existing: undefined })).columns.map((c) => c.name)).toEqual(["id", "amount", "coupon"]);
    expect((await a.table("orders")).columns.map((c) => c.name)).toEqual(["id", "amount", "coupon"]);
    const narrower = await a.createTable(ORDERS, { existing: undefined }).catch((error: unknown) => error);
    expect(narrower).toBeInstanceOf(LakeswapError);
    expect(narrower).toMatchObject({ code: "CONFLICT", message: expect.stringContaining("column coupon") });
    expect((await b.table("orders")).columns.map((c) => c.name)).toEqual(["id", "amount", "coupon"]);
  });

  it("with other columns: the second declaration is judged against the first (a column added in place), never written over it", async () => {
    for (let round = 0; round < 3; round += 1) {
      const [a, b] = await twoWriters();
      const [narrow, wide] = await Promise.allSettled([a.createTable(ORDERS), b.createTable(WIDER)]);
      const final = await a.table("orders");
      if (narrow.status === "fulfilled" && wide.status === "fulfilled") {
        // The narrower one first, then the wider one added its column in place.
        expect(final.columns.map((c) => c.name)).toEqual(["id", "amount", "coupon"]);
      } else {
        // The wider one first: the narrower one would drop a column, which is refused (exit 9), naming it.
        expect(wide.status, wide.status === "rejected" ? String(wide.reason) : "").toBe("fulfilled");
        expect(narrow.status === "rejected" && narrow.reason instanceof LakeswapError && narrow.reason.code).toBe("CONFLICT");
        expect(String(narrow.status === "rejected" ? narrow.reason : "")).toContain("column coupon");
        expect(final.columns.map((c) => c.name)).toEqual(["id", "amount", "coupon"]);
      }
      for (const lake of lakes.splice(0)) await lake.close();
      await backend.cleanup();
    }
    backend = await BACKEND_FACTORIES[backendName]!();
  });
});
