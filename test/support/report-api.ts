/**
 * A GA4-style report API for tests: a node:http server with in-memory rows per
 * day, served in pages two ways, with faults a test can inject. Test code only.
 *
 * - `GET /report?date=YYYY-MM-DD[&cursor=C]` -> `{"rowCount", "rows": [...], "next_cursor": "C"}`;
 *   `next_cursor` is absent on the last page and `rows` when the day has none (as GA4 does).
 * - `GET /v2/report?date=...[&page=N]` -> `{"data": {"items": [...]}, "next": "/v2/report?date=...&page=N+1"}`;
 *   `next` is null on the last page.
 * - `GET /looping/report?date=...` -> the first page with `next_cursor` always "again" (a server that pages in a loop).
 * - `GET /html/report?date=...` -> 200 with an HTML login page (not JSON).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

/** One request the API saw. */
interface ApiRequest {
  /** The request target, query included. */
  readonly path: string;
  readonly date: string | undefined;
  readonly status: number;
  /** Date.now() when the request arrived. */
  readonly at: number;
}

export interface ReportApi {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  setDay(date: string, rows: readonly object[]): void;
  /** The day has no rows from now on. */
  clearDay(date: string): void;
  days(): string[];
  /** The next `n` requests answer 429 with `Retry-After: retryAfterSeconds`. */
  throttleNext(n: number, retryAfterSeconds?: number): void;
  /** The next `n` requests answer `status` (default 500). */
  failNext(n: number, status?: number): void;
  /** Every request for `date` answers `status` until it is set back to undefined. */
  failDay(date: string, status: number | undefined): void;
  /** Each response waits this long before it is sent (default 0). */
  delayMs: number;
  readonly requests: readonly ApiRequest[];
  close(): Promise<void>;
}

/** Starts the API on a free port; with `token`, requests must send `Authorization: Bearer <token>` or get 401. */
export async function startReportApi(options: { pageSize?: number; token?: string } = {}): Promise<ReportApi> {
  const pageSize = options.pageSize ?? 3;
  const rowsByDay = new Map<string, readonly object[]>();
  const failingDays = new Map<string, number>();
  const requests: ApiRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let throttled = { left: 0, retryAfterSeconds: 1 };
  let failing = { left: 0, status: 500 };

  const server = http.createServer((request, response) => {
    const target = new URL(request.url ?? "/", "http://localhost");
    const date = target.searchParams.get("date") ?? undefined;
    const answer = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      requests.push({ path: request.url ?? "/", date, status, at: Date.now() });
      const html = typeof body === "string";
      const send = () => {
        if (response.destroyed) return;
        response.writeHead(status, { "content-type": html ? "text/html; charset=utf-8" : "application/json; charset=utf-8", ...headers });
        response.end(html ? body : JSON.stringify(body));
      };
      if (api.delayMs <= 0) return send();
      const timer = setTimeout(() => {
        timers.delete(timer);
        send();
      }, api.delayMs);
      timers.add(timer);
    };
    const error = (status: number, message: string) => ({ error: { code: status, message, status: http.STATUS_CODES[status] ?? "ERROR" } });

    if (throttled.left > 0) {
      throttled.left -= 1;
      return answer(429, error(429, "Exhausted concurrent requests quota."), { "retry-after": String(throttled.retryAfterSeconds) });
    }
    if (failing.left > 0) {
      failing.left -= 1;
      return answer(failing.status, error(failing.status, "The service is currently unavailable."));
    }
    if (options.token !== undefined && request.headers.authorization !== `Bearer ${options.token}`) {
      return answer(401, error(401, "Request had invalid authentication credentials."));
    }
    const routes = ["/report", "/v2/report", "/looping/report", "/html/report"];
    if (request.method !== "GET" || !routes.includes(target.pathname)) return answer(404, error(404, `no route ${request.method} ${target.pathname}`));
    if (!date) return answer(400, error(400, "query parameter date is required"));
    const dayStatus = failingDays.get(date);
    if (dayStatus !== undefined) return answer(dayStatus, error(dayStatus, `report for ${date} failed`));
    const rows = rowsByDay.get(date) ?? [];

    if (target.pathname === "/html/report") return answer(200, "<html><body><h1>Sign in</h1></body></html>");
    if (target.pathname === "/v2/report") {
      const page = Number(target.searchParams.get("page") ?? "1");
      if (!Number.isInteger(page) || page < 1) return answer(400, error(400, `bad page '${target.searchParams.get("page")}'`));
      const more = page * pageSize < rows.length;
      const next = more ? `/v2/report?date=${encodeURIComponent(date)}&page=${page + 1}` : null;
      return answer(200, { data: { items: rows.slice((page - 1) * pageSize, page * pageSize) }, next });
    }
    const cursor = target.searchParams.get("cursor");
    const offset = cursor === null || target.pathname === "/looping/report" ? 0 : decodeCursor(cursor, date);
    if (offset === undefined) return answer(400, error(400, `bad cursor '${cursor}'`));
    const page = rows.slice(offset, offset + pageSize);
    const body: Record<string, unknown> = { rowCount: rows.length };
    if (page.length > 0) body.rows = page;
    if (target.pathname === "/looping/report") body.next_cursor = "again";
    else if (offset + pageSize < rows.length) body.next_cursor = Buffer.from(`${date}:${offset + pageSize}`).toString("base64url");
    return answer(200, body);
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const api: ReportApi = {
    url: `http://127.0.0.1:${port}`,
    delayMs: 0,
    requests,
    setDay: (date, rows) => void rowsByDay.set(date, [...rows]),
    clearDay: (date) => void rowsByDay.delete(date),
    days: () => [...rowsByDay.keys()].sort(),
    throttleNext: (n, retryAfterSeconds = 1) => void (throttled = { left: n, retryAfterSeconds }),
    failNext: (n, status = 500) => void (failing = { left: n, status }),
    failDay: (date, status) => void (status === undefined ? failingDays.delete(date) : failingDays.set(date, status)),
    close: async () => {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
  return api;
}

/** The row offset an opaque cursor stands for; undefined when it was not made for `date`. */
function decodeCursor(cursor: string, date: string): number | undefined {
  const [day, offset] = Buffer.from(cursor, "base64url").toString().split(":");
  return day === date && offset !== undefined && /^\d+$/.test(offset) ? Number(offset) : undefined;
}
