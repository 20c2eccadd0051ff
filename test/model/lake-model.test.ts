// The model test (issue 25, item 22): random sequences of CLI commands against a small pipeline (raw items by day,
// stage = a filter + project of raw; an event pipeline beside it), each applied to a reference model too (./model.ts),
// and the lake read after every command as a plain reader would (./lake-view.ts) and compared with the model (./check.ts).
// Commands: ./commands.ts (sync, rollback, replace, pin, gc, killed, two at once), ./ingest.ts (ingest batches, also
// killed; query with exact digits), ./hostile.ts (a writer frozen past its lease, a sink table dropped, SQL reading files),
// ./held.ts (sync --hold, publish and discard of a held sync), ./appends.ts (a `write: append` dataset whose glob matches
// a folder that accumulates files: files added, synced, rolled back, killed, two syncs at once; each distinct part once).
// Deliveries may hold a day the raw `error` audit refuses (`BAD`); embedded lakes' catalog file (lake.duckdb) is read
// after every command and must show the glob's rows.
//
// `npm test` runs a fixed seed and a few short sequences on each backend (BACKENDS=local,aws; default both);
// `npm run test:model -- --runs N [--seed S] [--commands C] [--backends local] [--test NAME]` runs more. A failure
// prints the shrunk sequence of commands (`sync --input <01:v2,03:v0 order#5>`: days of the pool, each in a variant of
// model.ts's `variantRows`, rows shuffled by the order number; `ingest events <g0,b2>`: ./ingest.ts's good and bad
// events), with the seed, path and commands' replayPath that replay it: npm run test:model -- --seed S --path P
// --replay R --test NAME (R is the `replayPath` in the printed counterexample).
//
// Issue 25 item 6 (dead letters of two namespaces of one segment) needs `lakeswap serve`: `lakeswap ingest` appends one
// namespace per run, so no segment of it holds two. ./ingest.ts's ServeCommand posts a batch to each of two namespaces
// (one open segment) and stops the collector by SIGTERM or kill -9.
import { S3Client } from "@aws-sdk/client-s3";
import fc from "fast-check";
import { afterAll, beforeAll, describe, it } from "vitest";
import { awsCliEnv, selectedBackends, startAwsServices, type AwsServices } from "../support/lake-fixture.js";
import { postgresAvailable, startPostgres, type PostgresServer } from "../support/postgres.js";
import { CLICKS } from "./append-model.js";
import { AddClickFilesCommand, AppendRollbackCommand, AppendSyncCommand, appendCommands, concurrentAppendCommands, killedAppendCommands } from "./appends.js";
import { SignatureMap } from "./check.js";
import {
  concurrentCommands,
  GcCommand,
  KillCommand,
  killedCommands,
  ordinaryCommands,
  ReplaceCommand,
  RollbackDuringSyncCommand,
  SyncCommand,
  type LakeCommand,
  type Real,
} from "./commands.js";
import { heldCommands } from "./held.js";
import { DropSinkTableCommand, StalledWriterCommand, hostileCommands, sinkCommands } from "./hostile.js";
import { ingestCommands, ServeCommand } from "./ingest.js";
import { LakeModel, RAW, STAGE, type Day, type TableName } from "./model.js";
import { Workspace, type AwsWorkspaceTarget } from "./workspace.js";

const long = process.env.MODEL_RUNS !== undefined;
const seed = Number(process.env.MODEL_SEED ?? 20261202);
const replayPath = process.env.MODEL_PATH;
// fast-check's path of the failing run and its shrinks (MODEL_PATH), and the commands' own replay path (MODEL_REPLAY).
const timeout = long ? 24 * 3_600_000 : 300_000;

/** Runs one fixed sequence of commands on a fresh lake. */
async function runSequence(commands: readonly LakeCommand[], newWorkspace: () => Workspace): Promise<void> {
  const ws = newWorkspace();
  const real = newReal(ws);
  try {
    await fc.asyncModelRun(() => ({ model: new LakeModel(ws.write), real }), commands);
  } finally {
    ws.cleanup();
  }
}

/** Runs `runs` random sequences of up to `commands` commands, each on a fresh lake (MODEL_RUNS / MODEL_COMMANDS override). */
async function checkModel(
  arbitraries: fc.Arbitrary<LakeCommand>[],
  defaults: { runs: number; commands: number },
  newWorkspace: () => Workspace,
): Promise<void> {
  const runs = Number(process.env.MODEL_RUNS ?? defaults.runs);
  const maxCommands = Number(process.env.MODEL_COMMANDS ?? defaults.commands);
  await fc.assert(
    fc.asyncProperty(fc.commands(arbitraries, { maxCommands, size: "max", replayPath: process.env.MODEL_REPLAY }), async (commands) => {
      const ws = newWorkspace();
      const real = newReal(ws);
      try {
        await fc.asyncModelRun(() => ({ model: new LakeModel(ws.write), real }), commands);
      } finally {
        if (process.env.MODEL_VERBOSE) process.stderr.write(`model run: ${real.log.join(" ; ")}\n`);
        ws.cleanup();
      }
    }),
    { seed, numRuns: runs, path: replayPath, endOnFailure: !long, verbose: 1 },
  );
}

const backends = selectedBackends();

let postgres: PostgresServer | undefined;

/** The system under test of one sequence: the workspace, and its sink tables when it has them. */
function newReal(ws: Workspace): Real {
  const sink = ws.sink;
  const server = postgres;
  const dropSinkTable = sink && server ? async (table: TableName) => void (await server.query(`DROP TABLE IF EXISTS ${table === STAGE ? sink.table : sink.rawTable ?? sink.table}`)) : undefined;
  return { ws, signatures: new SignatureMap(), log: [], leftovers: false, sinkRows: sinkReader(ws), dropSinkTable };
}

/** Reads the sink tables of a workspace that has them, as psql would (pg), per day. */
function sinkReader(ws: Workspace): Real["sinkRows"] {
  const sink = ws.sink;
  if (!sink || !postgres) return undefined;
  const server = postgres;
  const read = async (qualified: string, text: string): Promise<Map<string, string[]>> => {
    const rows = new Map<string, string[]>();
    const [schema, table] = qualified.split(".");
    const exists = await server.query("SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2", [schema, table]);
    if (exists.length === 0) return rows;
    for (const row of await server.query<{ day: string; text: string }>(`SELECT day, ${text} AS text FROM ${qualified}`)) {
      rows.set(row.day, [...(rows.get(row.day) ?? []), row.text]);
    }
    for (const list of rows.values()) list.sort();
    return rows;
  };
  const deleteFlag = ws.write === "upsert" ? " || '|' || coalesce(del, false)::text" : "";
  return async () => ({
    [STAGE]: await read(sink.table, "k::text || '|' || v10::text"),
    ...(sink.rawTable ? { [RAW]: await read(sink.rawTable, `k::text || '|' || d::text || '|' || v::text || '|' || cat${deleteFlag}`) } : {}),
  });
}

describe.runIf(backends.includes("local"))("embedded lake against a reference model, over random command sequences", () => {
  let sequence = 0;
  /** CSV in one sequence, JSONL in the next; raw and stage published as Iceberg too in every other pair. */
  const workspace = () => new Workspace(undefined, undefined, (sequence += 1) % 2 === 0 ? "jsonl" : "csv", "partition_replace", Math.floor(sequence / 2) % 2 === 1);

  it("sync, rollback (partition and --sync), replace, pin, gc --grace 0, held syncs published or discarded, deliveries an audit refuses, files appended", async () => {
    await checkModel([...ordinaryCommands(), ...heldCommands(), ...appendCommands()], { runs: 4, commands: 15 }, workspace);
  }, timeout);

  it("write: upsert with delete_flag (keys that move, deletes, a delete naming a day the key is not in, two rows of a key refused; held syncs; files appended)", async () => {
    const upsert = () => new Workspace(undefined, undefined, (sequence += 1) % 2 === 0 ? "jsonl" : "csv", "upsert");
    await checkModel([...ordinaryCommands(), ...heldCommands(), ...appendCommands()], { runs: 3, commands: 12 }, upsert);
  }, timeout);

  /** Each format with each write mode, in turn; raw and stage published as Iceberg too in every other sequence. */
  const mixed = () => {
    sequence += 1;
    return new Workspace(undefined, undefined, sequence % 2 === 0 ? "jsonl" : "csv", Math.floor(sequence / 2) % 2 === 0 ? "partition_replace" : "upsert", sequence % 2 === 1);
  };

  it("the same (held syncs too), with a sync (of items or of appended files), rollback or replace killed at a random fault point, then recovered", async () => {
    await checkModel([...ordinaryCommands(), ...heldCommands(), ...appendCommands(), ...killedCommands(), ...killedCommands(), ...killedAppendCommands()], { runs: 2, commands: 10 }, mixed);
  }, timeout);

  it("the same (held syncs too), with two commands at once from two processes (ending as one of the serial orders), appended files' syncs too", async () => {
    await checkModel([...ordinaryCommands(), ...heldCommands(), ...appendCommands(), ...concurrentCommands(), ...concurrentCommands(), ...concurrentAppendCommands()], { runs: 2, commands: 10 }, mixed);
  }, timeout);

  it("the same, with ingest batches (also killed at an ingest fault point), queries of exact digits, a writer frozen past its lease, SQL that reads files", async () => {
    // Each new command twice: they weigh about half of the draws.
    await checkModel([...ordinaryCommands(), ...ingestCommands(), ...ingestCommands(), ...hostileCommands(), ...hostileCommands()], { runs: 2, commands: 10 }, mixed);
  }, timeout);

  // Found with seed 880002: a sync killed while it moved pointers, then its rerun (which had nothing left to append to
  // the day the killed one moved), then a rollback of another day. The rollback's move stayed out of lake.duckdb with a
  // warning that the killed sync's runs wait for its rerun, though the rerun had finished and its views showed them.
  it("a rollback after a killed sync's rerun finished shows in lake.duckdb (the killed sync's runs that the rerun kept are no longer waited for)", async () => {
    const file = (days: readonly (readonly [Day, number])[]) => ({ days, order: 0, gzip: false });
    await runSequence(
      [
        new AddClickFilesCommand([file([["2026-11-02", 1]])], new AppendSyncCommand()),
        new AddClickFilesCommand([file([["2026-11-01", 0]])], new KillCommand(new AppendSyncCommand(), "during-batch-swap", 1)),
        new AddClickFilesCommand([file([["2026-11-02", 0], ["2026-11-01", 0]])], new AppendSyncCommand()),
        new AppendRollbackCommand(CLICKS, "2026-11-02"),
      ],
      workspace,
    );
  }, timeout);

  // Found with seed 880003: a first sync killed after its raw move, then gc, then a replace. gc, which moves no
  // pointer, took its lease checks for moves of its own and wrote the killed sync's partial state into lake.duckdb,
  // which then held the replace back (the killed sync's run was current, and the file kept no state to tell it showed it).
  it("gc after a killed first sync leaves its views waiting for the rerun, as a replace after it does", async () => {
    await runSequence(
      [
        new KillCommand(new SyncCommand({ days: [["2026-11-01", 0]], order: 0, allowEmpty: true }), "lease-acquired", 2),
        new GcCommand(),
        new ReplaceCommand(RAW, "2026-11-02", 7),
      ],
      mixed,
    );
  }, timeout);

  // Issue 25 item 2: before the fence, the frozen writer's move landed over the taker's (both exit 0).
  it("a writer frozen past its lease's expiry never moves a pointer over the next writer's (issue 25 item 2)", async () => {
    await runSequence([new SyncCommand({ days: [["2026-11-01", 0]], order: 0 }), new StalledWriterCommand(RAW, "2026-11-01", [1, 4], 1)], workspace);
  }, timeout);

  // Issue 25 item 1 (fixed by the lease work: the rollback waits for the running sync, then holds all its tables); the
  // random sequences above also draw RollbackDuringSyncCommand. Before the fix the rollback read the record while only
  // the raw moves were in it, waited for the raw lease alone, and rolled raw back while the sync's stage stayed.
  it("rollback --sync last while that sync is still running ends as one writer's whole result (issue 25 item 1)", async () => {
    await runSequence(
      [new SyncCommand({ days: [["2026-11-01", 0], ["2026-11-02", 0]], order: 0 }), new RollbackDuringSyncCommand({ days: [["2026-11-01", 1], ["2026-11-02", 2]], order: 0 })],
      workspace,
    );
  }, timeout);

  // Issue 25 item 6: one bad event in each of two namespaces of one segment (same day) had one dead-letter file key;
  // with equal counts one dead letter was lost, with unequal ones every landing of the segment failed for good.
  it("dead letters of two namespaces in one segment all land, with equal and unequal counts, drained and killed (issue 25 item 6)", async () => {
    const bad = 4; // the first bad event of the pool (./ingest.ts)
    await runSequence([new ServeCommand([0, bad], [1, bad], false), new ServeCommand([bad, bad + 1, 2], [bad], true)], workspace);
  }, timeout);
});

describe.runIf(backends.includes("local") && postgresAvailable())("embedded lake with a PostgreSQL sink of the stage layer", () => {
  let sequence = 0;
  beforeAll(async () => {
    postgres = await startPostgres();
  });
  afterAll(async () => {
    await postgres?.stop();
    postgres = undefined;
  });

  // Issue 25 item 4: a partition emptied by an upsert (its only key moved back to its own day) was never sent (exit 7,
  // the target kept the key). The random sequences reach it seldom: it needs 01:v4 then 02:v0-like deliveries in upsert.
  it("a partition an upsert empties is emptied in the sink too (issue 25 item 4)", async () => {
    const workspace = () => {
      const schema = `model_${process.pid}_${(sequence += 1)}`;
      return new Workspace(undefined, { url: postgres!.url, table: `${schema}.items_stage`, rawTable: `${schema}.items_raw` }, "csv", "upsert");
    };
    await runSequence([new SyncCommand({ days: [["2026-11-01", 4]], order: 0 }), new SyncCommand({ days: [["2026-11-02", 0]], order: 0 })], workspace);
  }, timeout);

  // Issue 25 item 5: the dropped table was recreated empty and never refilled (every partition 'unchanged').
  it("a sink's target table dropped between syncs is refilled by the next sync (issue 25 item 5)", async () => {
    const workspace = () => {
      const schema = `model_${process.pid}_${(sequence += 1)}`;
      return new Workspace(undefined, { url: postgres!.url, table: `${schema}.items_stage`, rawTable: `${schema}.items_raw` }, "csv");
    };
    const delivery = { days: [["2026-11-01", 0], ["2026-11-02", 2]], order: 0 } as const;
    await runSequence([new SyncCommand(delivery), new DropSinkTableCommand(STAGE), new SyncCommand(delivery), new DropSinkTableCommand(RAW), new SyncCommand(delivery)], workspace);
  }, timeout);

  it("after every sync the sink's tables hold exactly the lake's raw and stage rows (sync, rollback, replace, pin, gc, two syncs at once)", async () => {
    // partition_replace in one sequence, upsert in the next.
    const workspace = () => {
      sequence += 1;
      const schema = `model_${process.pid}_${sequence}`;
      const target = { url: postgres!.url, table: `${schema}.items_stage`, rawTable: `${schema}.items_raw` };
      return new Workspace(undefined, target, "csv", sequence % 2 === 0 ? "upsert" : "partition_replace");
    };
    await checkModel([...ordinaryCommands(), ...concurrentCommands(), ...sinkCommands()], { runs: 2, commands: 12 }, workspace);
  }, timeout);
});

describe.runIf(backends.includes("aws"))("AWS lake (S3 + Glue + Athena emulators) against a reference model", () => {
  let services: AwsServices | undefined;
  let sequence = 0;
  beforeAll(async () => {
    process.env.AWS_EC2_METADATA_DISABLED = "true";
    services = await startAwsServices();
    if (postgresAvailable()) postgres = await startPostgres();
  });
  afterAll(async () => {
    await services?.close();
    await postgres?.stop();
    postgres = undefined;
  });

  /** A workspace on a fresh prefix and Glue database of the emulated services (with `sink`: its tables in PostgreSQL). */
  const workspace = (sink = false): Workspace => {
    const s = services!;
    const suffix = `${process.pid}_${(sequence += 1)}`;
    const target: AwsWorkspaceTarget = {
      env: awsCliEnv(s, {
        DATA_OUTPUT_S3_BUCKET: "lake",
        DATA_OUTPUT_S3_PREFIX: `model/${suffix}`,
        SCHEMA_OUTPUT_GLUE_DATABASE_NAME: `model_${suffix}`,
        DATA_OUTPUT_ATHENA_WORKGROUP_NAME: "primary",
        DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET: "results",
      }),
      location: { s3: new S3Client(s.s3.clientConfig), bucket: "lake", prefix: `model/${suffix}`, glue: s.glue.state, database: `model_${suffix}` },
    };
    const postgresTarget = sink ? { url: postgres!.url, table: `model_${suffix}.items_stage`, rawTable: `model_${suffix}.items_raw` } : undefined;
    return new Workspace(target, postgresTarget, "csv", sequence % 2 === 0 ? "upsert" : "partition_replace");
  };

  it("sync, rollback (partition and --sync), replace, pin, gc --grace 0, held syncs, files appended, and a command killed at a fault point", async () => {
    await checkModel([...ordinaryCommands(), ...heldCommands(), ...appendCommands(), ...killedCommands(), ...killedAppendCommands()], { runs: 2, commands: 8 }, () => workspace());
  }, timeout);

  it("the same, with two commands at once, ingest batches (also killed), queries of exact digits, a writer frozen past its lease, SQL that reads files", async () => {
    await checkModel([...ordinaryCommands(), ...appendCommands(), ...concurrentCommands(), ...concurrentAppendCommands(), ...ingestCommands(), ...hostileCommands()], { runs: 1, commands: 10 }, () => workspace());
  }, timeout);

  it.runIf(postgresAvailable())("with a PostgreSQL sink of both layers: after every sync its tables hold exactly the lake's rows (two syncs at once, a target table dropped)", async () => {
    await checkModel([...ordinaryCommands(), ...concurrentCommands(), ...sinkCommands()], { runs: 1, commands: 8 }, () => workspace(true));
  }, timeout);
});
