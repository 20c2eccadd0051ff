// The model test's commands of careless and hostile use (issue 25): a writer frozen past its lease while a second one
// takes the table over (item 2), a PostgreSQL sink's target table dropped between syncs (item 5), SQL that tries to
// read files instead of tables (item 10).
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import fc from "fast-check";
import { compare } from "./check.js";
import { ReplaceCommand, deliveryArbitrary, deliveryRows, verify, type Delivery, type LakeCommand, type Real } from "./commands.js";
import { DAYS, RAW, STAGE, type Day, type LakeModel, type TableName } from "./model.js";
import { spawnScript } from "../support/crash-kit.js";
import { advanceClock, resetClock } from "../../src/shared/clock.js";
import type { CommandResult } from "./workspace.js";

/** The answer of test/support/crash-writer.ts to a replace. */
interface WriterAnswer {
  readonly ok: boolean;
  readonly code?: string;
  readonly message?: string;
}

/** Where a writer is frozen: before its lease check (after-build), or after it, right before the pointer move. */
const FROZEN_POINTS = { local: ["after-build", "before-swap-rename"], aws: ["after-build", "after-outbox"] } as const;

/**
 * Issue 25 item 2: a replace frozen (`LAKESWAP_FAULT=<point>:stop`, SIGSTOP) in a writer whose lease lives 1.5 s
 * (test/support/crash-writer.ts: the CLI has no flag for it); once its lease expired, a second replace of the same
 * partition (`--no-wait`); then the first goes on (SIGCONT). The lake must end as one writer's whole result: both in
 * order (the second built on the first), the second alone (the first refused, LEASE_LOST), or the first alone (the
 * second refused, exit 4: on the embedded lake the frozen process still holds the table's kernel lock). Never the
 * first's move over the second's.
 */
export class StalledWriterCommand implements LakeCommand {
  constructor(readonly table: TableName, readonly day: Day, readonly values: readonly [number, number], readonly pointIndex: number) {}
  check(model: Readonly<LakeModel>): boolean {
    return model.tablesExist;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const point = FROZEN_POINTS[real.ws.aws ? "aws" : "local"][this.pointIndex]!;
    const first = new ReplaceCommand(this.table, this.day, this.values[0]);
    const second = new ReplaceCommand(this.table, this.day, this.values[1]);
    const both = model.clone();
    const firstStep = first.plan(both);
    const secondStep = second.plan(both);
    const secondOnly = model.clone();
    second.plan(secondOnly);
    const firstOnly = model.clone();
    first.plan(firstOnly);
    const select = firstStep.args[firstStep.args.indexOf("--sql") + 1]!;
    const stalled = spawnScript("crash-writer.ts", [...real.ws.lakeArgs(), "--lease-ttl-ms", "1500"], { ...real.ws.aws?.env, LAKESWAP_FAULT: `${point}:stop` });
    let taker: CommandResult;
    let answer: WriterAnswer;
    try {
      await stalled.nextJson(0, 120_000);
      stalled.send({ table: this.table, partition: `day=${this.day}`, select });
      await stalled.untilStopped(point, 120_000);
      // Frozen: nothing renews its lease, which expires within its TTL. The taker (this process) runs on a clock moved
      // past that expiry (src/shared/clock.ts) instead of the test waiting for it.
      const expiry = await real.ws.leaseExpiry(this.table);
      advanceClock(expiry === undefined ? 0 : Math.max(0, expiry + 100 - Date.now()));
      taker = await real.ws.run([...secondStep.args, "--no-wait"]).finally(() => resetClock());
      stalled.kill("SIGCONT");
      answer = await stalled.nextJson<WriterAnswer>(1, 120_000);
      stalled.process.stdin?.end();
      await stalled.exited;
    } finally {
      stalled.kill("SIGCONT");
      stalled.kill("SIGKILL");
    }
    real.log.push(this.toString(point));
    // The frozen writer's built run, if its move was refused, stays without a manifest until `gc --grace 0`.
    real.leftovers = true;
    const view = await real.ws.view();
    const candidates = [
      { name: "the frozen replace, then the taker's", model: both, ok: taker.code === 0 && (answer.ok || answer.code === "LEASE_LOST") },
      { name: "the taker's replace alone, the frozen one refused (LEASE_LOST)", model: secondOnly, ok: taker.code === 0 && answer.code === "LEASE_LOST" },
      { name: "the frozen replace alone, the taker refused (exit 4)", model: firstOnly, ok: taker.code === 4 && answer.ok },
    ];
    const outcomes: string[] = [];
    for (const candidate of candidates) {
      const signatures = real.signatures.clone();
      const problems = [...(candidate.ok ? [] : ["the exit codes do not fit"]), ...compare(candidate.model, view, signatures, { allowLeftovers: true })];
      if (problems.length === 0) {
        model.restore(candidate.model);
        model.adoptSyncs(view.syncs);
        real.signatures.restore(signatures);
        return;
      }
      outcomes.push(`not ${candidate.name}:\n      ${problems.join("\n      ")}`);
    }
    const said = `the taker: exit ${taker.code}; stderr: ${taker.stderr.trim().slice(0, 1500)}\n  the frozen writer answered ${JSON.stringify(answer)}`;
    throw new Error(`after \`${this.toString(point)}\`:\n  - ${outcomes.join("\n  - ")}\n  ${said}\n  commands run: ${real.log.join(" ; ")}`);
  }
  toString(point = `<frozen point ${this.pointIndex}>`): string {
    return `{ LAKESWAP_FAULT=${point}:stop replace ${this.table} day=${this.day} v=${this.values[0]} (lease 1.5 s) ; once expired: replace ${this.table} day=${this.day} v=${this.values[1]} --no-wait ; SIGCONT }`;
  }
}

/**
 * Issue 25 item 5: `DROP TABLE` of a PostgreSQL sink's target (stage's or raw's) between syncs. The lake is unchanged;
 * the next sync that runs to its end must make the target equal the lake again (./commands.ts's verifySink).
 */
export class DropSinkTableCommand implements LakeCommand {
  constructor(readonly table: TableName) {}
  check(): boolean {
    return true;
  }
  async run(_model: LakeModel, real: Real): Promise<void> {
    if (!real.dropSinkTable) throw new Error("DropSinkTableCommand needs a workspace with a PostgreSQL sink");
    await real.dropSinkTable(this.table);
    real.log.push(this.toString());
  }
  toString(): string {
    return `psql: DROP TABLE <the sink's table of ${this.table}>`;
  }
}

/** How the SQL reads files: a layer's SQL (a sync at plan time), replace --sql, lakeswap query. */
type FileReader = "layer" | "replace" | "query";

/**
 * Issue 25 item 10: SQL that reads files instead of tables: a layer joining `read_parquet('<lake>/items_raw/…')`
 * (a sync with it: refused at plan time), `replace --sql` from `read_parquet`, `lakeswap query` of `read_text` of
 * the lake's metadata or `read_csv` of a delivery. Each is refused (exit 2) and the lake is unchanged.
 */
class FileReadingSqlCommand implements LakeCommand {
  constructor(readonly reader: FileReader, readonly delivery: Delivery, readonly day: Day) {}
  check(model: Readonly<LakeModel>): boolean {
    return this.reader !== "replace" || model.tablesExist;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const lake = real.ws.aws ? `s3://${real.ws.aws.location.bucket}/${real.ws.aws.location.prefix}` : real.ws.lakeDir;
    const args = this.args(lake, real);
    await verify(model, real, this.toString(), { exitCode: 2 }, await real.ws.run(args), undefined, real.leftovers);
  }
  private args(lake: string, real: Real): string[] {
    if (this.reader === "query") return ["query", `SELECT * FROM read_text('${lake}/_lakeswap/tables/${RAW}.json')`];
    if (this.reader === "replace") {
      return ["replace", STAGE, "--partition", `day=${this.day}`, "--sql", `SELECT k, v10 FROM read_parquet('${lake}/${STAGE}/*/*.parquet')`];
    }
    const config = path.join(real.ws.dir, "reads-files.yaml");
    writeFileSync(path.join(real.ws.dir, "sql", "reads-files.sql"), `SELECT r.k, r.v * 10 AS v10 FROM ${RAW} r JOIN read_parquet('${lake}/${RAW}/*/*.parquet') f ON f.k = r.k WHERE r.day = {{ day }} AND r.cat = 'a'\n`);
    writeFileSync(config, readFileSync(real.ws.configFile, "utf8").replace("sql: sql/stage.sql", "sql: sql/reads-files.sql"));
    // The delivery is written only so that the sync has its input; nothing may be built from it.
    const file = real.ws.delivery(deliveryRows(this.delivery, real.ws.write), false);
    return ["sync", "-c", config, "--input", file, "--json"];
  }
  toString(): string {
    if (this.reader === "query") return `query "SELECT * FROM read_text('<lake>/_lakeswap/tables/${RAW}.json')"`;
    if (this.reader === "replace") return `replace ${STAGE} --partition day=${this.day} --sql "SELECT k, v10 FROM read_parquet('<lake>/${STAGE}/*/*.parquet')"`;
    return "sync -c reads-files.yaml (stage joins read_parquet('<lake>/items_raw/*/*.parquet')) --input <any delivery>";
  }
}

const day = fc.constantFrom(...DAYS);
const table = fc.constantFrom<TableName>(RAW, STAGE);

/** A stalled writer and a second one (item 2), SQL that reads files (item 10). */
export function hostileCommands(): fc.Arbitrary<LakeCommand>[] {
  return [
    fc.tuple(table, day, fc.integer({ min: 1, max: 3 }), fc.integer({ min: 4, max: 6 }), fc.integer({ min: 0, max: 1 })).map(([t, d, a, b, p]) => new StalledWriterCommand(t, d, [a, b], p)),
    fc.tuple(fc.constantFrom<FileReader>("layer", "replace", "query"), deliveryArbitrary, day).map(([reader, d, dd]) => new FileReadingSqlCommand(reader, d, dd)),
  ];
}

/** A sink's target table dropped (item 5): for the workspaces with a PostgreSQL sink. */
export function sinkCommands(): fc.Arbitrary<LakeCommand>[] {
  return [table.map((t) => new DropSinkTableCommand(t))];
}
