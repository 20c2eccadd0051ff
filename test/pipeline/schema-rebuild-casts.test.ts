import { writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { declarationWorkspace } from "../support/pipeline-fixture.js";

// A rebuild by swap (`sync --rebuild-schema`) never changes a value silently (docs/lake.md, "Rebuilding by swap"): a
// stored value converts to its column's new type only where converting it back gives the same value, for every pair
// of types, approximate targets (FLOAT, DOUBLE) and types stored alike (SMALLINT and UTINYINT, VARCHAR and TIME)
// included. Each case is a column of one table over several partitions: its unfit value in one of them, values that
// fit in all. Found by QA: TIMESTAMP -> DATE dropped a time of day, DECIMAL -> FLOAT/DOUBLE rounded, BIGINT -> UBIGINT
// kept -3, and a table with a TIME column could not be rebuilt at all.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Case {
  readonly from: string;
  readonly to: string;
  /** Values (as delivered) that convert, each with the text it reads as after the rebuild. */
  readonly fits: readonly (readonly [string, string])[];
  /** A value (as delivered) the new type cannot hold exactly, and the text the refusal names it by. */
  readonly unfit?: readonly [string, string];
}

const CASES: readonly Case[] = [
  // What QA found (each exited 0 and changed the value).
  { from: "TIMESTAMP", to: "DATE", fits: [["2026-11-02 00:00:00", "2026-11-02"]], unfit: ["2026-11-01 10:30:00", "2026-11-01 10:30:00"] },
  { from: "DECIMAL(10,2)", to: "FLOAT", fits: [["0.10", "0.1"], ["-2.50", "-2.5"]], unfit: ["12345678.91", "12345678.91"] },
  { from: "DECIMAL(18,2)", to: "DOUBLE", fits: [["-3.00", "-3.0"]], unfit: ["1234567890123456.78", "1234567890123456.78"] },
  { from: "BIGINT", to: "UBIGINT", fits: [["5", "5"]], unfit: ["-3", "-3"] },
  // Types stored alike (the unsigned ones as the next wider signed type, TIME as its text).
  { from: "SMALLINT", to: "UTINYINT", fits: [["200", "200"]], unfit: ["-5", "-5"] },
  { from: "BIGINT", to: "UINTEGER", fits: [["4294967295", "4294967295"]], unfit: ["-1", "-1"] },
  { from: "VARCHAR", to: "TIME", fits: [["10:30", "10:30:00"]], unfit: ["2026-11-01 10:30:00", "2026-11-01 10:30:00"] },
  // Approximate targets: nothing is rounded into them either.
  { from: "BIGINT", to: "DOUBLE", fits: [["5000000000", "5000000000.0"]], unfit: ["9007199254740993", "9007199254740993"] },
  { from: "HUGEINT", to: "FLOAT", fits: [["-3", "-3.0"]], unfit: ["12345678901234567890123", "12345678901234567890123"] },
  { from: "VARCHAR", to: "DOUBLE", fits: [["1.50", "1.5"], ["1e2", "100.0"]], unfit: ["12345678901234567890", "12345678901234567890"] },
  { from: "DOUBLE", to: "FLOAT", fits: [["1.5", "1.5"]], unfit: ["0.1", "0.1"] },
  // Times and zones: an instant's time of day, an offset a wall clock cannot keep.
  { from: "TIMESTAMPTZ", to: "DATE", fits: [["2026-11-02 00:00:00+00", "2026-11-02"]], unfit: ["2026-11-01 10:30:00+02", "2026-11-01 08:30:00+00"] },
  { from: "VARCHAR", to: "TIMESTAMP", fits: [["2026-11-01 10:30:00", "2026-11-01 10:30:00"]], unfit: ["2026-11-01 10:30:00+02", "2026-11-01 10:30:00+02"] },
  // What worked before, kept.
  { from: "BIGINT", to: "INTEGER", fits: [["-7", "-7"]], unfit: ["5000000000", "5000000000"] },
  { from: "DECIMAL(12,4)", to: "DECIMAL(10,2)", fits: [["21.0100", "21.01"]], unfit: ["21.0125", "21.0125"] },
  { from: "DOUBLE", to: "BIGINT", fits: [["3.0", "3"]], unfit: ["1.5", "1.5"] },
  { from: "VARCHAR", to: "INTEGER", fits: [["-3", "-3"]], unfit: ["x", "x"] },
  // Conversions that keep every value.
  { from: "FLOAT", to: "DECIMAL(38,10)", fits: [["-2.5", "-2.5000000000"], ["0.1", "0.1000000000"]] },
  { from: "DOUBLE", to: "DECIMAL(38,10)", fits: [["123456789.123", "123456789.1230000000"]] },
  { from: "TIMESTAMPTZ", to: "TIMESTAMP", fits: [["2026-11-01 10:30:00+02", "2026-11-01 08:30:00"]] },
  { from: "TIMESTAMP", to: "TIMESTAMPTZ", fits: [["2026-11-01 10:30:00", "2026-11-01 10:30:00+00"]] },
  { from: "INTEGER", to: "VARCHAR", fits: [["-3", "-3"]] },
  { from: "VARCHAR", to: "DECIMAL(10,2)", fits: [["1.5", "1.50"]] },
  { from: "DATE", to: "TIMESTAMP", fits: [["2026-11-01", "2026-11-01 00:00:00"]] },
];

const DAYS = 3;
const column = (i: number): string => `c${i}`;
/** The day a case's unfit value is in. */
const unfitDay = (i: number): number => (i % DAYS) + 1;

/** Rows by day: each day holds every value that fits (in a different order), and a case's unfit value its own row. */
function rows(value: (c: Case, i: number, pick: "fit" | "unfit", slot: number) => string): { day: number; values: string[] }[] {
  const out: { day: number; values: string[] }[] = [];
  const width = Math.max(...CASES.map((c) => c.fits.length)) + 1;
  for (let day = 1; day <= DAYS; day++) {
    for (let r = 0; r < width; r++) {
      out.push({ day, values: CASES.map((c, i) => (r < c.fits.length ? value(c, i, "fit", (r + day) % c.fits.length) : c.unfit && day === unfitDay(i) ? value(c, i, "unfit", 0) : "")) });
    }
  }
  return out;
}

function csv(value: (c: Case, i: number, pick: "fit" | "unfit", slot: number) => string): string {
  const quoted = (v: string) => (v.includes(",") ? `"${v}"` : v);
  const lines = rows(value).map((row, id) => [String(id), `d${row.day}`, ...row.values.map(quoted)].join(","));
  return `id,d,${CASES.map((_, i) => column(i)).join(",")}\n${lines.join("\n")}\n`;
}

function yaml(typeOf: (c: Case, i: number) => string): string {
  const columns = CASES.map((c, i) => `${column(i)}: '${typeOf(c, i)}'`).join(", ");
  return `datasets:\n  t:\n    source: {format: csv, path: deliveries/*.csv}\n    columns: {id: {type: BIGINT, nullable: false}, d: VARCHAR, ${columns}}\n    partition: {day: "d"}\n`;
}

const escaped = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe("a rebuild by swap converts a value only where it reads back the same (embedded)", () => {
  it("refuses, naming the partition, the column and the value, every change that would alter a value; makes the rest, every value as expected", async () => {
    const ws = await declarationWorkspace("local", "lakeswap-rebuild-casts-", cleanups);
    const configure = (text: string) => writeFileSync(ws.configFile, text);
    configure(yaml((c) => c.from));
    await ws.sync(ws.deliver(csv((c, _, pick, slot) => (pick === "fit" ? c.fits[slot]![0] : c.unfit![0]))));
    const read = async () =>
      (await ws.lake.query(`SELECT id, ${CASES.map((_, i) => `CAST(${column(i)} AS VARCHAR)`).join(", ")} FROM t_raw ORDER BY id`)).rows.map((r) => r.map((v) => (v === null ? "null" : String(v))).join("|"));
    const pointers = async () => (await ws.lake.snapshot({ tables: ["t_raw"] }))[0]?.partitions.map((p) => `${p.partition}:${p.runId}`);
    const [before, runs, columns] = [await read(), await pointers(), (await ws.lake.table("t_raw")).columns];
    // A day of its own, NULL in every case's column: it lands under any types, so the rebuild rewrites the others.
    const other = ws.deliver(`id,d,${CASES.map((_, i) => column(i)).join(",")}\n999,d9${",".repeat(CASES.length)}\n`);

    const refused = CASES.flatMap((c, i) => (c.unfit ? [i] : []));
    const outcomes = [];
    for (const i of refused) {
      const c = CASES[i]!;
      configure(yaml((k, j) => (j === i ? k.to : k.from)));
      const outcome = await ws.sync(other, { rebuildSchema: true }).then(
        () => "rebuilt",
        (error: unknown) => String(error),
      );
      const named = new RegExp(`t_raw/day=d${unfitDay(i)}: .*column ${column(i)} holds ${escaped(c.unfit![1])}, which ${escaped(c.to)} cannot hold exactly`);
      outcomes.push(`${c.from} -> ${c.to}: ${named.test(outcome) ? "refused" : outcome}`);
    }
    expect(outcomes).toEqual(refused.map((i) => `${CASES[i]!.from} -> ${CASES[i]!.to}: refused`));
    // Nothing moved: the same runs, the same definition, the same values.
    expect(await pointers()).toEqual(runs);
    expect((await ws.lake.table("t_raw")).columns).toEqual(columns);
    expect(await read()).toEqual(before);

    // Every change at once where no value is unfit (the unfit ones' columns keep their types): each value as expected.
    const fits = (i: number) => (CASES[i]!.unfit ? CASES[i]!.from : CASES[i]!.to);
    configure(yaml((_, i) => fits(i)));
    const report = await ws.sync(other, { rebuildSchema: true });
    expect(report.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([["t_raw", DAYS]]);
    const expected = rows((c, i, pick, slot) => (pick === "unfit" ? "" : c.unfit ? c.fits[slot]![0] : c.fits[slot]![1]));
    const beforeRows = before.map((line) => line.split("|"));
    const want = expected.map((row, id) => [String(id), ...row.values.map((v, i) => (CASES[i]!.unfit ? beforeRows[id]![i + 1]! : v === "" ? "null" : v))].join("|"));
    expect((await read()).filter((line) => !line.startsWith("999|"))).toEqual(want);
  }, 300_000);
});
