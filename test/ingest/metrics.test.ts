import { describe, expect, it } from "vitest";
import { escapeLabelValue, Metrics } from "../../src/ingest/metrics.js";

describe("the metrics registry", () => {
  it("renders counters with HELP and TYPE lines, a series per label value, counting up", () => {
    const metrics = new Metrics();
    const events = metrics.counter("lakeswap_ingest_events_total", "Events accepted.", ["pipeline", "namespace"]);
    const plain = metrics.counter("lakeswap_ingest_restarts_total", "Restarts.");
    events.inc({ pipeline: "web", namespace: "clicks" }, 1000);
    events.inc({ pipeline: "web", namespace: "clicks" }, 500);
    events.inc({ namespace: "views", pipeline: "web" });
    plain.inc();

    expect(metrics.render()).toBe(
      [
        "# HELP lakeswap_ingest_events_total Events accepted.",
        "# TYPE lakeswap_ingest_events_total counter",
        'lakeswap_ingest_events_total{pipeline="web",namespace="clicks"} 1500',
        'lakeswap_ingest_events_total{pipeline="web",namespace="views"} 1',
        "# HELP lakeswap_ingest_restarts_total Restarts.",
        "# TYPE lakeswap_ingest_restarts_total counter",
        "lakeswap_ingest_restarts_total 1",
        "",
      ].join("\n"),
    );
    expect(events.get({ pipeline: "web", namespace: "clicks" })).toBe(1500);
    expect(events.get({ pipeline: "web", namespace: "never" })).toBe(0);
    expect(metrics.render()).not.toContain("never");
  });

  it("escapes backslash, double quote and newline in label values, and backslash and newline in HELP", () => {
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd');
    const metrics = new Metrics();
    metrics.counter("odd_total", 'Help with a \\ backslash,\na newline and "quotes".', ["path"]).inc({ path: 'C:\\tmp\\"x"\nnext' });

    const lines = metrics.render().split("\n");
    expect(lines[0]).toBe('# HELP odd_total Help with a \\\\ backslash,\\na newline and "quotes".');
    expect(lines[2]).toBe('odd_total{path="C:\\\\tmp\\\\\\"x\\"\\nnext"} 1');
    expect(lines).toHaveLength(4); // three lines and the final newline: nothing broke a line
  });

  it("renders gauges, computing one with collect at render time (a number, or set calls for labelled series)", () => {
    const metrics = new Metrics();
    let walBytes = 10;
    const wal = metrics.gauge("lakeswap_ingest_wal_bytes", "Bytes in the write-ahead log.");
    wal.collect = () => walBytes;
    const lag = metrics.gauge("lakeswap_ingest_upload_lag_seconds", "Age of the oldest sealed segment.", ["pipeline"]);
    lag.collect = () => {
      lag.set(walBytes / 10, { pipeline: "web" });
    };
    const temperature = metrics.gauge("temperature", "Set by hand.");
    temperature.set(-1.5);
    temperature.inc(undefined, 0.25);

    expect(metrics.render()).toContain("lakeswap_ingest_wal_bytes 10\n");
    walBytes = 4096;
    const text = metrics.render();
    expect(text).toContain("# TYPE lakeswap_ingest_wal_bytes gauge\nlakeswap_ingest_wal_bytes 4096\n");
    expect(text).toContain('lakeswap_ingest_upload_lag_seconds{pipeline="web"} 409.6\n');
    expect(text).toContain("temperature -1.25\n");
  });

  it("renders a histogram with cumulative buckets, +Inf, sum and count per series", () => {
    const metrics = new Metrics();
    const seconds = metrics.histogram("request_seconds", "Request time.", ["route"], [0.1, 1]);
    for (const value of [0.05, 0.1, 0.5, 3]) seconds.observe(value, { route: "ingest" });

    expect(metrics.render()).toBe(
      [
        "# HELP request_seconds Request time.",
        "# TYPE request_seconds histogram",
        'request_seconds_bucket{route="ingest",le="0.1"} 2',
        'request_seconds_bucket{route="ingest",le="1"} 3',
        'request_seconds_bucket{route="ingest",le="+Inf"} 4',
        'request_seconds_sum{route="ingest"} 3.65',
        'request_seconds_count{route="ingest"} 4',
        "",
      ].join("\n"),
    );
  });

  it("spells special values as Prometheus does", () => {
    const metrics = new Metrics();
    const gauge = metrics.gauge("special", "Special values.", ["kind"]);
    gauge.set(Infinity, { kind: "up" });
    gauge.set(-Infinity, { kind: "down" });
    gauge.set(NaN, { kind: "none" });
    expect(metrics.render()).toContain('special{kind="up"} +Inf\nspecial{kind="down"} -Inf\nspecial{kind="none"} NaN\n');
  });

  it("refuses invalid metric and label names, wrong labels and counters going down", () => {
    const metrics = new Metrics();
    expect(() => metrics.counter("2xx_total", "x")).toThrow("metric name '2xx_total' is not valid");
    expect(() => metrics.counter("bad-name", "x")).toThrow("metric name 'bad-name' is not valid");
    expect(() => metrics.counter("ok_total", "x", ["bad-label"])).toThrow("label name 'bad-label' of metric ok_total is not valid");
    expect(() => metrics.counter("ok_total", "x", ["__reserved"])).toThrow("label name '__reserved'");
    expect(() => metrics.counter("ok_total", "x", ["a", "a"])).toThrow("names label 'a' twice");
    expect(() => metrics.histogram("h", "x", ["le"])).toThrow("cannot have a label named 'le'");
    expect(() => metrics.histogram("h", "x", [], [1, 0.5])).toThrow("must be finite and strictly increasing");

    const counter = metrics.counter("requests_total", "x", ["code"]);
    expect(() => counter.inc()).toThrow("metric requests_total has labels code, but was given missing code: pass exactly the declared labels");
    expect(() => counter.inc({ code: "200", route: "x" })).toThrow("unknown route");
    expect(() => counter.inc({ code: "200" }, -1)).toThrow("can only go up");
    expect(() => metrics.gauge("requests_total", "x")).toThrow("already registered as a counter");
    expect(metrics.render()).toBe("# HELP requests_total x\n# TYPE requests_total counter\n");
  });

  it("hands back the registered metric when asked again for the same one", () => {
    const metrics = new Metrics();
    const first = metrics.counter("requests_total", "x", ["code"]);
    first.inc({ code: "200" });
    const second = metrics.counter("requests_total", "x", ["code"]);
    second.inc({ code: "200" });
    expect(second).toBe(first);
    expect(first.get({ code: "200" })).toBe(2);
    expect(() => metrics.counter("requests_total", "x", ["status"])).toThrow("already registered");
  });
});
