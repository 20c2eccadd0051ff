// Reading an embedded lake's Iceberg tables back as a user would, with tools lakeswap did not write: icebird over
// HTTP (a small static server of the lake folder), avsc with the spec's own Avro schemas, plain DuckDB over the
// Hive view. The spec's schemas here are typed in from format/spec.md, independently of src/catalog/iceberg/.
import { createReadStream, promises as fs, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";
import avro from "avsc";
import { DuckDBInstance } from "@duckdb/node-api";
import { icebergRead } from "icebird";
import { expect } from "vitest";
import { PipelineWorkspace, orders, pipelineYaml } from "./pipeline-fixture.js";

/** A static HTTP server of one folder, with HEAD and byte ranges (what hyparquet asks for). */
async function serveFolder(root: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((request, response) => {
    void (async () => {
      const relative = decodeURIComponent(new URL(request.url ?? "/", "http://x").pathname);
      const file = path.join(root, relative);
      if (!file.startsWith(root)) return response.writeHead(403).end();
      const stat = await fs.stat(file).catch(() => undefined);
      if (!stat?.isFile()) return response.writeHead(404).end();
      const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.range ?? "");
      const start = range ? Number(range[1]) : 0;
      const end = range && range[2] !== "" ? Math.min(Number(range[2]), stat.size - 1) : stat.size - 1;
      response.writeHead(range ? 206 : 200, {
        "content-length": String(end - start + 1),
        "accept-ranges": "bytes",
        ...(range ? { "content-range": `bytes ${start}-${end}/${stat.size}` } : {}),
      });
      if (request.method === "HEAD" || stat.size === 0) return response.end();
      createReadStream(file, { start, end }).pipe(response);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/**
 * Runs `work` while fetch sends the lake's file URLs (Iceberg metadata names files by absolute location) to the
 * server of the lake folder, as icebird itself sends s3:// URLs to their HTTPS endpoint.
 */
async function withLakeOverHttp<T>(lakeDir: string, work: (baseUrl: string) => Promise<T>): Promise<T> {
  const server = await serveFolder(lakeDir);
  const prefix = pathToFileURL(lakeDir).href + "/";
  const original = globalThis.fetch;
  globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    return original(url.startsWith(prefix) ? `${server.url}/${url.slice(prefix.length)}` : input, init);
  }) as typeof fetch;
  try {
    return await work(server.url);
  } finally {
    globalThis.fetch = original;
    await server.close();
  }
}

/** A value as both readers' rows are compared: numbers by value (DuckDB prints DECIMAL 10.00, icebird reads 10), else text. */
export function text(value: unknown): string {
  const plain = String(value);
  return plain.trim() !== "" && Number.isFinite(Number(plain)) ? String(Number(plain)) : plain;
}

/** The rows icebird reads of a table (its current snapshot, or that of metadata version `version`), as sorted `key|key` lines of `columns`. */
export async function icebirdRows(lakeDir: string, table: string, columns: readonly string[], version?: number): Promise<string[]> {
  return withLakeOverHttp(lakeDir, async (url) => {
    const rows = await icebergRead({ tableUrl: `${url}/${table}`, ...(version !== undefined ? { metadataFileName: `v${version}.metadata.json` } : {}) });
    return rows.map((row) => columns.map((c) => text(row[c])).join("|")).sort();
  });
}

/** The same lines from plain DuckDB over the Hive view, and its rows per partition value of `key`. */
export async function hiveRows(lakeDir: string, table: string, columns: readonly string[], key: string): Promise<{ rows: string[]; perPartition: Record<string, number> }> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    const source = `read_parquet('${path.join(lakeDir, table)}/*/*.parquet', hive_partitioning = true, hive_types_autocast = false)`;
    const rows = (await connection.runAndReadAll(`SELECT ${columns.map((c) => `CAST(${c} AS VARCHAR)`).join(", ")} FROM ${source}`)).getRows();
    const counts = (await connection.runAndReadAll(`SELECT ${key}, count(*) FROM ${source} GROUP BY ALL`)).getRows();
    return {
      rows: rows.map((row) => row.map(text).join("|")).sort(),
      perPartition: Object.fromEntries(counts.map(([value, n]) => [String(value), Number(n)])),
    };
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

const optional = (type: unknown): unknown[] => ["null", type];

/** The spec's manifest_file schema (v2 fields lakeswap must write), as a reader schema. */
export const SPEC_MANIFEST_FILE = {
  type: "record",
  name: "manifest_file",
  fields: [
    { name: "manifest_path", type: "string", "field-id": 500 },
    { name: "manifest_length", type: "long", "field-id": 501 },
    { name: "partition_spec_id", type: "int", "field-id": 502 },
    { name: "content", type: "int", "field-id": 517 },
    { name: "sequence_number", type: "long", "field-id": 515 },
    { name: "min_sequence_number", type: "long", "field-id": 516 },
    { name: "added_snapshot_id", type: "long", "field-id": 503 },
    { name: "added_files_count", type: "int", "field-id": 504 },
    { name: "existing_files_count", type: "int", "field-id": 505 },
    { name: "deleted_files_count", type: "int", "field-id": 506 },
    { name: "added_rows_count", type: "long", "field-id": 512 },
    { name: "existing_rows_count", type: "long", "field-id": 513 },
    { name: "deleted_rows_count", type: "long", "field-id": 514 },
    {
      name: "partitions",
      "field-id": 507,
      type: optional({
        type: "array",
        "element-id": 508,
        items: {
          type: "record",
          name: "r508",
          fields: [
            { name: "contains_null", type: "boolean", "field-id": 509 },
            { name: "lower_bound", type: optional("bytes"), "field-id": 510 },
            { name: "upper_bound", type: optional("bytes"), "field-id": 511 },
          ],
        },
      }),
    },
  ],
};

/** The spec's map with int keys: an array of key/value records (Appendix A's logical map). */
function specMap(name: string, keyId: number, valueId: number, value: string): object {
  return { type: "array", logicalType: "map", items: { type: "record", name, fields: [{ name: "key", type: "int", "field-id": keyId }, { name: "value", type: value, "field-id": valueId }] } };
}

/** A data file's column metrics by field id, as its manifest entry holds them. */
export interface FileMetricsView {
  readonly valueCounts: Record<number, number>;
  readonly nullCounts: Record<number, number>;
  readonly lower: Record<number, Buffer>;
  readonly upper: Record<number, Buffer>;
}

export function metricsOf(dataFile: Record<string, any>): FileMetricsView {
  const map = <V>(pairs: { key: number; value: V }[] | null): Record<number, V> => Object.fromEntries((pairs ?? []).map((p) => [p.key, p.value]));
  const counts = (pairs: { key: number; value: unknown }[] | null): Record<number, number> => Object.fromEntries((pairs ?? []).map((p) => [p.key, Number(p.value)]));
  return { valueCounts: counts(dataFile.value_counts), nullCounts: counts(dataFile.null_value_counts), lower: map(dataFile.lower_bounds), upper: map(dataFile.upper_bounds) };
}

/** The spec's manifest_entry schema (required v2 fields, and the column metrics) for string partition fields. */
export function specManifestEntry(partition: readonly { name: string; id: number }[]): object {
  return {
    type: "record",
    name: "manifest_entry",
    fields: [
      { name: "status", type: "int", "field-id": 0 },
      { name: "snapshot_id", type: optional("long"), "field-id": 1 },
      { name: "sequence_number", type: optional("long"), "field-id": 3 },
      { name: "file_sequence_number", type: optional("long"), "field-id": 4 },
      {
        name: "data_file",
        "field-id": 2,
        type: {
          type: "record",
          name: "r2",
          fields: [
            { name: "content", type: "int", "field-id": 134 },
            { name: "file_path", type: "string", "field-id": 100 },
            { name: "file_format", type: "string", "field-id": 101 },
            { name: "partition", "field-id": 102, type: { type: "record", name: "r102", fields: partition.map((f) => ({ name: f.name, type: optional("string"), "field-id": f.id })) } },
            { name: "record_count", type: "long", "field-id": 103 },
            { name: "file_size_in_bytes", type: "long", "field-id": 104 },
            { name: "column_sizes", type: optional(specMap("k117_v118", 117, 118, "long")), "field-id": 108, default: null },
            { name: "value_counts", type: optional(specMap("k119_v120", 119, 120, "long")), "field-id": 109, default: null },
            { name: "null_value_counts", type: optional(specMap("k121_v122", 121, 122, "long")), "field-id": 110, default: null },
            { name: "lower_bounds", type: optional(specMap("k126_v127", 126, 127, "bytes")), "field-id": 125, default: null },
            { name: "upper_bounds", type: optional(specMap("k129_v130", 129, 130, "bytes")), "field-id": 128, default: null },
          ],
        },
      },
    ],
  };
}

/** The field ids of an Avro record schema, by dotted name (nested records too). */
function fieldIds(schema: { fields?: { name: string; type: unknown; "field-id"?: number }[] }, prefix = ""): Record<string, number | undefined> {
  const ids: Record<string, number | undefined> = {};
  for (const field of schema.fields ?? []) {
    ids[`${prefix}${field.name}`] = field["field-id"];
    const type = Array.isArray(field.type) ? field.type.find((t) => t !== "null") : field.type;
    if (typeof type === "object" && type !== null && (type as { type?: string }).type === "record") Object.assign(ids, fieldIds(type as never, `${prefix}${field.name}.`));
  }
  return ids;
}

/** Decodes an Avro container file with the spec's reader schema; checks the writer's field ids and the file metadata keys. */
export async function decodeWithSpec(file: string, spec: object, metadataKeys: readonly string[]): Promise<{ records: Record<string, any>[]; meta: Record<string, string> }> {
  const records: Record<string, any>[] = [];
  let meta: Record<string, string> = {};
  const reader = avro.Type.forSchema(spec as avro.Schema);
  await new Promise<void>((resolve, reject) => {
    const decoder = avro.createFileDecoder(file, { readerSchema: reader } as never);
    decoder.on("metadata", (_type: unknown, _codec: unknown, header: { meta: Record<string, Buffer> }) => {
      meta = Object.fromEntries(Object.entries(header.meta).map(([k, v]) => [k, v.toString()]));
    });
    decoder.on("data", (record: Record<string, any>) => records.push(record));
    decoder.on("end", resolve);
    decoder.on("error", reject);
  });
  const writer = JSON.parse(meta["avro.schema"] ?? "{}");
  const want = fieldIds(spec as never);
  const have = fieldIds(writer);
  for (const [name, id] of Object.entries(want)) expect(have[name], `field-id of ${name} in ${path.basename(file)}`).toBe(id);
  for (const key of metadataKeys) expect(meta[key], `file metadata '${key}' of ${path.basename(file)}`).toBeDefined();
  return { records, meta };
}

/** What `validateTable` read: every snapshot's live data files (store keys relative to the lake) with their record counts and partitions. */
export interface SnapshotView {
  readonly snapshotId: number;
  readonly summary: Record<string, string>;
  readonly files: { key: string; records: number; partition: Record<string, string | null>; metrics: FileMetricsView }[];
  /** The manifests its manifest list names (store keys), in order. */
  readonly manifests: string[];
  /** Each manifest's bounds of the first partition field, `lower..upper`, from the manifest list. */
  readonly bounds: string[];
}

/**
 * The checks of a current metadata file that hold whatever its catalog (a version hint, Glue): the spec's required v2
 * fields, sequence numbers increasing and unique, the main ref and the snapshot log's last entry naming the current
 * snapshot, and a name mapping of the current schema (DuckDB's Parquet files carry no field ids: readers map columns by
 * name). Returns the snapshots, the current schema, the default partition spec and its fields as manifests name them.
 */
export function expectSpecMetadata(metadata: Record<string, any>): {
  snapshots: Record<string, any>[];
  schema: Record<string, any>;
  spec: Record<string, any>;
  partition: { name: string; id: number }[];
} {
  expect(metadata["format-version"]).toBe(2);
  for (const field of ["table-uuid", "location", "last-sequence-number", "last-updated-ms", "last-column-id", "schemas", "current-schema-id", "partition-specs", "default-spec-id", "last-partition-id", "sort-orders", "default-sort-order-id"]) {
    expect(metadata[field], `metadata field ${field}`).toBeDefined();
  }
  const snapshots = metadata.snapshots as Record<string, any>[];
  const sequences = snapshots.map((s) => s["sequence-number"] as number);
  expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
  expect(new Set(sequences).size).toBe(sequences.length);
  expect(metadata["last-sequence-number"]).toBe(Math.max(0, ...sequences));
  expect(metadata.refs.main["snapshot-id"]).toBe(metadata["current-snapshot-id"]);
  expect((metadata["snapshot-log"] as any[]).at(-1)?.["snapshot-id"]).toBe(metadata["current-snapshot-id"]);
  const schema = (metadata.schemas as any[]).find((s) => s["schema-id"] === metadata["current-schema-id"]);
  expect(JSON.parse(metadata.properties["schema.name-mapping.default"])).toEqual((schema.fields as any[]).map((c) => ({ "field-id": c.id, names: [c.name] })));
  const spec = (metadata["partition-specs"] as any[]).find((s) => s["spec-id"] === metadata["default-spec-id"]);
  const partition = (spec.fields as any[]).map((f) => ({ name: f.name as string, id: f["field-id"] as number }));
  return { snapshots, schema, spec, partition };
}

/**
 * Checks a table's Iceberg metadata against the spec's required fields (format v2, increasing sequence numbers,
 * snapshot-log, metadata-log, refs), and decodes every manifest list and manifest with the spec's schemas.
 * Returns the version the hint names and every retained snapshot's files.
 */
export async function validateTable(lakeDir: string, table: string): Promise<{ version: number; metadata: Record<string, any>; snapshots: SnapshotView[] }> {
  const folder = path.join(lakeDir, table, "metadata");
  const version = Number((await fs.readFile(path.join(folder, "version-hint.text"), "utf8")).trim());
  const metadata = JSON.parse(await fs.readFile(path.join(folder, `v${version}.metadata.json`), "utf8")) as Record<string, any>;
  const { snapshots, schema, spec, partition } = expectSpecMetadata(metadata);
  for (const entry of metadata["snapshot-log"] as any[]) expect(snapshots.some((s) => s["snapshot-id"] === entry["snapshot-id"])).toBe(true);
  // Each earlier version is in the metadata log, in order.
  const logged = (metadata["metadata-log"] as any[]).map((e) => path.basename(new URL(e["metadata-file"]).pathname));
  // Each earlier version is in the log, in order, up to the oldest GC kept (an older one is deleted with its snapshot).
  const first = version - logged.length;
  expect(logged).toEqual(Array.from({ length: version - first }, (_, i) => `v${first + i}.metadata.json`));
  for (let older = 1; older < first; older += 1) await expect(fs.access(path.join(folder, `v${older}.metadata.json`))).rejects.toThrow();
  for (const f of spec.fields as any[]) {
    expect(f.transform).toBe("identity");
    expect(schema.fields.find((c: any) => c.id === f["source-id"])?.type).toBe("string");
  }
  const lakeUrl = pathToFileURL(lakeDir).href + "/";
  const keyOf = (url: string): string => {
    expect(url.startsWith(lakeUrl), `${url} lies in the lake`).toBe(true);
    return decodeURIComponent(url.slice(lakeUrl.length));
  };
  const views: SnapshotView[] = [];
  for (const snapshot of snapshots) {
    for (const key of ["operation", "added-data-files", "deleted-data-files", "added-records", "deleted-records", "total-data-files", "total-records"]) {
      expect(snapshot.summary[key], `summary ${key}`).toBeDefined();
    }
    const list = await decodeWithSpec(path.join(lakeDir, keyOf(snapshot["manifest-list"])), SPEC_MANIFEST_FILE, ["snapshot-id", "sequence-number", "format-version"]);
    const files: SnapshotView["files"] = [];
    for (const manifest of list.records) {
      expect(manifest.sequence_number).toBeLessThanOrEqual(snapshot["sequence-number"]);
      const entries = await decodeWithSpec(path.join(lakeDir, keyOf(manifest.manifest_path)), specManifestEntry(partition), ["schema", "schema-id", "partition-spec", "partition-spec-id", "format-version", "content"]);
      expect(entries.meta["format-version"]).toBe("2");
      expect(entries.meta.content).toBe("data");
      expect(JSON.parse(entries.meta["partition-spec"] ?? "null")).toEqual(spec.fields);
      for (const entry of entries.records) {
        if (entry.status === 2) continue;
        expect(entry.sequence_number ?? manifest.sequence_number).toBeLessThanOrEqual(snapshot["sequence-number"]);
        files.push({ key: keyOf(entry.data_file.file_path), records: Number(entry.data_file.record_count), partition: entry.data_file.partition, metrics: metricsOf(entry.data_file) });
      }
    }
    expect(String(files.reduce((n, f) => n + f.records, 0))).toBe(snapshot.summary["total-records"]);
    const manifests = list.records.map((m) => keyOf(m.manifest_path));
    const bounds = list.records.map((m) => `${m.partitions?.[0]?.lower_bound?.toString() ?? ""}..${m.partitions?.[0]?.upper_bound?.toString() ?? ""}`);
    views.push({ snapshotId: snapshot["snapshot-id"], summary: snapshot.summary, files: files.sort((a, b) => (a.key < b.key ? -1 : 1)), manifests, bounds });
  }
  return { version, metadata, snapshots: views };
}

/** The data files of the table's current runs as the Hive view reads them: the run files the pointers name, relative to the lake. */
export async function hiveFiles(lakeDir: string, table: string): Promise<string[]> {
  const files: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (!entry.name.includes("=")) continue;
      const real = await fs.realpath(full);
      if ((await fs.stat(real)).isDirectory() && entry.isSymbolicLink()) {
        for (const name of await fs.readdir(real)) if (name.endsWith(".parquet")) files.push(path.relative(await fs.realpath(lakeDir), path.join(real, name)));
      } else if (entry.isDirectory()) {
        await walk(full);
      }
    }
  };
  await walk(path.join(lakeDir, table));
  return files.sort();
}

/**
 * The scenario of the Iceberg kill tests (embedded: ../iceberg/iceberg-crash.test.ts; AWS: ../iceberg/iceberg-aws-crash.test.ts):
 * raw and stage published as Iceberg, delivery A synced, then delivery B (other amounts, one more day) killed at each
 * point. `@1` is the first table to commit (orders_stage: leases are held in name order and released inner first),
 * `@2` the second (orders_raw, stage committed already).
 */
export const CRASH_TABLES = ["orders_raw", "orders_stage"] as const;
export const CRASH_COLUMNS: Record<(typeof CRASH_TABLES)[number], readonly string[]> = { orders_raw: ["order_id", "customer_id", "amount"], orders_stage: ["order_id", "amount"] };
export const CRASH_POINTS = ["before-iceberg-commit", "during-iceberg-commit", "before-iceberg-commit@2", "during-iceberg-commit@2"];

/** The kill tests' workspace (an Iceberg pipeline) and its two deliveries, A and B. */
export function crashWorkspace(): { ws: PipelineWorkspace; fileA: string; fileB: string } {
  const ws = new PipelineWorkspace();
  writeFileSync(ws.configFile, pipelineYaml({ iceberg: true }));
  const [fileA, fileB] = [ws.delivery(orders(3, 4)), ws.delivery(orders(4, 4).map((r) => ({ ...r, amount: `${r.id}.50` })))];
  return { ws, fileA, fileB };
}
