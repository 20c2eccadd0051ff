import type { ApiCalls } from "./aws-lake.js";
import type { AwsDeliveryFigures, DeliveryFigures } from "./delivery-bench.js";
import { DELIVERY_TARGETS } from "./delivery-bench.js";
import { floorVerdicts, renderFloors, type FloorFigures } from "./floor-bench.js";
import {
  INGEST_LIMIT_FRACTION_TARGET,
  INGEST_LIMIT_MEASURE,
  INGEST_PER_CORE_LANDED_MEASURE,
  INGEST_PER_CORE_MEASURE,
  INGEST_PER_CORE_TARGET,
  type IngestFigures,
  type LimitRun,
  type Percentiles,
  type ServeRun,
} from "./ingest-bench.js";
import { LAKE_UPSERT_LIMIT, LAKE_UPSERT_MEASURE, type LakeUpsertFigures, type VariantFigures } from "./lake-upsert-bench.js";
import type { MetricsFigures, MetricsVariant } from "./metrics-bench.js";
import { icebergVerdicts, renderIceberg, type IcebergFigures } from "./iceberg-bench.js";
import type { MtdFigures, MtdSync } from "./mtd-bench.js";
import { MTD_FLOOR_TARGET, SMALL_BUILD_OVERHEAD_TARGET_MS, type SmallBuildFigures } from "./small-builds.js";
import { PG_REPLACE_MEASURE, PG_REPLACE_TARGET, PG_UPSERT_MEASURE, PG_UPSERT_TARGET, type PgUpsertFigures } from "./pg-upsert-bench.js";
import type { ReplaceFigures } from "./replace-bench.js";
import {
  GLUE_BATCH,
  O1_CALLS,
  SCALE_RATIO_TARGET,
  glueListings,
  glueWrites,
  type AwsScaleFigures,
  type ScaleFigures,
  type TinyRun,
  type TinySync,
} from "./scale-bench.js";
import type { MethodFigures, SignatureFigures } from "./signature-bench.js";
import { median, type Timing } from "./stats.js";
import type { SwapFigures } from "./swap-bench.js";
import { countAtMost, quantityAtLeast, ratioAtLeast, ratioAtMost, ratioBelow, verdictLine, verdictWord, type Verdict } from "./targets.js";

/** Where the benchmark ran. */
export interface Machine {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly platform: string;
  readonly node: string;
  readonly duckdb: string;
  readonly tmpdir: string;
  readonly memoryGb: number;
  /** 1-minute load averages at the start and the end: other work on the machine slows every figure. */
  readonly loadAverage: { readonly start: number; readonly end: number };
  /** When the run started (ISO 8601). */
  readonly startedAt: string;
  /** Median wall time of `node -e 0` (ms), in every process figure; without NODE_EXTRA_CA_CERTS where the environment sets it. */
  readonly nodeStart?: { readonly ms: number; readonly withoutExtraCaCertsMs?: number };
  /** Wall time of the whole run. */
  readonly totalMs: number;
  /** `npm run build` before the CLI benchmarks (undefined when none ran). */
  readonly buildMs?: number;
}

/** Month-to-date on AWS: its figures, or why it did not run. */
interface AwsMtd {
  readonly figures?: MtdFigures;
  readonly note: string;
}

/** What ran on the AWS emulators. */
export interface AwsFigures {
  readonly delivery?: AwsDeliveryFigures;
  readonly scale?: AwsScaleFigures;
  readonly mtd?: AwsMtd;
}

/** Everything one run of the benchmark measured; a section is absent when --only left it out. */
export interface BenchReport {
  readonly machine: Machine;
  readonly replace?: ReplaceFigures;
  readonly swap?: SwapFigures;
  readonly signature?: SignatureFigures;
  readonly mtd?: MtdFigures;
  readonly delivery?: DeliveryFigures;
  /** Parquet and CSV deliveries against plain DuckDB's floor (issue 27). */
  readonly floors?: FloorFigures;
  readonly scale?: ScaleFigures;
  /** What a sync's Iceberg commit writes and costs at 10, 1,000 and 10,000 partitions (issue 28). */
  readonly iceberg?: IcebergFigures;
  readonly aws?: AwsFigures;
  /** PostgreSQL sink, 1M rows: upsert against psycopg2 executemany, partition replace against a plain COPY (issues 11, 27). */
  readonly sink?: PgUpsertFigures;
  /** Lake upsert of 100,000 changed keys into a 3M-row table against rewriting the whole table (issue 11). */
  readonly upsert?: LakeUpsertFigures;
  /** Durable events per second through lakeswap serve against the disk's limit, and the latency to queryable (issue 12). */
  readonly ingest?: IngestFigures;
  /** The collector's POST path with its prom-client metrics against a no-op registry (issue 26). */
  readonly metrics?: MetricsFigures;
  readonly verdict?: { readonly swapGrowsWithSize: boolean; readonly maxFlatRatio: number; readonly message: string };
  /** Every target's verdict, judged from the figures above. */
  readonly targets: readonly Verdict[];
  /** Sections that stopped with an error (their figures are absent). */
  readonly failedSections: readonly { readonly section: string; readonly error: string }[];
}

/** The sections one run produced. */
export type BenchSections = Omit<BenchReport, "machine" | "verdict" | "targets" | "failedSections">;

/** Above this 1M/1k ratio of swap medians, the swap is taken to grow with partition size. */
const MAX_FLAT_RATIO = 1.25;


/** Puts the figures together with the verdicts: the swap's growth with partition size, and every target of issues 10, 11 and 12. */
export function buildReport(machine: Machine, sections: BenchSections, failedSections: BenchReport["failedSections"] = []): BenchReport {
  const { swap } = sections;
  let verdict: BenchReport["verdict"];
  if (swap) {
    const grows = swap.ratio > MAX_FLAT_RATIO;
    const message = grows
      ? `swap time GROWS with partition size: ratio ${swap.ratio.toFixed(2)} (above ${MAX_FLAT_RATIO})`
      : `swap time does not grow with partition size: ratio ${swap.ratio.toFixed(2)}`;
    verdict = { swapGrowsWithSize: grows, maxFlatRatio: MAX_FLAT_RATIO, message };
  }
  return { machine, ...sections, verdict, targets: judge(sections), failedSections };
}

/** Every target, judged from the measured figures (never from constants). */
function judge(sections: BenchSections): Verdict[] {
  const verdicts: Verdict[] = [];
  const { delivery, mtd, scale, signature, aws, sink, upsert, ingest, floors } = sections;
  if (floors) verdicts.push(...floorVerdicts(floors));
  if (sink) verdicts.push(pgUpsertVerdict(sink), pgReplaceVerdict(sink));
  if (upsert) verdicts.push(lakeUpsertVerdict(upsert));
  if (ingest) verdicts.push(...ingestVerdicts(ingest));
  if (sections.iceberg) verdicts.push(...icebergVerdicts(sections.iceberg));
  if (delivery) {
    verdicts.push(
      ratioAtMost("first load · lakeswap sync / raw DuckDB partitioned COPY (process wall times)", delivery.firstLoad.ratio, DELIVERY_TARGETS.firstLoadRatio),
      ratioAtLeast(
        "resend · straightforward signature (faster variant, reading excluded) / lakeswap sync (end to end)",
        delivery.resend.speedup,
        DELIVERY_TARGETS.resendSpeedup,
      ),
      ratioAtMost("first load · peak RSS of lakeswap sync / of the raw COPY", delivery.memory.ratio, DELIVERY_TARGETS.peakRssRatio),
    );
  }
  if (mtd?.smallBuilds) verdicts.push(...smallBuildVerdicts(mtd.smallBuilds));
  if (scale) {
    const [smallRun, largeRun] = scale.runs;
    const [small, large] = [count(smallRun?.partitions ?? 0), count(largeRun?.partitions ?? 0)];
    const judgeScale = (kind: "first" | "resend", ratio: ScaleFigures["firstRatio"]): Verdict => {
      const measure = `scale · ${kind === "first" ? "first sync" : "resend"} of ${large} / of ${small} tiny partitions`;
      const failed = [smallRun, largeRun].map((run) => run?.[kind]?.failed).find((f) => f !== undefined);
      // A sync that fails cannot have done its work within any time: the target is missed, and the report says why.
      if (failed !== undefined) return { measure, target: `≤ ${SCALE_RATIO_TARGET.toFixed(2)}×`, measured: "sync FAILED", met: false, note: failed };
      const note = ratio?.lowerBound
        ? `the ${large}-partition sync was stopped at its limit (--scale-budget ${(scale.budgetMs / 1000).toFixed(0)} s)`
        : ratio === undefined && kind === "resend"
          ? "no resend: the first sync did not finish"
          : undefined;
      return ratioAtMost(measure, ratio?.value, SCALE_RATIO_TARGET, { lowerBound: ratio?.lowerBound, note });
    };
    verdicts.push(judgeScale("first", scale.firstRatio), judgeScale("resend", scale.resendRatio));
  }
  if (aws?.scale) {
    const runs = aws.scale.runs;
    // A stopped or failed sync's partial count can prove a limit exceeded, never met.
    const point = (run: TinyRun, sync: TinySync | undefined, value: (calls: ApiCalls | undefined) => number | undefined, limit: number) => {
      const counted = value(sync?.calls);
      const complete = sync !== undefined && !sync.stopped && sync.failed === undefined;
      const known = sync !== undefined && (complete || (counted ?? 0) > limit) ? counted : undefined;
      return { label: `N=${count(run.partitions)}`, count: known, limit };
    };
    verdicts.push(
      countAtMost(
        `AWS · Glue partition writes of a first sync of N new partitions (≤ ceil(N/${GLUE_BATCH}) + ${O1_CALLS})`,
        runs.map((r) => point(r, r.first, glueWrites, Math.ceil(r.partitions / GLUE_BATCH) + O1_CALLS)),
      ),
      countAtMost(
        `AWS · Glue listings (GetPartitions pages + GetTables) of a first sync (O(1): ≤ ${O1_CALLS} at every N)`,
        runs.map((r) => point(r, r.first, glueListings, O1_CALLS)),
      ),
      countAtMost(
        `AWS · all API calls of a resend, S3 + Glue + Athena queries (O(1): ≤ ${O1_CALLS} at every N)`,
        runs.map((r) => point(r, r.resend, (calls) => calls?.total, O1_CALLS)),
        runs.some((r) => r.resend === undefined) ? "a resend did not run: its first sync did not finish" : undefined,
      ),
    );
  }
  if (signature) {
    verdicts.push(
      ratioAtLeast(
        "content signature · signature query alone / straightforward (throughput; earlier target, context)",
        signature.ratios.signatureQuery,
        signature.target.ratio,
      ),
    );
  }
  return verdicts;
}

/** The report as one JSON document, times rounded to the microsecond. */
export function renderJson(report: BenchReport): string {
  const round = (_key: string, value: unknown): unknown =>
    typeof value === "number" && !Number.isInteger(value) ? Math.round(value * 1000) / 1000 : value;
  return `${JSON.stringify(report, round, 2)}\n`;
}

/** The machine's Node start-up, which every process figure includes (" · …", or "" when not measured). */
export function nodeStartText(start: Machine["nodeStart"]): string {
  if (start === undefined) return "";
  const text = ` · Node start-up (node -e 0) ${duration(start.ms)}, in every process figure`;
  if (start.withoutExtraCaCertsMs === undefined) return text;
  return `${text}; ${duration(start.withoutExtraCaCertsMs)} without NODE_EXTRA_CA_CERTS, which this environment sets (Node parses that file as it starts)`;
}

/** The report as readable tables: machine, then each section that ran, then every target's verdict. */
export function renderText(report: BenchReport): string {
  const { machine } = report;
  const header =
    `lakeswap bench · ${machine.startedAt} · ${machine.cpus} cpus (${machine.cpuModel}), ${machine.memoryGb} GB · ${machine.platform} · ` +
    `node ${machine.node} · duckdb ${machine.duckdb} · temp dir ${machine.tmpdir}`;
  const load =
    `load average (1 min) ${machine.loadAverage.start.toFixed(2)} at the start, ${machine.loadAverage.end.toFixed(2)} at the end ` +
    `(above ${machine.cpus} means other work shared the cpus and slowed every figure) · whole run ${duration(machine.totalMs)}` +
    (machine.buildMs === undefined ? "" : ` · npm run build ${duration(machine.buildMs)} (not in any figure)`) +
    nodeStartText(machine.nodeStart);
  const parts = [header, load, ""];
  if (report.replace && report.swap) parts.push(renderReplaceAndSwap(report.replace, report.swap), "", report.verdict?.message ?? "", "");
  if (report.signature) parts.push(renderSignature(report.signature), "");
  if (report.mtd) parts.push(renderMtd(report.mtd, "month-to-date replay"), "", ...(report.mtd.smallBuilds ? [renderSmallBuilds(report.mtd.smallBuilds), ""] : []));
  if (report.delivery) parts.push(renderDelivery(report.delivery), "");
  if (report.floors) parts.push(renderFloors(report.floors, { duration, mb, gb }), "");
  if (report.scale) parts.push(renderScale(report.scale), "");
  if (report.iceberg) parts.push(renderIceberg(report.iceberg, renderTable), "");
  if (report.aws) parts.push(renderAws(report.aws), "");
  if (report.sink) parts.push(renderPgUpsert(report.sink), "");
  if (report.upsert) parts.push(renderLakeUpsert(report.upsert), "");
  if (report.ingest) parts.push(renderIngest(report.ingest), "");
  if (report.metrics) parts.push(renderMetrics(report.metrics), "");
  for (const { section, error } of report.failedSections) parts.push(`SECTION FAILED · ${section}: ${error}`, "");
  parts.push(renderTargets(report.targets), "");
  return parts.join("\n");
}

function renderReplaceAndSwap(replace: ReplaceFigures, swap: SwapFigures): string {
  const rows = count(replace.rows);
  const small = `${count(swap.small.rows)}-row partition`;
  const large = `${count(swap.large.rows)}-row partition`;
  const timings = renderTable(
    ["measure", "median", "min", "max", "n"],
    [
      timingRow(`replace ${rows} rows · lakeswap replacePartition`, replace.lakeswap),
      timingRow(`replace ${rows} rows · direct DuckDB COPY`, replace.direct),
      timingRow(`swap (pointer move) · ${small}`, swap.small.move),
      timingRow(`swap (pointer move) · ${large}`, swap.large.move),
      timingRow(`first move onto a just-written run · ${small}`, swap.small.freshMove),
      timingRow(`first move onto a just-written run · ${large}`, swap.large.freshMove),
    ],
  );
  const ratios = renderTable(
    ["ratio", "value"],
    [
      ["replace overhead · lakeswap / direct", times(replace.ratio)],
      [`swap · ${count(swap.large.rows)} rows / ${count(swap.small.rows)} rows`, times(swap.ratio)],
      [`first move onto a just-written run · ${count(swap.large.rows)} / ${count(swap.small.rows)}`, times(swap.freshRatio)],
    ],
  );
  const note =
    `replace and swap (in-process, library calls) · medians: replace of ${replace.repeat} rounds after 1 warm-up; swap of ${swap.moves} alternating moves; ` +
    `first move of ${swap.freshMoves} just-written runs (includes the fsync of the run's files)`;
  return [note, "", timings, "", ratios].join("\n");
}

/** Issue 27, item 4: a small build's cost above its own COPY and fsync, per layer; the last incremental sync against its floor. */
function smallBuildVerdicts(figures: SmallBuildFigures): Verdict[] {
  const verdicts = figures.layers.map((layer): Verdict => {
    const measured = `${layer.overheadMs.toFixed(1)} ms`;
    const met = figures.syncs > 0 ? layer.overheadMs <= SMALL_BUILD_OVERHEAD_TARGET_MS : undefined;
    return { measure: `small build · ${layer.layer} layer of 1 partition, in a sync, above its own COPY + fsync (median)`, target: `≤ ${SMALL_BUILD_OVERHEAD_TARGET_MS} ms`, measured, met };
  });
  verdicts.push(ratioAtMost("month-to-date · incremental sync of one new day (lakeswap sync) / its floor (plain DuckDB, one process)", figures.incremental?.ratio, MTD_FLOOR_TARGET));
  return verdicts;
}

/** The small builds against their floors: per layer, then the incremental sync against its floor process. */
function renderSmallBuilds(figures: SmallBuildFigures): string {
  const title =
    `small builds (issue 27, item 4) · ${figures.syncs} incremental syncs of the replay (one new day each) · a layer's time is its share of Pipeline.sync() ` +
    `(plan, build, audit, pointer move, records); its floor is the same SELECT over the same files COPYed by plain DuckDB into one Parquet file, then fsync of the file and its folder`;
  const layers = renderTable(
    ["layer (1 partition)", "layer median", "floor median", "layer − floor (median)", "target"],
    figures.layers.map((l) => [l.layer, ms(l.time.medianMs), ms(l.floor.medianMs), ms(l.overheadMs), `≤ ${SMALL_BUILD_OVERHEAD_TARGET_MS} ms`]),
  );
  const parts = [title, "", layers];
  const inc = figures.incremental;
  if (inc) {
    parts.push(
      "",
      `delivery ${inc.delivery} (${count(inc.rows)} rows, days 1-${inc.delivery}): node bin/lakeswap.js sync on a copy of the lake before it, against node bench/mtd-floor.mjs ` +
        `(reads the delivery once with the declared types, writes the day's raw and stage and the month's analytics partitions, each fsynced); process wall times, rounds interleaved`,
      renderTable(
        ["process", "median", "min", "max", "n"],
        [timingRow("lakeswap sync (incremental)", inc.lakeswap), timingRow("floor (plain DuckDB)", inc.floor)],
      ),
      `ratio ${times(inc.ratio)} (target ≤ ${MTD_FLOOR_TARGET.toFixed(2)}×)`,
    );
  }
  return parts.join("\n");
}

/** First load and resend of the flights delivery on an embedded lake. */
function renderDelivery(figures: DeliveryFigures): string {
  const { firstLoad, memory, resend } = figures;
  const title =
    `first load and resend · ${count(figures.rows)} flights in ${figures.partitions} day partitions, one Parquet file of ${mb(figures.fileBytes)} · ` +
    `raw layer only · embedded lake · each a process of its own (node bin/lakeswap.js sync …; node bench/raw-copy.mjs)`;
  const note =
    `wall time of each process as a user waits for it (Node start-up included); rounds of the first load interleaved, on a fresh lake each; ` +
    `peak RSS: the highest over the rounds (${memory.method === "gnu-time" ? "GNU time's maximum resident set size" : "VmHWM polled every 20 ms"}); ` +
    `resend = the same file again on the first round's lake (nothing to build; lakeswap signs ${resend.signatureForm === "native" ? "with its extension" : `in the ${resend.signatureForm} form`})`;
  const row = (label: string, timing: Timing, peak?: number): string[] => [
    label, duration(timing.medianMs), duration(timing.minMs), duration(timing.maxMs), String(timing.samplesMs.length), peak === undefined ? "" : gb(peak),
  ];
  const timings = renderTable(
    ["measure", "median", "min", "max", "n", "peak RSS"],
    [
      row("first load · lakeswap sync (process)", firstLoad.lakeswap, memory.lakeswapPeakRssBytes),
      row("  (context) its own report: raw layer seconds", firstLoad.lakeswapReportedRawMs),
      row("first load · raw DuckDB COPY … PARTITION_BY (day) (process)", firstLoad.copy, memory.copyPeakRssBytes),
      row("  (context) the COPY statement alone, inside its process", firstLoad.copyStatement),
      row("resend · lakeswap sync (process)", resend.lakeswap, resend.lakeswapPeakRssBytes),
      resend.straightforwardNode === undefined || resend.readIntoNodeMs === undefined
        ? ["resend · straightforward in Node: rows in memory → per day sort, CSV, sha256 (not run; --node-baseline runs it)", "—", "", "", "", ""]
        : [`resend · straightforward in Node: rows in memory (read in ${duration(resend.readIntoNodeMs)}, untimed) → per day sort, CSV, sha256`, duration(resend.straightforwardNode), "", "", "1", ""],
      [`resend · straightforward with DuckDB: table (loaded in ${duration(resend.loadIntoDuckDbMs)}, untimed) → per day COPY sorted CSV, sha256`, duration(resend.straightforwardCopy), "", "", "1", ""],
    ],
  );
  const ratios = renderTable(
    ["ratio", "value", "target", "verdict"],
    [
      ["first load · lakeswap / raw COPY (process wall times)", times(firstLoad.ratio), `≤ ${times(DELIVERY_TARGETS.firstLoadRatio)}`, verdictWord(firstLoad.ratio <= DELIVERY_TARGETS.firstLoadRatio)],
      ["  (context) lakeswap / the COPY statement alone", times(firstLoad.ratioToStatement), "", ""],
      ["first load · peak RSS lakeswap / raw COPY", times(memory.ratio), `≤ ${times(DELIVERY_TARGETS.peakRssRatio)}`, verdictWord(memory.ratio <= DELIVERY_TARGETS.peakRssRatio)],
      [
        `resend · straightforward (${resend.straightforwardNode === undefined ? "with DuckDB" : `faster: ${resend.baseline === "node" ? "in Node" : "with DuckDB"}`}) / lakeswap`,
        times(resend.speedup),
        `≥ ${times(DELIVERY_TARGETS.resendSpeedup)}`,
        verdictWord(resend.speedup >= DELIVERY_TARGETS.resendSpeedup),
      ],
    ],
  );
  const files =
    `written: lakeswap ${count(firstLoad.lakeswapFiles.files)} Parquet files, ${mb(firstLoad.lakeswapFiles.bytes)}; raw COPY ${count(firstLoad.copyFiles.files)} files, ${mb(firstLoad.copyFiles.bytes)} · ` +
    `checks: lakeswap built ${firstLoad.partitionsBuilt} partitions of ${count(firstLoad.rowsLanded)} rows; every resend built nothing: ${yes(figures.checks.resendBuiltNothing)}; ` +
    `both straightforward variants hash the same CSV text (${figures.checks.straightforwardDaysCompared} days compared): ${yes(figures.checks.straightforwardVariantsAgree)}`;
  return [title, note, "", timings, "", ratios, "", files].join("\n");
}

/** The embedded many-tiny-partitions runs. */
function renderScale(figures: ScaleFigures): string {
  const title = `scale · first sync and resend of N tiny partitions (${figures.rowsPerPartition} rows each, day keys from 1990-01-01) · embedded lake · one process each`;
  const cell = (sync: TinySync | undefined): string[] =>
    sync === undefined
      ? ["not run", ""]
      : sync.failed !== undefined
        ? [`FAILED after ${duration(sync.ms)}`, ""]
        : [`${sync.stopped ? "> " : ""}${duration(sync.ms)}`, `${sync.stopped ? "> " : ""}${sync.msPerPartition.toFixed(2)} ms`];
  const table = renderTable(
    ["partitions", "first sync", "per partition", "resend", "per partition"],
    figures.runs.map((r) => [count(r.partitions), ...cell(r.first), ...cell(r.resend)]),
  );
  const failedSync = (kind: "first" | "resend"): boolean => figures.runs.some((r) => r[kind]?.failed !== undefined);
  const ratio = (value: ScaleFigures["firstRatio"], kind: "first" | "resend"): string =>
    value === undefined ? (failedSync(kind) ? "not measured (a sync FAILED)" : "not measured") : `${value.lowerBound ? "> " : ""}${times(value.value)}`;
  const [small, large] = figures.runs.map((r) => count(r.partitions));
  const line =
    `${large} / ${small}: first sync ${ratio(figures.firstRatio, "first")}, resend ${ratio(figures.resendRatio, "resend")} (target ≤ ${times(SCALE_RATIO_TARGET)}; ` +
    `10× the partitions, so ≤ 12× means time per partition does not grow) · a larger sync is stopped at the smaller of ${duration(figures.budgetMs)} ` +
    `(--scale-budget) and just over ${SCALE_RATIO_TARGET}× the smaller one ("> " marks a stopped sync)`;
  return [title, "", table, "", line, ...failures(figures.runs)].join("\n");
}

/** One line per failed sync, with lakeswap's error. */
function failures(runs: readonly TinyRun[]): string[] {
  return runs.flatMap((run) =>
    (["first", "resend"] as const).flatMap((kind) => {
      const failed = run[kind]?.failed;
      return failed === undefined ? [] : [`FAILED: ${kind === "first" ? "first sync" : "resend"} of ${count(run.partitions)} partitions: ${failed}`];
    }),
  );
}

/** Everything measured on the AWS emulators: context, plus the call-count targets. */
function renderAws(aws: AwsFigures): string {
  const parts = [
    "AWS (emulated) · S3 = s3rver behind test/support's proxy, Glue and Athena = test/support's emulators, in the bench's process, over HTTP with the real AWS SDK; " +
      "lakeswap selected AWS from DATA_OUTPUT_S3_BUCKET etc. · times are context, not targets: an emulator sharing the two cpus is not AWS",
  ];
  if (aws.delivery) parts.push("", renderAwsDelivery(aws.delivery));
  if (aws.scale) parts.push("", renderAwsScale(aws.scale));
  if (aws.mtd) {
    parts.push("");
    if (aws.mtd.figures) parts.push(renderMtd(aws.mtd.figures, "AWS month-to-date replay (context)"), "", `(${aws.mtd.note})`);
    else parts.push(`AWS month-to-date replay: ${aws.mtd.note}`);
  }
  return parts.join("\n");
}

function renderAwsDelivery(figures: AwsDeliveryFigures): string {
  const columns: CallColumn[] = [];
  if (figures.firstLoad) columns.push({ label: "first load", ms: figures.firstLoad.wallMs, calls: figures.firstLoad.calls, peakRssBytes: figures.firstLoad.peakRssBytes });
  if (figures.resend) {
    columns.push({ label: `resend (median of ${figures.resend.timing.samplesMs.length}; calls of the last)`, ms: figures.resend.timing.medianMs, calls: figures.resend.calls });
  }
  const lines = ["AWS · the flights delivery (3,000,000 rows, 182 day partitions, raw layer): lakeswap sync processes, API calls by operation"];
  if (columns.length > 0) lines.push("", renderCallTable("lakeswap sync", columns));
  if (figures.note) lines.push(figures.note);
  return lines.join("\n");
}

function renderAwsScale(figures: AwsScaleFigures): string {
  const columns: CallColumn[] = figures.runs.flatMap((r) => [
    { label: `first ${count(r.partitions)}`, ms: r.first.ms, stopped: r.first.stopped, failed: r.first.failed !== undefined, calls: r.first.calls, partitions: r.partitions },
    { label: `resend ${count(r.partitions)}`, ms: r.resend?.ms, stopped: r.resend?.stopped, failed: r.resend?.failed !== undefined, calls: r.resend?.calls, partitions: r.partitions },
  ]);
  const rule =
    `rule: writes of a first sync ≤ ceil(N/${GLUE_BATCH}) + ${O1_CALLS}; "O(1)" = at most ${O1_CALLS} calls at every N measured (the two N show any growth); ` +
    `a resend's calls are all of its calls (the delivery is a local file: no call reads it); the Athena emulator's own Glue and S3 reads would count too, ` +
    `but a raw-only sync starts no Athena query (row "athena queries"); "> " marks a sync stopped at --aws-budget (its counts are partial)`;
  return [
    `AWS · scale: N tiny partitions (${figures.rowsPerPartition} rows each), first sync and resend, API calls by operation (each sync stopped after ${duration(figures.budgetMs)}, --aws-budget)`,
    "",
    renderCallTable("N tiny partitions", columns),
    "",
    rule,
    ...failures(figures.runs),
  ].join("\n");
}

/** One measured sync, a column of a call table. */
interface CallColumn {
  readonly label: string;
  readonly ms?: number;
  readonly stopped?: boolean;
  readonly failed?: boolean;
  readonly calls?: ApiCalls;
  readonly partitions?: number;
  readonly peakRssBytes?: number;
}

/** Wall time, then the API calls of each sync by service and operation, then the sums the targets read. */
function renderCallTable(title: string, columns: readonly CallColumn[]): string {
  const operations = new Set<string>();
  for (const column of columns) {
    for (const op of Object.keys(column.calls?.glue ?? {})) operations.add(`glue ${op}`);
    for (const op of Object.keys(column.calls?.s3 ?? {})) operations.add(`s3 ${op}`);
  }
  const value = (column: CallColumn, key: string): string => {
    if (column.calls === undefined) return "—";
    const [service, op] = key.split(" ") as [string, string];
    const n = (service === "glue" ? column.calls.glue : column.calls.s3)[op];
    return n === undefined ? "" : count(n);
  };
  const mark = (column: CallColumn): string => (column.stopped ? "> " : "");
  const body: string[][] = [
    ["wall time", ...columns.map((c) => (c.ms === undefined ? "not run" : `${c.failed ? "FAILED after " : mark(c)}${duration(c.ms)}`))],
  ];
  if (columns.some((c) => c.partitions !== undefined)) {
    body.push(["ms per partition", ...columns.map((c) => (c.ms === undefined || c.partitions === undefined ? "" : `${mark(c)}${(c.ms / c.partitions).toFixed(1)}`))]);
  }
  if (columns.some((c) => c.peakRssBytes !== undefined)) body.push(["peak RSS", ...columns.map((c) => (c.peakRssBytes === undefined ? "" : gb(c.peakRssBytes)))]);
  body.push(
    ...[...operations].sort().map((key) => [key, ...columns.map((c) => value(c, key))]),
    ["athena queries", ...columns.map((c) => (c.calls === undefined ? "—" : count(c.calls.athenaQueries)))],
    ["all calls", ...columns.map((c) => (c.calls === undefined ? "—" : count(c.calls.total)))],
    ["  glue partition writes (Batch/Create/UpdatePartition)", ...columns.map((c) => (c.calls === undefined ? "—" : count(glueWrites(c.calls) ?? 0)))],
    ["  glue listings (GetPartitions pages + GetTables)", ...columns.map((c) => (c.calls === undefined ? "—" : count(glueListings(c.calls) ?? 0)))],
  );
  return renderTable([title, ...columns.map((c) => c.label)], body);
}

/** Every target of issue 10 with its measure and verdict. */
function renderTargets(targets: readonly Verdict[]): string {
  if (targets.length === 0) return "targets: none of the sections that judge a target ran";
  const table = renderTable(
    ["target (issues 10, 11, 12)", "limit", "measured", "verdict"],
    targets.map((t) => [t.measure, t.target, t.measured, verdictWord(t.met) + (t.note ? ` (${shorten(t.note, 90)})` : "")]),
  );
  const met = targets.filter((t) => t.met === true).length;
  const missed = targets.filter((t) => t.met === false).length;
  return [`targets: ${met} met, ${missed} not met, ${targets.length - met - missed} undecided (each verdict computed from the figure beside it)`, "", table].join("\n");
}

/** The PostgreSQL upsert target: executemany's time over the lakeswap sink's, from the figures (undecided when not measured or the tables differ). */
function pgUpsertVerdict(figures: PgUpsertFigures): Verdict {
  if (!figures.measured) return ratioAtLeast(PG_UPSERT_MEASURE, undefined, PG_UPSERT_TARGET, figures.reason);
  if (!figures.checks.identical) return ratioAtLeast(PG_UPSERT_MEASURE, undefined, PG_UPSERT_TARGET, "the two tables differ (see the checks): the times are not comparable");
  const { executemany } = figures;
  const note = executemany.extrapolated
    ? `executemany EXTRAPOLATED from ${count(executemany.measuredRows)} measured rows (--sink-budget ${(executemany.budgetMs / 1000).toFixed(0)} s)`
    : undefined;
  return ratioAtLeast(PG_UPSERT_MEASURE, figures.ratio, PG_UPSERT_TARGET, note);
}

/** The PostgreSQL partition replace target: lakeswap's sink time over a plain COPY's (undecided when not measured or the rows differ). */
function pgReplaceVerdict(figures: PgUpsertFigures): Verdict {
  if (!figures.measured) return ratioAtMost(PG_REPLACE_MEASURE, undefined, PG_REPLACE_TARGET, { note: figures.reason });
  if (!figures.replace.identical) return ratioAtMost(PG_REPLACE_MEASURE, undefined, PG_REPLACE_TARGET, { note: "the replaced table differs from the COPYed rows" });
  return ratioAtMost(PG_REPLACE_MEASURE, figures.replace.ratio, PG_REPLACE_TARGET);
}

/** The PostgreSQL sink: upsert against psycopg2's executemany, partition replace against a plain COPY, the checks and the verdict lines. */
function renderPgUpsert(figures: PgUpsertFigures): string {
  const verdict = verdictLine(pgUpsertVerdict(figures));
  if (!figures.measured) return [`PostgreSQL sink · lakeswap vs psycopg2 executemany and plain COPY: not measured (${figures.reason})`, "", verdict, verdictLine(pgReplaceVerdict(figures))].join("\n");
  const { lakeswap, executemany, checks, replace } = figures;
  const title =
    `PostgreSQL upsert · ${count(figures.rows)} rows (${count(figures.updates)} updates of existing keys, ${count(figures.inserts)} new keys) in ${figures.partitions} day partitions ` +
    `into bench.orders, seeded with ${count(figures.seededRows)} rows (the ${count(figures.updates)} the updates hit + ${count(figures.seededRows - figures.updates)} untouched) · ` +
    `PostgreSQL ${figures.postgres} (throwaway cluster of test/support/postgres.ts: fsync=off, defaults otherwise), one database each, copied from the same seeded one`;
  const rate = (rows: number, ms: number): string => `${count(Math.round(rows / (ms / 1000)))} rows/s`;
  const perRow = executemany.extrapolated
    ? `${count(executemany.measuredRows)} measured in ${seconds(executemany.measuredMs)}; ${count(figures.rows)} EXTRAPOLATED linearly`
    : `${count(executemany.measuredRows)} measured`;
  const cpu = (value: number | undefined): string => (value === undefined ? "" : `${seconds(value)} cpu`);
  const table = renderTable(
    ["measure", "rows", "seconds", "client cpu", "server cpu", "throughput"],
    [
      [
        "lakeswap sink, upsert mode · per partition, one transaction: rows whose key the target lacks COPYed straight in, the others COPYed into a temporary table and merged by one INSERT … ON CONFLICT",
        count(lakeswap.rowsSent),
        seconds(lakeswap.sinkMs),
        cpu(lakeswap.sinkCpuMs),
        cpu(lakeswap.serverCpuMs),
        rate(lakeswap.rowsSent, lakeswap.sinkMs),
      ],
      [`  (context) the same Pipeline.sync's lake part: land, sign, write and swap ${figures.partitions} raw partitions`, count(figures.rows), seconds(lakeswap.lakeMs), "", "", ""],
      ["  (context) the whole Pipeline.sync (lake part + sink)", count(figures.rows), seconds(lakeswap.syncMs), "", "", ""],
      [
        `executemany (the seed's method) · ${executemany.client} · cur.executemany of the chapter's INSERT … ON CONFLICT DO UPDATE, one transaction · ${perRow}`,
        count(figures.rows),
        seconds(executemany.ms),
        `${cpu(executemany.measuredCpuMs)} (measured rows)`,
        "",
        rate(figures.rows, executemany.ms),
      ],
    ],
  );
  const ratio = `ratio executemany / lakeswap sink: ${times(figures.ratio)}${executemany.extrapolated ? " (executemany EXTRAPOLATED)" : ""}`;
  const note =
    `sink seconds: from opening the sink to closing it (connect, table checks, ${lakeswap.partitionsSent} partitions sent, ${lakeswap.partitionsSkipped} skipped as unchanged; ` +
    `the partitions' own seconds sum to ${lakeswap.partitionSecondsSum.toFixed(2)} s); client cpu: the bench process's (lakeswap, its DuckDB, pg) or Python's; server cpu: every process of the cluster (autovacuum included) · ` +
    `executemany: rows in memory (a list of dicts) before the clock starts, commit included (${ms(executemany.commitMs)})` +
    `${executemany.restRows > 0 ? `; after --sink-budget the other ${count(executemany.restRows)} rows were applied untimed, set-based, so the tables compare` : ""}`;
  const check = (label: string, c: { rows: number; amountSum: string; pending: number; touched: number; hash: string }): string =>
    `${label}: ${count(c.rows)} rows, sum(amount) ${c.amountSum}, ${count(c.touched)} written by the timed step, ${count(c.pending)} still pending, hash ${c.hash}`;
  const checked = [
    `checks (updated_at left out: it records when each method wrote): tables identical and as expected: ${yes(checks.identical)}`,
    `  expected (seed + delivery, computed by DuckDB from the Parquet files): ${count(checks.expected.rows)} rows, sum(amount) ${checks.expected.amountSum}, ${count(checks.expected.touched)} written`,
    `  ${check("lakeswap sink", checks.lakeswap)}`,
    `  ${check("executemany  ", checks.executemany)}`,
  ];
  const sinkRow = (label: string, sent: typeof replace.lakeswap): string[] => [
    label,
    count(sent.rowsSent),
    seconds(sent.sinkMs),
    cpu(sent.sinkCpuMs),
    cpu(sent.serverCpuMs),
    rate(sent.rowsSent, sent.sinkMs),
  ];
  const replaceTable = renderTable(
    ["measure", "rows", "seconds", "client cpu", "server cpu", "throughput"],
    [
      sinkRow(
        `lakeswap sink, partition_replace · ${replace.lakeswap.partitionsSent} partitions that hold older rows, partitioned layout (the default): COPY into a new leaf table, swap it for the old one (DETACH, ATTACH), one transaction each`,
        replace.lakeswap,
      ),
      sinkRow("  (context) the first send of the older rows into the empty target", replace.firstSend),
      sinkRow("  (context) the same replace on the index layout (partitioning: index, or a target made before): DELETE the partition, COPY its rows", replace.indexLayout.lakeswap),
      sinkRow("  (context) its first send of the older rows into the empty target", replace.indexLayout.firstSend),
      [`floor · plain COPY … FROM STDIN of the same rows into an empty table of the same columns, no index (fastest of four: CSV and text format, twice each; this one ${replace.copyFormat})`, count(figures.rows), seconds(replace.copyMs), "", cpu(replace.copyServerCpuMs), rate(figures.rows, replace.copyMs)],
      ...(["csv", "text"] as const).map((format) => {
        const copy = replace.copyByFormat[format];
        return [`  (context) the faster of the two in ${format === "csv" ? "CSV" : "text format"}`, count(figures.rows), seconds(copy.ms), "", cpu(copy.serverMs), rate(figures.rows, copy.ms)];
      }),
      ["  (context) a CSV COPY into an empty table with the target's index on the partition column", count(figures.rows), seconds(replace.indexedCopyMs), "", cpu(replace.indexedCopyServerCpuMs), rate(figures.rows, replace.indexedCopyMs)],
    ],
  );
  const replaceLines = [
    `PostgreSQL partition replace · ${count(figures.rows)} rows in ${replace.lakeswap.partitionsSent} day partitions, a database of its own`,
    "",
    replaceTable,
    "",
    `ratio lakeswap sink / plain COPY: ${times(replace.ratio)} · replaced table holds exactly the COPYed rows (count, md5 over every row): ${yes(replace.identical)} (index layout: ${yes(replace.indexLayout.identical)})`,
  ];
  return [title, "", table, "", ratio, note, "", ...checked, "", verdict, "", ...replaceLines, "", verdictLine(pgReplaceVerdict(figures))].join("\n");
}

/** What staying below the lake upsert's limit means (issue 11 gives no number). */
const LAKE_UPSERT_MEANING = "faster than a rewrite";

/** The lake upsert verdict: the recent delivery's upsert over the faster whole-table rewrite (undecided when the tables differ). */
function lakeUpsertVerdict(figures: LakeUpsertFigures): Verdict {
  const { recent } = figures;
  const { identical, partitionsAsExpected, rollbacksComplete } = recent.checks;
  if (!identical || !partitionsAsExpected || !rollbacksComplete) {
    const why = !identical ? "the upsert lake, the rewrites and the expected merge differ" : "the upsert's rounds did not all do the same work";
    return ratioBelow(LAKE_UPSERT_MEASURE, undefined, LAKE_UPSERT_LIMIT, LAKE_UPSERT_MEANING, `${why} (see the checks)`);
  }
  const note = `no numeric target in issue 11; baseline: the faster rewrite, ${rewriteName(recent.baseline)}`;
  return ratioBelow(LAKE_UPSERT_MEASURE, recent.ratios.toBaseline, LAKE_UPSERT_LIMIT, LAKE_UPSERT_MEANING, note);
}

function rewriteName(baseline: VariantFigures["baseline"]): string {
  return baseline === "fullRefresh" ? "lakeswap sync --full-refresh" : "DuckDB COPY … PARTITION_BY";
}

/** The lake upsert: both deliveries side by side (upsert and both rewrites), the ratios, the checks and the verdict line. */
function renderLakeUpsert(figures: LakeUpsertFigures): string {
  const { recent, uniform } = figures;
  const d = recent.delivery;
  const title =
    `lake upsert · ${count(d.keys)} changed keys into a ${count(figures.rows)}-row orders table (${figures.partitions} day partitions, day=YYYY-MM-DD; one Parquet file of ${mb(figures.tableFileBytes)}) · ` +
    "embedded lake · write: upsert, primary_key [order_id], order_by [updated_at], delete_flag deleted · " +
    "each a process of its own (node bin/lakeswap.js sync …; node bench/raw-copy.mjs)";
  const deliveries =
    `deliveries of ${count(d.rows)} rows: ${count(d.keys)} changed keys = ${count(d.updates)} updates (status, every 4th amount; ${count(d.repeatedKeys)} of them delivered twice, updated_at picks), ` +
    `${count(d.moves)} moves (order day corrected: the key leaves its partition), ${count(d.deletes)} deletes (deleted = true); plus ${count(d.unchanged)} rows re-delivered unchanged · ` +
    `recent: ${recent.description} · uniform (context): ${uniform.description}`;
  const note =
    `wall time as a user waits for each process (Node start-up included), median of ${recent.rounds} rounds, the order rotated each round; peak RSS: the highest over the rounds ` +
    `(${figures.rssMethod === "gnu-time" ? "GNU time's maximum resident set size" : "VmHWM polled every 20 ms"}) · the upsert lake is loaded once by a first sync ` +
    `(untimed: ${seconds(figures.initialLoad.wallMs)}, ${gb(figures.initialLoad.peakRssBytes)}) and each upsert rolled back after its round (untimed), so every round merges into the same table · ` +
    "the full refresh rewrites a partition_replace lake holding the table, from the merged table as one Parquet file (made beforehand by DuckDB, time as context); " +
    "DuckDB's rewrite does the merge and the partitioned COPY in one statement from a Hive copy of the table into a new folder (no swap, no signatures)";
  const partitions = (p: VariantFigures["upsert"]): string => `${p.built} built, ${p.skipped} skipped, ${p.untouched} untouched`;
  const spread = (t: Timing): string => `${(t.minMs / 1000).toFixed(2)}–${(t.maxMs / 1000).toFixed(2)}`;
  const row = (label: string, pick: (v: VariantFigures) => readonly string[]): string[] => [label, ...pick(recent), ...pick(uniform)];
  const timed = (f: VariantFigures["upsert"] | VariantFigures["fullRefresh"], what: string): string[] => [seconds(f.timing.medianMs), spread(f.timing), gb(f.peakRssBytes), what];
  const table = renderTable(
    ["measure", "recent: median", "min–max", "peak RSS", "partitions", "uniform: median", "min–max", "peak RSS", "partitions"],
    [
      row("lakeswap sync of the delivery · write: upsert (timed)", (v) => timed(v.upsert, partitions(v.upsert))),
      row("  (context) its own report: raw layer seconds", (v) => [seconds(v.upsert.reportedRawMs.medianMs), spread(v.upsert.reportedRawMs), "", `${count(v.upsert.rowsWritten)} rows written`]),
      row("rewrite · lakeswap sync --full-refresh of the merged table (partition_replace)", (v) => timed(v.fullRefresh, `${v.fullRefresh.partitions} built`)),
      row("rewrite · DuckDB COPY (merge) TO … PARTITION_BY (day), new folder", (v) => timed(v.duckdbCopy, `${v.duckdbCopy.partitions} written`)),
      row("  (context) the merge to a Parquet file the full refresh is handed (in-process)", (v) => [seconds(v.mergeToFileMs), "", "", ""]),
    ],
  );
  const ratio = (label: string, pick: (v: VariantFigures) => number): string[] => [label, times(pick(recent)), times(pick(uniform))];
  const ratios = renderTable(
    ["ratio (medians)", "recent", "uniform"],
    [
      [`upsert / faster rewrite (recent: ${rewriteName(recent.baseline)}; uniform: ${rewriteName(uniform.baseline)})`, times(recent.ratios.toBaseline), times(uniform.ratios.toBaseline)],
      ratio("upsert / lakeswap sync --full-refresh", (v) => v.ratios.toFullRefresh),
      ratio("upsert / DuckDB COPY … PARTITION_BY", (v) => v.ratios.toDuckdbCopy),
      ratio("peak RSS · upsert / full refresh", (v) => v.ratios.rssToFullRefresh),
      ratio("(context) partitions rebuilt · upsert / full refresh", (v) => v.upsert.built / v.fullRefresh.partitions),
    ],
  );
  const loads = (v: VariantFigures): string => `${v.variant} ${v.loadAverage.before.toFixed(2)} → ${v.loadAverage.after.toFixed(2)}`;
  const load = `load average (1 min; it counts this section's own processes too) before the first and after the last timed round: ${loads(recent)}, ${loads(uniform)}`;
  const check = (v: VariantFigures): string[] => {
    const c = v.checks;
    const shown = (label: string, t: { rows: number; hash: string }): string => `${label} ${count(t.rows)} rows, hash ${t.hash}`;
    return [
      `  ${v.variant}: after every round, upsert lake = full refresh's lake = DuckDB's folder = expected merge: ${yes(c.identical)} · ` +
        `each upsert built the ${c.expectedChanged} partitions whose rows change and skipped the other ${c.expectedTouched - c.expectedChanged} it touched ` +
        `(${c.expectedTouched} hold a delivered key before or after): ${yes(c.partitionsAsExpected)} · each rollback moved back every partition built: ${yes(c.rollbacksComplete)}`,
      `    ${shown("expected", c.expected)} · ${shown("upsert lake", c.upsert)}`,
      `    ${shown("full refresh", c.fullRefresh)} · ${shown("DuckDB folder", c.duckdbCopy)}`,
    ];
  };
  const checked = [
    "checks (expected: the merge computed by DuckDB from the table and the delivery, independently of lakeswap; hash: sum of DuckDB's hash() of every row's values " +
      "and partition, order-insensitive; lakes read through lakeswap's query engine, as a reader sees them):",
    ...check(recent),
    ...check(uniform),
  ];
  return [title, deliveries, note, "", table, "", ratios, load, "", ...checked, "", verdictLine(lakeUpsertVerdict(figures))].join("\n");
}

/**
 * The ingest targets, judged on the run with the most events/s: events per server CPU-second (while acknowledging,
 * and, read strictly, until the events are landed), and events/s over the limit (the higher of its two measurements). A run whose checks failed (events lost or duplicated, an unclean
 * stop) meets no target, whatever its figures.
 */
function ingestVerdicts(figures: IngestFigures): Verdict[] {
  const { best, checks } = figures;
  const note = `${best.clients} clients, the run with the most events/s`;
  const verdicts = [
    quantityAtLeast(INGEST_PER_CORE_MEASURE, best.eventsPerCpuSecond, INGEST_PER_CORE_TARGET, "events/s", note),
    ratioAtLeast(INGEST_LIMIT_MEASURE, best.fractionOfLimit, INGEST_LIMIT_FRACTION_TARGET, `${note}; limit: the median of its ${figures.limit.runs.length} measurements`),
    quantityAtLeast(INGEST_PER_CORE_LANDED_MEASURE, best.eventsPerCpuSecondWithLanding, INGEST_PER_CORE_TARGET, "events/s", `${note}; server CPU until the run's events were landed`),
  ];
  if (checks.passed) return verdicts;
  return verdicts.map((v) => ({ ...v, met: false, note: `CHECKS FAILED: ${checks.problems.join("; ")}` }));
}

/** Event ingest: serve and the limit side by side, the ratios, the latency to queryable, the checks and the verdicts. */
function renderIngest(figures: IngestFigures): string {
  const { limit, checks } = figures;
  // The collector checks a segment's age every twentieth of it (at most --flush-interval), and lands a segment it sealed at once.
  const sealCheckMs = Math.max(10, Math.min(figures.flushIntervalMs, figures.segmentMaxAgeMs / 20));
  const settingsMs = figures.segmentMaxAgeMs + sealCheckMs;
  const title =
    `event ingest · lakeswap serve (node bin/lakeswap.js serve, a process of its own) on an embedded lake · POST /v1/events/pageviews, ` +
    `batches of ${count(figures.batchEvents)} NDJSON events of ${figures.eventBytes.toFixed(0)} bytes on average (${mb(figures.bodyBytes)} a body), keep-alive · ` +
    `--flush-interval ${figures.flushIntervalMs} ms, wal.segment_max_age ${seconds(figures.segmentMaxAgeMs)} · the clients run in the bench's process, on the same cpus as the server`;
  const note =
    "durable: an event counts when its request got 200, which the collector sends once the events are fdatasynced in its write-ahead log (group commit) · " +
    "per core: events / CPU-seconds of the server process over the run's window (utime + stime of all its threads; the landing into Parquet runs in the same process, " +
    "so the part of it that ran in the window is in it too) · limit: the same bodies, stamped the same way, appended by one writer in the bench's process to one file " +
    "on the same file system, one write + fdatasync per batch, measured before each full-speed run and after the last (fdatasync time moves with other work on the machine); " +
    "the ratios use the median";
  const cpu = (msValue: number): string => (msValue / 1000).toFixed(2);
  const rate = (value: number): string => count(Math.round(value));
  const request = (p: Percentiles): string => `${p.p50Ms.toFixed(1)} / ${p.p99Ms.toFixed(1)} ms`;
  const serveRow = (run: ServeRun): string[] => [
    `lakeswap serve · ${run.label}${run.retried > 0 ? ` (${run.retried} × 503, retried)` : ""}`,
    count(run.events), seconds(run.wallMs), rate(run.eventsPerSecond), cpu(run.serverCpuMs), rate(run.eventsPerCpuSecond),
    (run.serverCpuMs / run.wallMs).toFixed(2), cpu(run.clientCpuMs), request(run.request),
  ];
  const limitRow = (label: string, run: LimitRun): string[] => [label, count(run.batches * figures.batchEvents), seconds(run.ms), rate(run.eventsPerSecond), "", "", "", "", `${run.mbPerSecond.toFixed(1)} MB/s`];
  const table = renderTable(
    ["measure", "events", "wall", "events/s", "server cpu s", "events/s per core", "cores used", "clients cpu s", "request p50 / p99"],
    [
      ...figures.runs.map(serveRow),
      ...limit.runs.map((run) => limitRow(`limit · one writer, one fdatasync per batch (${run.when})`, run)),
      limitRow(`  (context) group commit: ${limit.groupCommit.batchesPerFsync} batches per fdatasync (${limit.groupCommit.when})`, limit.groupCommit),
    ],
  );
  const fullSpeed = figures.runs.filter((run) => run.pacedEventsPerSecond === undefined);
  const ratios = renderTable(
    ["ratio", "value"],
    [
      ...fullSpeed.map((run) => [`lakeswap serve ${run.label} / limit (median ${rate(limit.judged)} events/s)`, times(run.eventsPerSecond / limit.judged)]),
      ["  (context) group commit limit / limit", times(limit.groupCommit.eventsPerSecond / limit.judged)],
    ],
  );
  const landing = renderTable(
    ["landing into Parquet (same server process)", "landed after the last 200", "server cpu s after it", "events per server CPU-second, window + landing"],
    figures.runs.map((run) => [run.label, seconds(run.drain.ms), cpu(run.drain.serverCpuMs), rate(run.eventsPerCpuSecondWithLanding)]),
  );
  const latency = renderTable(
    ["latency from 200 to queryable", "markers", "p50", "p99", "max"],
    figures.runs.map((run) => [run.label, count(run.latency.samples), seconds(run.latency.p50Ms), seconds(run.latency.p99Ms), seconds(run.latency.maxMs)]),
  );
  // Behind: the last events of the run were landed long after the settings' wait, so segments queued for the landing.
  const behind = figures.runs.filter((run) => run.drain.ms > 2 * settingsMs).map((run) => run.label);
  const latencyNote =
    `one marker event per batch; queryable = the first listing (every ${figures.pollMs} ms) that shows the Parquet file holding it, with its partition registered. ` +
    `The settings set the floor: a segment is sealed once its first record is ${seconds(figures.segmentMaxAgeMs)} old (wal.segment_max_age, checked every ${sealCheckMs} ms ` +
    `whatever the landing does) and landed at once when no landing runs, so up to ${seconds(settingsMs)} pass before its landing starts; lower the age for fresher data, ` +
    `at the cost of more, smaller files. ` +
    "Beyond that wait, the latency is the landing's own time" +
    (behind.length === 0
      ? "; every run was landed within twice the wait after its last 200, so the landing kept up."
      : `, and where a run was landed more than twice the wait after its last 200 (${behind.join("; ")}), the landing fell behind the posts: ` +
        "its latency is mostly the backlog of segments waiting to be landed, not the settings.");
  const query = "error" in checks.query ? `FAILED: ${checks.query.error}` : `${count(checks.query.rows)} rows, ${count(checks.query.distinctIds)} distinct event ids`;
  const checked = [
    `checks (${checks.passed ? "passed" : "FAILED"}): acknowledged ${count(checks.acknowledged)} events (warm-up included) · ` +
      `table files (DuckDB over ${count(checks.files.count)} Parquet files): ${count(checks.files.rows)} rows, ${count(checks.files.distinctIds)} distinct event ids · ` +
      `lakeswap query: ${query} · server counts: ${count(checks.server.accepted)} accepted, ${count(checks.server.written)} written, ${count(checks.server.deadLettered)} dead-lettered · ` +
      `SIGTERM: exit ${checks.exitCode ?? checks.exitSignal}, ${checks.walLeft} non-empty segment(s) left in the log · markers found ${count(checks.markersFound)}`,
    ...checks.problems.map((problem) => `  CHECK FAILED: ${problem}`),
  ];
  return [title, note, "", table, "", ratios, "", landing, "", latency, latencyNote, "", ...checked, "", ...ingestVerdicts(figures).map(verdictLine)].join("\n");
}

/** The signature benchmark: four methods on the same rows, throughput ratios, the 25× target, the checks. */
function renderSignature(figures: SignatureFigures): string {
  const title =
    `content signature · ${count(figures.rows)} rows in ${figures.partitions} partitions (day) · Parquet ${mb(figures.fileBytes)} · ` +
    `median of ${figures.rounds} interleaved rounds`;
  const method = (label: string, m: MethodFigures): string[] => [
    label, seconds(m.timing.medianMs), seconds(m.timing.minMs), seconds(m.timing.maxMs), String(m.timing.samplesMs.length),
    `${count(Math.round(m.rowsPerSecond))} rows/s`, seconds(m.cpuMedianMs),
  ];
  const methods = renderTable(
    ["method", "median", "min", "max", "n", "throughput", "cpu time"],
    [
      method("lakeswap land() · Parquet file → read, validate, partition, sign", figures.land),
      method(`lakeswap signature query alone · loaded table · ${figures.signing.form} form`, figures.signatureQuery),
      method("  (context) the same query in its plain-SQL form (the fallback)", figures.signatureQuerySql),
      method("straightforward in Node · per day: sorted rows → CSV → sha256", figures.straightforwardNode),
      method("straightforward via COPY · per day: COPY sorted → CSV file → sha256", figures.straightforwardCopy),
    ],
  );
  const baseline = figures.baseline === "straightforwardNode" ? "in Node" : "via COPY";
  const ratio = (label: string, key: keyof SignatureFigures["ratios"]): string[] => [label, times(figures.ratios[key]), times(figures.cpuRatios[key])];
  const ratios = renderTable(
    ["lakeswap / straightforward", "throughput", "by cpu time"],
    [
      ratio(`signature query alone / straightforward (faster variant: ${baseline})`, "signatureQuery"),
      ratio(`land() incl. read and validation / straightforward (faster variant: ${baseline})`, "land"),
      ratio("signature query alone / straightforward in Node", "signatureQueryVsNode"),
      ratio("signature query alone / straightforward via COPY", "signatureQueryVsCopy"),
    ],
  );
  const met = (yes: boolean): string => (yes ? "MET" : "NOT MET");
  const { target, checks } = figures;
  const note =
    `median/min/max: wall time; cpu time: median CPU time of the process (Node and DuckDB threads). ` +
    `The signature query and both straightforward variants read one DuckDB table loaded once from the file ` +
    `(${seconds(figures.loadMs)}, not charged to any of them; clustered by day, which only the straightforward method's per-day reads need); ` +
    `land() reads the file itself. The engine signs in the ${figures.signing.form} form` +
    (figures.signing.reason === undefined ? "" : ` (${figures.signing.reason})`) +
    `; the plain-SQL form, what lakeswap runs where its DuckDB extension is not built, is context, not judged`;
  const verdict =
    `target: lakeswap's signature ≥ ${target.ratio}× the straightforward method's throughput · ` +
    `signature query alone ${times(figures.ratios.signatureQuery)}: ${met(target.signatureQueryMet)} · ` +
    `(context, not the target's measure: land() with reading and validating the file ${times(figures.ratios.land)})`;
  const checked =
    `checks passed: signature query (both forms) = land() on every partition; on a ${count(checks.sampleRows)}-row sample (${checks.samplePartitions} partitions) ` +
    `every method gives the same signatures for two row orders and exactly one changed signature for one changed row; ` +
    `both straightforward variants hash the same CSV bytes; engine = reference rawSignature() on ${checks.referencePartitions} partitions`;
  return [title, note, "", methods, "", ratios, "", verdict, checked].join("\n");
}

/** The month-to-date replay: one line per delivery, then the totals. */
function renderMtd(figures: MtdFigures, name: string): string {
  const title =
    `${name} · ${figures.deliveries.length} cumulative deliveries of one month, ${count(figures.rowsPerDay)} rows a day ` +
    `(${count(figures.rowsDelivered)} rows delivered) · raw by day → stage by day → analytics by month · ` +
    `concurrency ${figures.concurrency} (lakeswap's default is 4; see MTD_CONCURRENCY in bench/mtd-bench.ts)`;
  const note = "each cell: partitions built/skipped; time: wall time of Pipeline.sync() (landing, planning, builds); incremental and full refresh take turns per delivery";
  const layers = (sync: MtdSync): string[] => [
    `${sync.layers.raw.built}/${sync.layers.raw.skipped}`,
    `${sync.layers.stage.built}/${sync.layers.stage.skipped}`,
    `${sync.layers.analytics.built}/${sync.layers.analytics.skipped}`,
    ms(sync.ms),
  ];
  const table = renderTable(
    ["delivery", "rows", "inc raw", "stage", "analytics", "inc time", "full raw", "stage", "analytics", "full time"],
    figures.deliveries.map((d) => [
      `${d.delivery} · days 1-${d.days}${d.note ? ` · ${d.note}` : ""}`,
      count(d.rows),
      ...layers(d.incremental),
      ...layers(d.full),
    ]),
  );
  const { incremental, full } = figures;
  const totals = renderTable(
    ["total", "builds", "raw", "stage", "analytics", "skipped", "wall time"],
    [
      ["incremental", count(incremental.built), count(incremental.layers.raw.built), count(incremental.layers.stage.built), count(incremental.layers.analytics.built), count(incremental.skipped), duration(incremental.ms)],
      ["full refresh", count(full.built), count(full.layers.raw.built), count(full.layers.stage.built), count(full.layers.analytics.built), count(full.skipped), duration(full.ms)],
      ["full / incremental", times(figures.ratios.builds), "", "", "", "", times(figures.ratios.time)],
    ],
  );
  const checked =
    `checks: incremental builds as expected on every delivery (the new day in raw and stage, the month in analytics; ` +
    `plus day ${figures.correction.day} in raw and stage on delivery ${figures.correction.delivery}): ${yes(figures.checks.incrementalBuildsAsExpected)} · ` +
    `analytics (${figures.checks.analyticsRows} rows) identical in both lakes and to the month computed from the last delivery: ${yes(figures.checks.analyticsMatch)}`;
  return [title, note, "", table, "", totals, "", checked].join("\n");
}

function timingRow(label: string, timing: Timing): string[] {
  return [label, ms(timing.medianMs), ms(timing.minMs), ms(timing.maxMs), String(timing.samplesMs.length)];
}

/** A table with a left-aligned first column and right-aligned others. */
/** The collector's POST path with prom-client and with a no-op registry, side by side, and their ratios. */
function renderMetrics(figures: MetricsFigures): string {
  const title =
    `collector metrics · POST /v1/events/pageviews in-process (HTTP server + write-ahead log, fdatasync before each 200), ` +
    `${figures.clients} keep-alive clients × ${count(figures.requests / figures.clients)} posts of ${figures.batchEvents} events, /metrics scraped every ${figures.scrapeMs} ms · ` +
    `interleaved rounds, medians`;
  const row = (name: string, variant: MetricsVariant): string[] => [
    name,
    count(Math.round(variant.requestsPerSecond)),
    variant.wallMicrosPerRequest.toFixed(0),
    variant.cpuMicrosPerRequest.toFixed(0),
    variant.roundsRequestsPerSecond.map((value) => count(Math.round(value))).join(" "),
    String(variant.scrapes),
  ];
  const table = renderTable(
    ["registry", "requests/s", "wall µs/request", "CPU µs/request", "rounds (requests/s)", "scrapes/round"],
    [row("prom-client (the collector's)", figures.promClient), row("no-op (no metrics)", figures.noop)],
  );
  const ratios = renderTable(
    ["ratio", "value"],
    [
      ["requests/s · prom-client / no-op", times(figures.promClient.requestsPerSecond / figures.noop.requestsPerSecond)],
      ["CPU µs/request · prom-client / no-op", times(figures.promClient.cpuMicrosPerRequest / figures.noop.cpuMicrosPerRequest)],
      ["requests/s · median of the rounds' paired ratios", times(pairedRatio(figures.promClient.roundsRequestsPerSecond, figures.noop.roundsRequestsPerSecond))],
      ["CPU µs/request · median of the rounds' paired ratios", times(pairedRatio(figures.promClient.roundsCpuMicrosPerRequest, figures.noop.roundsCpuMicrosPerRequest))],
    ],
  );
  return [title, "", table, "", ratios].join("\n");
}

/** The median of each round's ratio to the round of the other variant run next to it. */
function pairedRatio(of: readonly number[], to: readonly number[]): number {
  return median(of.map((value, i) => value / to[i]!));
}

function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, column) => Math.max(...all.map((row) => (row[column] ?? "").length)));
  const line = (row: readonly string[]): string =>
    row
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)))
      .join("   ")
      .trimEnd();
  const rule = widths.map((width) => "-".repeat(width)).join("   ");
  return [line(header), rule, ...rows.map(line)].join("\n");
}

function ms(value: number): string {
  return `${value.toFixed(value < 100 ? 2 : 1)} ms`;
}

function seconds(value: number): string {
  return `${(value / 1000).toFixed(2)} s`;
}

/** Milliseconds below 10 s, seconds above. */
function duration(value: number): string {
  return value < 10_000 ? ms(value) : `${(value / 1000).toFixed(2)} s`;
}

function mb(bytes: number): string {
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

function times(ratio: number): string {
  return `${ratio.toFixed(2)}×`;
}

function count(value: number): string {
  return value.toLocaleString("en-US");
}

function yes(value: boolean): string {
  return value ? "yes" : "NO";
}

function gb(bytes: number): string {
  return Number.isFinite(bytes) ? `${(bytes / 1e9).toFixed(2)} GB` : "n/a";
}

/** At most `length` characters; a longer text (an error quoted in full above) is cut with "…". */
function shorten(text: string, length: number): string {
  return text.length <= length ? text : `${text.slice(0, length - 1)}…`;
}
