import { InvalidInputError } from "../../model/errors.js";
import { postgresColumnType } from "../../model/column-types.js";
import { printable } from "../../model/sql.js";
import type { Column } from "../../model/table.js";
import type { SinkSpec } from "../../sinks/sink.js";
import type { DatasetConfig } from "./dataset-config.js";
import { didYouMean } from "../config-messages.js";
import type { SinksInput } from "../pipeline-schema.js";

const SQL_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Checks a layer's `sinks:` against its columns and resolves `${VAR}` in the URL from the environment. */
export function resolveSinks(sinks: SinksInput, layerColumns: readonly Column[], at: string, deleteFlag: string | undefined, env: NodeJS.ProcessEnv = process.env): SinkSpec[] {
  const postgres = sinks?.postgres;
  if (!postgres) return [];
  const where = `${at}.postgres`;
  const columns = layerColumns.map((c) => c.name);
  for (const column of layerColumns) {
    if (postgresColumnType(column.type) === undefined) {
      throw new InvalidInputError(`${where}: column '${column.name}' is ${column.type}, which the PostgreSQL sink does not send; leave it out of this layer or cast it in its SQL`);
    }
  }
  const url = interpolateEnvironment(postgres.url, env, `${where}.url`);
  const maskedUrl = maskUrl(url);
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new InvalidInputError(`${where}.url: '${printable(maskedUrl)}' is not a PostgreSQL URL: use postgres://user@host:5432/database (or postgresql://)`);
  }
  checkUrlAuthority(url, maskedUrl, `${where}.url`);
  try {
    new URL(url);
  } catch {
    throw new InvalidInputError(`${where}.url: '${printable(maskedUrl)}' is not a valid URL: use postgres://user:password@host:5432/database (percent-encode special characters in the password)`);
  }
  const parts = postgres.table.split(".");
  const [schema, table] = parts.length === 1 ? ["public", parts[0]!] : [parts[0]!, parts[1]!];
  if (parts.length > 2 || !SQL_NAME.test(schema) || !SQL_NAME.test(table)) {
    throw new InvalidInputError(
      `${where}.table: '${printable(postgres.table)}' is not a table name: use schema.table of lowercase letters, digits and '_' (letter or '_' first, at most 63 characters each), e.g. analytics.orders_monthly`,
    );
  }
  if (table === "lakeswap_state") throw new InvalidInputError(`${where}.table: lakeswap_state is the sink's own state table; choose another name`);
  const primaryKey = postgres.primary_key ?? [];
  for (const column of primaryKey) {
    if (!columns.includes(column)) {
      throw new InvalidInputError(`${where}.primary_key: unknown column '${column}'${didYouMean(column, columns)}; the layer's columns are ${columns.join(", ")}`);
    }
  }
  if (new Set(primaryKey).size !== primaryKey.length) throw new InvalidInputError(`${where}.primary_key: a column is named twice (${primaryKey.join(", ")})`);
  if (postgres.mode === "upsert" && primaryKey.length === 0) {
    throw new InvalidInputError(`${where}.primary_key: upsert merges rows by key: declare primary_key: [column, ...] (columns of this layer)`);
  }
  if (postgres.hard_delete && postgres.mode !== "upsert") {
    throw new InvalidInputError(`${where}.hard_delete: applies to mode: upsert only (partition_replace always deletes what the lake no longer holds)`);
  }
  if (postgres.partitioning !== undefined && postgres.mode !== "partition_replace") {
    throw new InvalidInputError(`${where}.partitioning: applies to mode: partition_replace only (an upsert target is one table with its primary key)`);
  }
  const flag = postgres.mode === "upsert" && deleteFlag !== undefined && columns.includes(deleteFlag) ? { deleteFlag } : {};
  const partitioning = postgres.partitioning ? { partitioning: postgres.partitioning } : {};
  return [{ kind: "postgres", url, maskedUrl, schema, table, mode: postgres.mode, primaryKey, hardDelete: postgres.hard_delete, ...flag, ...partitioning }];
}

/**
 * Refuses two layers (of one dataset or of two) that send to one PostgreSQL table: the same table name on the same
 * server and database, whoever connects. Each would replace or merge the other's rows, and its recorded signatures
 * too, so every sync would send both again, and the table would hold whichever was sent last.
 */
export function refuseSharedSinkTargets(datasets: readonly DatasetConfig[]): void {
  const seen = new Map<string, string>();
  for (const dataset of datasets) {
    const layers = [{ where: `datasets.${dataset.name}.sinks`, sinks: dataset.sinks }, ...dataset.layers.map((l) => ({ where: `datasets.${dataset.name}.layers.${l.name}.sinks`, sinks: l.sinks ?? [] }))];
    for (const { where, sinks } of layers) {
      for (const sink of sinks) {
        const target = `${sink.schema}.${sink.table}`;
        const key = `${serverOf(sink.url)}\n${target}`;
        const other = seen.get(key);
        if (other !== undefined) {
          throw new InvalidInputError(
            `${other}.postgres and ${where}.postgres both send to table ${target} of ${printable(sink.maskedUrl)}: each sync would overwrite the other's rows ` +
              "and send both again; give each layer a table of its own",
          );
        }
        seen.set(key, where);
      }
    }
  }
}

/** The server and database a PostgreSQL URL names (host, or socket folder, port and database), without who connects. */
function serverOf(url: string): string {
  const { hostname, port, pathname, searchParams } = new URL(url);
  let database = pathname;
  try {
    database = decodeURIComponent(pathname);
  } catch {
    // A malformed escape: compared as written.
  }
  return `${hostname.toLowerCase()}${searchParams.get("host") ?? ""}:${port || "5432"}${database}`;
}

/** Replaces each `${VAR}` with the environment variable's value; a variable that is not set is an error naming it. */
function interpolateEnvironment(value: string, env: NodeJS.ProcessEnv, at: string): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_match, name: string) => {
    const found = env[name];
    if (found === undefined || found === "") throw new InvalidInputError(`${at}: environment variable ${name} is not set (the config reads it as \${${name}}); export ${name}=postgres://user:password@host:5432/database`);
    return found;
  });
}

/**
 * A URL as messages show it: everything between the user name and the last `@` replaced by `***` (so a
 * password holding an unencoded `@`, `/` or `?` is hidden whole), and a `password=` parameter too.
 */
export function maskUrl(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0];
  const at = url.lastIndexOf("@");
  let masked = url;
  if (scheme && at > scheme.length) {
    const userInfo = url.slice(scheme.length, at);
    const colon = userInfo.indexOf(":");
    const user = colon >= 0 ? userInfo.slice(0, colon) : userInfo;
    // A user name holding '/', '?' or '#' is no user name but a mangled password: hide it all.
    const shown = /[/?#]/.test(user) ? "***" : colon >= 0 ? `${user}:***` : user;
    masked = `${scheme}${shown}${url.slice(at)}`;
  }
  return masked.replace(/([?&]password=)[^&#]*/gi, "$1***");
}

/**
 * Refuses a URL whose user or password holds an unencoded `@`, `/`, `?` or `#`: URL parsers end the host at
 * the first `/`, `?` or `#`, so part of the password would be read as the host (and printed in a DNS error).
 */
function checkUrlAuthority(url: string, maskedUrl: string, at: string): void {
  const rest = url.slice(url.indexOf("://") + 3);
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
  const signs = rest.split("@").length - 1;
  const inAuthority = authority.split("@").length - 1;
  if (signs > 1 || signs !== inAuthority) {
    throw new InvalidInputError(
      `${at}: '${printable(maskedUrl)}' cannot be read unambiguously: its user or password holds an '@', '/', '?' or '#' that is not percent-encoded; ` +
        "percent-encode them in the password ('@' as %40, '/' as %2F, '?' as %3F, '#' as %23, ':' as %3A), e.g. with encodeURIComponent",
    );
  }
}

