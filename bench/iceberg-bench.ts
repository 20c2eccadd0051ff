import { promises as fs } from "node:fs";
import path from "node:path";
import { quoteLiteral } from "../src/model/sql.js";
import { BenchDuck } from "./duck.js";
import { lakeswapSync, type IcebergCommitJson, type SyncRun } from "./lakeswap-cli.js";
import { TINY_YAML } from "./scale-bench.js";
import { settleDisk } from "./stats.js";
import { ratioAtMost, type Verdict } from "./targets.js";

/*
 * Issue 28, item 6: what the Iceberg commit of a sync costs. An `iceberg: true` table of N day partitions of
 * ROWS rows each (raw layer only, one Parquet delivery), N = 10, 1,000 and 10,000, synced by the CLI into a fresh
 * embedded lake three times: the first load (N new partitions), the same rows with every value changed (N changed
 * partitions: every run replaced), and then with FEW partitions changed (the rest of the previous snapshot's
 * manifests reused). For each sync, from its report: the metadata files and bytes the commit wrote, the catalog
 * calls that moved the table's Iceberg pointer, the manifests reused, and the commit's wall time against the whole
 * sync process's. Target: at 1,000 partitions, the commit under 5% of the sync.
 */

const ROWS = 10;
const SIZES = [10, 1_000, 10_000] as const;
/** Partitions the third sync changes. */
const FEW = 10;
/** Target: the commit's share of a 1,000-partition sync. */
const COMMIT_SHARE_TARGET = 0.05;

/** The scale bench's pipeline of tiny day partitions, its raw table published as Iceberg. */
const YAML = TINY_YAML.replace("  events:\n", "  events:\n    iceberg: true\n");

/** One sync and its commit, from the sync's report. */
interface IcebergSync extends Omit<IcebergCommitJson, "table" | "ms"> {
  readonly kind: "first load" | "all changed" | "few changed";
  readonly built: number;
  readonly syncMs: number;
  readonly commitMs: number;
}

export interface IcebergFigures {
  readonly rowsPerPartition: number;
  readonly runs: readonly { readonly partitions: number; readonly syncs: readonly IcebergSync[] }[];
}

/** Writes the delivery of N partitions: every value bumped by `all`, and by `few` instead in the first FEW days. */
async function writeDelivery(duck: BenchDuck, file: string, partitions: number, bump: { all: number; few: number }): Promise<void> {
  await duck.run(
    `COPY (SELECT range::BIGINT AS event_id, DATE '1990-01-01' + (range // ${ROWS})::INTEGER AS event_day, 'kind-' || (range % 7)::VARCHAR AS kind, ` +
      `(range % 1000)::DOUBLE / 10 + CASE WHEN range // ${ROWS} < ${FEW} THEN ${bump.few} ELSE ${bump.all} END AS value ` +
      `FROM range(${partitions * ROWS}) ORDER BY hash(range)) TO ${quoteLiteral(file)} (FORMAT PARQUET)`,
  );
}

/** The figures of one measured sync; fails unless it built what it had to and committed one snapshot. */
function figures(run: SyncRun, kind: IcebergSync["kind"], expected: number): IcebergSync {
  if (run.failure !== undefined || run.report === undefined) throw new Error(`the ${kind} sync failed: ${run.failure ?? "stopped"}`);
  const report = run.report;
  if (report.totals.built !== expected) throw new Error(`the ${kind} sync built ${report.totals.built} partitions, expected ${expected}`);
  const commit = report.snapshots?.[0];
  if (report.snapshots?.length !== 1 || !commit) throw new Error(`the ${kind} sync committed ${report.snapshots?.length ?? 0} Iceberg snapshots, expected 1`);
  // Field by field: the report's commit carries more than the bench prints.
  const { filesWritten, bytesWritten, catalogCalls, manifestsReused, addedFiles, deletedFiles } = commit;
  return { kind, built: report.totals.built, syncMs: run.process.wallMs, commitMs: commit.ms, filesWritten, bytesWritten, catalogCalls, manifestsReused, addedFiles, deletedFiles };
}

/** The three syncs at each size, each in a fresh lake per size. */
export async function benchIceberg(workDir: string, progress: (message: string) => void): Promise<IcebergFigures> {
  const dir = path.join(workDir, "iceberg");
  await fs.mkdir(dir, { recursive: true });
  const config = path.join(dir, "lakeswap.yaml");
  await fs.writeFile(config, YAML);
  const runs: IcebergFigures["runs"][number][] = [];
  const duck = await BenchDuck.open();
  try {
    for (const partitions of SIZES) {
      const lakeDir = path.join(dir, `lake-${partitions}`);
      const few = Math.min(FEW, partitions);
      const steps: { kind: IcebergSync["kind"]; bump: { all: number; few: number }; built: number }[] = [
        { kind: "first load", bump: { all: 0, few: 0 }, built: partitions },
        { kind: "all changed", bump: { all: 1, few: 1 }, built: partitions },
        { kind: "few changed", bump: { all: 1, few: 2 }, built: few },
      ];
      const syncs: IcebergSync[] = [];
      for (const [i, step] of steps.entries()) {
        const input = path.join(dir, `events-${partitions}-${i}.parquet`);
        await writeDelivery(duck, input, partitions, step.bump);
        progress(`iceberg: ${step.kind}, ${partitions.toLocaleString("en-US")} partitions`);
        settleDisk();
        syncs.push(figures(await lakeswapSync({ config, input, lakeDir }), step.kind, step.built));
        await fs.rm(input, { force: true });
      }
      runs.push({ partitions, syncs });
      await fs.rm(lakeDir, { recursive: true, force: true });
    }
  } finally {
    duck.close();
  }
  return { rowsPerPartition: ROWS, runs };
}

/**
 * The target: a sync of N changed partitions at N = 1,000 (the first load and the sync that changes every partition;
 * the worse of the two), its commit under 5% of the sync. The sync of few changes is printed beside it, not judged:
 * the target speaks of N changed partitions.
 */
export function icebergVerdicts(figures: IcebergFigures): Verdict[] {
  const thousand = figures.runs.find((r) => r.partitions === 1_000);
  const judged = thousand?.syncs.filter((s) => s.kind !== "few changed") ?? [];
  const worst = judged.length > 0 ? Math.max(...judged.map((s) => s.commitMs / s.syncMs)) : undefined;
  const verdict = ratioAtMost("iceberg · commit / whole sync process, 1,000 changed partitions (the worse of first load and all changed)", worst, COMMIT_SHARE_TARGET);
  return [{ ...verdict, target: `< ${(COMMIT_SHARE_TARGET * 100).toFixed(0)}%`, measured: worst === undefined ? verdict.measured : `${(worst * 100).toFixed(2)}%` }];
}

/** One row per sync: what the commit wrote and cost. */
export function renderIceberg(figures: IcebergFigures, table: (header: string[], rows: string[][]) => string): string {
  const title =
    `iceberg · the commit of a sync of an iceberg: true table, N day partitions of ${figures.rowsPerPartition} rows (raw layer), a fresh embedded lake per N · ` +
    "first load, then every partition changed, then " + `${FEW} changed · figures from each sync's report, sync time = the CLI process's wall time`;
  const rows = figures.runs.flatMap((run) =>
    run.syncs.map((s) => [
      run.partitions.toLocaleString("en-US"),
      s.kind,
      `+${s.addedFiles.toLocaleString("en-US")}/-${s.deletedFiles.toLocaleString("en-US")}`,
      String(s.filesWritten),
      `${(s.bytesWritten / 1024).toFixed(1)} KiB`,
      String(s.catalogCalls),
      String(s.manifestsReused),
      `${s.commitMs.toFixed(1)} ms`,
      `${(s.syncMs / 1000).toFixed(2)} s`,
      `${((s.commitMs / s.syncMs) * 100).toFixed(2)}%`,
    ]),
  );
  return [title, table(["partitions", "sync", "data files", "files written", "bytes written", "catalog calls", "manifests reused", "commit", "sync", "commit share"], rows)].join("\n");
}
