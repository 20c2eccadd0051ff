import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { promises as fs, closeSync, fdatasyncSync, openSync, readFileSync, rmSync, writeSync, writevSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { quoteLiteral } from "../src/model/sql.js";
import { BenchDuck } from "./duck.js";
import { LAKESWAP_BIN, tail } from "./lakeswap-cli.js";
import { runMeasured } from "./measured-process.js";
import { median } from "./stats.js";

/*
 * Issue 12, item 9: durable events per second through `lakeswap serve`, side
 * by side with the limit of the disk it writes to, measured in the same run.
 *
 * The collector runs as a process of its own (the compiled CLI, as a user
 * starts it), on an embedded lake, one pipeline `events`, one namespace
 * `pageviews` of seven declared columns. Clients in this process post batches
 * of 1,000 NDJSON events of about 300 bytes each over keep-alive connections,
 * a run with 4 and a run with 8 clients at once; every body is built once and
 * only its event ids are rewritten per post (each event_id is unique in the
 * whole section). An event counts when its request was answered 200, which
 * the collector sends only once the events are fdatasynced in its
 * write-ahead log. Throughput = events acknowledged / wall time of the run;
 * per core = events acknowledged / the server's CPU time over the same window
 * (utime + stime of /proc/<pid>/stat, all its threads, DuckDB's included).
 * The landing into Parquet runs in the same process, partly after the window:
 * read strictly, per core counts the server's CPU until the run's events are
 * landed, a third verdict.
 *
 * The limit: the same bodies, patched the same way, appended to one file on
 * the same file system by one writer in this process, one write and one
 * fdatasync per batch, measured before each full-speed run and after the last
 * (fdatasync time here moves with other work on the machine; the verdict takes
 * the median); with several batches per fdatasync as context (what group
 * commit can reach).
 *
 * Latency from 200 to queryable: every batch's first event is a marker. While
 * the runs go on, the table's folder is listed every POLL_MS, and a Parquet
 * file counts as queryable from the first listing that shows it with its
 * partition registered (the pointer state file that `lakeswap query` reads);
 * once the server has stopped, the files are read to find which file holds
 * which marker. The segment age and the flush interval set its floor; a run
 * at full speed measures the landing's backlog too, so a third run, one
 * client at a fixed rate the landing keeps up with, gives it at a
 * sustainable load (context: its throughput is not judged).
 *
 * At the end the lake must hold exactly the events acknowledged, each once
 * (count and count of distinct event ids, by DuckDB over the files and by
 * `lakeswap query`), nothing dead-lettered, and the server must exit 0 on
 * SIGTERM: otherwise the section reports its figures and fails.
 *
 * To see where the server's time goes, give it Node flags of its own:
 * LAKESWAP_BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof".
 */

/** Issue 12's first target: durable events per second per CPU-second of the server, at least. */
export const INGEST_PER_CORE_TARGET = 100_000;
/** Issue 12's second target: serve's durable events/s over the limit's, at least. */
export const INGEST_LIMIT_FRACTION_TARGET = 0.5;
/** The targets' measures, as the verdicts print them. */
export const INGEST_PER_CORE_MEASURE = "ingest · durable events/s per core (lakeswap serve, events per server CPU-second)";
export const INGEST_LIMIT_MEASURE = "ingest · lakeswap serve events/s / the limit (one writer, one fdatasync per batch)";
/** The per-core target read strictly: the server's CPU until every event of the run is landed into Parquet, not only while it acknowledged them. */
export const INGEST_PER_CORE_LANDED_MEASURE = "ingest · the same per core, landing into Parquet included (the sustained cost; stricter reading)";

/** Events per request, as the issue says. */
const INGEST_BATCH_EVENTS = 1_000;
/** Concurrent clients of each run. */
const CLIENT_COUNTS = [4, 8] as const;
/** Batches of the untimed warm-up (their events are checked like the others). */
const WARMUP_BATCHES = 20;
/** Batches timed by the limit, each time it is measured. */
const LIMIT_BATCHES = 300;
/** Batches per fdatasync in the group-commit variant of the limit. */
const GROUP_COMMIT_BATCHES = 8;
/** Distinct bodies the batches cycle through. */
const TEMPLATES = 8;
/** The collector's --flush-interval and its log's segment age: what the latency to queryable mostly is. */
const FLUSH_INTERVAL_MS = 500;
const SEGMENT_MAX_AGE_MS = 2000;
/** The paced run: one client at this rate (about what the landing keeps up with here), for the latency at a sustainable load. */
const PACED_EVENTS_PER_SECOND = 20_000;
const PACED_BATCHES = 200;
/** How often the table's folder is listed for new files. */
const POLL_MS = 100;
/** A run stops sending after this long (its figures are then over the batches it sent). */
const RUN_TIME_LIMIT_MS = 120_000;
/** Longest the server may take to land what it acknowledged, and to exit after SIGTERM. */
const DRAIN_TIMEOUT_MS = 180_000;
const STOP_TIMEOUT_MS = 120_000;
/** Longest one request may wait for its answer. */
const REQUEST_TIMEOUT_MS = 60_000;

const PIPELINE = "events";
const NAMESPACE = "pageviews";
/** `e` + 8 digits of batch number + `-` + 4 digits of index in the batch. */
const BATCH_DIGITS = 8;

/** A percentile summary of latencies, in ms. */
export interface Percentiles {
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** One run to make: N clients posting as fast as they are answered, or one client at a fixed rate. */
interface RunPlan {
  readonly label: string;
  readonly clients: number;
  readonly batches: number;
  /** Post at this rate instead of as fast as possible (the latency at a load the collector keeps up with). */
  readonly pacedEventsPerSecond?: number;
}

/** One run of clients against the server. */
export interface ServeRun extends RunPlan {
  /** The number of the run's first batch (batches are numbered across the section). */
  readonly firstBatch: number;
  /** Batches sent (fewer than planned if the run hit RUN_TIME_LIMIT_MS). */
  readonly sentBatches: number;
  /** Events acknowledged with 200. */
  readonly events: number;
  /** From the first request sent to the last answer received. */
  readonly wallMs: number;
  readonly eventsPerSecond: number;
  /** CPU time of the server process over the window (all threads). */
  readonly serverCpuMs: number;
  /** events / server CPU-seconds: the per-core figure. */
  readonly eventsPerCpuSecond: number;
  /** CPU time of this process (the clients) over the window. */
  readonly clientCpuMs: number;
  /** Requests answered 503 (backpressure) and sent again after Retry-After. */
  readonly retried: number;
  /** Time from sending a request to its 200. */
  readonly request: Percentiles;
  /** After the last 200: until the server reported everything acknowledged as landed, and the server's CPU in that time. */
  readonly drain: { readonly ms: number; readonly serverCpuMs: number };
  /** events / server CPU-seconds of the window and the drain: what an event costs including its landing into Parquet. */
  readonly eventsPerCpuSecondWithLanding: number;
  /** From an event's 200 to the first listing that showed it queryable (one marker per batch). */
  readonly latency: Percentiles;
}

/** The limit: the same bodies into one file, one writer. */
export interface LimitRun {
  /** When it was measured, e.g. "before the 4-client run". */
  readonly when: string;
  readonly batchesPerFsync: number;
  readonly batches: number;
  readonly ms: number;
  readonly eventsPerSecond: number;
  readonly mbPerSecond: number;
}

/** Everything the ingest section measured. */
export interface IngestFigures {
  readonly batchEvents: number;
  /** Mean bytes of one event line, newline included. */
  readonly eventBytes: number;
  readonly bodyBytes: number;
  readonly flushIntervalMs: number;
  readonly segmentMaxAgeMs: number;
  readonly pollMs: number;
  readonly clockTicksPerSecond: number;
  readonly runs: readonly ServeRun[];
  /**
   * One fdatasync per batch, measured before each run at full speed and after the last (the disk's fdatasync time
   * moves with other work on the machine); the group-commit variant as context; the verdict's limit is the median.
   */
  readonly limit: { readonly runs: readonly LimitRun[]; readonly groupCommit: LimitRun; readonly judged: number };
  /** The run the verdicts judge: of the runs at full speed, the highest events/s. */
  readonly best: {
    readonly clients: number;
    readonly eventsPerSecond: number;
    readonly eventsPerCpuSecond: number;
    readonly eventsPerCpuSecondWithLanding: number;
    readonly fractionOfLimit: number;
  };
  readonly checks: IngestChecks;
}

/** Did the lake end with exactly what was acknowledged, and did the server stop cleanly? */
interface IngestChecks {
  /** Events acknowledged over the whole section, warm-up included. */
  readonly acknowledged: number;
  /** DuckDB over the table's Parquet files. */
  readonly files: { readonly rows: number; readonly distinctIds: number; readonly count: number };
  /** `lakeswap query` through the CLI, as a reader sees the table. */
  readonly query: { readonly rows: number; readonly distinctIds: number } | { readonly error: string };
  /** As the server counted them before it stopped. */
  readonly server: { readonly accepted: number; readonly written: number; readonly deadLettered: number };
  readonly markersFound: number;
  readonly exitCode: number | null;
  readonly exitSignal: string | null;
  /** Non-empty segment files left in the write-ahead log after the stop. */
  readonly walLeft: number;
  /** Every check passed. */
  readonly passed: boolean;
  /** What failed, in words (empty when passed). */
  readonly problems: readonly string[];
}

/** Runs the ingest benchmark in `workDir/ingest`; throws only when it cannot measure at all (the checks' failures are in the figures). */
export async function benchIngest(workDir: string, options: { readonly batchesPerRun: number }, progress: (message: string) => void): Promise<IngestFigures> {
  const dir = path.join(workDir, "ingest");
  const lakeDir = path.join(dir, "lake");
  await fs.mkdir(dir, { recursive: true });
  const config = path.join(dir, "lakeswap.yaml");
  await fs.writeFile(config, CONFIG);
  const bodies = buildBodies(Date.now());
  const eventBytes = bodies.reduce((sum, b) => sum + b.bytes.length, 0) / (bodies.length * INGEST_BATCH_EVENTS);
  const ticks = clockTicksPerSecond();
  progress(`ingest: ${TEMPLATES} bodies of ${INGEST_BATCH_EVENTS} events, ${eventBytes.toFixed(0)} bytes an event on average`);
  const plans: RunPlan[] = [
    ...CLIENT_COUNTS.map((clients) => ({ label: `${clients} concurrent clients`, clients, batches: options.batchesPerRun })),
    { label: `(context) 1 client, paced at ${count(PACED_EVENTS_PER_SECOND)} events/s`, clients: 1, batches: PACED_BATCHES, pacedEventsPerSecond: PACED_EVENTS_PER_SECOND },
  ];

  const limits: LimitRun[] = [];
  const limit = (when: string): void => {
    limits.push(measureLimit(dir, bodies, 1, when));
    progress(`ingest: limit (one fdatasync per batch) ${when}: ${count(limits.at(-1)?.eventsPerSecond ?? 0)} events/s`);
  };
  const port = await freePort();
  const server = startServer(config, dir, port);
  const acks: number[] = [];
  const poller = new QueryablePoller(lakeDir);
  const runs: ServeRun[] = [];
  let health: ServerCounts = { accepted: 0, written: 0, deadLettered: 0 };
  let stopped: ServerExit;
  try {
    await server.healthy();
    progress(`ingest: lakeswap serve is up on port ${port} (pid ${server.pid}); warm-up of ${WARMUP_BATCHES} batches`);
    poller.start();
    const clients = new Clients(port, bodies, acks);
    await clients.run(4, WARMUP_BATCHES);
    health = await server.drained(clients.acknowledged);
    for (const plan of plans) {
      if (plan.pacedEventsPerSecond === undefined) limit(`before the ${plan.clients}-client run`);
      const cpuBefore = server.cpuMs(ticks);
      const clientCpu = process.cpuUsage();
      const sent = await clients.run(plan.clients, plan.batches, plan.pacedEventsPerSecond);
      const cpuWindow = server.cpuMs(ticks) - cpuBefore;
      const clientCpuUsage = process.cpuUsage(clientCpu);
      const drainStart = performance.now();
      health = await server.drained(clients.acknowledged);
      const drainMs = performance.now() - drainStart;
      const cpuDrain = server.cpuMs(ticks) - cpuBefore - cpuWindow;
      runs.push({
        ...plan,
        firstBatch: sent.firstBatch,
        sentBatches: sent.batches,
        events: sent.events,
        wallMs: sent.wallMs,
        eventsPerSecond: sent.events / (sent.wallMs / 1000),
        serverCpuMs: cpuWindow,
        eventsPerCpuSecond: sent.events / (cpuWindow / 1000),
        clientCpuMs: (clientCpuUsage.user + clientCpuUsage.system) / 1000,
        retried: sent.retried,
        request: percentiles(sent.requestMs),
        drain: { ms: drainMs, serverCpuMs: cpuDrain },
        eventsPerCpuSecondWithLanding: sent.events / ((cpuWindow + cpuDrain) / 1000),
        latency: percentiles([]),
      });
      progress(
        `ingest: ${plan.label}: ${count(sent.events)} events in ${(sent.wallMs / 1000).toFixed(2)} s = ${count(sent.events / (sent.wallMs / 1000))} events/s, ` +
          `server CPU ${(cpuWindow / 1000).toFixed(2)} s (${count(sent.events / (cpuWindow / 1000))} events per CPU-second); ` +
          `landed ${(drainMs / 1000).toFixed(2)} s after the last 200 (${(cpuDrain / 1000).toFixed(2)} s more server CPU)`,
      );
    }
    limit("after the runs");
    await poller.poll();
  } finally {
    poller.stop();
    stopped = await server.stop();
  }
  progress(`ingest: SIGTERM: the server exited with ${stopped.code ?? stopped.signal}`);
  const groupCommit = measureLimit(dir, bodies, GROUP_COMMIT_BATCHES, "after the server stopped");
  progress(`ingest: limit with ${GROUP_COMMIT_BATCHES} batches per fdatasync: ${count(groupCommit.eventsPerSecond)} events/s`);

  const checks = await checkLake(lakeDir, dir, acks, poller, runs, { health, stopped });
  const judged = median(limits.map((l) => l.eventsPerSecond));
  const best = runs.filter((r) => r.pacedEventsPerSecond === undefined).reduce((a, b) => (b.eventsPerSecond > a.eventsPerSecond ? b : a));
  return {
    batchEvents: INGEST_BATCH_EVENTS,
    eventBytes,
    bodyBytes: bodies[0]?.bytes.length ?? 0,
    flushIntervalMs: FLUSH_INTERVAL_MS,
    segmentMaxAgeMs: SEGMENT_MAX_AGE_MS,
    pollMs: POLL_MS,
    clockTicksPerSecond: ticks,
    runs,
    limit: { runs: limits, groupCommit, judged },
    best: {
      clients: best.clients,
      eventsPerSecond: best.eventsPerSecond,
      eventsPerCpuSecond: best.eventsPerCpuSecond,
      eventsPerCpuSecondWithLanding: best.eventsPerCpuSecondWithLanding,
      fractionOfLimit: best.eventsPerSecond / judged,
    },
    checks,
  };
}

const CONFIG = `# lakeswap serve, bench section ingest (bench/ingest-bench.ts)
lake: ./lake
pipelines:
  ${PIPELINE}:
    namespaces:
      ${NAMESPACE}:
        columns:
          event_id: {type: VARCHAR, nullable: false}
          user_id: VARCHAR
          session_id: VARCHAR
          url: VARCHAR
          referrer: VARCHAR
          user_agent: VARCHAR
          ts: {type: TIMESTAMPTZ, nullable: false}
        time: {field: ts}
    wal: {dir: ./wal, segment_max_age: ${SEGMENT_MAX_AGE_MS / 1000}s}
`;

/** One request body: NDJSON of INGEST_BATCH_EVENTS events, and where each event's batch number is written. */
interface Body {
  readonly bytes: Buffer;
  readonly batchOffsets: Int32Array;
}

const PAGES = ["products/shoes", "products/jackets", "cart", "checkout/payment", "account/orders", "search", "blog/spring-collection", "help/returns"];
const REFERRERS = ["https://www.google.com/search?q=", "https://duckduckgo.com/?q=", "https://news.example.org/article/", "https://t.co/"];
const AGENTS = [
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/126.0 Safari/537.36",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) Mobile/15E148",
  "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
];

/** TEMPLATES bodies of pageviews of about 300 bytes each, with placeholder batch numbers; `ts` within a second of `now`. */
function buildBodies(now: number): Body[] {
  let seed = 12345;
  const random = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const hex = (digits: number): string => Array.from({ length: digits }, () => "0123456789abcdef"[random(16)]).join("");
  return Array.from({ length: TEMPLATES }, () => {
    const lines: string[] = [];
    for (let i = 0; i < INGEST_BATCH_EVENTS; i += 1) {
      const event = {
        event_id: `e${"0".repeat(BATCH_DIGITS)}-${String(i).padStart(4, "0")}`,
        user_id: `u${String(random(1_000_000)).padStart(7, "0")}`,
        session_id: hex(16),
        url: `https://shop.example.com/${PAGES[random(PAGES.length)]}?item=${random(100_000)}`,
        referrer: `${REFERRERS[random(REFERRERS.length)]}${hex(6)}`,
        user_agent: AGENTS[random(AGENTS.length)],
        ts: new Date(now + random(1000)).toISOString(),
      };
      lines.push(JSON.stringify(event));
    }
    const bytes = Buffer.from(`${lines.join("\n")}\n`);
    const batchOffsets = new Int32Array(INGEST_BATCH_EVENTS);
    let at = 0;
    for (let i = 0; i < INGEST_BATCH_EVENTS; i += 1) {
      at = bytes.indexOf('"event_id":"e', at) + '"event_id":"e'.length;
      batchOffsets[i] = at;
    }
    return { bytes, batchOffsets };
  });
}

/** Writes batch number `batch` into every event id of a copy of a body (in place: the copy belongs to one writer). */
function stampBatch(copy: Buffer, body: Body, batch: number): void {
  const digits = Buffer.from(String(batch).padStart(BATCH_DIGITS, "0"));
  for (const offset of body.batchOffsets) digits.copy(copy, offset);
}

/**
 * The limit: `LIMIT_BATCHES` batches (the same bodies, stamped the same way) appended to one new file by one
 * writer, one write and one fdatasync per `batchesPerFsync` batches.
 */
function measureLimit(dir: string, bodies: readonly Body[], batchesPerFsync: number, when: string): LimitRun {
  const file = path.join(dir, `limit-${batchesPerFsync}.bin`);
  const copies = bodies.map((b) => Buffer.from(b.bytes));
  const fd = openSync(file, "w");
  let bytes = 0;
  const started = performance.now();
  try {
    for (let batch = 0; batch < LIMIT_BATCHES; batch += batchesPerFsync) {
      const group: Buffer[] = [];
      for (let k = batch; k < Math.min(LIMIT_BATCHES, batch + batchesPerFsync); k += 1) {
        const template = k % TEMPLATES;
        stampBatch(copies[template] as Buffer, bodies[template] as Body, k);
        // The group's copies are distinct only while it is no larger than TEMPLATES: copy beyond that.
        group.push(batchesPerFsync > TEMPLATES ? Buffer.from(copies[template] as Buffer) : (copies[template] as Buffer));
        bytes += (copies[template] as Buffer).length;
      }
      if (group.length === 1) writeSync(fd, group[0] as Buffer);
      else writevSync(fd, group);
      fdatasyncSync(fd);
    }
  } finally {
    closeSync(fd);
  }
  const ms = performance.now() - started;
  rmSync(file, { force: true });
  return { when, batchesPerFsync, batches: LIMIT_BATCHES, ms, eventsPerSecond: (LIMIT_BATCHES * INGEST_BATCH_EVENTS) / (ms / 1000), mbPerSecond: bytes / 1e6 / (ms / 1000) };
}

/** What one run of the clients sent and got back. */
interface ClientRun {
  readonly firstBatch: number;
  readonly batches: number;
  readonly events: number;
  readonly wallMs: number;
  readonly retried: number;
  readonly requestMs: number[];
}

/** The clients: keep-alive connections that post stamped bodies, numbering batches across runs so every event id is unique. */
class Clients {
  private nextBatch = 0;
  acknowledged = 0;

  constructor(
    private readonly port: number,
    private readonly bodies: readonly Body[],
    /** The time of each batch's 200 (performance.now()), by batch number. */
    private readonly acks: number[],
  ) {}

  /**
   * Posts `batches` batches from `clients` concurrent clients, each as soon as the last was answered, or at
   * `pacedEventsPerSecond`; throws on any answer but 200 and 503 (retried after Retry-After).
   */
  async run(clients: number, batches: number, pacedEventsPerSecond?: number): Promise<ClientRun> {
    const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
    const first = this.nextBatch;
    const end = first + batches;
    const requestMs: number[] = [];
    let events = 0;
    let retried = 0;
    let sent = 0;
    const started = performance.now();
    const client = async (): Promise<void> => {
      const copies = this.bodies.map((b) => Buffer.from(b.bytes));
      while (this.nextBatch < end && performance.now() - started < RUN_TIME_LIMIT_MS) {
        const batch = this.nextBatch++;
        if (pacedEventsPerSecond !== undefined) await sleep(started + ((batch - first) * INGEST_BATCH_EVENTS * 1000) / pacedEventsPerSecond - performance.now());
        const template = batch % TEMPLATES;
        const body = copies[template] as Buffer;
        stampBatch(body, this.bodies[template] as Body, batch);
        sent += 1;
        for (;;) {
          const requestStart = performance.now();
          const answer = await post(agent, this.port, body);
          if (answer.status === 503 && answer.retryAfterSeconds !== undefined) {
            retried += 1;
            await sleep(answer.retryAfterSeconds * 1000);
            continue;
          }
          if (answer.status !== 200) throw new Error(`batch ${batch}: lakeswap serve answered ${answer.status}: ${answer.text.slice(0, 300)}`);
          const accepted = (JSON.parse(answer.text) as { accepted?: unknown }).accepted;
          if (accepted !== INGEST_BATCH_EVENTS) throw new Error(`batch ${batch}: lakeswap serve accepted ${String(accepted)} events of ${INGEST_BATCH_EVENTS}: ${answer.text.slice(0, 300)}`);
          const now = performance.now();
          this.acks[batch] = now;
          requestMs.push(now - requestStart);
          events += INGEST_BATCH_EVENTS;
          this.acknowledged += INGEST_BATCH_EVENTS;
          break;
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: clients }, client));
    } finally {
      agent.destroy();
    }
    return { firstBatch: first, batches: sent, events, wallMs: performance.now() - started, retried, requestMs };
  }
}

/** One POST of an NDJSON body to the pipeline's namespace. */
function post(agent: http.Agent, port: number, body: Buffer): Promise<{ status: number; text: string; retryAfterSeconds?: number }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: `/v1/${PIPELINE}/${NAMESPACE}`,
        agent,
        headers: { "content-type": "application/x-ndjson", "content-length": body.length },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("error", reject);
        response.on("end", () => {
          const retryAfter = Number(response.headers["retry-after"]);
          resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), retryAfterSeconds: Number.isFinite(retryAfter) ? retryAfter : undefined });
        });
      },
    );
    request.on("timeout", () => request.destroy(new Error(`lakeswap serve gave no answer in ${REQUEST_TIMEOUT_MS / 1000} s`)));
    request.on("error", reject);
    request.end(body);
  });
}

/** What the server counts, from GET /healthz. */
interface ServerCounts {
  readonly accepted: number;
  readonly written: number;
  readonly deadLettered: number;
}

/** How the server exited, and the last lines it printed. */
interface ServerExit {
  readonly code: number | null;
  readonly signal: string | null;
  readonly output: string;
}

/** The `lakeswap serve` process. */
interface Server {
  readonly pid: number;
  healthy(): Promise<void>;
  /** Waits until the server has landed (written or dead-lettered) as many events as it accepted, and that is `acknowledged`. */
  drained(acknowledged: number): Promise<ServerCounts>;
  /** CPU time of the process so far (utime + stime, every thread), in ms. */
  cpuMs(ticksPerSecond: number): number;
  /** SIGTERM, then waits for the exit (SIGKILL after STOP_TIMEOUT_MS); with the last lines the server printed. */
  stop(): Promise<ServerExit>;
}

function startServer(config: string, cwd: string, port: number): Server {
  // Node flags for the server alone, to profile it: LAKESWAP_BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = (process.env.LAKESWAP_BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const args = [...nodeArgs, LAKESWAP_BIN, "serve", "-c", config, "--port", String(port), "--host", "127.0.0.1", "--flush-interval", String(FLUSH_INTERVAL_MS)];
  const child: ChildProcess = spawn(process.execPath, args, { cwd, env: { ...process.env, NODE_NO_WARNINGS: "1" }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let exit: { code: number | null; signal: string | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      resolve(exit);
    });
    child.on("error", (error) => {
      output += `\nspawn failed: ${error.message}`;
      exit = { code: null, signal: null };
      resolve(exit);
    });
  });
  const pid = child.pid ?? -1;
  const gone = (): Error => new Error(`lakeswap serve exited (${exit?.code ?? exit?.signal}):\n${tail(output, 20)}`);
  const health = async (): Promise<{ status: number; counts?: ServerCounts }> => {
    const response = await fetch(`http://127.0.0.1:${port}/healthz`);
    const detail = (await response.json()) as { detail?: { pipelines?: Partial<ServerCounts>[] } };
    const counts = detail.detail?.pipelines?.[0];
    return { status: response.status, counts: counts ? { accepted: counts.accepted ?? 0, written: counts.written ?? 0, deadLettered: counts.deadLettered ?? 0 } : undefined };
  };
  return {
    pid,
    async healthy() {
      const deadline = performance.now() + 60_000;
      for (;;) {
        if (exit) throw gone();
        const status = await health().then((h) => h.status, () => 0);
        if (status === 200) return;
        if (performance.now() > deadline) throw new Error(`lakeswap serve did not answer GET /healthz with 200 in 60 s:\n${tail(output, 20)}`);
        await sleep(100);
      }
    },
    async drained(acknowledged) {
      const deadline = performance.now() + DRAIN_TIMEOUT_MS;
      let last: ServerCounts | undefined;
      for (;;) {
        if (exit) throw gone();
        last = (await health()).counts;
        if (last && last.accepted !== acknowledged) {
          throw new Error(`lakeswap serve counts ${last.accepted} events accepted, the clients got 200 for ${acknowledged}`);
        }
        if (last && last.written + last.deadLettered >= last.accepted) return last;
        if (performance.now() > deadline) {
          throw new Error(`lakeswap serve landed ${last ? last.written + last.deadLettered : "?"} of ${acknowledged} events in ${DRAIN_TIMEOUT_MS / 1000} s:\n${tail(output, 20)}`);
        }
        await sleep(50);
      }
    },
    cpuMs(ticksPerSecond) {
      // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1000;
    },
    async stop() {
      if (!exit) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }
      return { code: exit?.code ?? null, signal: exit?.signal ?? null, output: tail(output, 10) };
    },
  };
}

/**
 * Lists the table's folder every POLL_MS and keeps, per Parquet file, the time it was first seen queryable: present,
 * with its partition registered (`_lakeswap/pointers/<table>/<partition>.json`, what `lakeswap query` reads).
 */
class QueryablePoller {
  readonly firstSeen = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly lakeDir: string) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.poll().finally(() => (this.running = undefined));
    }, POLL_MS);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  async poll(): Promise<void> {
    const now = performance.now();
    const tableDir = path.join(this.lakeDir, NAMESPACE);
    const names = await fs.readdir(tableDir, { recursive: true }).catch(() => [] as string[]);
    for (const name of names) {
      if (!name.endsWith(".parquet") || this.firstSeen.has(name)) continue;
      const partition = path.dirname(name);
      const pointer = path.join(this.lakeDir, "_lakeswap", "pointers", NAMESPACE, `${partition}.json`);
      if (await fs.access(pointer).then(() => true, () => false)) this.firstSeen.set(name, now);
    }
  }
}

/** The end checks: the lake holds exactly the acknowledged events, and the latency of every marker found. */
async function checkLake(
  lakeDir: string,
  dir: string,
  acks: readonly number[],
  poller: QueryablePoller,
  runs: ServeRun[],
  server: { health: ServerCounts; stopped: ServerExit },
): Promise<IngestChecks> {
  const acknowledged = acks.filter((t) => t !== undefined).length * INGEST_BATCH_EVENTS;
  const problems: string[] = [];
  const tableDir = path.join(lakeDir, NAMESPACE);
  const files = (await fs.readdir(tableDir, { recursive: true }).catch(() => [] as string[])).filter((name) => name.endsWith(".parquet"));
  const duck = await BenchDuck.open();
  let fileCheck = { rows: 0, distinctIds: 0, count: files.length };
  const markerFile = new Map<number, string>();
  try {
    if (files.length > 0) {
      const list = `[${files.map((f) => quoteLiteral(path.join(tableDir, f))).join(", ")}]`;
      const source = `read_parquet(${list}, filename = true, hive_partitioning = false)`;
      const [rows, distinct] = (await duck.rows(`SELECT count(*), count(DISTINCT event_id) FROM ${source}`))[0] as [bigint, bigint];
      fileCheck = { rows: Number(rows), distinctIds: Number(distinct), count: files.length };
      const markers = await duck.rows(`SELECT CAST(substr(event_id, 2, ${BATCH_DIGITS}) AS INTEGER), filename FROM ${source} WHERE event_id LIKE '%-0000'`);
      for (const [batch, file] of markers) markerFile.set(Number(batch), path.relative(tableDir, String(file)));
    }
  } finally {
    duck.close();
  }
  if (fileCheck.rows !== acknowledged) problems.push(`the table's files hold ${count(fileCheck.rows)} events, ${count(acknowledged)} were acknowledged (${fileCheck.rows < acknowledged ? "LOST" : "EXTRA"} events)`);
  if (fileCheck.distinctIds !== fileCheck.rows) problems.push(`${count(fileCheck.rows - fileCheck.distinctIds)} events are DUPLICATED in the table's files`);

  const query = await queryCount(lakeDir, dir);
  if ("error" in query) problems.push(`lakeswap query failed: ${query.error}`);
  else {
    if (query.rows !== acknowledged) problems.push(`lakeswap query counts ${count(query.rows)} events, ${count(acknowledged)} were acknowledged`);
    if (query.distinctIds !== query.rows) problems.push(`lakeswap query sees ${count(query.rows - query.distinctIds)} DUPLICATED events`);
  }
  if (server.health.deadLettered > 0) problems.push(`${count(server.health.deadLettered)} valid events were dead-lettered`);
  if (server.stopped.code !== 0) problems.push(`lakeswap serve did not exit 0 after SIGTERM (${server.stopped.code ?? server.stopped.signal}): ${server.stopped.output}`);
  const walDir = path.join(dir, "wal");
  const segments = (await fs.readdir(walDir).catch(() => [] as string[])).filter((name) => /\.(open|sealed)$/.test(name));
  const walLeft = (await Promise.all(segments.map((name) => fs.stat(path.join(walDir, name))))).filter((stat) => stat.size > 0).length;
  if (walLeft > 0) problems.push(`the write-ahead log still holds ${walLeft} non-empty segment(s) after the stop`);

  let markersFound = 0;
  for (const [index, run] of runs.entries()) {
    const latencies: number[] = [];
    for (let batch = run.firstBatch; batch < run.firstBatch + run.sentBatches; batch += 1) {
      const ack = acks[batch];
      const file = markerFile.get(batch);
      const seen = file === undefined ? undefined : poller.firstSeen.get(file);
      if (ack === undefined || seen === undefined) continue;
      latencies.push(seen - ack);
    }
    markersFound += latencies.length;
    if (latencies.length < run.sentBatches) problems.push(`${run.label}: only ${latencies.length} of ${run.sentBatches} markers were seen queryable`);
    runs[index] = { ...run, latency: percentiles(latencies) };
  }
  return {
    acknowledged,
    files: fileCheck,
    query,
    server: server.health,
    markersFound,
    exitCode: server.stopped.code,
    exitSignal: server.stopped.signal,
    walLeft,
    passed: problems.length === 0,
    problems,
  };
}

/** count(*) and count(DISTINCT event_id) of the table by `lakeswap query`, as a reader runs it. */
async function queryCount(lakeDir: string, cwd: string): Promise<{ rows: number; distinctIds: number } | { error: string }> {
  const sql = `SELECT count(*) AS n, count(DISTINCT event_id) AS d FROM ${NAMESPACE}`;
  const run = await runMeasured(process.execPath, [LAKESWAP_BIN, "--lake", lakeDir, "query", sql, "--json"], { cwd, timeoutMs: 120_000 });
  if (run.code !== 0) return { error: `exit ${run.code ?? run.signal}: ${tail(run.stderr, 5) || tail(run.stdout, 5)}` };
  try {
    const [row] = JSON.parse(run.stdout) as { n: number | string; d: number | string }[];
    return { rows: Number(row?.n), distinctIds: Number(row?.d) };
  } catch {
    return { error: `unreadable output: ${run.stdout.slice(0, 200)}` };
  }
}

/** A port nobody listens on now: one the kernel hands out for port 0, released at once. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Kernel clock ticks per second, the unit of /proc/<pid>/stat's CPU times. */
function clockTicksPerSecond(): number {
  try {
    const ticks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    return Number.isInteger(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
}

/** Nearest-rank percentiles of a list of ms (NaN when empty). */
function percentiles(values: readonly number[]): Percentiles {
  if (values.length === 0) return { samples: 0, p50Ms: Number.NaN, p99Ms: Number.NaN, maxMs: Number.NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
  return { samples: sorted.length, p50Ms: rank(50), p99Ms: rank(99), maxMs: sorted[sorted.length - 1] as number };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

function count(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}
