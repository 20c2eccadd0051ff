// The model test's ingest commands (issue 25 items 8, 9 and 22): `lakeswap ingest events <file>` of a batch of events
// drawn from a pool of good ones (exact digits at the types' limits: DECIMAL(18,2), UBIGINT, HUGEINT, a BIGINT past
// 2^53) and bad ones (item 8: 7 and 9 fraction digits, 0x1F, 1_000_000, "NaN" in a DOUBLE, a 39-digit HUGEINT, ...),
// also killed at an ingest fault point and recovered by the next ingest; and `lakeswap query` of the table, whose
// digits must be the model's exactly, in --json and in text (item 9).
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { Child, until } from "../support/crash-kit.js";
import { verify, type LakeCommand, type Real } from "./commands.js";
import type { Expected, LakeModel } from "./model.js";

/** A pool event: the line sent (raw JSON, so numbers past 2^53 are sent as digits) and, when good, the row the table must hold. */
interface PoolEvent {
  readonly line: string;
  /** `id|amt|u|h|x` as a plain reader casts them to text; undefined: a bad event (dead-lettered by its line, never changed). */
  readonly row?: string;
}

const NINES = "9".repeat(38);

/** The good events: each lands as exactly this row. */
const GOOD: readonly PoolEvent[] = [
  { line: `{"id": 1, "ts": "2026-11-01T01:00:00Z", "amt": "9999999999999999.99", "u": "9007199254740993", "h": "${NINES}", "x": 1.5}`, row: `1|9999999999999999.99|9007199254740993|${NINES}|1.5` },
  { line: `{"id": 2, "ts": "2026-11-02T23:59:59.999999Z", "amt": -0.01, "u": 18446744073709551615, "h": -${NINES}, "x": null}`, row: `2|-0.01|18446744073709551615|-${NINES}|NULL` },
  { line: `{"id": 9007199254740993, "ts": "2026-11-03T00:00:00Z", "amt": "12.3", "u": 0, "h": "0", "x": 0.1}`, row: "9007199254740993|12.30|0|0|0.1" },
  { line: `{"ID": 4, "Ts": "2026-11-01T12:00:00+01:00", "AMT": "0.00"}`, row: "4|0.00|NULL|NULL|NULL" },
];

/** The bad events (issue 25 item 8): each a dead letter, never a changed value. */
const BAD: readonly PoolEvent[] = [
  { line: `{"id": 10, "ts": "2026-11-01T12:00:00.9999999Z"}` },
  { line: `{"id": 11, "ts": "2026-11-01 12:00:00.999999999"}` },
  { line: `{"id": "0x1F", "ts": "2026-11-01T01:00:00Z"}` },
  { line: `{"id": "1_000_000", "ts": "2026-11-01T01:00:00Z"}` },
  { line: `{"id": 14, "ts": "2026-11-01T01:00:00Z", "x": "NaN"}` },
  { line: `{"id": 15, "ts": "2026-11-01T01:00:00Z", "h": "9${NINES}"}` },
  { line: `{"id": 16, "ts": "2026-11-01T01:00:00Z", "amt": "0.005"}` },
  { line: `{"id": 17, "ts": "infinity"}` },
  { line: `{"id": 18, "ts": "10000-01-01T00:00:00Z"}` },
];

const POOL = [...GOOD, ...BAD];

/** A batch: events of the pool by index (repeats are events of their own: each lands once per time sent). */
type Batch = readonly number[];

const batchText = (batch: Batch) => `<${batch.map((i) => (i < GOOD.length ? `g${i}` : `b${i - GOOD.length}`)).join(",")}>`;

/**
 * An event's id as ev2's `dedupe: {field: id}` reads it, as the landing reads the column: the field named `id` in any
 * case (none where two names are), a string's value or a number's own digits (the pool's objects are flat, so a
 * number is found by its name in the line).
 */
function dedupeId(line: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const names = Object.keys(value).filter((name) => name.toLowerCase() === "id");
  if (names.length !== 1) return undefined;
  const id = (value as Record<string, unknown>)[names[0]!];
  if (typeof id === "string") return id;
  return typeof id === "number" ? new RegExp(`"${names[0]}"\\s*:\\s*(-?[0-9][0-9.eE+-]*)`).exec(line)?.[1] : undefined;
}

/**
 * Applies a batch to the model: its good events appended (to ev2's with `ev2 ` before the row), its bad ones
 * dead-lettered; in ev2, an event whose id was taken before (in an earlier batch or earlier in this one) is dropped.
 */
function ingestModel(model: LakeModel, batch: Batch, namespace: "ev" | "ev2" = "ev"): Expected {
  model.ingest.opened = true;
  const taken = model.ingest.ev2Ids;
  const events = batch.map((i) => POOL[i]!).filter((event) => {
    const id = namespace === "ev2" ? dedupeId(event.line) : undefined;
    if (id === undefined) return true;
    if (taken.includes(id)) return false;
    taken.push(id);
    return true;
  });
  for (const event of events) {
    if (event.row !== undefined) model.ingest.events.push(namespace === "ev" ? event.row : `ev2 ${event.row}`);
    else model.ingest.deadLetters.push(event.line);
  }
  model.ingest.events.sort();
  model.ingest.deadLetters.sort();
  const written = events.filter((e) => e.row !== undefined).length;
  return { exitCode: 0, actions: new Map([["accepted", String(events.length)], ["written", String(written)], ["deadLettered", String(events.length - written)]]) };
}

const ingestReport = (json: unknown): Map<string, string> => {
  const report = json as { accepted: number; written: number; deadLettered: number };
  return new Map([["accepted", String(report.accepted)], ["written", String(report.written)], ["deadLettered", String(report.deadLettered)]]);
};

function ingestArgs(real: Real, batch: Batch): string[] {
  return ["ingest", "events", real.ws.events(batch.map((i) => POOL[i]!.line)), "-c", real.ws.configFile, "--namespace", "ev", "--json"];
}

/** `lakeswap ingest events <batch.ndjson>`: every good event appended exactly once, every bad one a dead letter. */
class IngestCommand implements LakeCommand {
  constructor(readonly batch: Batch) {}
  check(): boolean {
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const args = ingestArgs(real, this.batch);
    const expected = ingestModel(model, this.batch);
    await verify(model, real, this.toString(), expected, await real.ws.run(args), ingestReport, real.leftovers);
  }
  toString(): string {
    return `ingest events ${batchText(this.batch)}`;
  }
}

/** Ingest's fault points (src/core/faults.ts): files stored, not registered (@1 the namespace's, @2 the dead letters'); registered, still in the log. */
const INGEST_FAULTS = ["ingest-after-upload", "ingest-after-register"] as const;

/**
 * `LAKESWAP_FAULT=<point>:kill@<n> lakeswap ingest events <batch>`, then `lakeswap ingest` of an empty file, which lands
 * what the killed one's log held: the batch's events must then be in the lake exactly once (none lost, none twice).
 */
class KilledIngestCommand implements LakeCommand {
  constructor(readonly batch: Batch, readonly point: string, readonly nth: number) {}
  check(): boolean {
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const args = ingestArgs(real, this.batch);
    const expected = ingestModel(model, this.batch);
    const killed = await real.ws.spawn(args, { LAKESWAP_FAULT: `${this.point}:kill@${this.nth}` });
    if (killed.signal !== "SIGKILL") {
      await verify(model, real, this.toString(), expected, killed, ingestReport, real.leftovers);
      return;
    }
    real.log.push(`${this.toString()} (killed)`);
    const recovery = await real.ws.run(["ingest", "events", real.ws.events([]), "-c", real.ws.configFile, "--namespace", "ev", "--json"]);
    // The recovering ingest accepts nothing and lands the killed batch (the report counts what it landed).
    const landed = new Map([...expected.actions!].map(([key, value]) => [key, key === "accepted" ? "0" : value]));
    await verify(model, real, "ingest events <empty> (recovery)", { exitCode: 0, actions: landed }, recovery, ingestReport, real.leftovers);
  }
  toString(): string {
    return `LAKESWAP_FAULT=${this.point}:kill@${this.nth} ingest events ${batchText(this.batch)}`;
  }
}

/**
 * `lakeswap ingest events <batch> --idempotency-key K`, killed at an ingest fault point or not, then the same command
 * again with the same key (issue 30: a client that retries): the batch is in the lake exactly once. The retry's report
 * gives the first answer (`accepted`: the batch), and lands what a killed first run left in the log, or nothing.
 */
class KeyedIngestCommand implements LakeCommand {
  constructor(readonly batch: Batch, readonly fault: { readonly point: string; readonly nth: number } | undefined) {}
  check(): boolean {
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const args = [...ingestArgs(real, this.batch), "--idempotency-key", randomUUID()];
    const expected = ingestModel(model, this.batch);
    const first = await real.ws.spawn(args, this.fault ? { LAKESWAP_FAULT: `${this.fault.point}:kill@${this.fault.nth}` } : {});
    const killed = first.signal === "SIGKILL";
    if (!killed) await verify(model, real, this.toString(), expected, first, ingestReport, real.leftovers);
    else real.log.push(`${this.toString()} (killed)`);
    const retry = await real.ws.run(args);
    const landed = new Map([...expected.actions!].map(([key, value]) => [key, key === "accepted" || killed ? value : "0"]));
    await verify(model, real, `${this.toString()} (the retry, same key)`, { exitCode: 0, actions: landed }, retry, ingestReport, real.leftovers);
  }
  toString(): string {
    return `${this.fault ? `LAKESWAP_FAULT=${this.fault.point}:kill@${this.fault.nth} ` : ""}ingest events ${batchText(this.batch)} --idempotency-key K`;
  }
}

/** Compaction's fault points: the new run placed, not named; the tally naming it, the pointer not moved; the pointer moved. */
const COMPACT_FAULTS = ["compact-after-place", "compact-after-tally", "compact-after-move"] as const;

/**
 * `lakeswap compact --older-than 0` of every ingested table (the namespaces' and the dead letters'), killed at a
 * compaction fault point or not, then run again: the tables hold the same rows after it (issue 30 item 4: no gap,
 * no double), whatever ingests, GC and kills came before or come after.
 */
class CompactCommand implements LakeCommand {
  constructor(readonly fault: string | undefined) {}
  check(model: Readonly<LakeModel>): boolean {
    return model.ingest.opened;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const args = ["compact", "--older-than", "0", "--target-size", "1MiB", "-c", real.ws.configFile, "--json"];
    const first = await real.ws.spawn(args, this.fault ? { LAKESWAP_FAULT: `${this.fault}:kill` } : {});
    if (first.signal === "SIGKILL") {
      // What the killed one left (its lease, a run nothing names yet, a pointer behind its tally, a stale view of the
      // catalog file): the recovering gc takes every table's lease and rewrites the views, the next compaction finishes the rest.
      real.log.push(`${this.toString()} (killed)`);
      real.leftovers = true;
      await verify(model, real, "gc", { exitCode: 0 }, await real.ws.run(["gc"]), undefined, real.leftovers);
    } else {
      await verify(model, real, this.toString(), { exitCode: 0 }, first, undefined, real.leftovers);
    }
    const again = await real.ws.run(args);
    await verify(model, real, "compact --older-than 0 (again)", { exitCode: 0 }, again, undefined, real.leftovers);
  }
  toString(): string {
    return `${this.fault ? `LAKESWAP_FAULT=${this.fault}:kill ` : ""}compact --older-than 0`;
  }
}

/** The collector's answer to a POST: its status and body. */
async function post(url: string, namespace: string, lines: readonly string[]): Promise<{ status: number; body: string }> {
  const response = await fetch(`${url}/v1/events/${namespace}`, { method: "POST", headers: { "content-type": "application/x-ndjson" }, body: lines.join("\n") });
  return { status: response.status, body: await response.text() };
}

/**
 * `lakeswap serve`, a batch POSTed to namespace ev and one to ev2 (both in the collector's one open segment: issue
 * 25 item 6, two namespaces' dead letters of one segment and one day), then SIGTERM (the collector lands what its log
 * holds and exits 0) or kill -9 (then `lakeswap ingest` of an empty file lands the log). Every acknowledged event is
 * then in its namespace's table exactly once, every bad one dead-lettered, from both namespaces.
 */
export class ServeCommand implements LakeCommand {
  constructor(readonly first: Batch, readonly second: Batch, readonly kill: boolean) {}
  check(): boolean {
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const first = ingestModel(model, this.first, "ev");
    const second = ingestModel(model, this.second, "ev2");
    const server = new Child(real.ws.start(["serve", "-c", real.ws.configFile, "--port", "0", "--host", "127.0.0.1", "--flush-interval", "50", "--background-nice", "0"]));
    const problems: string[] = [];
    try {
      const url = await until("the collector to listen", () => {
        if (server.process.exitCode !== null) throw new Error(`lakeswap serve exited ${server.process.exitCode}: ${server.stderr.trim()}`);
        return /collecting .* on (http:\/\/\S+)/.exec(server.stderr)?.[1];
      }, 60_000);
      for (const [namespace, batch, expected] of [["ev", this.first, first], ["ev2", this.second, second]] as const) {
        const answer = await post(url, namespace, batch.map((i) => POOL[i]!.line));
        const stored = expected.actions!.get("accepted");
        if (answer.status !== 200 || String((JSON.parse(answer.body) as { accepted?: number }).accepted) !== stored) {
          problems.push(`POST /v1/events/${namespace} of ${batch.length} event(s) answered ${answer.status} ${answer.body.trim()}; the model stores ${stored} of them`);
        }
      }
    } finally {
      server.process.kill(this.kill ? "SIGKILL" : "SIGTERM");
    }
    const exit = await server.exited;
    const result = { code: exit.code, signal: exit.signal, stdout: server.lines.join("\n"), stderr: server.stderr };
    if (problems.length > 0) throw new Error(`after \`${this.toString()}\`:\n  - ${problems.join("\n  - ")}\n  stderr: ${server.stderr.trim().slice(0, 3000)}`);
    if (!this.kill) {
      await verify(model, real, this.toString(), { exitCode: 0 }, result, undefined, real.leftovers);
      return;
    }
    real.log.push(`${this.toString()} (killed)`);
    // What the killed collector acknowledged is in its log: the recovering ingest lands all of it, both namespaces.
    const recovery = await real.ws.run(["ingest", "events", real.ws.events([]), "-c", real.ws.configFile, "--namespace", "ev", "--json"]);
    const landed = (key: string) => String(Number(first.actions!.get(key)) + Number(second.actions!.get(key)));
    const expected = new Map([["accepted", "0"], ["written", landed("written")], ["deadLettered", landed("deadLettered")]]);
    await verify(model, real, "ingest events <empty> (recovery)", { exitCode: 0, actions: expected }, recovery, ingestReport, real.leftovers);
  }
  toString(): string {
    return `serve; POST ev ${batchText(this.first)}; POST ev2 ${batchText(this.second)}; ${this.kill ? "kill -9" : "SIGTERM"}`;
  }
}

/** One event's values as `lakeswap query` prints them, joined as the model's rows are (NULL as 'NULL'). */
const printed = (values: readonly unknown[]) => values.map((v) => (v === null || v === undefined ? "NULL" : String(v))).join("|");

/**
 * `lakeswap query "SELECT id, amt, u, h, x FROM ev" --json`, and in text: every value printed with its exact digits
 * (issue 25 item 9: DECIMAL(18,2), UBIGINT and HUGEINT once went through a double), the rows the model holds.
 */
class QueryCommand implements LakeCommand {
  check(model: Readonly<LakeModel>): boolean {
    return model.ingest.opened;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    real.log.push(this.toString());
    const problems: string[] = [];
    const json = await real.ws.run(["query", "SELECT id, amt, u, h, x FROM ev", "--json"]);
    const want = model.ingest.events.filter((row) => !row.startsWith("ev2 ")).sort();
    if (json.code !== 0) {
      problems.push(`query --json exited ${json.code}: ${json.stderr.trim()}`);
    } else {
      const got = (JSON.parse(json.stdout) as Record<string, unknown>[]).map((row) => printed(["id", "amt", "u", "h", "x"].map((c) => row[c]))).sort();
      if (got.join(" ; ") !== want.join(" ; ")) problems.push(`query --json printed [${got.join(" ; ")}], the model holds [${want.join(" ; ")}]`);
    }
    // Text: the rows without NULLs (an empty cell cannot be told from the column gap), columns split at 2+ spaces.
    const text = await real.ws.run(["query", "SELECT id, amt, u, h FROM ev WHERE amt IS NOT NULL AND u IS NOT NULL AND h IS NOT NULL"]);
    const wantText = want.map((row) => row.split("|").slice(0, 4)).filter((cells) => !cells.includes("NULL")).map((cells) => cells.join("|")).sort();
    if (text.code !== 0) {
      problems.push(`query (text) exited ${text.code}: ${text.stderr.trim()}`);
    } else {
      const lines = text.stdout.split("\n").filter((line) => line.trim().length > 0);
      const rows = lines.slice(2).map((line) => line.trim().split(/\s{2,}/).join("|")).sort();
      if (wantText.length > 0 && rows.join(" ; ") !== wantText.join(" ; ")) {
        problems.push(`query printed in text [${rows.join(" ; ")}], the model holds [${wantText.join(" ; ")}]`);
      }
    }
    if (problems.length > 0) throw new Error(`after \`${this.toString()}\`:\n  - ${problems.join("\n  - ")}\n  commands run: ${real.log.join(" ; ")}`);
  }
  toString(): string {
    return 'query "SELECT id, amt, u, h, x FROM ev" (--json and text)';
  }
}

/** A batch of 1 to 6 pool events, good ones weighing more. */
const batchArbitrary: fc.Arbitrary<Batch> = fc.array(
  fc.oneof({ arbitrary: fc.integer({ min: 0, max: GOOD.length - 1 }), weight: 2 }, { arbitrary: fc.integer({ min: GOOD.length, max: POOL.length - 1 }), weight: 1 }),
  { minLength: 1, maxLength: 6 },
);

/**
 * The ingest commands: a batch, a batch killed at an ingest fault point, a keyed batch, a query of the table, a
 * compaction (killed or not), the collector of two namespaces.
 */
export function ingestCommands(): fc.Arbitrary<LakeCommand>[] {
  return [
    batchArbitrary.map((b) => new IngestCommand(b)),
    fc.tuple(batchArbitrary, fc.constantFrom(...INGEST_FAULTS), fc.integer({ min: 1, max: 2 })).map(([b, point, nth]) => new KilledIngestCommand(b, point, nth)),
    fc
      .tuple(batchArbitrary, fc.option(fc.record({ point: fc.constantFrom(...INGEST_FAULTS), nth: fc.integer({ min: 1, max: 2 }) }), { nil: undefined }))
      .map(([b, fault]) => new KeyedIngestCommand(b, fault)),
    fc.constant(new QueryCommand()),
    fc.option(fc.constantFrom(...COMPACT_FAULTS), { nil: undefined }).map((fault) => new CompactCommand(fault)),
    fc.tuple(batchArbitrary, batchArbitrary, fc.boolean()).map(([first, second, kill]) => new ServeCommand(first, second, kill)),
  ];
}
