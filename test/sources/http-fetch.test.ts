import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { InvalidInputError, LakeswapError } from "../../src/model/errors.js";
import { HttpFetcher, type HttpFetcherOptions, type HttpSourceSpec } from "../../src/sources/http/http-fetcher.js";
import { startReportApi, type ReportApi } from "../support/report-api.js";

const DAY = "2026-11-30";
const TOKEN = "s3cr3t-token-value";
const noWait = { sleep: async () => {}, random: () => 0.5 } satisfies HttpFetcherOptions;

/** GA4-shaped rows: dimension and metric values in arrays. */
function ga4Rows(count: number): object[] {
  return Array.from({ length: count }, (_, i) => ({
    dimensionValues: [{ value: `country-${i}` }],
    metricValues: [{ value: String(i * 10) }],
    id: i,
  }));
}

let api: ReportApi;
let dir: string;
let fileCount = 0;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "lakeswap-http-fetch-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  api = await startReportApi();
});
afterEach(async () => {
  await api.close();
});

function spec(overrides: Partial<HttpSourceSpec> = {}): HttpSourceSpec {
  return {
    url: `${api.url}/report?date={{ date }}`,
    headers: {},
    rows: "$.rows",
    fields: {},
    pagination: { kind: "cursor", path: "next_cursor", param: "cursor" },
    timeoutMs: 2000,
    maxAttempts: 3,
    maxPages: 100,
    ...overrides,
  };
}

function outFile(): string {
  fileCount += 1;
  return path.join(dir, `part-${fileCount}.ndjson`);
}

async function lines(file: string): Promise<any[]> {
  const text = await readFile(file, "utf8");
  return text.split("\n").filter(Boolean).map((line) => JSON.parse(line));
}

async function failure(promise: Promise<unknown>): Promise<LakeswapError> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(LakeswapError);
  return error as LakeswapError;
}

describe("HttpFetcher pagination", () => {
  it("follows cursors to the last page, rows in order, sending the cursor back as the query parameter", async () => {
    api.setDay(DAY, ga4Rows(7));
    const file = outFile();
    const result = await new HttpFetcher(spec()).fetchPartition({ date: DAY }, ["id"], file);
    expect(result).toEqual({ rows: 7, pages: 3, requests: 3, url: `${api.url}/report?date=${DAY}` });
    expect(await lines(file)).toEqual([0, 1, 2, 3, 4, 5, 6].map((id) => ({ id })));
    const cursors = api.requests.map((r) => new URL(r.path, api.url).searchParams.get("cursor"));
    expect(cursors[0]).toBeNull();
    expect(cursors.slice(1).every((c) => typeof c === "string" && c.length > 0)).toBe(true);
    expect(new Set(cursors).size).toBe(3);
  });

  it("follows relative next-page links to the last page", async () => {
    api.setDay(DAY, ga4Rows(8));
    const file = outFile();
    const result = await new HttpFetcher(spec({ url: `${api.url}/v2/report?date={{date}}`, rows: "data.items", pagination: { kind: "next_url", path: "$.next" } }))
      .fetchPartition({ date: DAY }, ["id"], file);
    expect(result).toMatchObject({ rows: 8, pages: 3, requests: 3 });
    expect((await lines(file)).map((row) => row.id)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(api.requests.map((r) => r.path)).toEqual([`/v2/report?date=${DAY}`, `/v2/report?date=${DAY}&page=2`, `/v2/report?date=${DAY}&page=3`]);
  });

  it("reads a page without `rows` (a day with no data, as GA4 answers it) as no rows", async () => {
    const file = outFile();
    const result = await new HttpFetcher(spec()).fetchPartition({ date: "2026-01-01" }, ["id"], file);
    expect(result).toMatchObject({ rows: 0, pages: 1, requests: 1 });
    expect(await readFile(file, "utf8")).toBe("");
  });

  it("stops a server that sends the same cursor again, and one that pages past maxPages", async () => {
    api.setDay(DAY, ga4Rows(7));
    const looping = await failure(new HttpFetcher(spec({ url: `${api.url}/looping/report?date={{ date }}` })).fetchPartition({ date: DAY }, ["id"], outFile()));
    expect(looping.message).toMatch(/page 2 of .*looping\/report.* gave cursor 'again' again.*loop/);
    expect(api.requests).toHaveLength(2);

    const file = outFile();
    const endless = await failure(new HttpFetcher(spec({ maxPages: 2 })).fetchPartition({ date: DAY }, ["id"], file));
    expect(endless.message).toContain("max_pages 2");
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
  });
});

describe("HttpFetcher rows and fields", () => {
  it("maps columns by path, by name, and to null when missing, keeping nested values as JSON", async () => {
    api.setDay(DAY, [
      { dimensionValues: [{ value: "NL" }], metricValues: [{ value: "42" }], extra: { a: [1, 2] } },
      { dimensionValues: [], metricValues: [{ value: "7" }] },
    ]);
    const fetcher = new HttpFetcher(spec({ fields: { country: "dimensionValues[0].value", sessions: "$.metricValues[0].value" } }));
    const file = outFile();
    await fetcher.fetchPartition({ date: DAY }, ["country", "sessions", "extra", "missing"], file);
    expect(await lines(file)).toEqual([
      { country: "NL", sessions: "42", extra: { a: [1, 2] }, missing: null },
      { country: null, sessions: "7", extra: null, missing: null },
    ]);
  });

  it("refuses a row that is not an object, naming its page and index", async () => {
    api.setDay(DAY, [{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }, [5]]);
    const error = await failure(new HttpFetcher(spec()).fetchPartition({ date: DAY }, ["id"], outFile()));
    expect(error).toBeInstanceOf(InvalidInputError);
    expect(error.message).toMatch(/^row 1 of page 2 of .*: column id .*the row is an array, not an object/);
  });

  it("refuses a rows path that holds something other than an array", async () => {
    api.setDay(DAY, ga4Rows(4));
    const error = await failure(new HttpFetcher(spec({ rows: "next_cursor" })).fetchPartition({ date: DAY }, ["id"], outFile()));
    expect(error.message).toMatch(/page 1 of .*rows path 'next_cursor' holds a string/);
  });

  it("names the URL and content type of a body that is not JSON", async () => {
    const error = await failure(new HttpFetcher(spec({ url: `${api.url}/html/report?date={{ date }}` })).fetchPartition({ date: DAY }, ["id"], outFile()));
    expect(error.message).toContain(`GET ${api.url}/html/report?date=${DAY} answered HTTP 200 with content-type 'text/html; charset=utf-8', not JSON`);
    expect(error.message).toContain("<h1>Sign in</h1>");
  });
});

describe("HttpFetcher retries", () => {
  it("honours Retry-After on 429", async () => {
    api.setDay(DAY, ga4Rows(2));
    api.throttleNext(2, 3);
    const slept: number[] = [];
    const retries: (number | undefined)[] = [];
    const fetcher = new HttpFetcher(spec(), { sleep: async (ms) => void slept.push(ms), onRetry: (info) => retries.push(info.status) });
    const result = await fetcher.fetchPartition({ date: DAY }, ["id"], outFile());
    expect(result).toMatchObject({ rows: 2, pages: 1, requests: 3 });
    expect(slept).toEqual([3000, 3000]);
    expect(retries).toEqual([429, 429]);
  });

  it("retries 5xx with jittered exponential backoff, then succeeds", async () => {
    api.setDay(DAY, ga4Rows(2));
    api.failNext(2, 503);
    const slept: number[] = [];
    const fetcher = new HttpFetcher(spec(), { sleep: async (ms) => void slept.push(ms), random: () => 0.5, baseDelayMs: 100 });
    const result = await fetcher.fetchPartition({ date: DAY }, ["id"], outFile());
    expect(result).toMatchObject({ rows: 2, requests: 3 });
    expect(slept).toEqual([50, 100]);
    expect(api.requests.map((r) => r.status)).toEqual([503, 503, 200]);
  });

  it("fails a persistent 500 after maxAttempts, naming URL, status and attempts, never the token", async () => {
    api.failDay(DAY, 500);
    const fetcher = new HttpFetcher(
      spec({ url: `${api.url}/report?date={{ date }}&key=\${API_KEY}`, headers: { Authorization: "Bearer ${API_TOKEN}" } }),
      { ...noWait, env: { API_TOKEN: TOKEN, API_KEY: "key-abc-123" } },
    );
    const error = await failure(fetcher.fetchPartition({ date: DAY }, ["id"], outFile()));
    expect(error.code).toBe("STORE_ERROR");
    expect(error.retryable).toBe(true);
    expect(error.message).toContain(`GET ${api.url}/report?date=${DAY}&key=\${API_KEY} still failed after 3 attempts: HTTP 500`);
    expect(error.message).toContain(`report for ${DAY} failed`);
    expect(error.message).not.toContain(TOKEN);
    expect(error.message).not.toContain("key-abc-123");
    expect(api.requests).toHaveLength(3);
    expect(new URL(api.requests[0]!.path, api.url).searchParams.get("key")).toBe("key-abc-123");
  });

  it("does not retry 401 or 404", async () => {
    await api.close();
    api = await startReportApi({ token: TOKEN });
    api.setDay(DAY, ga4Rows(2));
    const auth = { headers: { Authorization: "Bearer ${API_TOKEN}" } };
    const denied = await failure(new HttpFetcher(spec(auth), { ...noWait, env: { API_TOKEN: "wrong-token" } }).fetchPartition({ date: DAY }, ["id"], outFile()));
    expect(denied.code).toBe("ACCESS_DENIED");
    expect(denied.message).toMatch(/HTTP 401 .*after 1 attempt .*API_TOKEN/);
    expect(denied.message).not.toContain("wrong-token");
    expect(api.requests).toHaveLength(1);

    // The 404 body echoes the path, secret included: the message shows it as ${API_KEY}.
    const env = { API_TOKEN: TOKEN, API_KEY: "key-abc-123" };
    const missing = await failure(new HttpFetcher(spec({ ...auth, url: `${api.url}/nowhere/\${API_KEY}?date={{ date }}` }), { ...noWait, env }).fetchPartition({ date: DAY }, ["id"], outFile()));
    expect(missing.code).toBe("STORE_ERROR");
    expect(missing.message).toMatch(/GET .*\/nowhere\/\$\{API_KEY\}\?date=2026-11-30 failed: HTTP 404 .*no route GET \/nowhere\/\$\{API_KEY\}.*after 1 attempt/);
    expect(missing.message).not.toContain("key-abc-123");
    expect(api.requests).toHaveLength(2);
  });

  it("retries a request that times out, then fails saying so", async () => {
    api.setDay(DAY, ga4Rows(2));
    api.delayMs = 400;
    const error = await failure(new HttpFetcher(spec({ timeoutMs: 100, maxAttempts: 2 }), noWait).fetchPartition({ date: DAY }, ["id"], outFile()));
    expect(error.message).toMatch(/still failed after 2 attempts: timed out after 100 ms/);
    expect(api.requests).toHaveLength(2);
  });
});

describe("HttpFetcher rate limit", () => {
  it("spaces requests of concurrent partitions 1/rps apart", async () => {
    const days = Array.from({ length: 10 }, (_, i) => `2026-11-${String(i + 1).padStart(2, "0")}`);
    for (const day of days) api.setDay(day, ga4Rows(1));
    const fetcher = new HttpFetcher(spec({ requestsPerSecond: 20 }));
    const started = performance.now();
    const results = await Promise.all(days.map((day) => fetcher.fetchPartition({ date: day }, ["id"], outFile())));
    expect(performance.now() - started).toBeGreaterThanOrEqual(440);
    expect(results.every((r) => r.rows === 1)).toBe(true);
    const arrivals = api.requests.map((r) => r.at).sort((a, b) => a - b);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThanOrEqual(400);
  });
});

describe("HttpFetcher secrets and checks", () => {
  it("fills ${VAR} in headers from env", async () => {
    await api.close();
    api = await startReportApi({ token: TOKEN });
    api.setDay(DAY, ga4Rows(4));
    const fetcher = new HttpFetcher(spec({ headers: { Authorization: "Bearer ${API_TOKEN}" } }), { env: { API_TOKEN: TOKEN } });
    expect(await fetcher.fetchPartition({ date: DAY }, ["id"], outFile())).toMatchObject({ rows: 4, pages: 2 });
  });

  it("check() refuses an unset variable, a placeholder that is not a key, and a scheme other than http(s)", () => {
    const s = spec({ url: "https://api.example.com/{{ day }}/report?key=${API_KEY}", headers: { Authorization: "Bearer ${API_TOKEN}" } });
    const env = { API_KEY: "present-key-value" };
    expect(() => HttpFetcher.check(s, ["date"], env)).toThrow(InvalidInputError);
    const message = (() => {
      try {
        HttpFetcher.check(s, ["date"], env);
        return "";
      } catch (error) {
        return (error as Error).message;
      }
    })();
    expect(message).toContain("url placeholder {{ day }} is not a partition key (keys: date)");
    expect(message).toContain("environment variable API_TOKEN (used in the header Authorization) is not set");
    expect(message).not.toContain("present-key-value");
    expect(() => HttpFetcher.check(spec({ url: "ftp://example.com/{{ date }}" }), ["date"], {})).toThrow(/must start with http:\/\/ or https:\/\//);
    expect(() => HttpFetcher.check(spec(), ["date"], {})).not.toThrow();
  });

  it("fetchPartition refuses to start when a variable is unset", async () => {
    const fetcher = new HttpFetcher(spec({ headers: { Authorization: "Bearer ${API_TOKEN}" } }), { env: {} });
    await expect(fetcher.fetchPartition({ date: DAY }, ["id"], outFile())).rejects.toThrow(/API_TOKEN .*is not set/);
    expect(api.requests).toHaveLength(0);
  });
});

describe("HttpFetcher numbers", () => {
  /** A server answering each request with the page its cursor names (`pages[cursor ?? ""]`), as raw text. */
  async function rawApi(pages: Record<string, string>): Promise<{ url: string; cursors: (string | null)[]; close: () => Promise<void> }> {
    const { createServer } = await import("node:http");
    const cursors: (string | null)[] = [];
    const server = createServer((req, res) => {
      const cursor = new URL(req.url ?? "/", "http://x").searchParams.get("cursor");
      cursors.push(cursor);
      res.writeHead(200, { "content-type": "application/json" }).end(pages[cursor ?? ""] ?? "{}");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    return { url: `http://127.0.0.1:${port}`, cursors, close: () => new Promise((resolve) => server.close(() => resolve())) };
  }

  it("keeps every digit the API wrote: 64-bit ids, long decimals, -0.0, a number past a double's range, and a numeric cursor", async () => {
    const raw = await rawApi({
      "": `{"rows": [{"id": 1234567890123456789, "amount": 12345678901234567.89, "zero": -0.0, "huge": 1e400, "cents": 1.10}], "next_cursor": 9007199254740993}`,
      "9007199254740993": `{"rows": [{"id": 1234567890123456788, "amount": 0.1}]}`,
    });
    try {
      const file = outFile();
      const result = await new HttpFetcher(spec({ url: `${raw.url}/report?date={{ date }}` })).fetchPartition({ date: DAY }, ["id", "amount", "zero", "huge", "cents"], file);
      expect(result).toMatchObject({ rows: 2, pages: 2 });
      // 2^53 + 1 as a double is 2^53: the cursor sent back is the one the API gave.
      expect(raw.cursors).toEqual([null, "9007199254740993"]);
      expect((await readFile(file, "utf8")).trimEnd().split("\n")).toEqual([
        `{"id":1234567890123456789,"amount":12345678901234567.89,"zero":-0.0,"huge":1e400,"cents":1.10}`,
        `{"id":1234567890123456788,"amount":0.1,"zero":null,"huge":null,"cents":null}`,
      ]);
    } finally {
      await raw.close();
    }
  });

  it("refuses a page that gives a key twice with different values, which JSON readers resolve differently", async () => {
    const raw = await rawApi({ "": `{"rows": [{"id": 1, "id": 2}]}` });
    try {
      const error = await failure(new HttpFetcher(spec({ url: `${raw.url}/report?date={{ date }}` })).fetchPartition({ date: DAY }, ["id"], outFile()));
      expect(error.message).toMatch(/answered JSON that is ambiguous \(Duplicate key 'id'.*\): an object gives a key twice with different values/);
    } finally {
      await raw.close();
    }
  });
});
