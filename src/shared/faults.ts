/**
 * Named fault points for crash tests. `LAKESWAP_FAULT=<point>:kill` makes the
 * process SIGKILL itself when it reaches `<point>`; `<point>:error` throws
 * there instead; `<point>:oom` throws DuckDB's out-of-memory error there, `<point>:enospc` its disk-full error;
 * `<point>:kill@N` acts the Nth time only; `<point>:pause=MS` blocks the
 * process there; `<point>:stop` stops it there (SIGSTOP, as a frozen process)
 * after saying so on stderr (`fault point <point> reached: stopping (pid N)`),
 * until a SIGCONT. Several may be given, separated by ','. Unset in production.
 */
export type FaultPoint =
  | "lease-acquired"
  | "during-build"
  | "after-build"
  | "after-outbox"
  | "after-fence"
  | "before-swap-rename"
  | "during-batch-swap"
  | "after-swap"
  | "after-manifest"
  | "during-gc"
  | "before-release";

/**
 * Ingest's points: a segment's files stored, not yet registered; registered, not yet removed from the write-ahead log.
 * Compaction's: the new run placed, its tally not yet written; the tally written, the pointer not yet moved; the
 * pointer moved, the catalog file not yet rewritten.
 */
export type IngestFaultPoint = "ingest-after-upload" | "ingest-after-register" | "compact-after-place" | "compact-after-tally" | "compact-after-move";

/** The embedded engine's points: a delivery's signature, computed beside the write ahead of its runs (or a first load's CSV delivery written first); a build's write. */
export type EngineFaultPoint = "signing-beside-write-ahead" | "build-write";

/** An `iceberg: true` table's points: the Hive pointers moved, the Iceberg commit not begun; its metadata file written, its hint not yet moved. */
export type IcebergFaultPoint = "before-iceberg-commit" | "during-iceberg-commit";

/**
 * A sync's points: its delivery landed, the leases of the tables it writes not yet taken; a held sync's publication
 * with every table's outbox entry stored, its commit (the sync record saying `publishing`) not yet written.
 */
export type SyncFaultPoint = "sync-before-leases" | "before-publish-commit" | "schema-after-record" | "schema-after-change" | "rebuild-after-place" | "rebuild-after-definition" | "rebuild-after-move" | "relayout-after-build" | "relayout-before-switch" | "relayout-after-switch" | "layout-gc-marked";

/** The PostgreSQL sink's point: a partition's rows and state row written, its transaction not yet committed. */
export type SinkFaultPoint = "sink-before-commit";

/** Every fault point, in the order a replace reaches them. */
export const FAULT_POINTS: readonly FaultPoint[] = [
  "lease-acquired",
  "during-build",
  "after-build",
  "after-outbox",
  "after-fence",
  "before-swap-rename",
  "during-batch-swap",
  "after-swap",
  "after-manifest",
  "during-gc",
  "before-release",
];

const reached = new Map<FaultPoint | IngestFaultPoint | EngineFaultPoint | SinkFaultPoint | SyncFaultPoint | IcebergFaultPoint, number>();

/**
 * Stops the process at `point` when LAKESWAP_FAULT asks for it. An action may
 * name the time the point is reached (`after-swap:kill@3`: the third pointer
 * move), and `pause=MS` holds the whole process there (a slow writer).
 */
export function faultPoint(point: FaultPoint | IngestFaultPoint | EngineFaultPoint | SinkFaultPoint | SyncFaultPoint | IcebergFaultPoint): void {
  const spec = process.env.LAKESWAP_FAULT;
  if (!spec) return;
  const count = (reached.get(point) ?? 0) + 1;
  reached.set(point, count);
  for (const entry of spec.split(",")) {
    const [name, action = "kill"] = entry.trim().split(":");
    if (name !== point) continue;
    const [verb = "kill", nth] = action.split("@");
    if (nth !== undefined && Number(nth) !== count) continue;
    if (verb.startsWith("pause=")) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(verb.slice("pause=".length)));
      continue;
    }
    if (verb === "stop") {
      // The handshake a test waits for (stderr is synchronous on a pipe), then frozen: no timer runs, no lease is renewed.
      process.stderr.write(`lakeswap: fault point ${point} reached: stopping (pid ${process.pid}); continue it with kill -CONT ${process.pid}\n`);
      process.kill(process.pid, "SIGSTOP");
      continue;
    }
    if (verb === "kill") process.kill(process.pid, "SIGKILL");
    // The shape of DuckDB's error when a query finds its memory limit reached (its message starts so).
    if (verb === "oom") throw new Error(`Out of Memory Error: fault injected at ${point}`);
    // The shape of DuckDB's error when the disk fills while it writes a file (as writing to /dev/full gives).
    if (verb === "enospc") throw new Error(`IO Error: Could not write file "fault injected at ${point}": No space left on device`);
    throw new Error(`fault injected at ${point}`);
  }
}
