import { createReadStream } from "node:fs";
import type { Readable } from "node:stream";
import type { Command } from "commander";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import type { IngestPipelineConfig } from "../../config/ingest-config.js";
import { InvalidInputError, LakeswapError } from "../../model/errors.js";
import type { Collector } from "../../ingest/collector.js";
import { idempotencyKeyOf } from "../../ingest/idempotency.js";
import type { SegmentReport } from "../../ingest/segment-lander.js";
import { report } from "../output.js";
import { wantsJson } from "../context.js";
import { chooseNamespace, choosePipelines, ingestModules, sayWhereItRuns } from "../ingest-pipelines.js";
import { ingestReport, ingestReportText } from "../reports/ingest-report.js";

/** The largest file or stdin `lakeswap ingest` appends as one record; larger input goes in several. */
const INGEST_CHUNK_BYTES = 8 * 1024 * 1024;

/** `lakeswap ingest`: appends events from a file or stdin to a pipeline's write-ahead log, lands them, and reports. */
export function registerIngest(program: Command): void {
  program
    .command("ingest")
    .description("append events from a file or stdin (NDJSON, or a JSON array) to a pipeline, land them, and report")
    .argument("<pipeline>", "the pipeline (pipelines.<name> in the config)")
    .argument("[file]", "an NDJSON or JSON file; - or nothing: stdin")
    .option("-c, --config <file>", "the config with pipelines:", "lakeswap.yaml")
    .option("--namespace <name>", "the namespace of the events (default: the pipeline's only namespace)")
    .option("--format <format>", "ndjson or json (default: from the file name, else by its first character)")
    .option("--idempotency-key <key>", "a key for this input (1-128 bytes, e.g. a UUID): run again with the same key and input, the command stores nothing new")
    .option("--json", "print the report as JSON")
    .action(async (pipelineName: string, file: string | undefined, options: { config: string; namespace?: string; format?: string; idempotencyKey?: string }, command: Command) => {
      const { Metrics, IngestLakes, openCollector } = await ingestModules();
      const config = loadPipelineConfig(options.config);
      const [pipeline] = choosePipelines(config, [pipelineName]) as [IngestPipelineConfig];
      const namespace = chooseNamespace(pipeline, options.namespace);
      sayWhereItRuns([pipeline], config.file);
      const lakes = new IngestLakes();
      const started = Date.now();
      try {
        const service = await openCollector(pipeline, lakes, new Metrics());
        const key = checkedKey(options.idempotencyKey);
        const { segments, ...counts } = await appendAndLand(service, { pipeline: pipeline.name, namespace, key }, chunks(file, options.format));
        const totals = ingestReport(pipeline.name, namespace, counts, segments, started);
        report(wantsJson(command), totals, () => ingestReportText(totals));
        refuseQuarantined(segments);
      } finally {
        await lakes.close();
      }
    });
}

/** Appends every body to the collector's log, then lands all it holds; the collector is closed either way. */
async function appendAndLand(
  service: Collector,
  { pipeline, namespace, key }: { pipeline: string; namespace: string; key: string | undefined },
  bodies: AsyncIterable<{ body: Buffer; format: "ndjson" | "json" }>,
): Promise<{ accepted: number; replayed: number; deduplicated: number; segments: SegmentReport[] }> {
  let accepted = 0;
  let replayed = 0;
  let deduplicated = 0;
  let part = 0;
  try {
    for await (const { body, format } of bodies) {
      // Input over INGEST_CHUNK_BYTES goes in several records: each has a key of its own, the same on every run of the same input.
      const idempotencyKey = key === undefined ? {} : { idempotencyKey: part === 0 ? key : `${key}#${part}` };
      part += 1;
      const answer = await service.accept({ pipeline, namespace, body, format, ...idempotencyKey });
      accepted += answer.accepted;
      if (answer.replayed) replayed += answer.accepted;
      else deduplicated += answer.deduplicated ?? 0;
    }
    return { accepted, replayed, deduplicated, segments: await service.flush() };
  } finally {
    await service.close();
  }
}

/** `--idempotency-key` checked as the collector checks the header (1-128 bytes, printable). */
function checkedKey(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  try {
    return idempotencyKeyOf(key);
  } catch (error) {
    throw new InvalidInputError(`--idempotency-key: ${(error as Error).message.replace(/^the Idempotency-Key header|^Idempotency-Key/, "the key")}`);
  }
}

/** Fails the command (exit code of a conflict) when a segment was quarantined, after the report said what landed. */
function refuseQuarantined(segments: readonly SegmentReport[]): void {
  const quarantined = segments.filter((s) => s.quarantined !== undefined);
  if (quarantined.length === 0) return;
  throw new LakeswapError(
    "CONFLICT",
    `${quarantined.length} segment(s) could not land, because the lake holds other rows where their files go, and were moved out of the log: ` +
      `${quarantined.map((s) => s.quarantined).join(", ")} (their events are kept there; the log's messages above name the objects)`,
  );
}

/**
 * The input as bodies of whole lines, each at most about INGEST_CHUNK_BYTES (a JSON array is read whole: it is
 * one value). NDJSON is split at line ends, so no event is cut.
 */
async function* chunks(file: string | undefined, format: string | undefined): AsyncGenerator<{ body: Buffer; format: "ndjson" | "json" }> {
  const stream: Readable = file === undefined || file === "-" ? process.stdin : createReadStream(file);
  if (format !== undefined && format !== "ndjson" && format !== "json") throw new InvalidInputError(`--format '${format}' is not known: use ndjson or json`);
  let kind: "ndjson" | "json" | undefined = (format as "ndjson" | "json" | undefined) ?? (file?.endsWith(".json") ? "json" : file && /\.(ndjson|jsonl)$/.test(file) ? "ndjson" : undefined);
  let held: Buffer[] = [];
  let heldBytes = 0;
  for await (const piece of stream as AsyncIterable<Buffer>) {
    if (kind === undefined) {
      const first = piece.toString("utf8").trimStart()[0];
      if (first !== undefined) kind = first === "[" ? "json" : "ndjson";
    }
    held.push(piece);
    heldBytes += piece.length;
    if (kind === "ndjson" && heldBytes >= INGEST_CHUNK_BYTES) {
      const all = Buffer.concat(held);
      const end = all.lastIndexOf(10);
      if (end >= 0) {
        yield { body: all.subarray(0, end + 1), format: "ndjson" };
        held = [all.subarray(end + 1)];
        heldBytes = held[0]!.length;
      }
    }
  }
  if (heldBytes > 0) yield { body: Buffer.concat(held), format: kind ?? "ndjson" };
}
