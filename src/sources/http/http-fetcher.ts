/**
 * Fetches one partition of a partitioned JSON API (a GA4-style daily report)
 * page by page and writes its rows as NDJSON. Retries, timeouts and the
 * request rate live here once for every HTTP source; secrets come from the
 * environment and never appear in a message.
 */
import { open, rm } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { isLosslessNumber, parse, stringify } from "lossless-json";
import { errorMessage, InvalidInputError, LakeswapError } from "../../model/errors.js";
import { kindOf, lookUp, parsePath, pathText, type Step } from "../json-path.js";
import { ENV_PLACEHOLDER, KEY_PLACEHOLDER, specProblems, type HttpSourceSpec } from "../http-source-spec.js";

export type { HttpSourceSpec } from "../http-source-spec.js";

/** What fetching one partition did. */
export interface FetchedPartition {
  readonly rows: number;
  readonly pages: number;
  /** HTTP requests sent, retries included. */
  readonly requests: number;
  /** The first page's URL as shown: partition values filled in, `${VAR}` left as written. */
  readonly url: string;
}

/** How an HttpFetcher waits and retries (defaults: real timers, Math.random, 500 ms base delay, 30 s cap). */
export interface HttpFetcherOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly random?: () => number;
  readonly baseDelayMs?: number;
  /** The longest pause between attempts, Retry-After included. */
  readonly maxDelayMs?: number;
  readonly onRetry?: (info: { url: string; attempt: number; status?: number; delayMs: number; reason: string }) => void;
}


/** One page's address: `real` is sent, `shown` (secrets as `${VAR}`) goes into messages. */
interface PageUrl {
  readonly real: string;
  readonly shown: string;
}

/** One answered request, or why none came. */
type Attempt =
  | { readonly status: number; readonly contentType: string; readonly text: string; readonly retryAfterMs?: number }
  | { readonly failure: string; readonly retryAfterMs?: undefined };

/** Fetches partitions of one HTTP source; concurrent calls share its request rate. */
export class HttpFetcher {
  private readonly env: NodeJS.ProcessEnv;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly rowsPath: readonly Step[];
  private readonly fieldPaths: ReadonlyMap<string, readonly Step[]>;
  private readonly paginationPath: readonly Step[];
  private nextSlotAt = 0;

  constructor(private readonly spec: HttpSourceSpec, private readonly options: HttpFetcherOptions = {}) {
    const problems = specProblems(spec);
    if (problems.length > 0) throw new InvalidInputError(`HTTP source: ${problems.join("; ")}`);
    this.env = options.env ?? process.env;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
    this.baseDelayMs = options.baseDelayMs ?? 500;
    this.maxDelayMs = options.maxDelayMs ?? 30_000;
    this.rowsPath = parsePath(spec.rows);
    this.fieldPaths = new Map(Object.entries(spec.fields).map(([column, path]) => [column, parsePath(path)]));
    this.paginationPath = spec.pagination ? parsePath(spec.pagination.path) : [];
  }

  /** Checks the spec up front (URL scheme, placeholders all named in `keys`, every ${VAR} set in env) and throws InvalidInputError naming the problem and the fix. */
  static check(spec: HttpSourceSpec, keys: readonly string[], env: NodeJS.ProcessEnv = process.env): void {
    const problems = specProblems(spec);
    const unknown = [...spec.url.matchAll(KEY_PLACEHOLDER)].map((m) => m[1] ?? "").filter((key) => !keys.includes(key));
    for (const key of new Set(unknown)) {
      problems.push(`url placeholder {{ ${key} }} is not a partition key (keys: ${keys.join(", ") || "none"}): use one of those`);
    }
    const uses: [string, string][] = [...envNames(spec.url)].map((name) => [name, "url"]);
    for (const [header, value] of Object.entries(spec.headers)) {
      for (const name of envNames(value)) uses.push([name, `header ${header}`]);
    }
    for (const [name, where] of uses) {
      if (!env[name]) problems.push(`environment variable ${name} (used in the ${where}) is ${env[name] === undefined ? "not set" : "empty"}: set it before running`);
    }
    if (problems.length === 0) {
      for (const [header, value] of Object.entries(spec.headers)) {
        const sent = fillEnv(value, env);
        if (sent.includes("\r") || sent.includes("\n") || sent.includes("\0")) {
          problems.push(`header ${header} holds a line break once its variables are filled in: strip it from ${[...envNames(value)].join(", ") || "the value"}`);
        }
      }
      const probe = fillEnv(fillKeys(spec.url, Object.fromEntries(keys.map((key) => [key, "x"]))), env);
      if (!URL.canParse(probe)) problems.push(`url '${spec.url}' is not a valid URL once its placeholders are filled in: check it and the variables it uses`);
      else if (!["http:", "https:"].includes(new URL(probe).protocol)) problems.push(`url '${spec.url}' must start with http:// or https://`);
    }
    if (problems.length > 0) throw new InvalidInputError(`HTTP source: ${problems.join("; ")}`);
  }

  /**
   * Fetches every page of one partition (`values`: partition key -> value) and
   * writes one JSON object per line to `file` (created or overwritten; removed
   * again when the fetch fails), each holding exactly `columns`.
   */
  async fetchPartition(values: Readonly<Record<string, string>>, columns: readonly string[], file: string): Promise<FetchedPartition> {
    HttpFetcher.check(this.spec, Object.keys(values), this.env);
    const redact = secretRedactor(this.spec, this.env);
    const headers = Object.fromEntries(Object.entries(this.spec.headers).map(([name, value]) => [name, fillEnv(value, this.env)]));
    const readers = columns.map((column) => [column, this.fieldPaths.get(column) ?? [column]] as const);
    const shownFirst = fillKeys(this.spec.url, values);
    const first: PageUrl = { real: fillEnv(shownFirst, this.env), shown: shownFirst };
    const seen = new Set<string>();
    if (this.spec.pagination?.kind === "next_url") seen.add(new URL(first.real).href);
    let page = first;
    let rows = 0;
    let pages = 0;
    let requests = 0;
    const out = await open(file, "w");
    try {
      for (;;) {
        const { body, attempts } = await this.getJson(page, headers, redact);
        requests += attempts;
        pages += 1;
        const where = `page ${pages} of ${page.shown}`;
        let lines = "";
        for (const [index, row] of this.rowsOf(body, where).entries()) {
          const record: Record<string, unknown> = {};
          for (const [column, path] of readers) record[column] = readRow(row, path, `row ${index} of ${where}`, column) ?? null;
          // Numbers as the API wrote them (lossless-json): every digit reaches the landing, which converts them exactly.
          lines += `${stringify(record)}\n`;
          rows += 1;
        }
        if (lines) await out.write(lines);
        const next = this.nextPage(body, page, first, seen, where, redact);
        if (!next) break;
        if (pages >= this.spec.maxPages) {
          throw new LakeswapError("STORE_ERROR", `${first.shown} still had a next page after ${pages} pages, the limit (max_pages ${this.spec.maxPages}): the API may page without end; raise source.http.max_pages if the partition really has more`);
        }
        page = next;
      }
    } catch (error) {
      await out.close();
      await rm(file, { force: true });
      throw error;
    }
    await out.close();
    return { rows, pages, requests, url: first.shown };
  }

  /** The rows array of one page; [] when the path is missing or null. */
  private rowsOf(body: unknown, where: string): readonly unknown[] {
    const found = lookUp(body, this.rowsPath);
    if ("mismatch" in found) throw new InvalidInputError(`${where}: rows path '${this.spec.rows}' cannot be followed (${found.mismatch}): check the source's rows path against the API's answer`);
    if (found.value === undefined || found.value === null) return [];
    if (!Array.isArray(found.value)) throw new InvalidInputError(`${where}: rows path '${this.spec.rows}' holds ${kindOf(found.value)}, not an array: point it at the array of rows`);
    return found.value;
  }

  /** The page after `page`, or undefined on the last page. */
  private nextPage(body: unknown, page: PageUrl, first: PageUrl, seen: Set<string>, where: string, redact: (text: string) => string): PageUrl | undefined {
    const pagination = this.spec.pagination;
    if (!pagination) return undefined;
    const found = lookUp(body, this.paginationPath);
    if ("mismatch" in found) throw new InvalidInputError(`${where}: pagination path '${pagination.path}' cannot be followed (${found.mismatch}): check the source's pagination path against the API's answer`);
    const value = found.value;
    if (value === undefined || value === null || value === "") return undefined;
    if (typeof value !== "string" && !(pagination.kind === "cursor" && isLosslessNumber(value))) {
      throw new InvalidInputError(`${where}: pagination path '${pagination.path}' holds ${kindOf(value)}, not a ${pagination.kind === "cursor" ? "cursor" : "URL"}: check the source's pagination path`);
    }
    const text = String(value);
    let next: PageUrl;
    if (pagination.kind === "next_url") {
      if (!URL.canParse(text, page.real)) throw new LakeswapError("STORE_ERROR", `${where}: the next-page link '${redact(text).slice(0, 200)}' is not a URL: check the source's pagination path`);
      const real = new URL(text, page.real).href;
      next = { real, shown: redact(real) };
      if (seen.has(real)) throw new LakeswapError("STORE_ERROR", `${where} links back to ${next.shown}, an earlier page: the API pages in a loop; check the source's pagination path`);
      seen.add(real);
    } else {
      if (seen.has(text)) throw new LakeswapError("STORE_ERROR", `${where} gave cursor '${redact(text).slice(0, 80)}' again, as an earlier page did: the API pages in a loop; check the source's pagination path`);
      seen.add(text);
      next = { real: withQueryParam(first.real, pagination.param, text), shown: withQueryParam(first.shown, pagination.param, redact(text)) };
    }
    return next;
  }

  /** GETs one page and parses its JSON, retrying what may go away on its own. */
  private async getJson(page: PageUrl, headers: Record<string, string>, redact: (text: string) => string): Promise<{ body: unknown; attempts: number }> {
    const { maxAttempts, timeoutMs } = this.spec;
    for (let attempt = 1; ; attempt += 1) {
      await this.waitForSlot();
      const answer = await this.send(page.real, headers, timeoutMs);
      const attempts = `${attempt} attempt${attempt === 1 ? "" : "s"}`;
      if ("status" in answer && answer.status >= 200 && answer.status < 300) {
        try {
          return { body: parse(answer.text), attempts: attempt };
        } catch (error) {
          if (isJson(answer.text)) {
            // JSON that lossless-json refuses: a key given twice with two values (JSON.parse would take the last silently).
            throw new LakeswapError("STORE_ERROR", `GET ${page.shown} answered JSON that is ambiguous (${errorMessage(error)}): an object gives a key twice with different values, and which one is meant cannot be told; fix the API's answer`);
          }
          throw new LakeswapError("STORE_ERROR", `GET ${page.shown} answered HTTP ${answer.status} with content-type '${answer.contentType || "none"}', not JSON (${attempts}): ${quote(answer.text, redact)}. Check the URL: the API may have sent a login or error page`);
        }
      }
      const said = "status" in answer ? `HTTP ${answer.status} (${quote(answer.text, redact)})` : redact(answer.failure);
      if ("status" in answer && answer.status !== 429 && answer.status < 500) {
        if (answer.status === 401 || answer.status === 403) {
          const names = [...new Set(Object.values(this.spec.headers).flatMap((value) => [...envNames(value)]))];
          throw new LakeswapError("ACCESS_DENIED", `GET ${page.shown} was refused: ${said}, after ${attempts} (not retried). Check the credentials the request sends${names.length > 0 ? ` (${names.join(", ")})` : ""}: valid, not expired, and allowed to read this resource`);
        }
        throw new LakeswapError("STORE_ERROR", `GET ${page.shown} failed: ${said}, after ${attempts} (a 4xx is not retried). Check the URL template and the partition values`);
      }
      if (attempt >= maxAttempts) {
        throw new LakeswapError("STORE_ERROR", `GET ${page.shown} still failed after ${attempts}: ${said}. Rerun later; if it keeps failing, check the API's status${said.startsWith("timed out") ? " or raise source.http.timeout" : ""}`, { retryable: true });
      }
      const delayMs = answer.retryAfterMs !== undefined
        ? Math.min(this.maxDelayMs, answer.retryAfterMs)
        : this.random() * Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
      this.options.onRetry?.({ url: page.shown, attempt, status: "status" in answer ? answer.status : undefined, delayMs, reason: said });
      await this.sleep(delayMs);
    }
  }

  /** One request, its whole body read within the timeout. */
  private async send(url: string, headers: Record<string, string>, timeoutMs: number): Promise<Attempt> {
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const response = await fetch(url, { headers, signal });
      const text = await response.text();
      return { status: response.status, contentType: response.headers.get("content-type") ?? "", text, retryAfterMs: retryAfterMs(response.headers.get("retry-after")) };
    } catch (error) {
      if (signal.aborted) return { failure: `timed out after ${timeoutMs} ms` };
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return { failure: `network error: ${cause?.code ?? cause?.message ?? (error as Error).message}` };
    }
  }

  /** Waits for this fetcher's next request slot; slots are reserved at once, so concurrent callers queue. */
  private async waitForSlot(): Promise<void> {
    const perSecond = this.spec.requestsPerSecond;
    if (perSecond === undefined) return;
    const now = performance.now();
    const at = Math.max(now, this.nextSlotAt);
    this.nextSlotAt = at + 1000 / perSecond;
    if (at > now) await this.sleep(at - now);
  }
}

function fillKeys(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(KEY_PLACEHOLDER, (_, key: string) => encodeURIComponent(values[key] ?? ""));
}

function fillEnv(template: string, env: NodeJS.ProcessEnv): string {
  return template.replace(ENV_PLACEHOLDER, (_, name: string) => env[name] ?? "");
}

function envNames(template: string): Set<string> {
  return new Set([...template.matchAll(ENV_PLACEHOLDER)].map((m) => m[1] ?? ""));
}

/** Replaces every secret the spec uses (raw or URL-encoded) with its `${VAR}`, longest first. */
function secretRedactor(spec: HttpSourceSpec, env: NodeJS.ProcessEnv): (text: string) => string {
  const names = new Set([spec.url, ...Object.values(spec.headers)].flatMap((template) => [...envNames(template)]));
  const secrets = [...names].flatMap((name) => {
    const value = env[name] ?? "";
    return value ? [[value, name], [encodeURIComponent(value), name]] : [];
  }).sort((a, b) => (b[0]?.length ?? 0) - (a[0]?.length ?? 0));
  return (text) => secrets.reduce((out, [value, name]) => out.split(value ?? "").join(`\${${name}}`), text);
}

/** `url` with query parameter `name` set to `value` (replaced when the template already has it); the rest kept byte for byte. */
function withQueryParam(url: string, name: string, value: string): string {
  const hash = url.indexOf("#");
  const base = hash < 0 ? url : url.slice(0, hash);
  const [path, query] = base.includes("?") ? [base.slice(0, base.indexOf("?")), base.slice(base.indexOf("?") + 1)] : [base, ""];
  const key = encodeURIComponent(name);
  const kept = query.split("&").filter((pair) => pair !== "" && pair.split("=", 1)[0] !== key);
  return `${path}?${[...kept, `${key}=${encodeURIComponent(value)}`].join("&")}`;
}

/** Retry-After in ms (seconds or an HTTP date); undefined when absent or unreadable. */
function retryAfterMs(header: string | null): number | undefined {
  const text = header?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** A printable excerpt of a response body, at most 200 characters, quoted, secrets redacted. */
function quote(text: string, redact: (text: string) => string): string {
  const printable = Array.from(redact(text.slice(0, 2000)), (char) => {
    const code = char.codePointAt(0) ?? 0;
    return code < 0x20 || (code >= 0x7f && code < 0xa0) ? " " : char;
  }).join("").replace(/\s+/g, " ").trim();
  if (!printable) return "empty body";
  return `body: "${printable.length <= 200 ? printable : `${printable.slice(0, 199)}…`}"`;
}

/** One column's value in one row; errors name the row, its page and the column. */
function readRow(row: unknown, path: readonly Step[], where: string, column: string): unknown {
  const found = lookUp(row, path);
  if (!("mismatch" in found)) return found.value;
  throw new InvalidInputError(`${where}: column ${column} cannot be read at '${pathText(path)}' (${found.mismatch.replace("the value", "the row")}): rows must be JSON objects, or map the column in fields to where its value is`);
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
