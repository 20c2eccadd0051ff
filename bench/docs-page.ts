import { execFileSync } from "node:child_process";
import { promises as fs } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./lakeswap-cli.js";
import { buildReport, nodeStartText, renderText, type BenchSections, type Machine } from "./report.js";
import { verdictWord, type Verdict } from "./targets.js";

/**
 * docs/benchmarks.md holds the method as prose, written by hand, and one block of figures per section, written by
 * `npm run bench`: a run replaces the blocks of the sections it ran and leaves the others (and the prose) as they are,
 * so that `--only ingest` refreshes the ingest figures alone. Each block says when, where and at which commit it ran.
 */
export const BENCHMARKS_PAGE = path.join(REPO_ROOT, "docs", "benchmarks.md");

/** The report keys each section of the bench fills, and the names its failures are reported under. */
const SECTION_KEYS: Readonly<Record<string, readonly (keyof BenchSections)[]>> = {
  replace: ["replace", "swap"],
  signature: ["signature"],
  mtd: ["mtd"],
  delivery: ["delivery"],
  floor: ["floors"],
  scale: ["scale"],
  iceberg: ["iceberg"],
  aws: ["aws"],
  sink: ["sink"],
  upsert: ["upsert"],
  ingest: ["ingest"],
  metrics: ["metrics"],
};

/** What one run wrote into the page. */
export interface PageUpdate {
  /** Sections whose block now holds this run's figures. */
  readonly written: readonly string[];
  /** Sections that ran but failed: their block keeps the figures of an earlier run. */
  readonly keptAfterFailure: readonly string[];
}

/** The comment lines that open and close a section's block of figures. */
function blockMarkers(section: string): { readonly start: string; readonly end: string } {
  return {
    start: `<!-- bench:figures ${section} · written by \`npm run bench\`: do not edit by hand (bench/docs-page.ts writes it) -->`,
    end: `<!-- /bench:figures ${section} -->`,
  };
}

/**
 * Replaces the figures of every section this run measured in `page` (docs/benchmarks.md by default), keeping the
 * prose and the blocks of sections it did not run or that failed. A section whose block is missing is appended.
 */
export async function writeBenchmarksPage(
  run: { readonly machine: Machine; readonly sections: BenchSections; readonly failed: readonly { readonly section: string; readonly error: string }[]; readonly command: string },
  page: string = BENCHMARKS_PAGE,
): Promise<PageUpdate> {
  let text = await fs.readFile(page, "utf8");
  const written: string[] = [];
  const keptAfterFailure: string[] = [];
  const provenance = describeRun(run.machine, run.command);
  for (const [section, keys] of Object.entries(SECTION_KEYS)) {
    const figures = Object.fromEntries(keys.filter((key) => run.sections[key] !== undefined).map((key) => [key, run.sections[key]])) as BenchSections;
    const failed = run.failed.some((f) => f.section === section || f.section.startsWith(`${section} `));
    if (failed) {
      keptAfterFailure.push(section);
      continue;
    }
    if (Object.keys(figures).length === 0) continue;
    text = replaceBlock(text, section, renderBlock(provenance, buildReport(run.machine, figures)));
    written.push(section);
  }
  if (written.length > 0) await fs.writeFile(page, text);
  return { written, keptAfterFailure };
}

/** `text` with the block of `section` holding `body` (appended at the end when the page has no such block). */
function replaceBlock(text: string, section: string, body: string): string {
  const { start, end } = blockMarkers(section);
  const block = `${start}\n${body}\n${end}`;
  const from = text.indexOf(start);
  const to = from < 0 ? -1 : text.indexOf(end, from);
  if (from < 0 || to < 0) return `${text.trimEnd()}\n\n### ${section}\n\n${block}\n`;
  return text.slice(0, from) + block + text.slice(to + end.length);
}

/** The line that says when, on what and at which commit a block's figures were measured. */
function describeRun(machine: Machine, command: string): string {
  return (
    `Measured ${machine.startedAt} by \`${command}\`${commitOfWorkTree()}, on ${machine.cpus} cpus (${machine.cpuModel}), ` +
    `${machine.memoryGb} GB, ${machine.platform}, Node ${machine.node}, DuckDB ${machine.duckdb}; load average ` +
    `${machine.loadAverage.start.toFixed(1)} at the start of the run, ${machine.loadAverage.end.toFixed(1)} at its end ` +
    `(above ${machine.cpus}, other work shared the cpus and slowed every figure)${nodeStartText(machine.nodeStart).replace(" · ", "; ")}.`
  );
}

/** " at commit abc1234" (with "plus uncommitted changes" when the work tree differs), or "" outside a git checkout. */
function commitOfWorkTree(): string {
  try {
    const git = (args: string[]): string => execFileSync("git", args, { cwd: REPO_ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    const commit = git(["rev-parse", "--short", "HEAD"]);
    // The page itself changes with every run; only other changes make the figures those of uncommitted code.
    const dirty = git(["status", "--porcelain", "--", ".", ":(exclude)docs/benchmarks.md"]) !== "";
    return ` at commit ${commit}${dirty ? " plus uncommitted changes" : ""}`;
  } catch {
    return "";
  }
}

/** One section's block: provenance, its targets as a table, then the bench's own text report of it. */
function renderBlock(provenance: string, report: ReturnType<typeof buildReport>): string {
  const parts = [provenance, ""];
  if (report.targets.length > 0) parts.push(targetsTable(report.targets), "");
  // The report's first two lines describe the machine, which the provenance line says; its closing list of targets is
  // the table above.
  const lines = renderText(report).split("\n").slice(3);
  const targetsAt = lines.map((line) => line.startsWith("targets: ")).lastIndexOf(true);
  const body = (targetsAt < 0 ? lines : lines.slice(0, targetsAt)).join("\n").trimEnd();
  parts.push("```text", body, "```");
  return parts.join("\n");
}

/** The targets a section judged, as a Markdown table. */
function targetsTable(targets: readonly Verdict[]): string {
  const cell = (text: string): string => text.replaceAll("|", "\\|");
  const rows = targets.map((t) => `| ${cell(t.measure)} | ${cell(t.measured)} | ${cell(t.target)} | ${verdictWord(t.met)}${t.note ? ` (${cell(t.note)})` : ""} |`);
  return ["| target | measured | limit | verdict |", "| --- | --- | --- | --- |", ...rows].join("\n");
}
