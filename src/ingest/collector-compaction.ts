import type { IngestPipelineConfig } from "../config/ingest-types.js";
import type { Lake } from "../lake/lake.js";
import { compactTables, type PartitionCompaction } from "../lake/operations/compact.js";
import { errorMessage } from "../model/errors.js";

/** The shortest time between two compactions of a collector, whatever `compact.after` says. */
const MIN_INTERVAL_MS = 60_000;

/**
 * A collector's own compaction (its pipeline's `compact: {after, target_size}`): the closed days of its namespaces'
 * tables and of its dead-letter table, compacted between landings (never beside one: the collector's own leases are
 * taken one at a time), at most every tenth of `after`. A failure is logged and left for the next round; landing goes on.
 */
export class CollectorCompaction {
  private last = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly config: NonNullable<IngestPipelineConfig["compact"]>,
    private readonly targets: readonly { readonly lake: Lake; readonly tables: readonly string[] }[],
    private readonly log: (line: string) => void,
  ) {}

  /** The compaction of a pipeline that asks for one (`compact:`): its namespaces' tables and its dead-letter table. */
  static of(pipeline: IngestPipelineConfig, lakes: { readonly lake: Lake; readonly deadLetterLake: Lake }, log: (line: string) => void): CollectorCompaction | undefined {
    if (!pipeline.compact) return undefined;
    const targets = [{ lake: lakes.lake, tables: pipeline.namespaces.map((ns) => ns.name) }, { lake: lakes.deadLetterLake, tables: [pipeline.name] }];
    return new CollectorCompaction(pipeline.compact, targets, log);
  }

  /** Whether a round is due now. */
  due(now = Date.now()): boolean {
    return now - this.last >= Math.max(MIN_INTERVAL_MS, this.config.afterMs / 10);
  }

  /** Compacts every closed day of the tables; logs what it compacted, refused or could not do. */
  async run(): Promise<PartitionCompaction[]> {
    this.last = Date.now();
    const reports: PartitionCompaction[] = [];
    for (const { lake, tables } of this.targets) {
      for (const table of tables) {
        try {
          reports.push(...(await compactTables(lake, table, { olderThanMs: this.config.afterMs, fileBytes: this.config.fileBytes })));
        } catch (error) {
          this.log(`compaction of ${table} failed (${errorMessage(error)}); it is tried again in the next round`);
        }
      }
    }
    for (const report of reports) {
      if (report.status === "compacted") this.log(`compacted ${report.table}/${report.partition}: ${report.files} files into ${report.filesAfter ?? 0}`);
      if (report.status === "refused") this.log(`compaction of ${report.table}/${report.partition} refused: ${report.reason ?? ""}`);
    }
    return reports;
  }
}
