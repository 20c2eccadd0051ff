/**
 * What an HTTP source is (a dataset's `source.http`, resolved) and the checks of it that need no network and no
 * environment: config runs them when it loads the file, the fetcher again when it starts.
 */
import { InvalidInputError } from "../model/errors.js";
import { parsePath } from "./json-path.js";

/** Where one partition's rows are, and how to ask for them. */
export interface HttpSourceSpec {
  /** URL template: `{{ key }}` placeholders take partition values (URL-encoded); `${VAR}` takes an environment variable (a secret: never printed). http:// or https:// only. */
  readonly url: string;
  /** Request headers; values may hold `${VAR}` (e.g. `Bearer ${TOKEN}`), never printed. */
  readonly headers: Readonly<Record<string, string>>;
  /** Path to the rows array in each page's JSON body, dot-separated with [n] indices, optional leading `$.`; "" or "$" = the body itself. A page where it is missing or null has no rows (GA4 omits `rows` when empty); present but not an array is an error. */
  readonly rows: string;
  /** Column -> path inside one row (same syntax); a column not listed reads the row's field of its own name. */
  readonly fields: Readonly<Record<string, string>>;
  /** Follow pages to the end: a next-page URL (absolute or relative to the current page's URL) at `path` in the body, or a cursor at `path` sent back as query parameter `param`. Stops when the value is missing, null or "". */
  readonly pagination?: { readonly kind: "next_url"; readonly path: string } | { readonly kind: "cursor"; readonly path: string; readonly param: string };
  /** At most this many requests per second through one HttpFetcher (all partitions together); undefined = no limit. */
  readonly requestsPerSecond?: number;
  /** Per request (connect to last body byte). */
  readonly timeoutMs: number;
  /** Attempts per request; 429, 5xx, network errors and timeouts are retried with exponential backoff and full jitter, honouring Retry-After (seconds or HTTP date) when the server sends it. Other 4xx fail at once. */
  readonly maxAttempts: number;
  /** Pages per partition at most (a pagination loop or a server that never ends is an error naming the limit). A repeated next URL / cursor is an error too. */
  readonly maxPages: number;
}

export const KEY_PLACEHOLDER = /\{\{\s*([^{}\s]*)\s*\}\}/g;
export const ENV_PLACEHOLDER = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Problems of the spec alone (numbers, paths, header names). */
export function specProblems(spec: HttpSourceSpec): string[] {
  const problems: string[] = [];
  const positive = (name: string, value: number | undefined, integer: boolean) => {
    if (value !== undefined && !(Number.isFinite(value) && value > 0 && (!integer || Number.isInteger(value)))) {
      problems.push(`${name} is ${value}: use a positive ${integer ? "whole number" : "number"}`);
    }
  };
  positive("timeoutMs", spec.timeoutMs, false);
  positive("maxAttempts", spec.maxAttempts, true);
  positive("maxPages", spec.maxPages, true);
  positive("requestsPerSecond", spec.requestsPerSecond, false);
  const paths: [string, string][] = [["rows", spec.rows], ...Object.entries(spec.fields).map(([column, path]): [string, string] => [`fields.${column}`, path])];
  if (spec.pagination) paths.push(["pagination.path", spec.pagination.path]);
  for (const [name, path] of paths) {
    try {
      parsePath(path);
    } catch {
      problems.push(`${name} '${path}' is not a path: write it as a.b[0].c, optionally starting with $.`);
    }
  }
  if (spec.pagination?.kind === "cursor" && !spec.pagination.param) problems.push("pagination.param is empty: name the query parameter that carries the cursor");
  for (const name of Object.keys(spec.headers)) {
    if (!HEADER_NAME.test(name)) problems.push(`header name '${name}' is not a valid HTTP header name`);
  }
  return problems;
}


/** Throws InvalidInputError naming every problem of the spec alone (numbers, paths, header names). */
export function assertHttpSourceSpec(spec: HttpSourceSpec): void {
  const problems = specProblems(spec);
  if (problems.length > 0) throw new InvalidInputError(`HTTP source: ${problems.join("; ")}`);
}
