import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex, Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { InvalidInputError, LakeswapError, errorMessage } from "../model/errors.js";
import { Metrics } from "./metrics.js";
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_BYTES_IN_FLIGHT, DEFAULT_MAX_CONNECTIONS } from "./server-limits.js";


/** The interface the collector listens on by default: this machine only. */
const DEFAULT_HOST = "127.0.0.1";

/** How a request body splits into events: one JSON value per line, or one JSON array. */
type IngestFormat = "ndjson" | "json";

/** One POST of events, as the server hands it to the ingest service. */
export interface IngestRequest {
  readonly pipeline: string;
  readonly namespace: string;
  /** The body as received (gunzipped when it came gzip-compressed): one buffer, or the chunks it arrived in, in order. */
  readonly body: Buffer | readonly Buffer[];
  readonly format: IngestFormat;
}

/** What the server calls; the ingest service implements it. */
export interface IngestHandler {
  /**
   * Appends a request's events to the write-ahead log; resolves only once they are durable. Throws
   * BackpressureError when the log is full, UnavailableError when it cannot take events at all (it stopped after a
   * disk error), NotFoundError for an unknown pipeline/namespace, InvalidInputError for a body that cannot be split
   * into events.
   */
  accept(request: IngestRequest): Promise<{ readonly accepted: number }>;
  /** Liveness/readiness detail for GET /healthz. */
  health(): { readonly ok: boolean; readonly detail: Record<string, unknown> };
}

/** The collector cannot take events now: the client should retry after `retryAfterSeconds`, here or elsewhere (HTTP 503). */
export class UnavailableError extends LakeswapError {
  constructor(
    code: LakeswapError["code"],
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(code, message, { retryable: true });
    this.name = "UnavailableError";
  }
}

/** The write-ahead log is over its size limit: the client should retry after `retryAfterSeconds` (HTTP 503). */
export class BackpressureError extends UnavailableError {
  constructor(message: string, retryAfterSeconds: number) {
    super("NO_SPACE", message, retryAfterSeconds);
    this.name = "BackpressureError";
  }
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

/**
 * Who may post: each pipeline's bearer token (`Authorization: Bearer <token>`), compared in constant time. A post to
 * a pipeline with a token, to one the server does not know, and GET /metrics need a token (its own, or for the last
 * two any of them); GET /healthz answers its status to anyone and its detail only with a token.
 */
export interface IngestAuth {
  /** The token a post to `pipeline` must carry; undefined: the pipeline is known and takes posts without one; null: unknown. */
  tokenFor(pipeline: string): string | undefined | null;
  /** Every token: a request that needs any one of them takes any. */
  readonly tokens: readonly string[];
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


/** The Retry-After of a request refused because the bodies held are at their limit: they are held until an fsync, milliseconds. */
const BUSY_RETRY_AFTER_SECONDS = 1;

/** How long `close()` waits for requests in flight by default. */
const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;

/** The Retry-After a request gets while the server drains: long enough for a restart or a peer to take over. */
const DRAINING_RETRY_AFTER_SECONDS = 5;

const NAME = /^[a-z][a-z0-9_]{0,127}$/;
const NAME_RULE = "names are lowercase identifiers: a letter, then letters, digits or '_', at most 128 characters";
const INGEST_ROUTE = "POST /v1/<pipeline>/<namespace>";
const NDJSON_TYPES = new Set(["application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/jsonlines", "text/plain"]);
const UTF8_CHARSETS = new Set(["utf-8", "utf8", "us-ascii"]);

/** An answer other than 200, with the JSON error message and headers it goes out with. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: OutgoingHttpHeaders = {},
  ) {
    super(message);
  }
}

/**
 * Starts the collector's HTTP face: `POST /v1/<pipeline>/<namespace>` (NDJSON or a JSON array, gzip or not),
 * answered 200 only once `handler.accept` says the events are durable; `GET /healthz`; `GET /metrics`.
 */
export async function startIngestServer(options: IngestServerOptions): Promise<IngestServer> {
  const { handler, metrics } = options;
  const host = options.host ?? DEFAULT_HOST;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const maxBytesInFlight = options.maxBytesInFlight ?? Math.max(DEFAULT_MAX_BYTES_IN_FLIGHT, maxBodyBytes);
  if (maxBytesInFlight < maxBodyBytes) {
    throw new InvalidInputError(`the bytes in flight limit (${formatBytes(maxBytesInFlight)}) is below the largest body (${formatBytes(maxBodyBytes)}): no such body could ever be taken; raise it`);
  }
  /** Body bytes held now, by every request being read or waiting for its answer. */
  let bytesHeld = 0;
  /** The digests of every token (undefined: no authentication), compared with a request's in constant time. */
  const tokens = options.auth && options.auth.tokens.length > 0 ? options.auth.tokens.map(tokenDigest) : undefined;
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const requests = metrics.counter("lakeswap_ingest_http_requests_total", "HTTP requests answered by the collector, by status code ('aborted': the client left first).", ["code"]);
  const seconds = metrics.histogram("lakeswap_ingest_request_seconds", "Time from a request's arrival to its answer, for all but /healthz and /metrics (an event POST is answered 200 once its events are durable), seconds.");
  const inFlightGauge = metrics.gauge("lakeswap_ingest_http_requests_in_flight", "HTTP requests the collector is reading or answering.", [], () => inFlightGauge.set(inFlight));
  const bytesGauge = metrics.gauge("lakeswap_ingest_http_body_bytes_in_flight", "Body bytes the collector holds, of requests being read or waiting for their events to be durable.", [], () =>
    bytesGauge.set(bytesHeld),
  );

  let inFlight = 0;
  let draining = false;
  let onIdle: (() => void) | undefined;

  async function handle(request: IncomingMessage, response: ServerResponse, expectsContinue: boolean): Promise<void> {
    const started = process.hrtime.bigint();
    inFlight++;
    const method = request.method ?? "GET";
    const path = (request.url ?? "/").split("?", 1)[0]!;
    // Scrapes and health checks would drown the time of event posts.
    const timed = path !== "/healthz" && path !== "/metrics";
    // This request's share of `bytesHeld`, given back once it is answered (the log has its events, or it failed).
    let held = 0;
    const hold = (bytes: number): boolean => {
      if (bytes <= held) return true;
      if (bytesHeld + bytes - held > maxBytesInFlight) return false;
      bytesHeld += bytes - held;
      held = bytes;
      return true;
    };
    response.once("close", () => {
      bytesHeld -= held;
      held = 0;
      inFlight--;
      requests.inc({ code: response.writableFinished ? String(response.statusCode) : "aborted" });
      if (timed && response.writableFinished) seconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
      if (inFlight === 0) onIdle?.();
    });
    try {
      if (draining) {
        throw new HttpError(503, `the collector is shutting down and takes no new requests: retry in ${DRAINING_RETRY_AFTER_SECONDS} s (against another collector if there is one)`, {
          "retry-after": String(DRAINING_RETRY_AFTER_SECONDS),
        });
      }
      const authorization = request.headers.authorization;
      if (path === "/healthz") return await onlyGet(method, () => answerHealth(response, authorizedFor(undefined, authorization)));
      if (path === "/metrics") {
        // Awaited here, so that a render that fails is answered by the catch below.
        return await onlyGet(method, () => {
          requireToken(undefined, authorization);
          return answerMetrics(response);
        });
      }
      const [pipeline, namespace] = ingestTarget(method, path);
      // Before a byte of the body is read (and before 100-continue): a client without the token sends nothing more.
      requireToken(pipeline, authorization);
      const format = formatOf(request.headers["content-type"]);
      const gzip = isGzip(request.headers["content-encoding"]);
      const declaredLength = Number(request.headers["content-length"] ?? 0);
      if (!gzip && declaredLength > maxBodyBytes) throw tooLarge(maxBodyBytes, false);
      // The declared body is counted before a byte of it is read, so that concurrent posts cannot all pass the limit.
      if (!hold(gzip ? 0 : declaredLength)) throw busy(bytesHeld, maxBytesInFlight);
      if (expectsContinue) response.writeContinue();
      const body = await readBody(request, maxBodyBytes, gzip, (size) => hold(size) || busy(bytesHeld, maxBytesInFlight));
      // The chunks as they arrived: the log writes them as they are, never copied into one buffer.
      const { accepted } = await handler.accept({ pipeline, namespace, body, format: format ?? sniffFormat(body) });
      sendJson(response, 200, { accepted });
    } catch (error) {
      answerError(response, error, method, path);
    }
  }

  async function onlyGet(method: string, answer: () => void | Promise<void>): Promise<void> {
    if (method !== "GET" && method !== "HEAD") throw new HttpError(405, `${method} is not allowed here: use GET`, { allow: "GET, HEAD" });
    await answer();
  }

  /** Whether a request may go on: no token needed (no auth, or a pipeline without one), or it carries a right one. */
  function authorizedFor(pipeline: string | undefined, authorization: string | undefined): boolean {
    if (!tokens) return true;
    const own = pipeline === undefined ? null : options.auth!.tokenFor(pipeline);
    if (own === undefined) return true;
    return bearerMatches(authorization, own === null ? tokens : [tokenDigest(own)]);
  }

  function requireToken(pipeline: string | undefined, authorization: string | undefined): void {
    if (authorizedFor(pipeline, authorization)) return;
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

  function answerHealth(response: ServerResponse, detailed: boolean): void {
    let health: ReturnType<IngestHandler["health"]>;
    try {
      health = handler.health();
    } catch (error) {
      log(`lakeswap ingest: the health check failed: ${describe(error)}`);
      health = { ok: false, detail: { error: errorMessage(error) } };
    }
    // Its status for a load balancer's probe, which carries no token; what the collector holds and where, only with one.
    sendJson(response, health.ok ? 200 : 503, detailed ? health : { ok: health.ok });
  }

  async function answerMetrics(response: ServerResponse): Promise<void> {
    const text = await metrics.render();
    response.writeHead(200, { "content-type": Metrics.contentType, "content-length": Buffer.byteLength(text) });
    response.end(text);
  }

  function answerError(response: ServerResponse, error: unknown, method: string, path: string): void {
    if (response.headersSent || response.destroyed) {
      if (!response.destroyed) response.destroy();
      return;
    }
    if (error instanceof HttpError) return sendJson(response, error.status, { error: error.message }, error.headers);
    if (error instanceof UnavailableError) {
      const retryAfter = Math.max(1, Math.ceil(error.retryAfterSeconds));
      return sendJson(response, 503, { error: `${error.message} (Retry-After: ${retryAfter} s)` }, { "retry-after": String(retryAfter) });
    }
    if (error instanceof LakeswapError && error.code === "NOT_FOUND") return sendJson(response, 404, { error: error.message });
    if (error instanceof LakeswapError && error.code === "INVALID_INPUT") return sendJson(response, 400, { error: error.message });
    log(`lakeswap ingest: ${method} ${path} failed: ${describe(error)}`);
    const unacknowledged = method === "POST" ? "; the events were not acknowledged" : "";
    sendJson(response, 500, { error: `the collector failed on ${method} ${path} (the cause is in its log)${unacknowledged}: retry the request` });
  }

  function sendJson(response: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
    const text = JSON.stringify(body);
    // While draining, every answer closes its connection, so that close() is not kept waiting by idle clients.
    const connection: OutgoingHttpHeaders = draining ? { connection: "close" } : {};
    response.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text), ...connection, ...headers });
    response.end(text);
  }

  // HTTP keep-alive is Node's default; keepAlive here also turns on TCP keep-alive, so dead peers are noticed.
  const server = createServer({ keepAlive: true }, (request, response) => void handle(request, response, false));
  server.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  // Answer a client that waits for 100-continue before it sends the body: a request that is refused anyway
  // (wrong route, too large, draining) is refused before the body travels.
  server.on("checkContinue", (request: IncomingMessage, response: ServerResponse) => void handle(request, response, true));
  // What Node would answer to a request it cannot parse, with a JSON body like every other error.
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === "ECONNRESET" || !socket.writable) return socket.destroy();
    const [status, reason, message] =
      error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? [408, "Request Timeout", "the request did not arrive in time: send it again, faster"]
      : error.code === "HPE_HEADER_OVERFLOW" ? [431, "Request Header Fields Too Large", "the request headers are too large: send fewer or shorter headers"]
      : [400, "Bad Request", `the request is not valid HTTP/1.1 (${error.code ?? error.message}): send a well-formed request`];
    const text = JSON.stringify({ error: message });
    requests.inc({ code: String(status) });
    socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`);
  });
  // Longer than the idle timeout of the usual load balancers (60 s), so that they never reuse a connection we just closed.
  server.keepAliveTimeout = 65_000;

  await new Promise<void>((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException): void => reject(listenError(error, options.port, host));
    server.once("error", failed);
    server.listen(options.port, host, () => {
      server.off("error", failed);
      resolve();
    });
  });
  server.on("error", (error) => log(`lakeswap ingest: server error: ${describe(error)}`));
  const address = server.address() as AddressInfo;
  const port = address.port;

  let closing: Promise<void> | undefined;
  async function close(timeoutMs = DEFAULT_CLOSE_TIMEOUT_MS): Promise<void> {
    draining = true;
    // server.close() stops listening and closes the idle keep-alive connections at once; a connection that
    // becomes idle later (its last answer sent) is closed as soon as no request is in flight.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    onIdle = () => server.closeIdleConnections();
    const deadline = setTimeout(() => {
      if (inFlight > 0) log(`lakeswap ingest: ${inFlight} request(s) still in flight after ${timeoutMs} ms; closing their connections unanswered`);
      server.closeAllConnections();
    }, timeoutMs);
    try {
      await closed;
    } finally {
      clearTimeout(deadline);
    }
  }

  return {
    url: `http://${urlHost(host)}:${port}`,
    port,
    close: (timeoutMs) => (closing ??= close(timeoutMs)),
  };
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

/** The format a Content-Type announces; undefined when there is none (the body's first byte decides). */
function formatOf(contentType: string | undefined): IngestFormat | undefined {
  if (contentType === undefined || contentType.trim() === "") return undefined;
  const [type = "", ...parameters] = contentType.split(";").map((part) => part.trim().toLowerCase());
  const charset = parameters.find((parameter) => parameter.startsWith("charset="))?.slice("charset=".length).replace(/"/g, "");
  if (charset !== undefined && !UTF8_CHARSETS.has(charset)) {
    throw new HttpError(415, `charset '${quoted(charset)}' is not supported: send the events as UTF-8`);
  }
  if (type === "application/json") return "json";
  if (NDJSON_TYPES.has(type)) return "ndjson";
  throw new HttpError(
    415,
    `Content-Type '${quoted(type)}' is not supported: send NDJSON (one event per line) with Content-Type application/x-ndjson, ` +
      `or a JSON array with application/json (curl: -H 'Content-Type: application/x-ndjson')`,
  );
}

/** JSON when the body's first byte after whitespace (and a byte order mark) is `[`, NDJSON otherwise. */
function sniffFormat(chunks: readonly Buffer[]): IngestFormat {
  // The bytes that decide may span chunks (a mark and white space before the first value): read across them.
  const head = Buffer.concat(chunks.slice(0, 3), Math.min(3, chunks.reduce((sum, chunk) => sum + chunk.length, 0)));
  let skip = head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0;
  for (const chunk of chunks) {
    for (let at = Math.min(skip, chunk.length); at < chunk.length; at++) {
      const byte = chunk[at];
      if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) return byte === 0x5b ? "json" : "ndjson";
    }
    skip -= Math.min(skip, chunk.length);
  }
  return "ndjson";
}

function isGzip(contentEncoding: string | undefined): boolean {
  const encoding = (contentEncoding ?? "").trim().toLowerCase();
  if (encoding === "" || encoding === "identity") return false;
  if (encoding === "gzip" || encoding === "x-gzip") return true;
  throw new HttpError(415, `Content-Encoding '${quoted(encoding)}' is not supported: send the body as it is, or gzip-compressed with Content-Encoding: gzip`);
}

function tooLarge(maxBodyBytes: number, gzip: boolean): HttpError {
  return new HttpError(
    413,
    `the request body is larger than the collector's limit of ${formatBytes(maxBodyBytes)}${gzip ? " once gunzipped" : ""}: split the events into smaller requests`,
    // The rest of the body is not read: the connection cannot carry another request.
    { connection: "close" },
  );
}

/** The 503 of a request refused because the bodies held are at the server's limit (`maxBytesInFlight`). */
function busy(held: number, limit: number): HttpError {
  return new HttpError(
    503,
    `the collector holds ${formatBytes(held)} of request bodies, at its limit of ${formatBytes(limit)} (--max-bytes-in-flight): retry in ${BUSY_RETRY_AFTER_SECONDS} s`,
    // The body is not read: the connection cannot carry another request.
    { "retry-after": String(BUSY_RETRY_AFTER_SECONDS), connection: "close" },
  );
}

/**
 * Reads a body up to `maxBodyBytes` (counted after gunzip), keeping the chunks as they arrived. Gives up with
 * 413 as soon as the limit is passed, without reading the rest; and with what `hold` returns when it refuses to
 * hold the bytes read so far (the server's bytes in flight).
 */
function readBody(request: IncomingMessage, maxBodyBytes: number, gzip: boolean, hold: (size: number) => true | HttpError): Promise<Buffer[]> {
  return new Promise<Buffer[]>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const gunzip = gzip ? createGunzip() : undefined;
    const source: Readable = gunzip ?? request;
    if (gunzip !== undefined) {
      request.on("error", (error) => gunzip.destroy(error));
      request.pipe(gunzip);
    }
    const stop = (error: Error): void => {
      source.off("data", onData);
      source.off("end", onEnd);
      if (gunzip !== undefined) {
        request.unpipe(gunzip);
        gunzip.destroy();
      }
      // Stop reading what the client still sends; the answer closes the connection.
      request.pause();
      reject(error);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBodyBytes) return stop(tooLarge(maxBodyBytes, gzip));
      const held = hold(size);
      if (held !== true) return stop(held);
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      request.off("close", onClose);
      resolve(chunks);
    };
    const onClose = (): void => {
      if (!request.complete) stop(new HttpError(400, "the client closed the connection before the whole body arrived; resend the request"));
    };
    source.on("data", onData);
    source.once("end", onEnd);
    source.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "ECONNRESET" || !gzip) return stop(new HttpError(400, `the request body could not be read (${error.message}); resend the request`));
      stop(new HttpError(400, `the body is not valid gzip (${error.message}): compress it with gzip, or leave out Content-Encoding: gzip for a plain body`));
    });
    request.once("close", onClose);
  });
}

/** The SHA-256 of a token: digests of equal length, so that comparing them takes the same time whatever the token. */
function tokenDigest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Whether an Authorization header carries a bearer token of `digests`, compared in constant time with every one. */
function bearerMatches(authorization: string | undefined, digests: readonly Buffer[]): boolean {
  const given = tokenDigest(/^Bearer +(\S+) *$/i.exec(authorization ?? "")?.[1] ?? "");
  let matched = false;
  for (const digest of digests) matched = timingSafeEqual(given, digest) || matched;
  return matched && authorization !== undefined;
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

/** A value from a client, cut short and without control characters, for a message. */
function quoted(value: string): string {
  const clean = value.replace(/\p{Cc}/gu, "?");
  return clean.length > 64 ? `${clean.slice(0, 64)}...` : clean;
}

function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
