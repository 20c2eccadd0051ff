// Reading an AWS lake's Iceberg tables back as a user would, with tools lakeswap did not write: the Glue table of
// type ICEBERG through the Glue SDK, icebird over HTTP (its s3:// URLs sent to the S3 emulator), avsc with the
// spec's own Avro schemas, plain DuckDB over the Hive view (the files the Glue partitions' locations hold).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { GetPartitionsCommand, GetTableCommand, GlueClient, type Table } from "@aws-sdk/client-glue";
import { DuckDBInstance } from "@duckdb/node-api";
import { icebergRead } from "icebird";
import { expect } from "vitest";
import type { AwsTarget } from "../../src/config/aws-config.js";
import type { AwsEndpoints } from "./aws-services.js";
import { SPEC_MANIFEST_FILE, decodeWithSpec, expectSpecMetadata, metricsOf, specManifestEntry, text, type SnapshotView } from "./iceberg-kit.js";

/** What Glue holds for an `iceberg: true` table's Iceberg view. */
export interface GlueIcebergTable {
  readonly table: Table;
  readonly metadataLocation: string;
  readonly previousMetadataLocation: string | undefined;
}

/** An AWS lake (an S3 prefix and a Glue database on the emulators), read as a user would. */
export class AwsLakeReader {
  private readonly s3: S3Client;
  private readonly glue: GlueClient;
  private readonly dir = mkdtempSync(path.join(tmpdir(), "lakeswap-iceberg-aws-"));
  private downloads = 0;

  constructor(
    private readonly services: AwsEndpoints,
    private readonly target: AwsTarget,
  ) {
    this.s3 = new S3Client(services.s3.clientConfig);
    this.glue = new GlueClient(services.glue.clientConfig);
  }

  close(): void {
    this.s3.destroy();
    this.glue.destroy();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** The s3:// URI of a lake key. */
  uri(key: string): string {
    return `s3://${this.target.bucket}/${this.target.prefix}/${key}`;
  }

  /** The lake key of an s3:// URI, which must lie in the lake. */
  keyOf(uri: string): string {
    const head = this.uri("");
    expect(uri.startsWith(head), `${uri} lies in the lake (${head})`).toBe(true);
    return uri.slice(head.length);
  }

  async get(key: string): Promise<Buffer> {
    const object = await this.s3.send(new GetObjectCommand({ Bucket: this.target.bucket, Key: `${this.target.prefix}/${key}` }));
    return Buffer.from(await object.Body!.transformToByteArray());
  }

  async put(key: string, body: string): Promise<void> {
    await this.s3.send(new PutObjectCommand({ Bucket: this.target.bucket, Key: `${this.target.prefix}/${key}`, Body: body }));
  }

  /** The lake keys under a prefix. */
  async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.s3.send(new ListObjectsV2Command({ Bucket: this.target.bucket, Prefix: `${this.target.prefix}/${prefix}`, ContinuationToken: token }));
      keys.push(...(page.Contents ?? []).map((o) => o.Key!.slice(this.target.prefix.length + 1)));
      token = page.NextContinuationToken;
    } while (token);
    return keys.sort();
  }

  /** A Glue table of the lake's database, or undefined. */
  async glueTable(name: string): Promise<Table | undefined> {
    try {
      return (await this.glue.send(new GetTableCommand({ DatabaseName: this.target.database, Name: name }))).Table;
    } catch (error) {
      if ((error as { name?: string }).name === "EntityNotFoundException") return undefined;
      throw error;
    }
  }

  /** The Glue Iceberg table of `table` (`<table>_iceberg`), checked to be one: EXTERNAL_TABLE, table_type ICEBERG, a metadata_location in the lake. */
  async icebergTable(table: string, glueName = `${table}_iceberg`): Promise<GlueIcebergTable> {
    const glue = await this.glueTable(glueName);
    expect(glue, `Glue table ${glueName}`).toBeDefined();
    const parameters = glue!.Parameters ?? {};
    expect(glue!.TableType).toBe("EXTERNAL_TABLE");
    expect(parameters.table_type).toBe("ICEBERG");
    expect(glue!.PartitionKeys ?? []).toEqual([]);
    expect(glue!.StorageDescriptor?.Location).toBe(this.uri(table));
    const metadataLocation = parameters.metadata_location ?? "";
    expect(this.keyOf(metadataLocation)).toMatch(new RegExp(`^${table}/metadata/\\d{5}-[0-9a-f-]{36}\\.metadata\\.json$`));
    return { table: glue!, metadataLocation, previousMetadataLocation: parameters.previous_metadata_location };
  }

  /** The data files of the table's current runs as the Hive view reads them: every Parquet file under the Glue partitions' locations (lake keys, sorted). */
  async hiveFiles(table: string): Promise<string[]> {
    return (await this.hivePartitions(table)).flatMap((p) => p.files).sort();
  }

  private async hivePartitions(table: string): Promise<{ values: string[]; files: string[] }[]> {
    const partitions: { values: string[]; files: string[] }[] = [];
    let token: string | undefined;
    do {
      const page = await this.glue.send(new GetPartitionsCommand({ DatabaseName: this.target.database, TableName: table, NextToken: token }));
      for (const partition of page.Partitions ?? []) {
        const prefix = this.keyOf(partition.StorageDescriptor?.Location ?? "");
        // Every object of the run (Athena's UNLOAD names its files without an extension), not its folder markers.
        partitions.push({ values: partition.Values ?? [], files: (await this.list(prefix)).filter((key) => !key.endsWith("/")) });
      }
      token = page.NextToken;
    } while (token);
    return partitions;
  }

  /** The rows plain DuckDB reads over the Hive view (the current runs' files, downloaded, with the partition values of their Glue partitions), as sorted `a|b` lines. */
  async hiveRows(table: string, columns: readonly string[], key: string): Promise<string[]> {
    const folder = path.join(this.dir, `hive-${(this.downloads += 1)}`);
    for (const partition of await this.hivePartitions(table)) {
      const into = path.join(folder, `${key}=${partition.values[0] ?? ""}`);
      mkdirSync(into, { recursive: true });
      for (const file of partition.files) writeFileSync(path.join(into, `${path.basename(file).replace(/\.parquet$/, "")}.parquet`), await this.get(file));
    }
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    try {
      const source = `read_parquet('${folder}/*/*.parquet', hive_partitioning = true, hive_types_autocast = false)`;
      const rows = (await connection.runAndReadAll(`SELECT ${columns.map((c) => `CAST(${c} AS VARCHAR)`).join(", ")} FROM ${source}`)).getRows();
      return rows.map((row) => row.map(text).join("|")).sort();
    } finally {
      connection.closeSync();
      instance.closeSync();
    }
  }

  /**
   * The rows icebird reads of a table, as sorted `a|b` lines: its current snapshot (Glue's metadata_location), or that
   * of the metadata file `metadataLocation`. icebird sends s3:// URLs to `https://<bucket>.s3.amazonaws.com/<key>`;
   * fetch sends those to the S3 emulator, path-style.
   */
  async icebirdRows(table: string, columns: readonly string[], metadataLocation?: string): Promise<string[]> {
    const location = metadataLocation ?? (await this.icebergTable(table)).metadataLocation;
    const original = globalThis.fetch;
    const aws = `https://${this.target.bucket}.s3.amazonaws.com/`;
    globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) => {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      return original(url.startsWith(aws) ? `${this.services.s3.endpoint}/${this.target.bucket}/${url.slice(aws.length)}` : input, init);
    }) as typeof fetch;
    try {
      const rows = await icebergRead({ tableUrl: this.uri(table), metadataFileName: path.basename(location) });
      return rows.map((row) => columns.map((c) => text(row[c])).join("|")).sort();
    } finally {
      globalThis.fetch = original;
    }
  }

  /** A metadata file of the lake, parsed. */
  async metadataAt(location: string): Promise<Record<string, any>> {
    return JSON.parse((await this.get(this.keyOf(location))).toString("utf8")) as Record<string, any>;
  }

  /**
   * Checks the Iceberg table Glue names against the spec's required fields (format v2, increasing sequence numbers,
   * snapshot-log, refs, the name mapping), its metadata log as a chain (each earlier metadata file's own log is the
   * prefix before it, the last one is Glue's previous_metadata_location), and decodes every manifest list and manifest
   * with the spec's Avro schemas. Returns the metadata, its log, and every retained snapshot's files (lake keys).
   */
  async validate(table: string): Promise<{ glue: GlueIcebergTable; metadata: Record<string, any>; log: string[]; snapshots: SnapshotView[] }> {
    const glue = await this.icebergTable(table);
    const metadata = await this.metadataAt(glue.metadataLocation);
    const { snapshots, spec, partition } = expectSpecMetadata(metadata);
    expect(metadata.location).toBe(this.uri(table));
    const log = (metadata["metadata-log"] as any[]).map((e) => e["metadata-file"] as string);
    expect(log.at(-1)).toBe(glue.previousMetadataLocation);
    for (const [i, earlier] of log.entries()) {
      const own = ((await this.metadataAt(earlier))["metadata-log"] as any[]).map((e) => e["metadata-file"]);
      // GC drops the oldest entries from the log (their files with them): an earlier file's log ends as this one's begins.
      expect(own.slice(own.length - i), `the metadata log of ${path.basename(earlier)}`).toEqual(log.slice(0, i));
    }
    const views: SnapshotView[] = [];
    for (const snapshot of snapshots) views.push(await this.snapshotView(snapshot, partition, spec.fields));
    return { glue, metadata, log, snapshots: views };
  }

  private async snapshotView(snapshot: Record<string, any>, partition: readonly { name: string; id: number }[], specFields: unknown): Promise<SnapshotView> {
    const list = await decodeWithSpec(await this.download(snapshot["manifest-list"]), SPEC_MANIFEST_FILE, ["snapshot-id", "sequence-number", "format-version"]);
    const files: SnapshotView["files"] = [];
    for (const manifest of list.records) {
      expect(manifest.sequence_number).toBeLessThanOrEqual(snapshot["sequence-number"]);
      const entries = await decodeWithSpec(await this.download(manifest.manifest_path), specManifestEntry(partition), ["schema", "schema-id", "partition-spec", "partition-spec-id", "format-version", "content"]);
      expect(entries.meta["format-version"]).toBe("2");
      expect(JSON.parse(entries.meta["partition-spec"] ?? "null")).toEqual(specFields);
      for (const entry of entries.records) {
        if (entry.status === 2) continue;
        files.push({ key: this.keyOf(entry.data_file.file_path), records: Number(entry.data_file.record_count), partition: entry.data_file.partition, metrics: metricsOf(entry.data_file) });
      }
    }
    expect(String(files.reduce((n, f) => n + f.records, 0))).toBe(snapshot.summary["total-records"]);
    return {
      snapshotId: snapshot["snapshot-id"],
      summary: snapshot.summary,
      files: files.sort((a, b) => (a.key < b.key ? -1 : 1)),
      manifests: list.records.map((m) => this.keyOf(m.manifest_path)),
      bounds: [],
    };
  }

  /** Downloads a lake file named by its s3:// URI; returns the local path. */
  private async download(uri: string): Promise<string> {
    const file = path.join(this.dir, `${(this.downloads += 1)}-${path.basename(uri)}`);
    writeFileSync(file, await this.get(this.keyOf(uri)));
    return file;
  }
}

/**
 * Checks one table on AWS: Glue's Iceberg table is valid, its current snapshot's files are exactly the Hive view's
 * current run files, and icebird reads the rows plain DuckDB reads. Returns what was read.
 */
export async function agreeOnAws(reader: AwsLakeReader, table: string, columns: readonly string[]): Promise<{ metadataLocation: string; previous: string | undefined; rows: string[]; snapshots: SnapshotView[]; summary: Record<string, string>; log: string[] }> {
  const { glue, metadata, log, snapshots } = await reader.validate(table);
  const current = snapshots.find((s) => s.snapshotId === metadata["current-snapshot-id"]);
  expect(current, `${table}'s current snapshot`).toBeDefined();
  expect(current?.files.map((f) => f.key)).toEqual(await reader.hiveFiles(table));
  const rows = await reader.hiveRows(table, columns, "day");
  expect(await reader.icebirdRows(table, columns, glue.metadataLocation)).toEqual(rows);
  return { metadataLocation: glue.metadataLocation, previous: glue.previousMetadataLocation, rows, snapshots, summary: current?.summary ?? {}, log };
}
