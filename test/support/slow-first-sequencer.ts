/**
 * vitest's file order (vitest.config.ts `sequence.sequencer`): the longest files first, so that the two workers end
 * together instead of one running a long file alone at the end. vitest orders by the durations it cached from the
 * previous run, but CI starts without that cache (`npm ci` empties node_modules/.vite) and then vitest orders by file
 * size, which says little here: sync-crash.test.ts, 114 lines, was the longest file and started near the end. Without
 * a cached duration a file takes the one below, measured on a full run (seconds; files under 10 s are left out).
 */
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** Seconds per file on a full run of `npm test` on 2 cores (the run of 2 December 2026, before issue 26's speed-ups). */
const MEASURED_SECONDS: Readonly<Record<string, number>> = {
  "test/pipeline/sync-crash.test.ts": 190,
  "test/lake/concurrent-readers.test.ts": 180,
  "test/lake/writer-lease.test.ts": 177,
  "test/pipeline/pipeline.test.ts": 151,
  "test/lake/rollback.test.ts": 133,
  "test/ingest/ingest-crash.test.ts": 128,
  "test/lake/crash-safety.test.ts": 121,
  "test/sources/http-source-crash.test.ts": 120,
  "test/model/lake-model.test.ts": 102,
  "test/sinks/postgres-sink.test.ts": 90,
  "test/sinks/postgres-sink-mirror.test.ts": 66,
  "test/pipeline/write-modes.test.ts": 60,
  "test/ingest/ingest-service.test.ts": 57,
  "test/pipeline/aws-calls.test.ts": 48,
  "test/sources/http-source.test.ts": 39,
  "test/pipeline/write-modes-crash.test.ts": 38,
  "test/catalog/glue-batches.test.ts": 36,
  "test/pipeline/known-delivery.test.ts": 36,
  "test/engine/many-partitions.test.ts": 27,
  "test/store/s3-store.test.ts": 25,
  "test/engine/landing-input.test.ts": 23,
  "test/cli/pipeline-cli.test.ts": 21,
  "test/sinks/postgres-sink-cli.test.ts": 21,
  "test/cli/demo-upsert.test.ts": 19,
  "test/ingest/wal.test.ts": 18,
  "test/lake/names.test.ts": 16,
  "test/engine/landing-memory.test.ts": 16,
  "test/lake/audit.test.ts": 15,
  "test/lake/lease-read-back.test.ts": 14,
  "test/cli/bundle.test.ts": 11,
  "test/ingest/dead-letter-keys.test.ts": 11,
  "test/pipeline/sync-under-lease.test.ts": 11,
};

/** Orders test files longest first: by vitest's cached duration when it has one for every file, else by MEASURED_SECONDS. */
export default class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const relative = (file: TestSpecification): string => file.moduleId.slice(root.length + 1);
    const cached = (file: TestSpecification) => this.ctx.cache.getFileTestResults(`${file.project.name}:${relative(file)}`);
    // vitest's own order when it knows every file's duration (a local rerun); it also runs failed files first.
    if (files.every((file) => cached(file) !== undefined)) return super.sort(files);
    const seconds = (file: TestSpecification): number => MEASURED_SECONDS[relative(file)] ?? 0;
    const bySize = await super.sort(files);
    // Array.prototype.sort is stable: files of equal estimate keep vitest's order.
    return bySize.sort((a, b) => seconds(b) - seconds(a));
  }
}
