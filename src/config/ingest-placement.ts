import path from "node:path";
import { InvalidInputError } from "../model/errors.js";
import { printable } from "../model/sql.js";
import type { DataSinkTarget, IngestContext, IngestPipelineConfig } from "./ingest-types.js";

/**
 * The data sink datasets run on: `target:`; else the only data sink; else, with several and no datasets, the one
 * every pipeline writes to (so that `lakeswap query -c` reads the ingested tables); else none.
 */
export function chooseDatasetsSink(
  names: readonly string[],
  pipelines: readonly IngestPipelineConfig[],
  writtenTo: ReadonlySet<string | undefined>,
  context: IngestContext,
  dataSink: (name: string) => DataSinkTarget,
): DataSinkTarget | undefined {
  let chosen: DataSinkTarget | undefined;
  if (context.target !== undefined) {
    const name = names.find((n) => n === context.target || `data_sinks.${n}` === context.target);
    if (name === undefined) {
      const known = names.length > 0 ? `defined data sinks: ${names.join(", ")}` : "no data sinks are defined";
      throw new InvalidInputError(`target: '${printable(context.target)}' is not a data sink${context.didYouMean(context.target.replace(/^data_sinks\./, ""), names)}; ${known}`);
    }
    chosen = dataSink(name);
  } else if (names.length === 1) {
    chosen = dataSink(names[0]!);
  } else if (names.length > 1) {
    const [only] = writtenTo;
    if (context.datasetTables.length === 0 && writtenTo.size === 1 && only !== undefined) chosen = pipelines[0]!.dataSink;
    else if (context.datasetTables.length > 0) throw new InvalidInputError(`target: name the data sink the datasets run on (one of ${names.join(", ")})`);
  }
  if (chosen?.kind === "local" && context.lake !== undefined && chosen.path !== context.lake) {
    throw new InvalidInputError(
      `lake: '${context.lake}' and data_sinks.${chosen.name}.Local.path '${chosen.path}' name different folders, and the datasets run on one lake: ` +
        `remove lake: (data_sinks.${chosen.name} sets it), or make them the same`,
    );
  }
  return chosen;
}

/** Where a sink keeps tables: the places a table name must be unique in. */
function places(sink: DataSinkTarget, database?: string): string[] {
  if (sink.kind === "local") return [`the lake folder ${sink.path}`];
  const s3 = `s3://${sink.aws.bucket}${sink.aws.prefix ? `/${sink.aws.prefix}` : ""}`;
  return [`Glue database ${database ?? sink.aws.database}`, s3];
}

/** Refuses two tables of one name in one place: namespaces, dead letters, and the datasets' tables on their sink. */
export function checkTables(pipelines: readonly IngestPipelineConfig[], datasetsOn: DataSinkTarget | undefined, context: IngestContext): void {
  const claims = new Map<string, string>();
  const claim = (where: readonly string[], table: string, by: string) => {
    for (const place of where) {
      const other = claims.get(`${place}\0${table}`);
      if (other !== undefined && other !== by) {
        throw new InvalidInputError(`${by}: table '${table}' in ${place} is also ${other}; give each its own name (or its own sink)`);
      }
      claims.set(`${place}\0${table}`, by);
    }
  };
  const datasetPlaces = datasetsOn ? places(datasetsOn) : [];
  for (const { table, where } of context.datasetTables) claim(datasetPlaces, table, where);
  for (const pipeline of pipelines) {
    for (const namespace of pipeline.namespaces) claim(places(pipeline.dataSink, pipeline.schemaSink?.database), namespace.name, `pipelines.${pipeline.name}.namespaces.${namespace.name}`);
    claim(places(pipeline.deadletterSink), pipeline.name, `pipelines.${pipeline.name} (its dead letters)`);
  }
}

/** Refuses a write-ahead log shared by two pipelines, or kept inside a lake folder. */
export function checkLogs(pipelines: readonly IngestPipelineConfig[], lake: string | undefined): void {
  const inside = (child: string, parent: string) => child === parent || child.startsWith(parent.endsWith(path.sep) ? parent : parent + path.sep);
  const lakes = new Set<string>();
  for (const sink of pipelines.flatMap((p) => [p.dataSink, p.deadletterSink])) if (sink.kind === "local") lakes.add(sink.path);
  if (lake !== undefined) lakes.add(lake);
  pipelines.forEach((pipeline, index) => {
    const at = `pipelines.${pipeline.name}.wal.dir`;
    for (const other of pipelines.slice(0, index)) {
      if (inside(pipeline.wal.dir, other.wal.dir) || inside(other.wal.dir, pipeline.wal.dir)) {
        throw new InvalidInputError(`${at}: '${pipeline.wal.dir}' overlaps the log of pipeline ${other.name} ('${other.wal.dir}'); give each pipeline its own folder`);
      }
    }
    for (const folder of lakes) {
      if (inside(pipeline.wal.dir, folder) || inside(folder, pipeline.wal.dir)) {
        throw new InvalidInputError(`${at}: '${pipeline.wal.dir}' overlaps the lake folder '${folder}'; keep the log outside the lake (default .lakeswap-wal/${pipeline.name})`);
      }
    }
  });
}
