import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { openAwsLake, openEmbeddedLake } from "../../src/open/open-lake.js";
import { freePort, spawnScript, type Child } from "../support/crash-kit.js";
import { awsCliEnv, sharedAwsServices, tempDir } from "../support/lake-fixture.js";
import { readCatalogFile } from "../support/plain-reader.js";

/**
 * Where the collector writes: the embedded lake (12 rounds), or S3 + Glue on the emulators (fewer rounds: each
 * start of the collector loads the AWS SDK). Some rounds kill at an ingest fault point instead of at a random
 * moment (files stored, not registered; registered, not removed from the log).
 */
interface Backend {
  readonly name: string;
  readonly rounds: number;
  /** The config's lines that choose the data sink, and the environment of the collector. */
  setup(dir: string): Promise<{
    sinkYaml: string[];
    env: Record<string, string>;
    open: () => Promise<Lake>;
    close: () => Promise<void>;
    /** SQL run by plain DuckDB over the embedded lake's catalog file (lake.duckdb), as its readers run it. */
    readCatalogFile?: (sql: string) => Promise<unknown[][]>;
  }>;
}

const BACKENDS: Backend[] = [
  {
    name: "embedded",
    rounds: 12,
    setup: async (dir) => ({
      sinkYaml: ["lake: ./lake"],
      env: {},
      open: () => openEmbeddedLake(path.join(dir, "lake")),
      close: async () => undefined,
      readCatalogFile: (sql) => readCatalogFile(path.join(dir, "lake"), sql),
    }),
  },
  {
    name: "AWS (s3rver + the Glue and Athena emulators)",
    rounds: 4,
    setup: async () => {
      const services = await sharedAwsServices();
      const suffix = Math.random().toString(16).slice(2, 8);
      const athena = {
        s3_bucket: "lake",
        s3_prefix: `crash/${suffix}`,
        glue_database_name: `ingest_crash_${suffix}`,
        athena_workgroup_name: "primary",
        athena_results_s3_bucket: "results",
        region: "us-east-1",
        endpoint: services.s3.endpoint,
        glue_endpoint: services.glue.endpoint,
        athena_endpoint: services.athena.endpoint,
      };
      const env = awsCliEnv(services);
      for (const [key, value] of Object.entries(env)) process.env[key] ??= value;
      return {
        sinkYaml: ["data_sinks:", "  warehouse:", `    Athena: ${JSON.stringify(athena)}`],
        env,
        open: () =>
          openAwsLake({
            bucket: athena.s3_bucket,
            prefix: athena.s3_prefix,
            database: athena.glue_database_name,
            workgroup: "primary",
            resultsLocation: "s3://results/lakeswap/",
            region: "us-east-1",
            endpoint: athena.endpoint,
            glueEndpoint: athena.glue_endpoint,
            athenaEndpoint: athena.athena_endpoint,
          }),
        close: () => services.close(),
      };
    },
  },
];

/** An event post: its Idempotency-Key, body and the ids of its events. */
interface Posted {
  readonly key: string;
  readonly body: string;
  readonly ids: readonly string[];
}

/**
 * Its landing at the requests' priority (--background-nice 0): the suite's other workers would otherwise starve the
 * lowered landing (as they should on a collector's own machine), and the rounds wait for the log to drain.
 */
function startServer(config: string, port: number, env: Record<string, string>, fault?: string): Child {
  return spawnScript("run-cli.ts", ["serve", "-c", config, "--port", String(port), "--host", "127.0.0.1", "--flush-interval", "50", "--background-nice", "0"], { ...env, ...(fault ? { LAKESWAP_FAULT: fault } : {}) });
}

async function waitHealthy(child: Child, port: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      await response.text();
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    if (child.process.exitCode !== null || child.process.signalCode !== null) throw new Error(`the collector exited before it was healthy: ${child.stderr}`);
    if (Date.now() > deadline) throw new Error(`the collector did not become healthy: ${child.stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(BACKENDS)("the collector killed at random moments, on $name", (backend) => {
  it(`keeps every event exactly once over ${backend.rounds} kill -9 rounds while clients post, retrying unanswered requests under their Idempotency-Key`, async () => {
    const { dir, cleanup } = tempDir("lakeswap-ingest-crash-");
    const { sinkYaml, env, open, close, readCatalogFile: readLakeDuckdb } = await backend.setup(dir);
    try {
      const config = path.join(dir, "lakeswap.yaml");
      writeFileSync(
        config,
        [
          ...sinkYaml,
          "pipelines:",
          "  events:",
          "    namespaces:",
          "      clicks:",
          "        columns: {event_id: {type: VARCHAR, nullable: false}, n: BIGINT, ts: {type: TIMESTAMPTZ, nullable: false}}",
          "        time: {field: ts}",
          "    wal: {dir: ./wal, segment_max_age: 100ms, segment_max_bytes: 20000}",
          "",
        ].join("\n"),
      );
      const acknowledged = new Set<string>();
      // Requests whose answer never came (the collector was killed first): their client sends them again, with the
      // same Idempotency-Key, to the next collector, as a client that wants each event stored once does.
      const unanswered: Posted[] = [];
      let sent = 0;
      let retried = 0;
      const post = async (port: number, request: Posted): Promise<boolean> => {
        const response = await fetch(`http://127.0.0.1:${port}/v1/events/clicks`, {
          method: "POST",
          headers: { "content-type": "application/x-ndjson", "idempotency-key": request.key },
          body: request.body,
        });
        await response.text();
        if (response.status !== 200) return false;
        for (const eventId of request.ids) acknowledged.add(eventId);
        return true;
      };
      for (let round = 0; round < backend.rounds; round++) {
        const port = await freePort();
        // Every fourth round dies at a fault point of the uploader instead of at a random moment.
        const fault = round % 4 === 1 ? "ingest-after-upload:kill" : round % 4 === 3 ? "ingest-after-register:kill" : undefined;
        const server = startServer(config, port, env, fault);
        try {
          await waitHealthy(server, port);
          let stop = false;
          const client = async (id: number): Promise<void> => {
            for (let batch = 0; !stop; batch++) {
              let request = unanswered.shift();
              if (request !== undefined) retried += 1;
              else {
                const ids = Array.from({ length: 20 }, (_, k) => `r${round}-c${id}-b${batch}-${k}`);
                const day = 1 + ((round + batch) % 3);
                const body = ids.map((eventId, k) => JSON.stringify({ event_id: eventId, n: k, ts: `2026-11-0${day}T12:00:00Z` })).join("\n");
                request = { key: randomUUID(), body, ids };
                sent += ids.length;
              }
              try {
                if (!(await post(port, request))) unanswered.push(request);
              } catch {
                unanswered.push(request);
                return; // the server is gone
              }
            }
          };
          const clients = [0, 1, 2].map(client);
          await new Promise((resolve) => setTimeout(resolve, 150 + Math.floor(Math.random() * 500)));
          server.kill("SIGKILL");
          stop = true;
          await Promise.all(clients);
        } finally {
          server.kill("SIGKILL");
          await server.exited;
        }
      }
      // A last start takes the requests still unanswered, lands what the log holds, and SIGTERM lets it finish cleanly.
      const port = await freePort();
      const last = startServer(config, port, env);
      await waitHealthy(last, port);
      for (const request of unanswered.splice(0)) expect(await post(port, request), "a retry is answered 200").toBe(true);
      last.kill("SIGTERM");
      const exit = await last.exited;
      expect(exit.code, last.stderr).toBe(0);

      expect(acknowledged.size).toBeGreaterThan(50);
      const lake = await open();
      try {
        const result = await lake.query("SELECT event_id, count(*) AS n FROM clicks GROUP BY event_id");
        const counts = new Map(result.rows.map((row) => [String(row[0]), Number(row[1])]));
        const missing = [...acknowledged].filter((id) => !counts.has(id));
        const twice = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
        expect(missing, `acknowledged but not in the lake (of ${acknowledged.size}, ${sent} sent, ${retried} requests sent again)`).toEqual([]);
        expect(twice, "in the lake more than once").toEqual([]);
        // Every request was answered in the end, some only on a retry under its key: each event is in the lake, once.
        expect(acknowledged.size).toBe(sent);
        expect(counts.size).toBe(sent);
        // The catalog file too, although collectors were killed with its views left behind (rewrites are put off while
        // a backlog lands): the last collector's rounds brought them up to date.
        if (readLakeDuckdb) expect((await readLakeDuckdb("SELECT count(*), count(DISTINCT event_id) FROM lake.clicks"))[0]!.map(Number)).toEqual([sent, sent]);
      } finally {
        await lake.close();
      }
    } finally {
      await close();
      cleanup();
    }
  }, 300_000);
});
