/**
 * vitest's file order (vitest.config.ts `sequence.sequencer`): the longest files first, so that the two workers end
 * together instead of one running a long file alone at the end. vitest orders by the durations it cached from the
 * previous run, but CI starts without that cache (`npm ci` empties node_modules/.vite) and then vitest orders by file
 * size, which says little here: sync-crash.test.ts, 114 lines, was the longest file and started near the end. Without
 * a cached duration a file takes the one below, measured on a full run (seconds; files under 10 s are left out).
 */
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Seconds per file, the mean of three full runs of `npm test` on 2 cores (6 December 2026, at 1075410-63d05ad). A file
 * written since the table before it had no estimate, and started after every file in it.
 */
const MEASURED_SECONDS: Readonly<Record<string, number>> = {
  "test/pipeline/pipeline.test.ts": 64,
  "test/ingest/compact.test.ts": 61,
  "test/pipeline/schema-rebuild.test.ts": 55,
  "test/model/lake-model.test.ts": 50,
  "test/lake/rollback.test.ts": 50,
  "test/pipeline/partition-key-change.test.ts": 48,
  "test/engine/landing-memory.test.ts": 43,
  "test/pipeline/sync-crash.test.ts": 42,
  "test/lake/writer-lease.test.ts": 41,
  "test/pipeline/partition-key-change-crash.test.ts": 41,
  "test/pipeline/all-or-nothing-crash.test.ts": 39,
  "test/engine/csv-streaming.test.ts": 37,
  "test/ingest/ingest-crash.test.ts": 36,
  "test/iceberg/iceberg-aws-crash.test.ts": 35,
  "test/sinks/postgres-sink.test.ts": 34,
  "test/pipeline/schema-rebuild-crash.test.ts": 33,
  "test/catalog/glue-schema-change.test.ts": 31,
  "test/lake/crash-safety.test.ts": 29,
  "test/ingest/ingest-service.test.ts": 28,
  "test/pipeline/write-modes.test.ts": 25,
  "test/lake/concurrent-readers.test.ts": 24,
  "test/pipeline/hold-publish.test.ts": 23,
  "test/catalog/catalog-file-history.test.ts": 23,
  "test/iceberg/iceberg-aws.test.ts": 23,
  "test/sinks/postgres-sink-mirror.test.ts": 22,
  "test/pipeline/schema-change.test.ts": 20,
  "test/sources/http-source.test.ts": 20,
  "test/sources/http-source-crash.test.ts": 19,
  "test/catalog/glue-batches.test.ts": 19,
  "test/engine/landing-input.test.ts": 18,
  "test/pipeline/schema-change-crash.test.ts": 17,
  "test/engine/write-first.test.ts": 17,
  "test/ingest/wal.test.ts": 17,
  "test/pipeline/aws-calls.test.ts": 16,
  "test/pipeline/audits.test.ts": 15,
  "test/lake/catalog-file-readers.test.ts": 12,
  "test/sinks/postgres-sink-cli.test.ts": 12,
  "test/iceberg/iceberg-crash.test.ts": 11,
  "test/pipeline/write-modes-crash.test.ts": 11,
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
