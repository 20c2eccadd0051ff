import { promises as fs } from "node:fs";
import http from "node:http";
import path from "node:path";
import { performance } from "node:perf_hooks";
import type { IngestPipelineConfig } from "../src/config/ingest-config.js";
import { startIngestServer } from "../src/ingest/http-server.js";
import { Collector } from "../src/ingest/collector.js";
import { Metrics, type Counter, type Gauge, type Histogram } from "../src/ingest/metrics.js";
import { openEmbeddedLake } from "../src/open/open-lake.js";
import { median } from "./stats.js";

/*
 * Issue 26, item 5: what prom-client's metrics cost the collector's POST path.
 *
 * In this process, the collector as `lakeswap serve` runs it: its HTTP server and one pipeline's ingest service
 * (write-ahead log, fdatasync'd before each 200, on an embedded lake). CLIENTS keep-alive clients post batches of
 * BATCH_EVENTS NDJSON events (small, so that the per-request work weighs the most), while a scraper GETs /metrics
 * every SCRAPE_MS (15 times as often as Prometheus's default of 15 s, so that rendering counts too). Segments are never
 * sealed during a round, so no landing runs.
 *
 * Two registries, in interleaved rounds (so that the machine's drift falls on both): the collector's (prom-client)
 * and a no-op one whose metrics record nothing and render nothing. Figures per registry, the median over its rounds:
 * requests/s, wall µs per request (1 / throughput) and CPU µs per request (this whole process: server and clients,
 * the same for both registries, so what differs is the metrics'); and the ratios prom-client / no-op, both of the
 * medians and the median of each round's ratio to the other registry's round run next to it (which cancels the
 * machine's drift best).
 */

const CLIENTS = 4;
const REQUESTS_PER_CLIENT = 500;
const BATCH_EVENTS = 10;
const ROUNDS = 8;
const SCRAPE_MS = 1000;

/** One registry's figures: the median of its rounds, and every round's requests/s. */
export interface MetricsVariant {
  readonly requestsPerSecond: number;
  readonly wallMicrosPerRequest: number;
  readonly cpuMicrosPerRequest: number;
  readonly roundsRequestsPerSecond: readonly number[];
  readonly roundsCpuMicrosPerRequest: readonly number[];
  readonly scrapes: number;
}

/** The collector's POST path with prom-client against a no-op registry. */
export interface MetricsFigures {
  readonly clients: number;
  readonly requests: number;
  readonly batchEvents: number;
  readonly scrapeMs: number;
  readonly promClient: MetricsVariant;
  readonly noop: MetricsVariant;
}

const NOOP_METRIC = { inc: () => undefined, set: () => undefined, observe: () => undefined };

/** A registry whose metrics record nothing and which renders nothing: the collector without metrics. */
class NoopMetrics extends Metrics {
  override counter(): Counter {
    return NOOP_METRIC as unknown as Counter;
  }
  override gauge(): Gauge {
    return NOOP_METRIC as unknown as Gauge;
  }
  override histogram(): Histogram {
    return NOOP_METRIC as unknown as Histogram;
  }
  override render(): Promise<string> {
    return Promise.resolve("");
  }
}

interface Round {
  readonly requestsPerSecond: number;
  readonly wallMicrosPerRequest: number;
  readonly cpuMicrosPerRequest: number;
  readonly scrapes: number;
}

/** Runs ROUNDS rounds of each registry, interleaved, and returns their medians. */
export async function benchMetrics(workDir: string, progress: (message: string) => void): Promise<MetricsFigures> {
  const rounds = { promClient: [] as Round[], noop: [] as Round[] };
  await runRound(workDir, "warm-up", new Metrics());
  for (let i = 0; i < ROUNDS; i++) {
    // Alternate which goes first, so that neither always follows the other.
    const order = i % 2 === 0 ? (["promClient", "noop"] as const) : (["noop", "promClient"] as const);
    for (const variant of order) {
      const round = await runRound(workDir, `${variant}-${i}`, variant === "noop" ? new NoopMetrics() : new Metrics());
      rounds[variant].push(round);
      progress(`metrics: round ${i + 1}/${ROUNDS} ${variant === "noop" ? "no-op registry" : "prom-client"}: ${Math.round(round.requestsPerSecond)} requests/s`);
    }
  }
  const summarize = (of: readonly Round[]): MetricsVariant => ({
    requestsPerSecond: median(of.map((round) => round.requestsPerSecond)),
    wallMicrosPerRequest: median(of.map((round) => round.wallMicrosPerRequest)),
    cpuMicrosPerRequest: median(of.map((round) => round.cpuMicrosPerRequest)),
    roundsRequestsPerSecond: of.map((round) => round.requestsPerSecond),
    roundsCpuMicrosPerRequest: of.map((round) => round.cpuMicrosPerRequest),
    scrapes: median(of.map((round) => round.scrapes)),
  });
  return {
    clients: CLIENTS,
    requests: CLIENTS * REQUESTS_PER_CLIENT,
    batchEvents: BATCH_EVENTS,
    scrapeMs: SCRAPE_MS,
    promClient: summarize(rounds.promClient),
    noop: summarize(rounds.noop),
  };
}

/** One round: a fresh collector on `metrics`, CLIENTS clients posting as fast as they are answered, a scraper. */
async function runRound(workDir: string, name: string, metrics: Metrics): Promise<Round> {
  const dir = path.join(workDir, `metrics-${name}`);
  const lake = await openEmbeddedLake(path.join(dir, "lake"));
  const service = await Collector.open({ pipeline: pipelineOf(path.join(dir, "wal")), lake, deadLetterLake: lake, metrics, log: () => undefined, walSyncer: "thread" });
  const server = await startIngestServer({ handler: service, metrics, port: 0, host: "127.0.0.1", log: () => undefined });
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS + 1 });
  const url = `${server.url}/v1/events/pageviews`;
  try {
    let scraping = true;
    let scrapes = 0;
    const scraper = (async () => {
      while (scraping) {
        await request(agent, `${server.url}/metrics`, "GET");
        scrapes++;
        await new Promise((wake) => setTimeout(wake, SCRAPE_MS));
      }
    })();
    const cpu = process.cpuUsage();
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        for (let i = 0; i < REQUESTS_PER_CLIENT; i++) await request(agent, url, "POST", BODY);
      }),
    );
    const wallMs = performance.now() - started;
    const { user, system } = process.cpuUsage(cpu);
    scraping = false;
    await scraper;
    const requests = CLIENTS * REQUESTS_PER_CLIENT;
    return { requestsPerSecond: (requests * 1000) / wallMs, wallMicrosPerRequest: (wallMs * 1000) / requests, cpuMicrosPerRequest: (user + system) / requests, scrapes };
  } finally {
    agent.destroy();
    await server.close(10_000);
    await service.close();
    await lake.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
}

const BODY = Buffer.from(
  Array.from({ length: BATCH_EVENTS }, (_, i) =>
    JSON.stringify({ event_id: `e${i}`, user_id: `u${i % 7}`, url: `https://example.com/page/${i}`, ms: i * 3, ts: "2026-12-01T10:00:00Z" }),
  ).join("\n"),
);

/** One request, resolved when answered 200 (anything else fails the round). */
function request(agent: http.Agent, url: string, method: "GET" | "POST", body?: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const sent = http.request(url, { method, agent, headers: body ? { "content-type": "application/x-ndjson" } : {} }, (response) => {
      response.resume();
      response.on("end", () => (response.statusCode === 200 ? resolve() : reject(new Error(`${method} ${url} answered ${response.statusCode}`))));
    });
    sent.on("error", reject);
    sent.end(body);
  });
}

/** One pipeline, one namespace; segments that never seal during a round (nothing lands while it is timed). */
function pipelineOf(walDir: string): IngestPipelineConfig {
  const local = { kind: "local" as const, name: "lake", path: "/unused" };
  return {
    name: "events",
    dataSink: local,
    deadletterSink: local,
    namespaces: [
      {
        name: "pageviews",
        columns: [
          { name: "event_id", type: "VARCHAR", nullable: false },
          { name: "user_id", type: "VARCHAR", nullable: true },
          { name: "url", type: "VARCHAR", nullable: true },
          { name: "ms", type: "BIGINT", nullable: true },
          { name: "ts", type: "TIMESTAMPTZ", nullable: false },
        ],
        unknownFields: "keep",
        extraColumn: "extra",
        time: { field: "ts", partition: [{ key: "p_day", expression: "strftime(ts, '%Y-%m-%d')" }] },
      },
    ],
    wal: { dir: walDir, segmentMaxBytes: 1024 * 1024 * 1024, segmentMaxAgeMs: 3_600_000, maxBytes: 4 * 1024 * 1024 * 1024 },
  };
}
