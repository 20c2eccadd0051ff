import { writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { openEmbeddedLake } from "../../src/open-lake.js";
import { spawnScript, type Child } from "../support/crash-kit.js";
import { tempDir } from "../support/lake-fixture.js";

/** Rounds of kill -9 while clients post; some rounds kill at an ingest fault point instead (files stored, not registered; registered, not removed). */
const ROUNDS = 20;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function startServer(config: string, port: number, fault?: string): Child {
  return spawnScript("run-cli.ts", ["serve", "-c", config, "--port", String(port), "--host", "127.0.0.1", "--flush-interval", "50"], fault ? { LAKESWAP_FAULT: fault } : {});
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

describe("the collector killed at random moments", () => {
  it(`keeps every acknowledged event exactly once over ${ROUNDS} kill -9 rounds while clients post`, async () => {
    const { dir, cleanup } = tempDir("lakeswap-ingest-crash-");
    try {
      const config = path.join(dir, "lakeswap.yaml");
      writeFileSync(
        config,
        [
          "lake: ./lake",
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
      let sent = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const port = await freePort();
        // Every fourth round dies at a fault point of the uploader instead of at a random moment.
        const fault = round % 4 === 1 ? "ingest-after-upload:kill" : round % 4 === 3 ? "ingest-after-register:kill" : undefined;
        const server = startServer(config, port, fault);
        try {
          await waitHealthy(server, port);
          let stop = false;
          const client = async (id: number): Promise<void> => {
            for (let batch = 0; !stop; batch++) {
              const ids = Array.from({ length: 20 }, (_, k) => `r${round}-c${id}-b${batch}-${k}`);
              const day = 1 + ((round + batch) % 3);
              const body = ids.map((eventId, k) => JSON.stringify({ event_id: eventId, n: k, ts: `2026-11-0${day}T12:00:00Z` })).join("\n");
              sent += ids.length;
              try {
                const response = await fetch(`http://127.0.0.1:${port}/v1/events/clicks`, { method: "POST", headers: { "content-type": "application/x-ndjson" }, body });
                await response.text();
                if (response.status === 200) for (const eventId of ids) acknowledged.add(eventId);
              } catch {
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
      // A last start lands what the log holds, and SIGTERM lets it finish cleanly.
      const port = await freePort();
      const last = startServer(config, port);
      await waitHealthy(last, port);
      last.kill("SIGTERM");
      const exit = await last.exited;
      expect(exit.code, last.stderr).toBe(0);

      expect(acknowledged.size).toBeGreaterThan(100);
      const lake = await openEmbeddedLake(path.join(dir, "lake"));
      try {
        const result = await lake.query("SELECT event_id, count(*) AS n FROM clicks GROUP BY event_id");
        const counts = new Map(result.rows.map((row) => [String(row[0]), Number(row[1])]));
        const missing = [...acknowledged].filter((id) => !counts.has(id));
        const twice = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
        expect(missing, `acknowledged but not in the lake (of ${acknowledged.size}, ${sent} sent)`).toEqual([]);
        expect(twice, "in the lake more than once").toEqual([]);
        // Events whose request was cut off by a kill may be in the lake too (durable, but the answer was lost): never more than were sent.
        expect(counts.size).toBeLessThanOrEqual(sent);
      } finally {
        await lake.close();
      }
    } finally {
      cleanup();
    }
  }, 300_000);
});
