import { createServer, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { InvalidInputError, LakeswapError, errorMessage } from "../model/errors.js";
import { Metrics, type Counter, type Histogram } from "./metrics.js";
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_BYTES_IN_FLIGHT, DEFAULT_MAX_CONNECTIONS } from "./server-limits.js";
import { bearerMatches, tokenDigest, type IngestAuth } from "./http-auth.js";
import { HttpError, UnavailableError, formatBytes, quoted } from "./http-errors.js";
import { idempotencyKeyOf } from "./idempotency.js";
import { busy, formatOf, isGzip, readBody, sniffFormat, tooLarge, type IngestFormat } from "./request-body.js";

/** The interface the collector listens on by default: this machine only. */
const DEFAULT_HOST = "127.0.0.1";

/** How long `close()` waits for requests in flight by default. */
const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;

/** The Retry-After a request gets while the server drains: long enough for a restart or a peer to take over. */
const DRAINING_RETRY_AFTER_SECONDS = 5;

const NAME = /^[a-z][a-z0-9_]{0,127}$/;
const NAME_RULE = "names are lowercase identifiers: a letter, then letters, digits or '_', at most 128 characters";
const INGEST_ROUTE = "POST /v1/<pipeline>/<namespace>";

/** One POST of events, as the server hands it to the ingest service. */
export interface IngestRequest {
  readonly pipeline: string;
  readonly namespace: string;
  /** The body as received (gunzipped when it came gzip-compressed): one buffer, or the chunks it arrived in, in order. */
  readonly body: Buffer | readonly Buffer[];
  readonly format: IngestFormat;
  /** The request's Idempotency-Key header, checked (./idempotency.ts), when it has one. */
  readonly idempotencyKey?: string;
}

/** What `accept` answers: the events stored; for a request with a key, how long keys are kept, and whether it was a retry of one stored before. */
export interface IngestAnswer {
  readonly accepted: number;
  /** Events dropped because their namespace took their id within its `dedupe` window (for a namespace that dedupes). */
  readonly deduplicated?: number;
  readonly replayed?: boolean;
  readonly idempotencyWindowSeconds?: number;
}

/** What the server calls; the ingest service implements it. */
export interface IngestHandler {
  /**
   * Appends a request's events to the write-ahead log; resolves only once they are durable. Throws
   * BackpressureError when the log is full, UnavailableError when it cannot take events at all (it stopped after a
   * disk error), NotFoundError for an unknown pipeline/namespace, InvalidInputError for a body that cannot be split
   * into events.
   */
  accept(request: IngestRequest): Promise<IngestAnswer>;
  /** Liveness/readiness detail for GET /healthz. */
  health(): { readonly ok: boolean; readonly detail: Record<string, unknown> };
}

/** How to start the collector's HTTP server. */
export interface IngestServerOptions {
  readonly handler: IngestHandler;
  readonly metrics: Metrics;
  /** 0 picks a free port. */
  readonly port: number;
  /** Default 127.0.0.1: this machine only; `0.0.0.0` (or `::`) opens it to other hosts. */
  readonly host?: string;
  /** Bearer-token authentication; none by default (every request is taken). */
  readonly auth?: IngestAuth;
  /** The largest body accepted, after gunzip; default 16 MiB. */
  readonly maxBodyBytes?: number;
  /**
   * The most body bytes held at once, over every request being read or waiting for its events to be durable; a request
   * that would pass it is answered 503 with Retry-After, its body not read. Default 256 MiB; at least `maxBodyBytes`.
   */
  readonly maxBytesInFlight?: number;
  /** The most connections open at once; more are closed as they arrive (Node's `server.maxConnections`). Default 1024. */
  readonly maxConnections?: number;
  /** Where the server reports what it cannot answer to a client (unexpected errors); default stderr. */
  readonly log?: (line: string) => void;
}

/** A running collector HTTP server. */
export interface IngestServer {
  readonly url: string;
  readonly port: number;
  /**
   * Stops accepting new connections and requests (new requests get 503 while draining), waits for requests in
   * flight to finish (bounded by timeoutMs, default 10 s), then closes.
   */
  close(timeoutMs?: number): Promise<void>;
}


/**
 * Starts the collector's HTTP face: `POST /v1/<pipeline>/<namespace>` (NDJSON or a JSON array, gzip or not),
 * answered 200 only once `handler.accept` says the events are durable; `GET /healthz`; `GET /metrics`.
 */
export async function startIngestServer(options: IngestServerOptions): Promise<IngestServer> {
  const host = options.host ?? DEFAULT_HOST;
  const requests = new RequestHandling(options);
  // HTTP keep-alive is Node's default; keepAlive here also turns on TCP keep-alive, so dead peers are noticed.
  const server = createServer({ keepAlive: true }, (request, response) => void requests.handle(request, response, false));
  server.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  // Answer a client that waits for 100-continue before it sends the body: a request that is refused anyway
  // (wrong route, too large, draining) is refused before the body travels.
  server.on("checkContinue", (request: IncomingMessage, response: ServerResponse) => void requests.handle(request, response, true));
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => requests.clientError(error, socket));
  // Longer than the idle timeout of the usual load balancers (60 s), so that they never reuse a connection we just closed.
  server.keepAliveTimeout = 65_000;
  await listen(server, options.port, host);
  server.on("error", (error) => requests.log(`lakeswap ingest: server error: ${describe(error)}`));
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHost(host)}:${port}`,
    port,
    close: (timeoutMs) => (closing ??= requests.drain(server, timeoutMs)),
  };
}

/** Listens on `port` of `host`; a failure to listen is an error that says what to do. */
function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException): void => reject(listenError(error, port, host));
    server.once("error", failed);
    server.listen(port, host, () => {
      server.off("error", failed);
      resolve();
    });
  });
}

/** The collector's answers to requests: routes, authentication, the bounds on bodies held, and draining. */
class RequestHandling {
  private readonly handler: IngestHandler;
  private readonly metrics: Metrics;
  private readonly maxBodyBytes: number;
  private readonly maxBytesInFlight: number;
  /** The digests of every token (undefined: no authentication), compared with a request's in constant time. */
  private readonly tokens: Buffer[] | undefined;
  readonly log: (line: string) => void;
  private readonly requests: Counter;
  private readonly seconds: Histogram;
  /** Body bytes held now, by every request being read or waiting for its answer. */
  private bytesHeld = 0;
  private inFlight = 0;
  private draining = false;
  private onIdle: (() => void) | undefined;

  constructor(private readonly options: IngestServerOptions) {
    this.handler = options.handler;
    this.metrics = options.metrics;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.maxBytesInFlight = options.maxBytesInFlight ?? Math.max(DEFAULT_MAX_BYTES_IN_FLIGHT, this.maxBodyBytes);
    if (this.maxBytesInFlight < this.maxBodyBytes) {
      throw new InvalidInputError(
        `the bytes in flight limit (${formatBytes(this.maxBytesInFlight)}) is below the largest body (${formatBytes(this.maxBodyBytes)}): no such body could ever be taken; raise it`,
      );
    }
    this.tokens = options.auth && options.auth.tokens.length > 0 ? options.auth.tokens.map(tokenDigest) : undefined;
    this.log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    const { metrics } = this;
    this.requests = metrics.counter("lakeswap_ingest_http_requests_total", "HTTP requests answered by the collector, by status code ('aborted': the client left first).", ["code"]);
    this.seconds = metrics.histogram("lakeswap_ingest_request_seconds", "Time from a request's arrival to its answer, for all but /healthz and /metrics (an event POST is answered 200 once its events are durable), seconds.");
    const inFlightGauge = metrics.gauge("lakeswap_ingest_http_requests_in_flight", "HTTP requests the collector is reading or answering.", [], () => inFlightGauge.set(this.inFlight));
    const bytesGauge = metrics.gauge("lakeswap_ingest_http_body_bytes_in_flight", "Body bytes the collector holds, of requests being read or waiting for their events to be durable.", [], () =>
      bytesGauge.set(this.bytesHeld),
    );
  }

  async handle(request: IncomingMessage, response: ServerResponse, expectsContinue: boolean): Promise<void> {
    const started = process.hrtime.bigint();
    this.inFlight++;
    const method = request.method ?? "GET";
    const path = (request.url ?? "/").split("?", 1)[0]!;
    // Scrapes and health checks would drown the time of event posts.
    const timed = path !== "/healthz" && path !== "/metrics";
    // This request's share of `bytesHeld`, given back once it is answered (the log has its events, or it failed).
    let held = 0;
    const hold = (bytes: number): boolean => {
      if (bytes <= held) return true;
      if (this.bytesHeld + bytes - held > this.maxBytesInFlight) return false;
      this.bytesHeld += bytes - held;
      held = bytes;
      return true;
    };
    response.once("close", () => {
      this.bytesHeld -= held;
      held = 0;
      this.inFlight--;
      this.requests.inc({ code: response.writableFinished ? String(response.statusCode) : "aborted" });
      if (timed && response.writableFinished) this.seconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
      if (this.inFlight === 0) this.onIdle?.();
    });
    try {
      if (this.draining) {
        throw new HttpError(503, `the collector is shutting down and takes no new requests: retry in ${DRAINING_RETRY_AFTER_SECONDS} s (against another collector if there is one)`, {
          "retry-after": String(DRAINING_RETRY_AFTER_SECONDS),
        });
      }
      const authorization = request.headers.authorization;
      if (path === "/healthz") return await onlyGet(method, () => this.answerHealth(response, this.authorizedFor(undefined, authorization)));
      if (path === "/metrics") {
        // Awaited here, so that a render that fails is answered by the catch below.
        return await onlyGet(method, () => {
          this.requireToken(undefined, authorization);
          return this.answerMetrics(response);
        });
      }
      await this.post(request, response, { method, path, expectsContinue, hold });
    } catch (error) {
      this.answerError(response, error, method, path);
    }
  }

  /** An event POST: checked (route, token, type, size) before its body is read, answered 200 once its events are durable. */
  private async post(
    request: IncomingMessage,
    response: ServerResponse,
    { method, path, expectsContinue, hold }: { method: string; path: string; expectsContinue: boolean; hold: (bytes: number) => boolean },
  ): Promise<void> {
    const [pipeline, namespace] = ingestTarget(method, path);
    // Before a byte of the body is read (and before 100-continue): a client without the token sends nothing more.
    this.requireToken(pipeline, request.headers.authorization);
    const format = formatOf(request.headers["content-type"]);
    const idempotencyKey = idempotencyKeyOf(request.headers["idempotency-key"]);
    const gzip = isGzip(request.headers["content-encoding"]);
    const declaredLength = Number(request.headers["content-length"] ?? 0);
    if (!gzip && declaredLength > this.maxBodyBytes) throw tooLarge(this.maxBodyBytes, false);
    // The declared body is counted before a byte of it is read, so that concurrent posts cannot all pass the limit.
    if (!hold(gzip ? 0 : declaredLength)) throw busy(this.bytesHeld, this.maxBytesInFlight);
    if (expectsContinue) response.writeContinue();
    const body = await readBody(request, this.maxBodyBytes, gzip, (size) => hold(size) || busy(this.bytesHeld, this.maxBytesInFlight));
    // The chunks as they arrived: the log writes them as they are, never copied into one buffer.
    const answer = await this.handler.accept({ pipeline, namespace, body, format: format ?? sniffFormat(body), ...(idempotencyKey !== undefined ? { idempotencyKey } : {}) });
    const headers: OutgoingHttpHeaders = {
      ...(answer.idempotencyWindowSeconds !== undefined ? { "idempotency-window": String(answer.idempotencyWindowSeconds) } : {}),
      ...(answer.replayed ? { "idempotent-replayed": "true" } : {}),
    };
    this.sendJson(response, 200, { accepted: answer.accepted, ...(answer.deduplicated !== undefined ? { deduplicated: answer.deduplicated } : {}) }, headers);
  }

  /** Whether a request may go on: no token needed (no auth, or a pipeline without one), or it carries a right one. */
  private authorizedFor(pipeline: string | undefined, authorization: string | undefined): boolean {
    if (!this.tokens) return true;
    const own = pipeline === undefined ? null : this.options.auth!.tokenFor(pipeline);
    if (own === undefined) return true;
    return bearerMatches(authorization, own === null ? this.tokens : [tokenDigest(own)]);
  }

  private requireToken(pipeline: string | undefined, authorization: string | undefined): void {
    if (this.authorizedFor(pipeline, authorization)) return;
    const given = authorization !== undefined;
    throw new HttpError(
      401,
      given
        ? "the bearer token is not the one this collector takes: send Authorization: Bearer <token> with the pipeline's auth_token (or LAKESWAP_INGEST_TOKEN)"
        : "this collector needs a bearer token: send Authorization: Bearer <token> with the pipeline's auth_token (or LAKESWAP_INGEST_TOKEN)",
      // A POST's body is not read: the connection cannot carry another request.
      { "www-authenticate": `Bearer realm="lakeswap"${given ? ', error="invalid_token"' : ""}`, connection: "close" },
    );
  }

  private answerHealth(response: ServerResponse, detailed: boolean): void {
    let health: ReturnType<IngestHandler["health"]>;
    try {
      health = this.handler.health();
    } catch (error) {
      this.log(`lakeswap ingest: the health check failed: ${describe(error)}`);
      health = { ok: false, detail: { error: errorMessage(error) } };
    }
    // Its status for a load balancer's probe, which carries no token; what the collector holds and where, only with one.
    this.sendJson(response, health.ok ? 200 : 503, detailed ? health : { ok: health.ok });
  }

  private async answerMetrics(response: ServerResponse): Promise<void> {
    const text = await this.metrics.render();
    response.writeHead(200, { "content-type": Metrics.contentType, "content-length": Buffer.byteLength(text) });
    response.end(text);
  }

  private answerError(response: ServerResponse, error: unknown, method: string, path: string): void {
    if (response.headersSent || response.destroyed) {
      if (!response.destroyed) response.destroy();
      return;
    }
    if (error instanceof HttpError) return this.sendJson(response, error.status, { error: error.message }, error.headers);
    if (error instanceof UnavailableError) {
      const retryAfter = Math.max(1, Math.ceil(error.retryAfterSeconds));
      return this.sendJson(response, 503, { error: `${error.message} (Retry-After: ${retryAfter} s)` }, { "retry-after": String(retryAfter) });
    }
    if (error instanceof LakeswapError && error.code === "NOT_FOUND") return this.sendJson(response, 404, { error: error.message });
    if (error instanceof LakeswapError && error.code === "INVALID_INPUT") return this.sendJson(response, 400, { error: error.message });
    this.log(`lakeswap ingest: ${method} ${path} failed: ${describe(error)}`);
    const unacknowledged = method === "POST" ? "; the events were not acknowledged" : "";
    this.sendJson(response, 500, { error: `the collector failed on ${method} ${path} (the cause is in its log)${unacknowledged}: retry the request` });
  }

  private sendJson(response: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
    const text = JSON.stringify(body);
    // While draining, every answer closes its connection, so that close() is not kept waiting by idle clients.
    const connection: OutgoingHttpHeaders = this.draining ? { connection: "close" } : {};
    response.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text), ...connection, ...headers });
    response.end(text);
  }

  /** What Node would answer to a request it cannot parse, with a JSON body like every other error. */
  clientError(error: NodeJS.ErrnoException, socket: Duplex): void {
    if (error.code === "ECONNRESET" || !socket.writable) return void socket.destroy();
    const [status, reason, message] =
      error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? [408, "Request Timeout", "the request did not arrive in time: send it again, faster"]
      : error.code === "HPE_HEADER_OVERFLOW" ? [431, "Request Header Fields Too Large", "the request headers are too large: send fewer or shorter headers"]
      : [400, "Bad Request", `the request is not valid HTTP/1.1 (${error.code ?? error.message}): send a well-formed request`];
    const text = JSON.stringify({ error: message });
    this.requests.inc({ code: String(status) });
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`);
  }

  /**
   * Stops taking requests, waits for those in flight (at most `timeoutMs`; then their connections are closed
   * unanswered), and closes the server.
   */
  async drain(server: Server, timeoutMs = DEFAULT_CLOSE_TIMEOUT_MS): Promise<void> {
    this.draining = true;
    // server.close() stops listening and closes the idle keep-alive connections at once; a connection that
    // becomes idle later (its last answer sent) is closed as soon as no request is in flight.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    this.onIdle = () => server.closeIdleConnections();
    const deadline = setTimeout(() => {
      if (this.inFlight > 0) this.log(`lakeswap ingest: ${this.inFlight} request(s) still in flight after ${timeoutMs} ms; closing their connections unanswered`);
      server.closeAllConnections();
    }, timeoutMs);
    try {
      await closed;
    } finally {
      clearTimeout(deadline);
    }
  }
}

async function onlyGet(method: string, answer: () => void | Promise<void>): Promise<void> {
  if (method !== "GET" && method !== "HEAD") throw new HttpError(405, `${method} is not allowed here: use GET`, { allow: "GET, HEAD" });
  await answer();
}

/** The pipeline and namespace of an event POST, or the 404/405 that path and method deserve. */
function ingestTarget(method: string, path: string): [string, string] {
  const segments = path.split("/");
  if (segments.length !== 4 || segments[0] !== "" || segments[1] !== "v1") {
    throw new HttpError(404, `no such route: ${method} ${quoted(path)}; post events to /v1/<pipeline>/<namespace>, or GET /healthz or /metrics`);
  }
  const pipeline = segments[2]!;
  const namespace = segments[3]!;
  for (const [what, name] of [["pipeline", pipeline], ["namespace", namespace]] as const) {
    if (!NAME.test(name)) {
      throw new HttpError(404, `${what} '${quoted(name)}' in ${quoted(path)} is not a valid name: ${NAME_RULE}; use a ${what} declared under pipelines: in the config`);
    }
  }
  if (method !== "POST") throw new HttpError(405, `${method} is not allowed on ${quoted(path)}: send events with ${INGEST_ROUTE}`, { allow: "POST" });
  return [pipeline, namespace];
}

function listenError(error: NodeJS.ErrnoException, port: number, host: string): Error {
  const where = `${host === "0.0.0.0" || host === "::" ? "every interface" : host}, port ${port}`;
  if (error.code === "EADDRINUSE") return new InvalidInputError(`cannot listen on ${where}: the port is already in use by another process; choose another port or stop that process`);
  if (error.code === "EACCES") return new InvalidInputError(`cannot listen on ${where}: permission denied (ports below 1024 need privileges); choose a port of 1024 or more`);
  if (error.code === "EADDRNOTAVAIL") return new InvalidInputError(`cannot listen on ${where}: no interface of this machine has that address; choose one of its addresses, or 0.0.0.0`);
  return error;
}

/** A host to put in a URL that reaches the server from this machine. */
function urlHost(host: string | undefined): string {
  if (host === undefined || host === "" || host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
