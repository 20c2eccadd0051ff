import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { InvalidInputError } from "../model/errors.js";

export type { Counter, Gauge, Histogram } from "prom-client";

/** Upper bounds (seconds) of a histogram's buckets when none are given: 1 ms to 10 s. */
const DEFAULT_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

type Kind = "counter" | "gauge" | "histogram";

interface MetricConfig {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly registers: Registry[];
  readonly collect: () => void;
}

interface Registered {
  readonly kind: Kind;
  readonly labelNames: readonly string[];
  readonly metric: Counter | Gauge | Histogram;
  /** Run, in the order given, each time the registry renders (several services can feed one family). */
  readonly collects: (() => void)[];
}

/**
 * The collector's counters, gauges and histograms: prom-client metrics in a registry of their own (not prom-client's
 * global one, so two collectors in one process do not collide), rendered in the Prometheus text format 0.0.4.
 * Asking again for a metric with the same name, kind and labels returns the one already registered, so that two
 * parts of the collector (or the services of several pipelines) share it; each may add a `collect` callback, run
 * before the metric is rendered.
 */
export class Metrics {
  /** The Content-Type of `render()`'s output. */
  static readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;

  private readonly registry = new Registry();
  private readonly registered = new Map<string, Registered>();

  /** A counter named `name` (by convention ending in `_total`), without labels unless `labelNames` are given. */
  counter(name: string, help: string, labelNames: readonly string[] = [], collect?: () => void): Counter {
    return this.register({ name, help, labelNames }, "counter", collect, (config) => new Counter(config)) as Counter;
  }

  /** A gauge named `name`, without labels unless `labelNames` are given; `collect` (none by default) sets it when rendered. */
  gauge(name: string, help: string, labelNames: readonly string[] = [], collect?: () => void): Gauge {
    return this.register({ name, help, labelNames }, "gauge", collect, (config) => new Gauge(config)) as Gauge;
  }

  /** A histogram named `name` with the bucket upper bounds `buckets` (default DEFAULT_BUCKETS, in seconds). */
  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets: readonly number[] = DEFAULT_BUCKETS): Histogram {
    return this.register({ name, help, labelNames }, "histogram", undefined, (config) => new Histogram({ ...config, buckets: [...buckets] })) as Histogram;
  }

  /** Every metric in registration order, as Prometheus text (ends with a newline). */
  async render(): Promise<string> {
    // prom-client puts a blank line between families; the exposition lakeswap has always served has none.
    return (await this.registry.metrics()).replace(/\n\n+/g, "\n");
  }

  private register(
    { name, help, labelNames }: { name: string; help: string; labelNames: readonly string[] },
    kind: Kind,
    collect: (() => void) | undefined,
    create: (config: MetricConfig) => Counter | Gauge | Histogram,
  ): Counter | Gauge | Histogram {
    const existing = this.registered.get(name);
    if (existing !== undefined) {
      if (existing.kind !== kind || existing.labelNames.join() !== labelNames.join()) {
        throw new InvalidInputError(
          `metric ${name} is already registered as a ${existing.kind} with labels [${existing.labelNames.join(", ")}], ` +
            `not as a ${kind} with labels [${labelNames.join(", ")}]: choose another name`,
        );
      }
      if (collect) existing.collects.push(collect);
      return existing.metric;
    }
    const collects = collect ? [collect] : [];
    // prom-client validates the names (and refuses 'le' on a histogram); its collect runs before a metric is rendered.
    const metric = create({ name, help, labelNames, registers: [this.registry], collect: () => collects.forEach((run) => run()) });
    this.registered.set(name, { kind, labelNames, metric, collects });
    return metric;
  }
}
