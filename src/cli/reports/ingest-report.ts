import type { SegmentReport } from "../../ingest/segment-lander.js";
import { formatTable } from "../output.js";

/** `lakeswap ingest`'s report: what was accepted, and what each segment landed (with any the log held before). */
export interface IngestReport {
  readonly pipeline: string;
  readonly namespace: string;
  readonly accepted: number;
  /** Of `accepted`, the events of input stored before under the same --idempotency-key: stored nothing this time. */
  readonly replayed: number;
  /** Events dropped because their namespace took their id within its `dedupe` window. */
  readonly deduplicated: number;
  readonly events: number;
  readonly written: number;
  readonly deadLettered: number;
  readonly files: number;
  readonly seconds: number;
  readonly segments: readonly SegmentReport[];
}

/** The report of `segments` landed after `accepted` events were appended to `pipeline`/`namespace`, `started` (ms) ago. */
export function ingestReport(
  pipeline: string,
  namespace: string,
  { accepted, replayed, deduplicated }: { accepted: number; replayed: number; deduplicated: number },
  segments: readonly SegmentReport[],
  started: number,
): IngestReport {
  return {
    pipeline,
    namespace,
    accepted,
    replayed,
    deduplicated,
    events: segments.reduce((sum, s) => sum + s.events, 0),
    written: segments.reduce((sum, s) => sum + s.written, 0),
    deadLettered: segments.reduce((sum, s) => sum + s.deadLettered, 0),
    files: segments.reduce((sum, s) => sum + s.files, 0),
    seconds: (Date.now() - started) / 1000,
    segments,
  };
}

/** `lakeswap ingest`'s text report: the totals, then a line per segment landed. */
export function ingestReportText(report: IngestReport): string {
  return [
    `${report.pipeline}/${report.namespace}: ${report.accepted} events accepted` +
      (report.replayed > 0 ? ` (${report.replayed} of them stored before under the same idempotency key: not stored again)` : "") +
      (report.deduplicated > 0 ? `; ${report.deduplicated} dropped as duplicates (their ids were taken within the dedupe window)` : "") +
      `; landed ${report.events} (with any earlier events the log held): ${report.written} written, ${report.deadLettered} dead-lettered` +
      (report.deadLettered > 0 ? ` (table ${report.pipeline})` : ""),
    "",
    formatTable(
      ["segment", "events", "written", "dead-lettered", "files"],
      report.segments.map((s) => [s.segment, s.quarantined !== undefined ? "quarantined" : s.events, s.written, s.deadLettered, s.files]),
    ),
  ].join("\n");
}
