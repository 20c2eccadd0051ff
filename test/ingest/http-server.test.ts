import { Agent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect, type Socket } from "node:net";
import { networkInterfaces } from "node:os";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { InvalidInputError, NotFoundError } from "../../src/model/errors.js";
import { startIngestServer, type IngestHandler, type IngestRequest, type IngestServer, type IngestServerOptions } from "../../src/ingest/http-server.js";
import { BackpressureError } from "../../src/ingest/http-errors.js";
import { Metrics } from "../../src/ingest/metrics.js";

// The collector's HTTP face on a real server (port 0) answering real HTTP requests. The handler stands in for
// the ingest service: it records what it was given and answers as each test tells it to.

type Answer = (request: IngestRequest & { readonly body: Buffer }) => Promise<{ accepted: number }>;

/** Counts the events of an NDJSON or JSON-array body, as the ingest service would. */
const countEvents: Answer = async ({ body, format }) => ({
  accepted: format === "json" ? (JSON.parse(body.toString("utf8")) as unknown[]).length : body.toString("utf8").split("\n").filter((line) => line.trim() !== "").length,
});

/** A request as the handler got it, its body joined into one buffer (the server hands it over in the chunks it arrived in). */
type Recorded = IngestRequest & { readonly body: Buffer };

class RecordingHandler implements IngestHandler {
  readonly requests: Recorded[] = [];
  answer: Answer = countEvents;
  healthy = true;
  private waiters: Array<() => void> = [];

  accept(request: IngestRequest): Promise<{ accepted: number }> {
    const recorded: Recorded = { ...request, body: Buffer.isBuffer(request.body) ? request.body : Buffer.concat(request.body) };
    this.requests.push(recorded);
    for (const wake of this.waiters.splice(0)) wake();
    return this.answer(recorded);
  }

  health(): { ok: boolean; detail: Record<string, unknown> } {
    return { ok: this.healthy, detail: { walBytes: 1234, pipelines: ["web"] } };
  }

  /** Resolves once accept has been called `count` times in all. */
  async calls(count: number): Promise<void> {
    while (this.requests.length < count) await new Promise<void>((wake) => this.waiters.push(wake));
  }
}

/** A promise and the functions that settle it, for a handler whose answer the test controls. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const NDJSON = '{"user":"a","n":1}\n{"user":"b","n":2}\n{"user":"c","n":3}\n';
const ARRAY = '[{"user":"a"},{"user":"b"}]';

const servers: IngestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close(1000)));
});

async function start(options: Pick<Partial<IngestServerOptions>, "maxBodyBytes" | "maxBytesInFlight" | "maxConnections" | "auth"> = {}): Promise<{ server: IngestServer; handler: RecordingHandler; metrics: Metrics; logged: string[] }> {
  const handler = new RecordingHandler();
  const metrics = new Metrics();
  const logged: string[] = [];
  const server = await startIngestServer({ handler, metrics, port: 0, host: "127.0.0.1", log: (line) => logged.push(line), ...options });
  servers.push(server);
  return { server, handler, metrics, logged };
}

function post(server: IngestServer, path: string, body: string | Buffer, headers: Record<string, string> = { "content-type": "application/x-ndjson" }): Promise<Response> {
  return fetch(`${server.url}${path}`, { method: "POST", body: typeof body === "string" ? body : new Uint8Array(body), headers });
}

async function errorOf(response: Response): Promise<string> {
  expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
  const body = (await response.json()) as { error: string };
  expect(Object.keys(body)).toEqual(["error"]);
  return body.error;
}

/** A request through node:http, which (unlike fetch) lets a test write the body piece by piece. */
function rawPost(server: IngestServer, path: string, headers: Record<string, string | number>): {
  request: ReturnType<typeof httpRequest>;
  response: Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>;
} {
  const request = httpRequest(`${server.url}${path}`, { method: "POST", headers });
  const response = new Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>((resolve, reject) => {
    request.on("response", (answer) => {
      let body = "";
      answer.setEncoding("utf8");
      answer.on("data", (chunk: string) => (body += chunk));
      answer.on("end", () => resolve({ status: answer.statusCode ?? 0, headers: answer.headers, body }));
    });
    request.on("error", reject);
  });
  return { request, response };
}

/** Whether `promise` has settled within `ms`. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  void promise.then(() => (settled = true), () => (settled = true));
  await new Promise((wake) => setTimeout(wake, ms));
  return settled;
}

describe("POST /v1/<pipeline>/<namespace>", () => {
  it("hands an NDJSON body to the handler as ndjson, with the path's pipeline and namespace, and answers the count", async () => {
    const { server, handler } = await start();
    for (const type of ["application/x-ndjson", "application/jsonl", "text/plain; charset=utf-8"]) {
      const response = await post(server, "/v1/web/clicks", NDJSON, { "content-type": type });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(await response.json()).toEqual({ accepted: 3 });
    }
    expect(handler.requests.map(({ pipeline, namespace, format }) => ({ pipeline, namespace, format }))).toEqual(
      Array(3).fill({ pipeline: "web", namespace: "clicks", format: "ndjson" }),
    );
    expect(handler.requests.every((request) => request.body.toString("utf8") === NDJSON)).toBe(true);
  });

  it("hands a JSON array to the handler as json, by Content-Type or, without one, by its first byte", async () => {
    const { server, handler } = await start();
    expect(await (await post(server, "/v1/web/clicks", ARRAY, { "content-type": "application/json" })).json()).toEqual({ accepted: 2 });
    expect(await (await post(server, "/v1/web/clicks", Buffer.from(` \r\n\t${ARRAY}`), {})).json()).toEqual({ accepted: 2 });
    expect(await (await post(server, "/v1/web/clicks", Buffer.from(NDJSON), {})).json()).toEqual({ accepted: 3 });
    expect(handler.requests.map((request) => request.format)).toEqual(["json", "json", "ndjson"]);
    expect(handler.requests[1]!.body.toString("utf8")).toBe(` \r\n\t${ARRAY}`);
  });

  it("answers 200 only once accept resolves (the events are durable), not before", async () => {
    const { server, handler } = await start();
    const durable = deferred<{ accepted: number }>();
    handler.answer = () => durable.promise;

    const response = post(server, "/v1/web/clicks", NDJSON);
    await handler.calls(1);
    expect(await settledWithin(response, 300)).toBe(false);

    durable.resolve({ accepted: 3 });
    const answer = await response;
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ accepted: 3 });
  });

  it("answers 503 with Retry-After (whole seconds, rounded up) when the handler pushes back", async () => {
    const { server, handler } = await start();
    handler.answer = async () => {
      throw new BackpressureError("the write-ahead log holds 1.0 GiB, its limit (WAL_MAX_BYTES): retry later", 2.5);
    };
    const response = await post(server, "/v1/web/clicks", NDJSON);
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("3");
    expect(await errorOf(response)).toBe("the write-ahead log holds 1.0 GiB, its limit (WAL_MAX_BYTES): retry later (Retry-After: 3 s)");
    expect(new BackpressureError("x", 1)).toMatchObject({ code: "NO_SPACE", retryable: true, retryAfterSeconds: 1 });
  });

  it("answers 404 with the handler's message for an unknown pipeline or namespace, and 400 for a body it cannot split", async () => {
    const { server, handler } = await start();
    handler.answer = async ({ pipeline, namespace }) => {
      if (pipeline !== "web") throw new NotFoundError(`pipeline '${pipeline}' is not defined: the config defines web`);
      if (namespace !== "clicks") throw new NotFoundError(`namespace '${namespace}' is not declared in pipeline web: declare it under pipelines.web`);
      throw new InvalidInputError("line 1 is not JSON: send one JSON object per line");
    };
    const unknownPipeline = await post(server, "/v1/mobile/clicks", NDJSON);
    expect(unknownPipeline.status).toBe(404);
    expect(await errorOf(unknownPipeline)).toBe("pipeline 'mobile' is not defined: the config defines web");
    const unknownNamespace = await post(server, "/v1/web/views", NDJSON);
    expect(unknownNamespace.status).toBe(404);
    expect(await errorOf(unknownNamespace)).toContain("namespace 'views' is not declared");
    const invalid = await post(server, "/v1/web/clicks", "not json\n");
    expect(invalid.status).toBe(400);
    expect(await errorOf(invalid)).toBe("line 1 is not JSON: send one JSON object per line");
  });

  it("answers 404 with a JSON error naming the rule for a bad pipeline or namespace segment, and for other paths", async () => {
    const { server, handler } = await start();
    const cases: Array<[string, string]> = [
      ["/v1/Web/clicks", "pipeline 'Web' in /v1/Web/clicks is not a valid name: names are lowercase identifiers"],
      ["/v1/web/1clicks", "namespace '1clicks' in /v1/web/1clicks is not a valid name"],
      ["/v1/web/click-stream", "namespace 'click-stream'"],
      ["/v1/web/%63licks", "namespace '%63licks'"],
      [`/v1/web/a${"b".repeat(128)}`, "is not a valid name"],
      ["/v1/web", "no such route: POST /v1/web; post events to /v1/<pipeline>/<namespace>"],
      ["/v1/web/clicks/more", "no such route"],
      ["/v1/web/clicks/", "no such route"],
      ["/v2/web/clicks", "no such route"],
      ["/", "no such route"],
    ];
    for (const [path, message] of cases) {
      const response = await post(server, path, NDJSON);
      expect(response.status, path).toBe(404);
      expect(await errorOf(response), path).toContain(message);
    }
    expect(handler.requests).toEqual([]);
    // The longest valid name: 128 characters.
    expect((await post(server, `/v1/web/a${"b".repeat(127)}`, NDJSON)).status).toBe(200);
  });

  it("answers 405 with Allow to a method a route does not take", async () => {
    const { server, handler } = await start();
    const get = await fetch(`${server.url}/v1/web/clicks`);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect(await errorOf(get)).toBe("GET is not allowed on /v1/web/clicks: send events with POST /v1/<pipeline>/<namespace>");
    for (const path of ["/healthz", "/metrics"]) {
      const response = await fetch(`${server.url}${path}`, { method: "POST", body: "x" });
      expect(response.status).toBe(405);
      expect(response.headers.get("allow")).toBe("GET, HEAD");
      expect(await errorOf(response)).toBe("POST is not allowed here: use GET");
    }
    expect((await fetch(`${server.url}/v1/web/clicks`, { method: "PUT", body: NDJSON })).status).toBe(405);
    expect(handler.requests).toEqual([]);
  });

  it("answers 413 over the body limit: at once when Content-Length says so, and mid-stream as soon as the limit is passed", async () => {
    const { server, handler } = await start({ maxBodyBytes: 1024 });
    expect((await post(server, "/v1/web/clicks", Buffer.alloc(1024, 0x20))).status).toBe(200);

    const declared = await post(server, "/v1/web/clicks", Buffer.alloc(1025, 0x20));
    expect(declared.status).toBe(413);
    expect(await errorOf(declared)).toBe("the request body is larger than the collector's limit of 1 KiB: split the events into smaller requests");

    // Chunked, without a length: the answer arrives while the client has not finished (and never will).
    const { request, response } = rawPost(server, "/v1/web/clicks", { "content-type": "application/x-ndjson" });
    request.write(Buffer.alloc(800, 0x20));
    await new Promise((wake) => setTimeout(wake, 50));
    request.write(Buffer.alloc(800, 0x20));
    const answer = await response;
    expect(answer.status).toBe(413);
    expect(answer.headers.connection).toBe("close");
    expect(JSON.parse(answer.body)).toEqual({ error: expect.stringContaining("larger than the collector's limit of 1 KiB") });
    request.destroy();

    // A client that waits for 100-continue is refused before it sends the body.
    const waiting = rawPost(server, "/v1/web/clicks", { "content-type": "application/x-ndjson", "content-length": 5000, expect: "100-continue" });
    let continued = false;
    waiting.request.on("continue", () => (continued = true));
    waiting.request.flushHeaders();
    expect((await waiting.response).status).toBe(413);
    expect(continued).toBe(false);
    waiting.request.destroy();
    expect(handler.requests).toHaveLength(1);
  });

  // Nothing bounded the bodies held at once: thirty concurrent 15 MB posts took the collector to 527 MB.
  it("holds at most maxBytesInFlight of bodies: a post past it gets 503 with Retry-After before its body is read, and is taken once the others are answered", async () => {
    const { server, handler, metrics } = await start({ maxBodyBytes: 1024 * 1024, maxBytesInFlight: 1024 * 1024 });
    const durable = deferred<{ accepted: number }>();
    handler.answer = () => durable.promise;
    const first = post(server, "/v1/web/clicks", Buffer.alloc(600 * 1024, 0x20));
    await handler.calls(1);
    expect(await metrics.render()).toMatch(/lakeswap_ingest_http_body_bytes_in_flight 614400/);

    // Its headers only: the answer comes although the client has not sent a byte of the body.
    const declared = rawPost(server, "/v1/web/clicks", { "content-type": "application/x-ndjson", "content-length": 600 * 1024 });
    declared.request.flushHeaders();
    const refused = await declared.response;
    expect(refused.status).toBe(503);
    expect(refused.headers["retry-after"]).toBe("1");
    expect(refused.headers.connection).toBe("close");
    expect(JSON.parse(refused.body)).toEqual({ error: "the collector holds 600 KiB of request bodies, at its limit of 1 MiB (--max-bytes-in-flight): retry in 1 s" });
    declared.request.destroy();

    // Chunked, without a length: refused as soon as what arrived passes the limit.
    const chunked = rawPost(server, "/v1/web/clicks", { "content-type": "application/x-ndjson" });
    chunked.request.write(Buffer.alloc(300 * 1024, 0x20));
    chunked.request.write(Buffer.alloc(300 * 1024, 0x20));
    expect((await chunked.response).status).toBe(503);
    chunked.request.destroy();
    expect(handler.requests).toHaveLength(1);

    durable.resolve({ accepted: 0 });
    expect((await first).status).toBe(200);
    handler.answer = countEvents;
    expect((await post(server, "/v1/web/clicks", Buffer.alloc(600 * 1024, 0x20))).status).toBe(200);
    expect(await metrics.render()).toMatch(/lakeswap_ingest_http_body_bytes_in_flight 0/);
  });

  it("keeps at most maxConnections connections open: one more is closed as it arrives", async () => {
    const { server } = await start({ maxConnections: 2 });
    const port = Number(new URL(server.url).port);
    const open = (): Promise<Socket> => new Promise((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => resolve(socket));
      socket.on("error", reject);
    });
    const held = [await open(), await open()];
    const third = await open();
    const closed = await new Promise<string>((resolve) => {
      third.on("data", () => resolve("answered"));
      third.on("close", () => resolve("closed"));
      third.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    });
    expect(closed).toBe("closed");
    held[0]!.destroy();
    await new Promise((wake) => held[0]!.once("close", wake));
    // Node counts the closed one out on its own time: poll until a new connection is served.
    for (;;) {
      const socket = await open();
      const answer = await new Promise<string>((resolve) => {
        socket.on("data", () => resolve("answered"));
        socket.on("close", () => resolve("closed"));
        socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      });
      socket.destroy();
      if (answer === "answered") break;
    }
    held[1]!.destroy();
  });

  it("gunzips a gzip body (Content-Encoding: gzip), with the limit on the gunzipped size; refuses broken gzip and other encodings", async () => {
    const { server, handler } = await start({ maxBodyBytes: 64 * 1024 });
    const gzipped = await post(server, "/v1/web/clicks", gzipSync(NDJSON), { "content-type": "application/x-ndjson", "content-encoding": "gzip" });
    expect(gzipped.status).toBe(200);
    expect(await gzipped.json()).toEqual({ accepted: 3 });
    expect(handler.requests[0]!.body.toString("utf8")).toBe(NDJSON);

    const noType = await post(server, "/v1/web/clicks", gzipSync(ARRAY), { "content-encoding": "gzip" });
    expect(await noType.json()).toEqual({ accepted: 2 });
    expect(handler.requests[1]!.format).toBe("json");

    // 1 MiB of spaces gzips to about 1 KiB: small on the wire, over the limit once gunzipped.
    const bomb = gzipSync(Buffer.alloc(1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const tooLarge = await post(server, "/v1/web/clicks", bomb, { "content-type": "application/x-ndjson", "content-encoding": "gzip" });
    expect(tooLarge.status).toBe(413);
    expect(await errorOf(tooLarge)).toBe("the request body is larger than the collector's limit of 64 KiB once gunzipped: split the events into smaller requests");

    const broken = await post(server, "/v1/web/clicks", Buffer.from(NDJSON), { "content-type": "application/x-ndjson", "content-encoding": "gzip" });
    expect(broken.status).toBe(400);
    expect(await errorOf(broken)).toMatch(/^the body is not valid gzip \(.+\): compress it with gzip, or leave out Content-Encoding: gzip for a plain body$/);

    const truncated = await post(server, "/v1/web/clicks", gzipSync(NDJSON).subarray(0, 20), { "content-type": "application/x-ndjson", "content-encoding": "gzip" });
    expect(truncated.status).toBe(400);

    const brotli = await post(server, "/v1/web/clicks", NDJSON, { "content-type": "application/x-ndjson", "content-encoding": "br" });
    expect(brotli.status).toBe(415);
    expect(await errorOf(brotli)).toBe("Content-Encoding 'br' is not supported: send the body as it is, or gzip-compressed with Content-Encoding: gzip");
    expect(handler.requests).toHaveLength(2);
  });

  it("answers 415 to a Content-Type or charset it cannot read, naming the types it takes", async () => {
    const { server, handler } = await start();
    const form = await post(server, "/v1/web/clicks", NDJSON, { "content-type": "application/x-www-form-urlencoded" });
    expect(form.status).toBe(415);
    expect(await errorOf(form)).toContain("Content-Type 'application/x-www-form-urlencoded' is not supported: send NDJSON (one event per line) with Content-Type application/x-ndjson");
    const latin1 = await post(server, "/v1/web/clicks", NDJSON, { "content-type": "application/x-ndjson; charset=iso-8859-1" });
    expect(latin1.status).toBe(415);
    expect(await errorOf(latin1)).toBe("charset 'iso-8859-1' is not supported: send the events as UTF-8");
    expect(handler.requests).toEqual([]);
  });

  it("answers 500 with a generic message to anything else the handler throws, and logs the cause", async () => {
    const { server, handler, logged } = await start();
    handler.answer = async () => {
      throw new Error("EIO: i/o error, fsync '/var/lib/lakeswap/wal/000042.log'");
    };
    const response = await post(server, "/v1/web/clicks", NDJSON);
    expect(response.status).toBe(500);
    const message = await errorOf(response);
    expect(message).toBe("the collector failed on POST /v1/web/clicks (the cause is in its log); the events were not acknowledged: retry the request");
    expect(logged).toHaveLength(1);
    expect(message).not.toContain("EIO");
    expect(logged.join("\n")).toContain("POST /v1/web/clicks failed: Error: EIO: i/o error, fsync '/var/lib/lakeswap/wal/000042.log'");
  });

  it("answers a request that is not valid HTTP with 400 and a JSON error", async () => {
    const { server, metrics } = await start();
    const socket = connect(server.port, "127.0.0.1");
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (answer += chunk));
    const ended = new Promise((resolve) => socket.once("close", resolve));
    socket.write("POST /v1/web/clicks HTTP/1.1\r\nContent-Length: x\r\n\r\n");
    await ended;
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: string };
    expect(body.error).toMatch(/^the request is not valid HTTP\/1\.1 \(HPE_.+\): send a well-formed request$/);
    expect(await requestsAnswered(metrics, "400")).toBe(1);
  });

  it("keeps connections alive between requests", async () => {
    const { server } = await start();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const reused: boolean[] = [];
      for (let i = 0; i < 3; i++) {
        await new Promise<void>((resolve, reject) => {
          const request = httpRequest(`${server.url}/v1/web/clicks`, { method: "POST", agent, headers: { "content-type": "application/x-ndjson" } }, (response) => {
            expect(response.statusCode).toBe(200);
            expect(response.headers.connection).toBe("keep-alive");
            response.resume();
            response.on("end", resolve);
          });
          request.on("error", reject);
          request.end(NDJSON);
          reused.push(request.reusedSocket);
        });
      }
      expect(reused).toEqual([false, true, true]);
    } finally {
      agent.destroy();
    }
  });

  it("answers 50 concurrent posts, each with its own events", async () => {
    const { server, handler } = await start();
    handler.answer = async (request) => {
      await new Promise((wake) => setTimeout(wake, Math.random() * 50));
      return countEvents(request);
    };
    const bodies = Array.from({ length: 50 }, (_, i) => Array.from({ length: i + 1 }, (_, n) => JSON.stringify({ request: i, n, pad: "x".repeat(300) })).join("\n"));
    const responses = await Promise.all(bodies.map((body) => post(server, "/v1/web/clicks", body)));
    expect(responses.map((response) => response.status)).toEqual(Array(50).fill(200));
    expect(await Promise.all(responses.map((response) => response.json()))).toEqual(bodies.map((_, i) => ({ accepted: i + 1 })));
    expect(handler.requests.map((request) => request.body.toString("utf8")).sort()).toEqual([...bodies].sort());
  });

  it("drops a request whose client leaves before the whole body arrived, without calling the handler", async () => {
    const { server, handler, metrics } = await start();
    const { request, response } = rawPost(server, "/v1/web/clicks", { "content-type": "application/x-ndjson", "content-length": 1000 });
    response.catch(() => {});
    request.write('{"user":"a"}\n');
    await new Promise((wake) => setTimeout(wake, 50));
    request.destroy();
    while ((await requestsAnswered(metrics, "aborted")) === 0) await new Promise((wake) => setTimeout(wake, 10));
    expect(handler.requests).toEqual([]);
    expect(await metrics.render()).toContain("\nlakeswap_ingest_http_requests_in_flight 0\n");
  });

  it("does not let a client that sends its body slowly hold up the others", async () => {
    const { server, handler } = await start();
    const slow = rawPost(server, "/v1/web/slow", { "content-type": "application/x-ndjson" });
    slow.request.write('{"user":"slow",');

    const fast = await Promise.all(Array.from({ length: 5 }, () => post(server, "/v1/web/clicks", NDJSON)));
    expect(fast.map((response) => response.status)).toEqual(Array(5).fill(200));
    expect(handler.requests.map((request) => request.namespace)).toEqual(Array(5).fill("clicks"));

    slow.request.end('"n":1}\n');
    expect((await slow.response).status).toBe(200);
    expect(handler.requests[5]!.body.toString("utf8")).toBe('{"user":"slow","n":1}\n');
  });
});

describe("GET /healthz", () => {
  it("answers 200 with the handler's health when ok, 503 when not", async () => {
    const { server, handler } = await start();
    const ok = await fetch(`${server.url}/healthz`);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true, detail: { walBytes: 1234, pipelines: ["web"] } });

    handler.healthy = false;
    const failing = await fetch(`${server.url}/healthz`);
    expect(failing.status).toBe(503);
    expect(await failing.json()).toEqual({ ok: false, detail: { walBytes: 1234, pipelines: ["web"] } });

    handler.health = () => {
      throw new Error("the WAL folder is gone");
    };
    const thrown = await fetch(`${server.url}/healthz`);
    expect(thrown.status).toBe(503);
    expect(await thrown.json()).toEqual({ ok: false, detail: { error: "the WAL folder is gone" } });
  });
});

interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}
interface Family {
  readonly help: string;
  readonly type: string;
  readonly samples: Sample[];
}

/**
 * Parses Prometheus text exposition format 0.0.4 strictly: every line is a HELP, a TYPE or a sample; a family's
 * HELP comes before its TYPE, its TYPE before its samples, and its samples are together.
 */
function parsePrometheusText(text: string): Map<string, Family> {
  expect(text.endsWith("\n")).toBe(true);
  const families = new Map<string, Family>();
  const name = "[a-zA-Z_:][a-zA-Z0-9_:]*";
  const labelPair = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"/y;
  let current: string | undefined;
  let pendingHelp: { name: string; help: string } | undefined;
  for (const line of text.slice(0, -1).split("\n")) {
    const help = new RegExp(`^# HELP (${name}) (.*)$`).exec(line);
    const type = new RegExp(`^# TYPE (${name}) (counter|gauge|histogram|summary|untyped)$`).exec(line);
    if (help) {
      pendingHelp = { name: help[1]!, help: help[2]!.replace(/\\(\\|n)/g, (_, c: string) => (c === "n" ? "\n" : "\\")) };
      continue;
    }
    if (type) {
      expect(pendingHelp?.name, `HELP before TYPE of ${type[1]}`).toBe(type[1]);
      expect(families.has(type[1]!), `${type[1]} described once`).toBe(false);
      families.set(type[1]!, { help: pendingHelp!.help, type: type[2]!, samples: [] });
      current = type[1];
      continue;
    }
    const sample = new RegExp(`^(${name})(?:\\{(.*)\\})? ([+-]?(?:\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?|Inf)|NaN)$`).exec(line);
    expect(sample, `a valid sample line: ${line}`).not.toBeNull();
    const [, sampleName, labelText = "", valueText] = sample!;
    const family = families.get(current ?? "");
    const suffixes = family?.type === "histogram" ? ["_bucket", "_sum", "_count"] : [""];
    expect(suffixes.map((suffix) => `${current}${suffix}`), `${sampleName} under its family's TYPE`).toContain(sampleName);
    const labels: Record<string, string> = {};
    let at = 0;
    while (at < labelText.length) {
      labelPair.lastIndex = at;
      const pair = labelPair.exec(labelText);
      expect(pair, `a valid label list: ${labelText}`).not.toBeNull();
      labels[pair![1]!] = pair![2]!.replace(/\\(\\|"|n)/g, (_, c: string) => (c === "n" ? "\n" : c));
      at = labelPair.lastIndex;
      if (at < labelText.length) {
        expect(labelText[at]).toBe(",");
        at++;
      }
    }
    const value = valueText === "NaN" ? NaN : valueText!.endsWith("Inf") ? (valueText!.startsWith("-") ? -Infinity : Infinity) : Number(valueText);
    family!.samples.push({ name: sampleName!, labels, value });
  }
  return families;
}

/** The collector's count of requests answered with `code`, as /metrics shows it (0 before the first). */
async function requestsAnswered(metrics: Metrics, code: string): Promise<number> {
  const samples = parsePrometheusText(await metrics.render()).get("lakeswap_ingest_http_requests_total")?.samples ?? [];
  return samples.find((sample) => sample.labels.code === code)?.value ?? 0;
}

describe("GET /metrics", () => {
  it("renders Prometheus text 0.0.4: requests counted by status code, the request time histogram, escaped labels", async () => {
    const { server, handler, metrics } = await start();
    const sources = metrics.counter("test_sources_total", "Label values that need escaping.", ["source"]);
    sources.inc({ source: 'C:\\data\\"events"\nnext' }, 2);
    let walBytes = 0;
    const wal = metrics.gauge("test_wal_bytes", "Computed when scraped.", [], () => wal.set(walBytes));

    for (let i = 0; i < 3; i++) expect((await post(server, "/v1/web/clicks", NDJSON)).status).toBe(200);
    expect((await post(server, "/v1/Web/clicks", NDJSON)).status).toBe(404);
    handler.answer = async () => {
      throw new BackpressureError("full", 1);
    };
    expect((await post(server, "/v1/web/clicks", NDJSON)).status).toBe(503);
    walBytes = 4096;

    const response = await fetch(`${server.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const families = parsePrometheusText(await response.text());

    const requests = families.get("lakeswap_ingest_http_requests_total")!;
    expect(requests.type).toBe("counter");
    expect(requests.help).toMatch(/^HTTP requests answered by the collector/);
    expect(requests.samples.map(({ labels, value }) => [labels.code, value])).toEqual([["200", 3], ["404", 1], ["503", 1]]);

    const seconds = families.get("lakeswap_ingest_request_seconds")!;
    expect(seconds.type).toBe("histogram");
    const buckets = seconds.samples.filter((sample) => sample.name.endsWith("_bucket"));
    expect(buckets.at(-1)!.labels).toEqual({ le: "+Inf" });
    expect(buckets.map((bucket) => bucket.value)).toEqual([...buckets.map((bucket) => bucket.value)].sort((a, b) => a - b)); // cumulative
    expect(buckets.at(-1)!.value).toBe(5);
    expect(seconds.samples.find((sample) => sample.name === "lakeswap_ingest_request_seconds_count")!.value).toBe(5);
    expect(seconds.samples.find((sample) => sample.name === "lakeswap_ingest_request_seconds_sum")!.value).toBeGreaterThan(0);

    expect(families.get("lakeswap_ingest_http_requests_in_flight")!.samples).toEqual([{ name: "lakeswap_ingest_http_requests_in_flight", labels: {}, value: 1 }]);
    expect(families.get("test_sources_total")!.samples[0]).toEqual({ name: "test_sources_total", labels: { source: 'C:\\data\\"events"\nnext' }, value: 2 });
    expect(families.get("test_wal_bytes")!.samples[0]!.value).toBe(4096);

    // The scrape itself is counted once answered.
    const again = parsePrometheusText(await (await fetch(`${server.url}/metrics`)).text());
    expect(again.get("lakeswap_ingest_http_requests_total")!.samples.find((sample) => sample.labels.code === "200")!.value).toBe(4);
  });
});

describe("close()", () => {
  it("lets requests in flight finish with 200, refuses new ones (503 while draining), then resolves", async () => {
    const { server, handler } = await start();
    const durable = deferred<{ accepted: number }>();
    handler.answer = () => durable.promise;
    const inFlight = Array.from({ length: 3 }, () => post(server, "/v1/web/clicks", NDJSON));
    await handler.calls(3);

    // A client that has started a request on an open connection, and finishes it once the server drains.
    const late: Socket = connect(server.port, "127.0.0.1");
    await new Promise((resolve) => late.once("connect", resolve));
    late.write("POST /v1/web/clicks HTTP/1.1\r\nHost: collector\r\n");
    await new Promise((wake) => setTimeout(wake, 50));

    const closed = server.close(5000);
    expect(await settledWithin(closed, 100)).toBe(false);

    // New connections are refused.
    await expect(post(server, "/v1/web/clicks", NDJSON)).rejects.toThrow();

    let lateAnswer = "";
    late.setEncoding("utf8");
    late.on("data", (chunk: string) => (lateAnswer += chunk));
    const lateEnded = new Promise((resolve) => late.once("close", resolve));
    late.write(`Content-Type: application/x-ndjson\r\nContent-Length: ${NDJSON.length}\r\n\r\n${NDJSON}`);
    await lateEnded;
    expect(lateAnswer).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(lateAnswer).toMatch(/\r\nretry-after: 5\r\n/i);
    expect(lateAnswer).toMatch(/\r\nconnection: close\r\n/i);
    expect(lateAnswer).toContain('{"error":"the collector is shutting down and takes no new requests: retry in 5 s');
    expect(handler.requests).toHaveLength(3);

    expect(await settledWithin(closed, 50)).toBe(false);
    durable.resolve({ accepted: 3 });
    const answers = await Promise.all(inFlight);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(await Promise.all(answers.map((answer) => answer.json()))).toEqual(Array(3).fill({ accepted: 3 }));
    await closed;
  });

  it("gives up on requests still in flight after timeoutMs, and says so", async () => {
    const { server, handler, logged } = await start();
    handler.answer = () => new Promise(() => {});
    const stuck = post(server, "/v1/web/clicks", NDJSON);
    await handler.calls(1);
    const started = Date.now();
    await server.close(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    await expect(stuck).rejects.toThrow();
    expect(logged).toEqual(["lakeswap ingest: 1 request(s) still in flight after 200 ms; closing their connections unanswered"]);
  });

  it("resolves at once when idle, also with keep-alive connections open", async () => {
    const { server } = await start();
    expect((await post(server, "/v1/web/clicks", NDJSON)).status).toBe(200);
    const started = Date.now();
    await server.close();
    expect(Date.now() - started).toBeLessThan(500);
  });

  it("says which port is taken when it cannot listen", async () => {
    const { server } = await start();
    await expect(startIngestServer({ handler: new RecordingHandler(), metrics: new Metrics(), port: server.port, host: "127.0.0.1" })).rejects.toThrow(
      `cannot listen on 127.0.0.1, port ${server.port}: the port is already in use by another process; choose another port or stop that process`,
    );
  });
});

describe("who may reach the collector", () => {
  // serve listened on every interface, with no authentication.
  it("listens on 127.0.0.1 unless told otherwise: another interface of the machine is refused", async () => {
    const handler = new RecordingHandler();
    const server = await startIngestServer({ handler, metrics: new Metrics(), port: 0, log: () => undefined });
    servers.push(server);
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:/);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const external = Object.values(networkInterfaces()).flat().find((i) => i && i.family === "IPv4" && !i.internal);
    if (external) {
      const reached = await new Promise<string>((resolve) => {
        const socket = connect(server.port, external.address, () => {
          socket.destroy();
          resolve("connected");
        });
        socket.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
      });
      expect(reached).toBe("ECONNREFUSED");
    }
  });

  it("takes a pipeline's posts only with its bearer token (401 with WWW-Authenticate otherwise, the body unread), /metrics with any token, /healthz's detail with one", async () => {
    const tokens = new Map<string, string | undefined>([["web", "s3cret-web"], ["app", "s3cret-app"], ["open", undefined]]);
    const auth = { tokenFor: (pipeline: string) => (tokens.has(pipeline) ? tokens.get(pipeline) : null), tokens: ["s3cret-web", "s3cret-app"] };
    const { server, handler } = await start({ auth });
    const headers = (token?: string): Record<string, string> => ({ "content-type": "application/x-ndjson", ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}) });

    const missing = await post(server, "/v1/web/clicks", NDJSON, headers());
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="lakeswap"');
    expect(await errorOf(missing)).toBe("this collector needs a bearer token: send Authorization: Bearer <token> with the pipeline's auth_token (or LAKESWAP_INGEST_TOKEN)");
    for (const wrong of ["s3cret-app", "s3cret-we", "s3cret-web2", ""]) {
      const refused = await post(server, "/v1/web/clicks", NDJSON, headers(wrong));
      expect(refused.status, wrong).toBe(401);
      expect(refused.headers.get("www-authenticate")).toBe('Bearer realm="lakeswap", error="invalid_token"');
    }
    expect((await post(server, "/v1/web/clicks", NDJSON, { ...headers(), authorization: "Basic czNjcmV0LXdlYg==" })).status).toBe(401);
    // An unknown pipeline is not told apart from a known one without a token.
    expect((await post(server, "/v1/nope/clicks", NDJSON, headers())).status).toBe(401);
    // A client that waits for 100-continue is refused before it sends the body.
    const waiting = rawPost(server, "/v1/web/clicks", { "content-type": "application/x-ndjson", "content-length": 5000, expect: "100-continue" });
    let continued = false;
    waiting.request.on("continue", () => (continued = true));
    waiting.request.flushHeaders();
    expect((await waiting.response).status).toBe(401);
    expect(continued).toBe(false);
    waiting.request.destroy();
    expect(handler.requests).toHaveLength(0);

    expect((await post(server, "/v1/web/clicks", NDJSON, headers("s3cret-web"))).status).toBe(200);
    expect((await post(server, "/v1/app/clicks", NDJSON, headers("s3cret-app"))).status).toBe(200);
    expect((await post(server, "/v1/open/clicks", NDJSON, headers())).status).toBe(200);
    expect(handler.requests.map((r) => r.pipeline)).toEqual(["web", "app", "open"]);

    expect((await fetch(`${server.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer s3cret-app" } })).status).toBe(200);
    const probe = await fetch(`${server.url}/healthz`);
    expect(probe.status).toBe(200);
    expect(await probe.json()).toEqual({ ok: true });
    expect(await (await fetch(`${server.url}/healthz`, { headers: { authorization: "Bearer s3cret-web" } })).json()).toEqual({ ok: true, detail: { walBytes: 1234, pipelines: ["web"] } });
  });
});

