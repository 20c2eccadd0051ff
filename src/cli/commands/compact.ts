import type { Command } from "commander";
import { InvalidInputError, LakeswapError } from "../../model/errors.js";
import { parseByteSize } from "../../config/ingest-config.js";
import { formatDuration, parseDuration } from "../../model/duration.js";
import { assertTableName } from "../../model/sql.js";
import { compactTables, DEFAULT_COMPACT_FILE_BYTES, DEFAULT_COMPACT_OLDER_THAN_MS } from "../../lake/operations/compact.js";
import { Progress, formatTable, report } from "../output.js";
import { addWaitOptions, configSource, wantsJson, withLake } from "../context.js";

/** `lakeswap compact`: rewrites closed ingested partitions of many small files into one run each, by swap. */
export function registerCompact(program: Command): void {
  addWaitOptions(
    program
      .command("compact [table]")
      .description("rewrite each closed partition of an ingested table (one, or all) into a run of right-sized files and move its pointer to it")
      .option("--older-than <duration>", "a partition is closed once no event was added for this long", formatDuration(DEFAULT_COMPACT_OLDER_THAN_MS))
      .option("--target-size <size>", "about how large each compacted file grows: bytes, or 64MiB, 1GiB", "128MiB")
      .option("--partition <spec...>", "only these partitions of the table: p_year=2026/p_month=11/p_day=30")
      .option("--dry-run", "show what would be compacted, change nothing")
      .option("-c, --config <file>", "reach the lake of this pipeline config (lakeswap.yaml), as sync does")
      .option("--json", "print the report as JSON"),
  ).action(async (name: string | undefined, options: { olderThan: string; targetSize: string; partition?: string[]; dryRun?: boolean; config?: string }, command: Command) => {
    if (name !== undefined) assertTableName(name);
    if (options.partition !== undefined && name === undefined) throw new InvalidInputError("--partition names partitions of one table: name the table too (lakeswap compact TABLE --partition ...)");
    const olderThanMs = parseDuration(options.olderThan, "--older-than");
    const fileBytes = parseByteSize(options.targetSize, "--target-size");
    await withLake(command, async (lake) => {
      const progress = new Progress(wantsJson(command));
      const partitions = await compactTables(lake, name, {
        olderThanMs,
        fileBytes: fileBytes > 0 ? fileBytes : DEFAULT_COMPACT_FILE_BYTES,
        partitions: options.partition,
        dryRun: options.dryRun,
        onProgress: ({ done, total, label }) => progress.update(done, total, label),
      });
      progress.done();
      const compacted = partitions.filter((p) => p.status === "compacted" || p.status === "would compact");
      const refused = partitions.filter((p) => p.status === "refused");
      report(
        wantsJson(command),
        { dryRun: options.dryRun === true, olderThanMs, fileBytes, partitions, compacted: compacted.length, refused: refused.length },
        () => {
          const verb = options.dryRun ? "would compact" : "compacted";
          const filesBefore = compacted.reduce((sum, p) => sum + p.files, 0);
          const filesAfter = compacted.reduce((sum, p) => sum + (p.filesAfter ?? 0), 0);
          const head = `compact: ${verb} ${compacted.length} of ${partitions.length} partition(s)${options.dryRun ? "" : `, ${filesBefore} files into ${filesAfter}`}${refused.length > 0 ? `; refused ${refused.length}` : ""}`;
          if (partitions.length === 0) return head;
          const rows = partitions.map((p) => [p.table, p.partition, p.status, p.files, p.filesAfter ?? "", p.rows, p.runId ?? "", p.reason ?? ""]);
          return `${head}\n${formatTable(["table", "partition", "status", "files", "after", "rows", "run", "why"], rows)}`;
        },
      );
      if (refused.length > 0) {
        const first = refused[0]!;
        throw new LakeswapError("PARTIAL_FAILURE", `${refused.length} partition(s) were not compacted, their files left as they are: ${first.table}/${first.partition}: ${first.reason}`);
      }
    }, configSource(options.config));
  });
}
