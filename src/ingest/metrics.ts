import { InvalidInputError } from "../core/errors.js";

/** Label values of one series, keyed by label name. */
export type Labels = Readonly<Record<string, string>>;

/** The metric kinds this registry renders, as named on a `# TYPE` line. */
export type MetricType = "counter" | "gauge" | "histogram";

/** Upper bounds (seconds) of a histogram's buckets when none are given: 1 ms to 10 s. */
export const DEFAULT_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** One metric family: its name, help, label names and series, rendered as Prometheus text. */
abstract class Metric<Series> {
  protected readonly series = new Map<string, { readonly labels: Labels; readonly value: Series }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    readonly type: MetricType,
  ) {}

  /** The series of `labels`, created by `initial` on first use; the labels must be exactly the declared ones. */
  protected seriesOf(labels: Labels | undefined, initial: () => Series): Series {
    const key = this.keyOf(labels);
    const existing = this.series.get(key);
    if (existing !== undefined) return existing.value;
    const value = initial();
    this.series.set(key, { labels: { ...labels }, value });
    return value;
  }

  /** The series of `labels` if it exists, without creating it. */
  protected existingSeries(labels: Labels | undefined): Series | undefined {
    return this.series.get(this.keyOf(labels))?.value;
  }

  private keyOf(labels: Labels | undefined): string {
    const given = labels ?? {};
    this.checkLabels(given);
    return this.labelNames.length === 0 ? "" : JSON.stringify(this.labelNames.map((name) => given[name]));
  }

  private checkLabels(labels: Labels): void {
    const names = Object.keys(labels);
    if (names.length === this.labelNames.length && this.labelNames.every((name) => typeof labels[name] === "string")) return;
    const missing = this.labelNames.filter((name) => typeof labels[name] !== "string");
    const unknown = names.filter((name) => !this.labelNames.includes(name));
    const declared = this.labelNames.length === 0 ? "no labels" : `labels ${this.labelNames.join(", ")}`;
    const problems = [...(missing.length > 0 ? [`missing ${missing.join(", ")}`] : []), ...(unknown.length > 0 ? [`unknown ${unknown.join(", ")}`] : [])];
    throw new InvalidInputError(`metric ${this.name} has ${declared}, but was given ${problems.join("; ")}: pass exactly the declared labels`);
  }

  /** Makes sure a collect callback ran (gauges); a no-op for the other kinds. */
  protected beforeRender(): void {}

  /** The family as Prometheus text lines: HELP, TYPE, then one line per sample. */
  render(): string[] {
    this.beforeRender();
    const lines = [`# HELP ${this.name} ${escapeHelp(this.help)}`, `# TYPE ${this.name} ${this.type}`];
    for (const { labels, value } of this.series.values()) this.renderSeries(lines, labels, value);
    return lines;
  }

  protected abstract renderSeries(lines: string[], labels: Labels, value: Series): void;

  protected sample(lines: string[], name: string, labels: Labels, value: number, extra?: readonly [string, string]): void {
    const pairs = this.labelNames.map((label) => `${label}="${escapeLabelValue(labels[label] ?? "")}"`);
    if (extra !== undefined) pairs.push(`${extra[0]}="${escapeLabelValue(extra[1])}"`);
    lines.push(`${name}${pairs.length > 0 ? `{${pairs.join(",")}}` : ""} ${formatValue(value)}`);
  }
}

/** A count that only goes up (events, requests), one per combination of label values. */
export class Counter extends Metric<{ value: number }> {
  constructor(name: string, help: string, labelNames: readonly string[]) {
    super(name, help, labelNames, "counter");
    if (labelNames.length === 0) this.seriesOf(undefined, () => ({ value: 0 }));
  }

  /** Adds `by` (default 1, never negative) to the series of `labels`. */
  inc(labels?: Labels, by = 1): void {
    if (!(by >= 0) || !Number.isFinite(by)) {
      throw new InvalidInputError(`counter ${this.name} can only go up by a finite number >= 0, not ${by}: use a gauge for values that go down`);
    }
    this.seriesOf(labels, () => ({ value: 0 })).value += by;
  }

  /** The current value of the series of `labels` (0 when it never counted). */
  get(labels?: Labels): number {
    return this.existingSeries(labels)?.value ?? 0;
  }

  protected renderSeries(lines: string[], labels: Labels, series: { value: number }): void {
    this.sample(lines, this.name, labels, series.value);
  }
}

/** A value that goes up and down (bytes in the log, requests in flight); `collect` can compute it at render time. */
export class Gauge extends Metric<{ value: number }> {
  /**
   * Called each time the registry renders, before this gauge is written: either returns the value of an
   * unlabelled gauge, or calls `set` itself (for labelled series). Unset by default.
   */
  collect: (() => number | void) | undefined;

  constructor(name: string, help: string, labelNames: readonly string[]) {
    super(name, help, labelNames, "gauge");
    if (labelNames.length === 0) this.seriesOf(undefined, () => ({ value: 0 }));
  }

  /** Sets the series of `labels` to `value`. */
  set(value: number, labels?: Labels): void {
    this.seriesOf(labels, () => ({ value: 0 })).value = value;
  }

  /** Adds `by` (default 1; negative to go down) to the series of `labels`. */
  inc(labels?: Labels, by = 1): void {
    this.seriesOf(labels, () => ({ value: 0 })).value += by;
  }

  /** The current value of the series of `labels` (0 when never set). */
  get(labels?: Labels): number {
    return this.existingSeries(labels)?.value ?? 0;
  }

  protected override beforeRender(): void {
    const value = this.collect?.();
    if (typeof value === "number") this.set(value);
  }

  protected renderSeries(lines: string[], labels: Labels, series: { value: number }): void {
    this.sample(lines, this.name, labels, series.value);
  }
}

interface HistogramSeries {
  /** Observations per bucket (not cumulative), the last one for those above every bound (+Inf). */
  readonly counts: number[];
  sum: number;
  count: number;
}

/** A distribution of observed values (request durations) in fixed buckets, with their sum and count. */
export class Histogram extends Metric<HistogramSeries> {
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    readonly buckets: readonly number[],
  ) {
    super(name, help, labelNames, "histogram");
    if (labelNames.includes("le")) throw new InvalidInputError(`histogram ${name} cannot have a label named 'le': Prometheus reserves it for bucket bounds`);
    if (buckets.length === 0 || buckets.some((bound, i) => !Number.isFinite(bound) || (i > 0 && bound <= buckets[i - 1]!))) {
      throw new InvalidInputError(`histogram ${name} buckets [${buckets.join(", ")}] must be finite and strictly increasing (+Inf is added by itself)`);
    }
    if (labelNames.length === 0) this.seriesOf(undefined, () => this.emptySeries());
  }

  /** Records one observation of `value` in the series of `labels`. */
  observe(value: number, labels?: Labels): void {
    const series = this.seriesOf(labels, () => this.emptySeries());
    let bucket = 0;
    while (bucket < this.buckets.length && value > this.buckets[bucket]!) bucket++;
    series.counts[bucket]!++;
    series.sum += value;
    series.count++;
  }

  private emptySeries(): HistogramSeries {
    return { counts: new Array<number>(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
  }

  protected renderSeries(lines: string[], labels: Labels, series: HistogramSeries): void {
    let cumulative = 0;
    for (const [i, bound] of this.buckets.entries()) {
      cumulative += series.counts[i]!;
      this.sample(lines, `${this.name}_bucket`, labels, cumulative, ["le", formatValue(bound)]);
    }
    this.sample(lines, `${this.name}_bucket`, labels, series.count, ["le", "+Inf"]);
    this.sample(lines, `${this.name}_sum`, labels, series.sum);
    this.sample(lines, `${this.name}_count`, labels, series.count);
  }
}

/**
 * A registry of counters, gauges and histograms, rendered in the Prometheus text exposition format 0.0.4.
 * Asking again for a metric with the same name, kind and labels returns the one already registered, so that
 * two parts of the collector (or two servers in one process) can share a registry.
 */
export class Metrics {
  /** The Content-Type of `render()`'s output. */
  static readonly contentType = "text/plain; version=0.0.4; charset=utf-8";

  private readonly metrics = new Map<string, Counter | Gauge | Histogram>();

  /** A counter named `name` (by convention ending in `_total`), without labels unless `labelNames` are given. */
  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.register(name, "counter", labelNames, () => new Counter(name, help, labelNames));
  }

  /** A gauge named `name`, without labels unless `labelNames` are given; set `collect` to compute it when rendered. */
  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.register(name, "gauge", labelNames, () => new Gauge(name, help, labelNames));
  }

  /** A histogram named `name` with the bucket upper bounds `buckets` (default DEFAULT_BUCKETS, in seconds). */
  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets: readonly number[] = DEFAULT_BUCKETS): Histogram {
    const histogram = this.register(name, "histogram", labelNames, () => new Histogram(name, help, labelNames, buckets));
    if (histogram.buckets.join() !== buckets.join()) {
      throw new InvalidInputError(`histogram ${name} is already registered with buckets [${histogram.buckets.join(", ")}], not [${buckets.join(", ")}]: use one set of buckets`);
    }
    return histogram;
  }

  /** Every metric in registration order, as Prometheus text (ends with a newline). */
  render(): string {
    const lines: string[] = [];
    for (const metric of this.metrics.values()) lines.push(...metric.render());
    return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
  }

  private register<M extends Counter | Gauge | Histogram>(name: string, type: MetricType, labelNames: readonly string[], create: () => M): M {
    const existing = this.metrics.get(name);
    if (existing !== undefined) {
      if (existing.type === type && existing.labelNames.join() === labelNames.join()) return existing as M;
      throw new InvalidInputError(
        `metric ${name} is already registered as a ${existing.type} with labels [${existing.labelNames.join(", ")}], ` +
          `not as a ${type} with labels [${labelNames.join(", ")}]: choose another name`,
      );
    }
    checkNames(name, labelNames);
    const metric = create();
    this.metrics.set(name, metric);
    return metric;
  }
}

function checkNames(name: string, labelNames: readonly string[]): void {
  if (!METRIC_NAME.test(name)) {
    throw new InvalidInputError(`metric name '${name}' is not valid: use letters, digits, '_' and ':', not starting with a digit`);
  }
  for (const label of labelNames) {
    if (!LABEL_NAME.test(label) || label.startsWith("__")) {
      throw new InvalidInputError(`label name '${label}' of metric ${name} is not valid: use letters, digits and '_', not starting with a digit or '__'`);
    }
  }
  const duplicate = labelNames.find((label, i) => labelNames.indexOf(label) !== i);
  if (duplicate !== undefined) throw new InvalidInputError(`metric ${name} names label '${duplicate}' twice: name each label once`);
}

/** A label value as the text format wants it: backslash, double quote and newline escaped. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (char) => (char === "\n" ? "\\n" : `\\${char}`));
}

/** A HELP text as the text format wants it: backslash and newline escaped. */
function escapeHelp(help: string): string {
  return help.replace(/[\\\n]/g, (char) => (char === "\n" ? "\\n" : "\\\\"));
}

/** A sample value as the text format spells it (`+Inf`, `-Inf`, `NaN` for the special ones). */
function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}
