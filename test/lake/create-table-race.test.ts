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
/** An ingested table (a collector's namespace), and the same with a field more. */
const EVENTS = defineTable({ name: "events", columns: [{ name: "id", type: "VARCHAR" }, { name: "n", type: "BIGINT" }], partitionKeys: ["day"], ingest: true });
const EVENTS_WITH_NOTE = defineTable({ name: "events", columns: [...EVENTS.columns, { name: "note", type: "VARCHAR" }], partitionKeys: ["day"], ingest: true });

describe.each(selectedBackends())("two writers declaring a new table at once on the %s backend", (backendName) => {
  let backend: TestBackend;
  const lakes: Lake[] = [];

  afterEach(async () => {
    for (const lake of lakes.splice(0)) await lake.close();
    await backend.cleanup();
  });

  /** The table's columns as a writer that opens the lake now reads them (a lake keeps what its catalog read). */
  async function columnsNow(table: string): Promise<string[]> {
    const lake = await backend.open();
    try {
      return (await lake.table(table)).columns.map((c) => c.name);
    } finally {
      await lake.close();
    }
  }

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

  // The same stale read for an ingested table that gains a column (a collector's namespace with a field more): the
  // catalog found the other's table and wrote the wider definition over it at once, outside the table's lease, where
  // the lease's holder may be changing that definition too (one of the two changes then lost).
  it("an ingested table's column added on a read from before its creation waits for the table's lease, then is added in place", async () => {
    const [a, b] = await twoWriters();
    await a.createTable(EVENTS);
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const holder = a.write(["events"], "test: the table's writer", async () => {
      entered();
      await held;
    });
    await inside;
    const declaring = b.createTable(EVENTS_WITH_NOTE, { existing: undefined });
    declaring.catch(() => undefined);
    // Long enough for a declaration that does not wait to have written its definition.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await columnsNow("events"), "the definition while another writer holds the table's lease").toEqual(["id", "n"]);
    release();
    await holder;
    expect((await declaring).columns.map((c) => c.name)).toEqual(["id", "n", "note"]);
    expect(await columnsNow("events")).toEqual(["id", "n", "note"]);
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
