import { describe, expect, it } from "vitest";
import { Metrics } from "../../src/ingest/metrics.js";

describe("the metrics registry", () => {
  it("renders counters with HELP and TYPE lines, a series per label value, in registration order and no blank line between families", async () => {
    const metrics = new Metrics();
    const events = metrics.counter("lakeswap_ingest_events_total", "Events accepted.", ["pipeline", "namespace"]);
    const plain = metrics.counter("lakeswap_ingest_restarts_total", "Restarts.");
    events.inc({ pipeline: "web", namespace: "clicks" }, 1000);
    events.inc({ pipeline: "web", namespace: "clicks" }, 500);
    events.inc({ pipeline: "web", namespace: "views" });
    plain.inc();

    expect(await metrics.render()).toBe(
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
  });

  it("escapes backslash, double quote and newline in label values, and backslash and newline in HELP", async () => {
    const metrics = new Metrics();
    metrics.counter("odd_total", 'Help with a \\ backslash,\na newline and "quotes".', ["path"]).inc({ path: 'C:\\tmp\\"x"\nnext' });

    const lines = (await metrics.render()).split("\n");
    expect(lines[0]).toBe('# HELP odd_total Help with a \\\\ backslash,\\na newline and "quotes".');
    expect(lines[2]).toBe('odd_total{path="C:\\\\tmp\\\\\\"x\\"\\nnext"} 1');
    expect(lines).toHaveLength(4); // three lines and the final newline: nothing broke a line
  });

  it("runs every collect callback of a shared metric at render time, so each pipeline's service sets its own series", async () => {
    const metrics = new Metrics();
    const bytes = { web: 10, api: 1 };
    for (const pipeline of ["web", "api"] as const) {
      const wal = metrics.gauge("lakeswap_ingest_wal_bytes", "Bytes in the write-ahead log.", ["pipeline"], () => wal.set({ pipeline }, bytes[pipeline]));
    }
    expect(await metrics.render()).toContain('lakeswap_ingest_wal_bytes{pipeline="web"} 10\nlakeswap_ingest_wal_bytes{pipeline="api"} 1\n');
    bytes.web = 4096;
    expect(await metrics.render()).toContain('lakeswap_ingest_wal_bytes{pipeline="web"} 4096\n');
  });

  it("renders a histogram with cumulative buckets (1 ms to 10 s by default), +Inf, sum and count", async () => {
    const metrics = new Metrics();
    const seconds = metrics.histogram("request_seconds", "Request time.");
    for (const value of [0.0005, 0.1, 0.5, 30]) seconds.observe(value);

    const text = await metrics.render();
    expect(text).toContain('# TYPE request_seconds histogram\nrequest_seconds_bucket{le="0.001"} 1\nrequest_seconds_bucket{le="0.0025"} 1\n');
    expect(text).toContain('request_seconds_bucket{le="0.1"} 2\nrequest_seconds_bucket{le="0.25"} 2\nrequest_seconds_bucket{le="0.5"} 3\n');
    expect(text).toContain('request_seconds_bucket{le="10"} 3\nrequest_seconds_bucket{le="+Inf"} 4\nrequest_seconds_sum 30.6005\nrequest_seconds_count 4\n');
  });

  it("hands back the registered metric when asked again for the same one, and refuses the name for another kind or labels", async () => {
    const metrics = new Metrics();
    const first = metrics.counter("requests_total", "x", ["code"]);
    first.inc({ code: "200" });
    const second = metrics.counter("requests_total", "x", ["code"]);
    second.inc({ code: "200" });
    expect(second).toBe(first);
    expect(await metrics.render()).toContain('requests_total{code="200"} 2\n');
    expect(() => metrics.counter("requests_total", "x", ["status"])).toThrow("metric requests_total is already registered as a counter with labels [code], not as a counter with labels [status]");
    expect(() => metrics.gauge("requests_total", "x")).toThrow("already registered as a counter");
  });

  it("keeps each registry's metrics apart: two collectors in one process register the same names", async () => {
    const one = new Metrics();
    const two = new Metrics();
    one.counter("lakeswap_ingest_http_requests_total", "x", ["code"]).inc({ code: "200" });
    two.counter("lakeswap_ingest_http_requests_total", "x", ["code"]).inc({ code: "503" });
    expect(await one.render()).not.toContain("503");
    expect(await two.render()).not.toContain("200");
  });
});
