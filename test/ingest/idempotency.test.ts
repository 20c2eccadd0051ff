import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { IngestPipelineConfig } from "../../src/config/ingest-types.js";
import type { Lake } from "../../src/lake/lake.js";
import { Collector } from "../../src/ingest/collector.js";
import { startIngestServer, type IngestServer } from "../../src/ingest/http-server.js";
import { Metrics } from "../../src/ingest/metrics.js";
import { advanceClock, resetClock } from "../../src/shared/clock.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { awsBackend, embeddedBackend, runCli, tempDir, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

// Issue 30, items 1 and 2: a request sent again with the same Idempotency-Key (a client that never got its answer)
// stores nothing and gets the first answer again, through restarts, landing and kill -9; the same key with another
// request is refused; keys are kept for a window, and at most so many.

const WINDOW_MS = 24 * 3_600_000;

/** `dedupe:` of the namespace `clicks` in the tests that use it: by event_id, for an hour. */
const DEDUPE = { field: "event_id", windowMs: 3_600_000, maxIds: 10_000 };

function pipelineOf(walDir: string, maxKeys = 1000, dedupe = false): IngestPipelineConfig {
  const local = { kind: "local" as const, name: "lake", path: "/unused" };
  const namespace = (name: string) => ({
    name,
    columns: [
      { name: "event_id", type: "VARCHAR", nullable: false },
      { name: "ts", type: "TIMESTAMPTZ", nullable: false },
    ],
    unknownFields: "keep" as const,
    extraColumn: "extra",
    time: { field: "ts", partition: [{ key: "day", expression: "strftime(ts, '%Y-%m-%d')" }] },
  });
  return {
    name: "events",
    dataSink: local,
    deadletterSink: local,
    namespaces: [{ ...namespace("clicks"), ...(dedupe ? { dedupe: DEDUPE } : {}) }, namespace("views")],
    wal: { dir: walDir, segmentMaxBytes: 64 * 1024 * 1024, segmentMaxAgeMs: 60_000, maxBytes: 1024 * 1024 * 1024 },
    idempotency: { windowMs: WINDOW_MS, maxKeys },
  };
}

/** `count` events with ids `<prefix><i>`, as NDJSON. */
function batch(prefix: string, count: number): string {
  return Array.from({ length: count }, (_, i) => JSON.stringify({ event_id: `${prefix}${i}`, ts: `2026-11-${String(1 + (i % 3)).padStart(2, "0")}T10:00:00Z` })).join("\n");
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  resetClock();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Harness {
  readonly lake: Lake;
  readonly metrics: () => Metrics;
  /** Posts `body` to a namespace with a key (or none); the status, the answer and its idempotency headers. */
  post(namespace: string, body: string, key?: string): Promise<{ status: number; body: { accepted?: number; deduplicated?: number; error?: string }; replayed: string | null; window: string | null }>;
  /** Stops the collector without landing (what it holds stays in its log), and starts it again on the same log. */
  restart(): Promise<void>;
  flush(): Promise<void>;
  count(namespace: string): Promise<number>;
}

async function harness(backend: () => Promise<TestBackend>, { maxKeys, dedupe }: { maxKeys?: number; dedupe?: boolean } = {}): Promise<Harness> {
  const b = await backend();
  const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
  const lake = await b.open();
  const pipeline = pipelineOf(walDir, maxKeys, dedupe);
  let metrics = new Metrics();
  let collector = await Collector.open({ pipeline, lake, deadLetterLake: lake, metrics, log: () => undefined });
  let server: IngestServer = await startIngestServer({ handler: collector, metrics, port: 0 });
  cleanups.push(async () => {
    await server.close();
    await collector.close().catch(() => undefined);
    await lake.close();
    await b.cleanup();
    await rm(walDir, { recursive: true, force: true });
  });
  return {
    lake,
    metrics: () => metrics,
    async post(namespace, body, key) {
      const response = await fetch(`${server.url}/v1/events/${namespace}`, {
        method: "POST",
        headers: { "content-type": "application/x-ndjson", ...(key !== undefined ? { "idempotency-key": key } : {}) },
        body,
      });
      return { status: response.status, body: (await response.json()) as { accepted?: number }, replayed: response.headers.get("idempotent-replayed"), window: response.headers.get("idempotency-window") };
    },
    async restart() {
      await server.close();
      await collector.close();
      metrics = new Metrics();
      collector = await Collector.open({ pipeline, lake, deadLetterLake: lake, metrics, log: () => undefined });
      server = await startIngestServer({ handler: collector, metrics, port: 0 });
    },
    async flush() {
      await collector.flush();
    },
    async count(namespace) {
      return Number((await lake.query(`SELECT count(*) FROM ${namespace}`)).rows[0]?.[0]);
    },
  };
}

describe.each([
  ["embedded", embeddedBackend],
  ["aws", awsBackend],
] as const)("Idempotency-Key on the %s lake", (_name, backend) => {
  it("a retry stores nothing and gets the first answer, also while the first is being written, after a restart and after its segment landed", async () => {
    const h = await harness(backend);
    const body = batch("a", 50);
    const first = await h.post("clicks", body, "key-1");
    expect(first).toMatchObject({ status: 200, body: { accepted: 50 }, replayed: null, window: String(WINDOW_MS / 1000) });
    expect(await h.post("clicks", body, "key-1")).toMatchObject({ status: 200, body: { accepted: 50 }, replayed: "true" });

    // Ten at once under a new key: one is written, the others wait for it and store nothing.
    const other = batch("b", 30);
    const answers = await Promise.all(Array.from({ length: 10 }, () => h.post("clicks", other, "key-2")));
    expect(answers.map((a) => [a.status, a.body.accepted])).toEqual(Array.from({ length: 10 }, () => [200, 30]));
    expect(answers.filter((a) => a.replayed === "true")).toHaveLength(9);

    // Restarted before anything landed: the keys come back from the log's records.
    await h.restart();
    expect(await h.post("clicks", body, "key-1")).toMatchObject({ status: 200, body: { accepted: 50 }, replayed: "true" });
    // Landed, and the segment removed from the log: the keys come back from the key file.
    await h.flush();
    await h.restart();
    expect(await h.post("clicks", other, "key-2")).toMatchObject({ status: 200, body: { accepted: 30 }, replayed: "true" });
    await h.flush();
    expect(await h.count("clicks")).toBe(80);
    const metrics = await h.metrics().render();
    expect(metrics).toMatch(/lakeswap_ingest_idempotent_replays_total\{pipeline="events"\} 1\b/);
    expect(metrics).toMatch(/lakeswap_ingest_idempotency_keys\{pipeline="events"\} 2\b/);
  });

  it("the same key with another body, or to another namespace, is refused (422) and stores nothing", async () => {
    const h = await harness(backend);
    const body = batch("c", 10);
    expect((await h.post("clicks", body, "shared")).status).toBe(200);
    const otherBody = await h.post("clicks", batch("d", 10), "shared");
    expect(otherBody.status).toBe(422);
    expect(otherBody.body.error).toMatch(/Idempotency-Key 'shared' was already used for another request .* within the last 24 h: .*send a new key/);
    const otherNamespace = await h.post("views", body, "shared");
    expect(otherNamespace.status).toBe(422);
    // Without a key, the same body is new events (as before keys existed).
    expect(await h.post("views", body)).toMatchObject({ status: 200, body: { accepted: 10 }, replayed: null, window: null });
    await h.flush();
    expect([await h.count("clicks"), await h.count("views")]).toEqual([10, 10]);
    expect(await h.metrics().render()).toMatch(/lakeswap_ingest_idempotency_conflicts_total\{pipeline="events"\} 2\b/);
  });
});

describe("Idempotency-Key bounds", () => {
  it("a key is kept for the window: once it has passed, the same request is new events", async () => {
    const h = await harness(embeddedBackend);
    const body = batch("w", 5);
    await h.post("clicks", body, "late");
    advanceClock(WINDOW_MS + 60_000);
    expect(await h.post("clicks", body, "late")).toMatchObject({ status: 200, body: { accepted: 5 }, replayed: null });
    await h.flush();
    expect(await h.count("clicks")).toBe(10);
  });

  it("at most idempotency_max_keys are kept: the oldest are forgotten first, counted in /metrics", async () => {
    const h = await harness(embeddedBackend, { maxKeys: 3 });
    for (let i = 0; i < 5; i += 1) expect((await h.post("clicks", batch(`k${i}-`, 2), `key-${i}`)).status).toBe(200);
    expect(await h.metrics().render()).toMatch(/lakeswap_ingest_idempotency_evictions_total\{pipeline="events"\} 2\b/);
    // The newest three are kept, across a restart too (key file and log agree on which).
    await h.flush();
    await h.restart();
    expect((await h.post("clicks", batch("k4-", 2), "key-4")).replayed).toBe("true");
    expect((await h.post("clicks", batch("k0-", 2), "key-0")).replayed).toBeNull();
  });

  it("refuses a key that is empty, longer than 128 bytes or holds a control character (400), storing nothing", async () => {
    const h = await harness(embeddedBackend);
    for (const key of ["x".repeat(129), " ", "é".repeat(65)]) {
      const answer = await h.post("clicks", batch("z", 3), key);
      expect(answer.status, key).toBe(400);
      expect(answer.body.error).toMatch(/Idempotency-Key/);
    }
    await h.flush();
    expect(await h.count("clicks")).toBe(0);
  });
});

/** NDJSON of events with these ids. */
function withIds(ids: readonly string[]): string {
  return ids.map((id) => JSON.stringify({ event_id: id, ts: "2026-11-02T10:00:00Z" })).join("\n");
}

const ids = (prefix: string, from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `${prefix}${from + i}`);

describe("dedupe: {field: event_id, window: 1h} (issue 30, item 3)", () => {
  it("drops an event whose id the namespace took within the window, also within one request, after a restart and after landing; other namespaces keep theirs", async () => {
    const h = await harness(embeddedBackend, { dedupe: true });
    expect((await h.post("clicks", withIds(ids("a", 0, 10)))).body).toEqual({ accepted: 10, deduplicated: 0 });
    expect((await h.post("clicks", withIds(ids("a", 5, 15)))).body).toEqual({ accepted: 5, deduplicated: 5 });
    expect((await h.post("clicks", withIds(["x1", "x1", "x2"]))).body).toEqual({ accepted: 2, deduplicated: 1 });
    // Events without the field, or not JSON, go on to the landing (which dead-letters them).
    expect((await h.post("clicks", `${JSON.stringify({ ts: "2026-11-02T10:00:00Z" })}\nnot json`)).body).toEqual({ accepted: 2, deduplicated: 0 });
    // The ids come back from the log's records after a restart, and from the namespace's file once landed.
    await h.restart();
    expect((await h.post("clicks", withIds(ids("a", 0, 5)))).body).toEqual({ accepted: 0, deduplicated: 5 });
    await h.flush();
    await h.restart();
    expect((await h.post("clicks", withIds(ids("a", 10, 20)))).body).toEqual({ accepted: 5, deduplicated: 5 });
    // A namespace without dedupe: stores what it is sent, and its answer has no deduplicated.
    expect((await h.post("views", withIds(["v", "v"]))).body).toEqual({ accepted: 2 });
    await h.flush();
    // Those ids were written down from what this collector kept when it appended them (not parsed again): a restart finds them.
    await h.restart();
    expect((await h.post("clicks", withIds(ids("a", 15, 20)))).body).toEqual({ accepted: 0, deduplicated: 5 });
    const clicks = await h.lake.query("SELECT event_id, count(*) FROM clicks WHERE event_id IS NOT NULL GROUP BY event_id HAVING count(*) > 1");
    expect(clicks.rows, "an id stored twice").toEqual([]);
    expect(await h.count("clicks")).toBe(10 + 5 + 2 + 5);
    expect(await h.count("views")).toBe(2);
    expect(await h.metrics().render()).toMatch(/lakeswap_ingest_events_deduplicated_total\{pipeline="events"\} 5\b/);
  });

  it("reads an id as the landing reads it: a 64-bit integer by its digits, the field in any case; one given twice goes to the landing", async () => {
    const h = await harness(embeddedBackend, { dedupe: true });
    const event = (fields: string): string => `{${fields}, "ts": "2026-11-01T10:00:00Z"}`;
    // Two ids that are one double (2^53 is far below them): two events, both stored.
    const big = [event(`"event_id": 1234567890123456789`), event(`"event_id": 1234567890123456788`)].join("\n");
    expect((await h.post("clicks", big)).body).toEqual({ accepted: 2, deduplicated: 0 });
    expect((await h.post("clicks", event(`"event_id": 1234567890123456788`))).body).toEqual({ accepted: 0, deduplicated: 1 });
    // The field spelled in another case is the column (the landing reads it so): the same id, dropped.
    expect((await h.post("clicks", `${event(`"event_id": "c1"`)}\n${event(`"Event_ID": "c1"`)}\n${event(`"EVENT_ID": "c1"`)}`)).body).toEqual({ accepted: 1, deduplicated: 2 });
    // Given twice (in two cases, or in one): no id; the landing dead-letters it, whatever ids were taken.
    expect((await h.post("clicks", `${event(`"event_id": "c1", "EVENT_ID": "c2"`)}\n${event(`"event_id": "c1", "event_id": "c3"`)}`)).body).toEqual({ accepted: 2, deduplicated: 0 });
    // Nested fields of the same name, strings holding quotes and braces, and an escaped name are read in their place.
    const nested = event(`"meta": {"event_id": "zz", "s": "}{\\"event_id\\": 1"}, "list": [{"event_id": 1}], "event\\u005fid": "c4"`);
    expect((await h.post("clicks", `${nested}\n${event(`"event_id": "c4"`)}`)).body).toEqual({ accepted: 1, deduplicated: 1 });
    await h.flush();
    const stored = await h.lake.query("SELECT event_id, count(*) FROM clicks GROUP BY event_id ORDER BY event_id");
    expect(stored.rows.map(([id, n]) => [id, Number(n)])).toEqual([
      ["1234567890123456788", 1],
      ["1234567890123456789", 1],
      ["c1", 1],
      ["c4", 1],
    ]);
  });

  it("two requests at once sharing an id: the second waits for the first's write, then drops the id it stored", async () => {
    const h = await harness(embeddedBackend, { dedupe: true });
    const [first, second] = await Promise.all([h.post("clicks", withIds(["p", "q"])), h.post("clicks", withIds(["q", "r"]))]);
    expect([first.body, second.body]).toEqual([
      { accepted: 2, deduplicated: 0 },
      { accepted: 1, deduplicated: 1 },
    ]);
    await h.flush();
    expect(await h.count("clicks")).toBe(3);
  });

  it("an id is taken for the window only; with an Idempotency-Key, a retry gets the first answer, duplicates counted as they were", async () => {
    const h = await harness(embeddedBackend, { dedupe: true });
    await h.post("clicks", withIds(ids("w", 0, 4)));
    const keyed = withIds(ids("w", 2, 8));
    expect((await h.post("clicks", keyed, "retry-me")).body).toEqual({ accepted: 4, deduplicated: 2 });
    await h.restart();
    expect(await h.post("clicks", keyed, "retry-me")).toMatchObject({ body: { accepted: 4, deduplicated: 2 }, replayed: "true" });
    advanceClock(DEDUPE.windowMs + 60_000);
    // The key is still kept (24 h), the ids no longer (1 h): a new request with old ids stores them again.
    expect(await h.post("clicks", keyed, "retry-me")).toMatchObject({ body: { accepted: 4, deduplicated: 2 }, replayed: "true" });
    expect((await h.post("clicks", withIds(ids("w", 0, 2)))).body).toEqual({ accepted: 2, deduplicated: 0 });
    await h.flush();
    expect(await h.count("clicks")).toBe(4 + 4 + 2);
  });
});

describe("lakeswap ingest --idempotency-key", () => {
  const CONFIG = ["pipelines:", "  events:", "    namespaces:", "      clicks:", "        columns: {event_id: {type: VARCHAR, nullable: false}, ts: {type: TIMESTAMPTZ, nullable: false}}", "        time: {field: ts}", "    wal: {dir: ./wal}", "lake: ./lake", ""].join("\n");

  it("run twice with the same key and file stores the events once; killed after the append, the rerun lands them once", async () => {
    const { dir, cleanup } = tempDir("lakeswap-ingest-key-");
    cleanups.push(async () => cleanup());
    writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
    const file = path.join(dir, "events.ndjson");
    writeFileSync(file, batch("f", 40));
    const ingest = (key: string, env: Record<string, string> = {}) =>
      (Object.keys(env).length > 0 ? runCli : runMain)(["ingest", "events", file, "-c", path.join(dir, "lakeswap.yaml"), "--idempotency-key", key, "--json"], env);
    const count = async (): Promise<number> => {
      const lake = await openEmbeddedLake(path.join(dir, "lake"));
      try {
        return Number((await lake.query("SELECT count(*) FROM clicks")).rows[0]?.[0]);
      } finally {
        await lake.close();
      }
    };

    const once = await ingest("file-1");
    expect(once.code, once.stderr).toBe(0);
    const again = await ingest("file-1");
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ accepted: 40, replayed: 40, events: 0 });
    expect(await count()).toBe(40);

    // Killed once its files were stored (the record acknowledged, the segment not landed): the rerun finds the key in the log.
    const killed = await ingest("file-2", { LAKESWAP_FAULT: "ingest-after-upload:kill" });
    expect(killed.signal).toBe("SIGKILL");
    const rerun = await ingest("file-2");
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(JSON.parse(rerun.stdout)).toMatchObject({ accepted: 40, replayed: 40, events: 40 });
    expect(await count()).toBe(80);

    const bad = await runMain(["ingest", "events", file, "-c", path.join(dir, "lakeswap.yaml"), "--idempotency-key", "k".repeat(200)]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--idempotency-key: the key '.*' is 200 bytes, over the limit of 128/);
  });
});
