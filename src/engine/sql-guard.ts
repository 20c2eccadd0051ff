import type { DuckDBInstance } from "@duckdb/node-api";
import { processDuckDb } from "../duckdb/duckdb-open.js";
import { InvalidInputError, errorMessage } from "../model/errors.js";
import { printable } from "../model/sql.js";

/**
 * Checks users' SQL with DuckDB's own parser, never with string tests: a layer's SQL (a sql file,
 * `--sql`, `--sql-file`) must be exactly one SELECT, and a partition or `inputs.map` expression
 * exactly one expression. Parsing runs in the process's own DuckDB instance, which cannot read or write a
 * file through SQL, and nothing of the checked text is ever executed. Any engine may use it (DuckDB, Athena).
 */

/** The parse-only instance: the process's own DuckDB, which reaches no file through SQL (../duckdb/duckdb-open.ts). */
async function parserInstance(): Promise<DuckDBInstance> {
  return (await processDuckDb()).instance;
}

/** DuckDB's parse tree of `sql` (json_serialize_sql): statements, or the parser's error. */
async function parse(sql: string): Promise<{ statements?: unknown[]; error?: string }> {
  const tree = JSON.parse(await serializedParseTree(sql)) as { error?: boolean; error_message?: string; statements?: unknown[] };
  return tree.error ? { error: tree.error_message ?? "unknown parser error" } : { statements: tree.statements ?? [] };
}

/** Parse trees serialized by serializedParseTree, by SQL text, the oldest dropped past PARSED_MAX. */
const parsed = new Map<string, Promise<string>>();
const PARSED_MAX = 256;

/**
 * DuckDB's parse tree of `sql` as json_serialize_sql prints it (with `"error": true` when it does not parse). The
 * parser's answer depends on the text alone, so a process parses a text once: a sync checks each layer's SQL and
 * reads which tables it names, and a process that syncs again (a collector, a test run) parses nothing anew.
 */
export function serializedParseTree(sql: string): Promise<string> {
  const known = parsed.get(sql);
  if (known !== undefined) return known;
  if (parsed.size >= PARSED_MAX) parsed.delete(parsed.keys().next().value as string);
  const tree = serialize(sql);
  parsed.set(sql, tree);
  tree.catch(() => parsed.delete(sql));
  return tree;
}

async function serialize(sql: string): Promise<string> {
  const connection = await (await parserInstance()).connect();
  try {
    const reader = await connection.runAndReadAll("SELECT json_serialize_sql($1::VARCHAR)", [sql]);
    return String(reader.getRowsJS()[0]?.[0] ?? "{}");
  } finally {
    connection.closeSync();
  }
}

/** How many statements DuckDB's parser sees in `sql` (0 when it does not parse). */
async function statementCount(sql: string): Promise<number> {
  const connection = await (await parserInstance()).connect();
  try {
    return (await connection.extractStatements(sql)).count;
  } catch {
    return 0;
  } finally {
    connection.closeSync();
  }
}

/** A trailing `;` and any comments or blanks after it (the parser has seen that nothing else follows). */
const TRAILING_SEMICOLON = /;(?:\s|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*$/;

/**
 * Returns `sql` if it is exactly one SELECT (a WITH … SELECT, a UNION, VALUES and FROM-first
 * queries are SELECTs), without its trailing `;` and ending in a new line, so a caller may wrap it
 * in `(…)`. Refuses with InvalidInputError (exit 2) an empty text, several statements, or a
 * statement that is not a SELECT (COPY, ATTACH, SET, PRAGMA, INSTALL, LOAD …), or SQL that does not
 * parse on its own (DuckDB's message). `what` names the SQL in messages.
 */
export async function assertOneSelect(sql: string, what: string): Promise<string> {
  return checkOneSelect(sql, what);
}

/**
 * Starts parsing `sql` now, for a build that will check it soon (assertOneSelect): the parse tree is then ready in
 * serializedParseTree's cache. Never fails: a refusal is the check's to make.
 */
export function checkAhead(sql: string): void {
  serializedParseTree(sql).catch(() => undefined);
}

async function checkOneSelect(sql: string, what: string): Promise<string> {
  const tree = await parse(sql);
  const fix = "lakeswap runs exactly one SELECT (it writes a layer's result, or prints a query's rows; it never runs other statements)";
  if (tree.error !== undefined) {
    const count = await statementCount(sql);
    if (count > 1) throw new InvalidInputError(`${what} is ${count} statements: ${fix}; nothing was run`);
    if (/Only SELECT statements/i.test(tree.error)) {
      throw new InvalidInputError(`${what} is not a SELECT ('${printable(sql.trim(), 60)}'): ${fix}; nothing was run`);
    }
    throw new InvalidInputError(`${what} does not parse: ${tree.error.replace(/\s+/g, " ").trim()}; nothing was run`);
  }
  const statements = tree.statements ?? [];
  if (statements.length === 0) throw new InvalidInputError(`${what} is empty: give one SELECT`);
  if (statements.length > 1) throw new InvalidInputError(`${what} is ${statements.length} statements: ${fix}; nothing was run`);
  refuseFileReads(statements[0], what);
  return `${sql.trim().replace(TRAILING_SEMICOLON, "")}\n`;
}

/**
 * Refuses (InvalidInputError, exit 2) a query that reads files rather than tables, as assertOneSelect does, when DuckDB's
 * parser reads it; a query it cannot parse (Trino syntax DuckDB lacks) is left to the engine that runs it, which has
 * the last word on its own dialect. For `lakeswap query` on Athena: a file read is refused up front, never sent.
 */
export async function refuseFileReadsWherePossible(sql: string, what: string): Promise<void> {
  const tree = await parse(sql);
  const statements = tree.statements ?? [];
  if (tree.error !== undefined || statements.length !== 1) return;
  refuseFileReads(statements[0], what);
}

/** Table functions that read no file: they make rows from their arguments alone. */
const PURE_TABLE_FUNCTIONS = new Set(["range", "generate_series", "unnest"]);

/** A table name that can only be a file path (DuckDB reads `FROM 'x.parquet'` as the file): a lake table name has none of these. */
const FILE_PATH_CHARACTERS = /[./\\*?:~{}[\]]/;

/**
 * Refuses a SELECT that reads files rather than tables: a table function other than `range`,
 * `generate_series` and `unnest` (read_parquet, read_csv, read_json, read_text, read_blob,
 * parquet_scan, glob, query_table …) or a table named by a file path (`FROM 'orders.parquet'`),
 * anywhere in it (subqueries, CTEs, joins). A file read bypasses the declared inputs: the layer
 * would not be rebuilt when the file's table changes. Walks DuckDB's parse tree, never the text.
 */
function refuseFileReads(statement: unknown, what: string): void {
  const fix = "lakeswap's SQL names lake tables, never files: read the table by its name (every lake table is visible by name; in a pipeline, declare it in inputs.tables so that its changes rebuild this layer); nothing was run";
  const cteNames = new Set<string>();
  const refs: { readonly kind: "function" | "path"; readonly name: string; readonly argument?: string }[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (typeof node !== "object" || node === null) return;
    const record = node as Record<string, unknown>;
    for (const entry of (record.cte_map as { map?: { key?: unknown }[] } | undefined)?.map ?? []) {
      if (typeof entry.key === "string") cteNames.add(entry.key.toLowerCase());
    }
    if (record.type === "TABLE_FUNCTION") {
      const fn = record.function as { function_name?: unknown; children?: { value?: { value?: unknown } }[] } | undefined;
      const name = String(fn?.function_name ?? "");
      const first = fn?.children?.[0]?.value?.value;
      if (!PURE_TABLE_FUNCTIONS.has(name.toLowerCase())) refs.push({ kind: "function", name, ...(typeof first === "string" ? { argument: first } : {}) });
    }
    if (record.type === "BASE_TABLE" && typeof record.table_name === "string" && FILE_PATH_CHARACTERS.test(record.table_name)) {
      refs.push({ kind: "path", name: record.table_name });
    }
    Object.values(record).forEach(walk);
  };
  walk(statement);
  const ref = refs.find((r) => r.kind === "function" || !cteNames.has(r.name.toLowerCase()));
  if (!ref) return;
  if (ref.kind === "path") throw new InvalidInputError(`${what} reads the file '${printable(ref.name, 80)}' as a table (FROM '…'): ${fix}`);
  const call = `${ref.name}(${ref.argument !== undefined ? `'${printable(ref.argument, 80)}'` : "…"})`;
  throw new InvalidInputError(`${what} calls the table function ${call}, which reads files or the engine's state: ${fix}`);
}

/**
 * Returns one SQL expression (a partition expression, an `inputs.map` expression) as DuckDB prints
 * it back from its parse tree (so no comment or stray text survives), after checking it is exactly
 * one expression with no subquery: `strftime(order_ts, '%Y-%m-%d')` passes; `1) FROM t; COPY …`,
 * `x FROM read_text('/etc/passwd')` and `(SELECT …)` are refused with InvalidInputError (exit 2).
 */
export async function assertOneExpression(expression: string, what: string): Promise<string> {
  // The same expression is checked once a process: a collector lands every segment with the same partition expressions.
  // A check under way (one started ahead, ../landing/duckdb/duckdb-landing.ts `prepare`) is waited for; one that
  // failed is made again, so that the refusal names `what`.
  const known = await checkedExpressions.get(expression)?.catch(() => undefined);
  if (known !== undefined) return known;
  const checking = checkOneExpression(expression, what);
  checkedExpressions.set(expression, checking);
  checking.catch(() => {
    if (checkedExpressions.get(expression) === checking) checkedExpressions.delete(expression);
  });
  return checking;
}

/** Expressions `assertOneExpression` checks or passed, with what it returns for each (the parser's answer never changes). */
const checkedExpressions = new Map<string, Promise<string>>();

async function checkOneExpression(expression: string, what: string): Promise<string> {
  const refuse = (why: string): never => {
    throw new InvalidInputError(`${what} '${printable(expression, 80)}' is not allowed: ${why}; give one expression over the columns, for example strftime(order_ts, '%Y-%m-%d')`);
  };
  const tree = await parse(`SELECT ${expression}`);
  if (tree.error !== undefined) {
    const count = await statementCount(`SELECT ${expression}`);
    refuse(count > 1 ? `it makes ${count} statements` : /Only SELECT statements/i.test(tree.error) ? "it is not an expression" : `it does not parse (${tree.error.replace(/\s+/g, " ").trim()})`);
  }
  const statements = tree.statements ?? [];
  if (statements.length !== 1) refuse(statements.length === 0 ? "it is empty" : `it makes ${statements.length} statements`);
  const node = (statements[0] as { node?: Record<string, unknown> }).node ?? {};
  const selectList = node.select_list as unknown[] | undefined;
  const from = node.from_table as { type?: string } | undefined;
  const empty = (value: unknown) => value === null || value === undefined || (Array.isArray(value) && value.length === 0);
  const cteMap = node.cte_map as { map?: unknown[] } | undefined;
  if (node.type !== "SELECT_NODE" || selectList?.length !== 1) refuse("it is more than one expression");
  if (from?.type !== "EMPTY" || !empty(node.where_clause) || !empty(node.group_expressions) || !empty(node.having) ||
    !empty(node.qualify) || !empty(node.modifiers) || !empty(cteMap?.map)) {
    refuse("it reaches beyond one expression (FROM, WHERE, GROUP BY, LIMIT, WITH …)");
  }
  if (containsSubquery(selectList?.[0])) refuse("it contains a subquery (an expression reads the row's columns, not tables or files)");
  const canonical = await deparse(`SELECT ${expression}`);
  return canonical.replace(/^SELECT /, "");
}

function containsSubquery(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(containsSubquery);
  if (typeof node !== "object" || node === null) return false;
  const record = node as Record<string, unknown>;
  if (record.class === "SUBQUERY" || record.type === "SUBQUERY") return true;
  return Object.values(record).some(containsSubquery);
}

async function deparse(select: string): Promise<string> {
  const connection = await (await parserInstance()).connect();
  try {
    const reader = await connection.runAndReadAll("SELECT json_deserialize_sql(json_serialize_sql($1::VARCHAR))", [select]);
    return String(reader.getRowsJS()[0]?.[0] ?? "");
  } catch (error) {
    throw new InvalidInputError(`'${printable(select, 80)}' cannot be checked: ${errorMessage(error)}`);
  } finally {
    connection.closeSync();
  }
}
