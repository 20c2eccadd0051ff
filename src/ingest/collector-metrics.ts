import type { Metrics } from "./metrics.js";
import type { AdaptiveLimit } from "../shared/adaptive-limit.js";

/** What a collector's metrics read when they are rendered. */
export interface CollectorReadings {
  readonly walBytes: () => number;
  readonly sealedSegments: () => number;
  readonly lagSeconds: () => number;
  readonly failingSeconds: () => number;
  readonly counts: () => { readonly accepted: number; readonly deduplicated: number; readonly written: number; readonly deadLettered: number; readonly corruptRecords: number; readonly quarantinedSegments: number };
  readonly idempotency: () => { readonly size: number; readonly replays: number; readonly conflicts: number; readonly evictions: number };
  readonly limits?: { readonly upload: AdaptiveLimit; readonly glue: AdaptiveLimit };
}

/** Registers one pipeline's collector metrics (labelled with the pipeline), brought up to date each time they are rendered. */
export function registerCollectorMetrics(metrics: Metrics, pipeline: string, read: CollectorReadings): void {
  const labels = { pipeline };
  // Counts are counters (they only grow), brought up to date when the metrics are rendered; what the log holds and how far
  // behind the uploader is are gauges.
  const gauge = (name: string, help: string, value: () => number): void => {
    const g = metrics.gauge(name, help, ["pipeline"], () => g.set(labels, value()));
  };
  const counter = (name: string, help: string, value: () => number): void => {
    let shown = 0;
    const c = metrics.counter(name, help, ["pipeline"], () => {
      const now = value();
      if (now > shown) c.inc(labels, now - shown);
      shown = now;
    });
  };
  gauge("lakeswap_ingest_wal_bytes", "Bytes in the write-ahead log (all segments).", read.walBytes);
  gauge("lakeswap_ingest_wal_sealed_segments", "Sealed segments waiting to be landed.", read.sealedSegments);
  gauge("lakeswap_ingest_upload_lag_seconds", "Age of the oldest event not yet landed and registered.", read.lagSeconds);
  gauge("lakeswap_ingest_landing_failing_seconds", "How long landing has kept failing (0 while it lands); past 120 s /healthz answers 503.", read.failingSeconds);
  const limits = read.limits;
  if (limits) {
    gauge("lakeswap_ingest_upload_concurrency", "The auto-tuned limit of S3 upload requests in flight (UPLOAD_CONCURRENCY).", () => limits.upload.current);
    gauge("lakeswap_ingest_glue_concurrency", "The auto-tuned limit of Glue calls in flight (ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY).", () => limits.glue.current);
  }
  counter("lakeswap_ingest_events_accepted_total", "Events acknowledged (durable in the write-ahead log).", () => read.counts().accepted);
  counter("lakeswap_ingest_events_deduplicated_total", "Events dropped at acceptance because their namespace took their id within its dedupe window.", () => read.counts().deduplicated);
  counter("lakeswap_ingest_events_written_total", "Events written to their namespaces' tables.", () => read.counts().written);
  counter("lakeswap_ingest_events_dead_lettered_total", "Events written to the dead-letter table instead.", () => read.counts().deadLettered);
  gauge("lakeswap_ingest_idempotency_keys", "Idempotency keys remembered (sent with requests within idempotency_window).", () => read.idempotency().size);
  counter("lakeswap_ingest_idempotent_replays_total", "Requests answered from their Idempotency-Key: retries of a request already stored, storing nothing.", () => read.idempotency().replays);
  counter("lakeswap_ingest_idempotency_conflicts_total", "Requests refused (422) because their Idempotency-Key stood for another request.", () => read.idempotency().conflicts);
  counter(
    "lakeswap_ingest_idempotency_evictions_total",
    "Idempotency keys forgotten within their window because more than idempotency_max_keys were remembered: a retry of such a request would be stored again.",
    () => read.idempotency().evictions,
  );
  counter("lakeswap_ingest_corrupt_records_total", "Corrupt write-ahead log records skipped.", () => read.counts().corruptRecords);
  counter(
    "lakeswap_ingest_segments_quarantined_total",
    "Segments moved out of the write-ahead log (to its quarantine folder) because the lake held other rows where their files go: a defect to look into.",
    () => read.counts().quarantinedSegments,
  );
}
