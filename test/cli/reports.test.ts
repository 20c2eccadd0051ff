import { describe, expect, it } from "vitest";
import type { SyncReport } from "../../src/pipeline/pipeline.js";
import { ingestReportText, type IngestReport } from "../../src/cli/reports/ingest-report.js";
import { planReport, planReportText } from "../../src/cli/reports/plan-report.js";
import { syncReportText } from "../../src/cli/reports/sync-report.js";

// The text reports are pure functions of the JSON reports (`--json` prints those): rendered here from JSON objects.
describe("text reports from JSON reports", () => {
  it("names the partitions appended by difference, and their files, in a sync's report and a plan's", () => {
    const partition = { table: "events", layer: "raw", partition: "day=2026-11-01", action: "build", reason: "appended by difference", byDifference: ["log.csv"] } as const;
    const sync = JSON.parse(
      JSON.stringify({
        syncId: "20261201T100000Z-ab12",
        loads: [],
        layers: [],
        partitions: [{ ...partition, run: "r1", rows: 4, seconds: 0.1 }],
        totals: { built: 1, skipped: 0, failed: 0, rows: 4, seconds: 0.1 },
        sinks: [],
      }),
    ) as SyncReport;
    expect(syncReportText(sync)).toContain("1 partition(s) appended by difference: ");
    expect(syncReportText(sync)).toContain("only its rows the partition does not hold were appended (a row alike to one held counts as held): events/day=2026-11-01 (log.csv)");
    const plan = planReportText(planReport([{ dataset: "events", ...partition }]));
    expect(plan).toContain("1 partition(s) to append by difference: ");
    expect(plan).toContain("are appended (a row alike to one held counts as held): events/day=2026-11-01 (log.csv)");
  });

  it("renders a sync: what was landed, the layers, the partitions that changed, the sinks, the slow signatures", () => {
    const result = JSON.parse(
      JSON.stringify({
        syncId: "20261201T100000Z-ab12",
        loads: [
          { dataset: "orders", delivery: "d1", files: ["a.csv", "b.csv"], rowsRead: 10, rowsLoaded: 9, rowsDeadLettered: 1, deadLetterTable: "orders_dead", signing: { form: "sql", reason: "not built" } },
          {
            dataset: "events", delivery: "d3", files: ["e1.csv", "e2.csv", "e3.csv"], rowsRead: 6, rowsLoaded: 3, rowsAppended: 1, rowsDeadLettered: 3, deadLetterTable: "events_dead",
            deadLetterPartitions: [{ partition: "delivery=da", files: ["e1.csv"], rows: 2, written: false }, { partition: "delivery=db", files: ["e3.csv"], rows: 1, written: true }],
            rowsDeadLetteredBefore: 2, signing: { form: "native" },
          },
          { dataset: "weather", delivery: "d2", files: ["w.jsonl"], rowsRead: 48, rowsLoaded: 48, rowsDeadLettered: 0, signing: { form: "native" }, fetched: { days: 2, failed: 0 } },
        ],
        layers: [{ dataset: "orders", layer: "raw", table: "orders", built: 1, skipped: 1, failed: 0, rows: 9, seconds: 0.5 }],
        partitions: [
          { table: "orders", layer: "raw", partition: "day=2026-11-30", action: "build", reason: "new", run: "r1", rows: 9, seconds: 0.5 },
          { table: "orders", layer: "raw", partition: "day=2026-11-29", action: "skip", reason: "already appended", seconds: 0 },
          { table: "weather", layer: "raw", partition: "day=2026-11-28", action: "skip", reason: "empty in source", seconds: 0 },
        ],
        totals: { built: 1, skipped: 2, failed: 0, rows: 9, seconds: 0.5 },
        sinks: [
          { sink: "pg", layer: "raw", table: "public.orders", partition: "day=2026-11-30", action: "sent", reason: "new", rows: 9, seconds: 0.1 },
          { sink: "pg", layer: "raw", table: "public.orders", partition: "day=2026-11-29", action: "skipped", reason: "unchanged", seconds: 0 },
        ],
      }),
    ) as SyncReport;
    expect(syncReportText(result)).toBe(
      [
        "sync 20261201T100000Z-ab12 (undo with: lakeswap rollback --sync 20261201T100000Z-ab12)",
        "",
        "orders: read 10 rows from 2 file(s): 9 loaded, 1 dead-lettered (orders_dead, delivery=d1)",
        "events: read 6 rows from 3 file(s): 3 loaded (1 appended), 3 dead-lettered, 2 of them kept already by an earlier sync (events_dead, by file: delivery=da, delivery=db)",
        "weather: fetched 2 of 2 day(s) from its http source, 48 rows: 48 loaded, 0 dead-lettered",
        "signatures computed in plain SQL, about 5x slower than with lakeswap's extension: not built",
        "",
        "layer  table   built  skipped  failed  rows  seconds",
        "-----  ------  -----  -------  ------  ----  -------",
        "raw    orders  1      1        0       9     0.50",
        "",
        "orders: 1 partition(s) skip: already appended (they hold this delivery already; --allow-duplicates appends it again)",
        "",
        "1 day(s) came back from the source without rows, and were left as they are (a day with rows keeps them): weather/day=2026-11-28. If they really are empty now, set allow_empty: true under the dataset's source",
        "",
        "layer  partition       action  reason  run  rows  error",
        "-----  --------------  ------  ------  ---  ----  -----",
        "raw    day=2026-11-30  build   new     r1   9",
        "",
        "sinks: 1 partition(s) sent, 1 skipped (unchanged), 0 failed",
        "layer  target         partition       action  reason  rows  error",
        "-----  -------------  --------------  ------  ------  ----  -----",
        "raw    public.orders  day=2026-11-30  sent    new     9",
      ].join("\n"),
    );
  });

  it("renders a sync that built nothing", () => {
    const result = { syncId: "s", loads: [], layers: [], partitions: [], totals: { built: 0, skipped: 0, failed: 0, rows: 0, seconds: 0 }, sinks: [] } as unknown as SyncReport;
    expect(syncReportText(result)).toBe(["sync: nothing was built, so nothing was recorded or needs undoing", "", "", "layer  table  built  skipped  failed  rows  seconds", "-----  -----  -----  -------  ------  ----  -------"].join("\n"));
  });

  it("renders an ingest: the totals, and a quarantined segment as such", () => {
    const report: IngestReport = JSON.parse(
      JSON.stringify({
        pipeline: "events",
        namespace: "pageviews",
        accepted: 3,
        events: 5,
        written: 4,
        deadLettered: 1,
        files: 2,
        seconds: 0.2,
        segments: [
          { segment: "abc-000000000001", events: 5, written: 4, deadLettered: 1, files: 2, corruptBytes: 0 },
          { segment: "abc-000000000002", events: 0, written: 0, deadLettered: 0, files: 0, corruptBytes: 0, quarantined: "/wal/quarantine/abc-000000000002.sealed" },
        ],
      }),
    );
    expect(ingestReportText(report)).toBe(
      [
        "events/pageviews: 3 events accepted; landed 5 (with any earlier events the log held): 4 written, 1 dead-lettered (table events)",
        "",
        "segment           events       written  dead-lettered  files",
        "----------------  -----------  -------  -------------  -----",
        "abc-000000000001  5            4        1              2",
        "abc-000000000002  quarantined  0        0              0",
      ].join("\n"),
    );
  });

  it("renders a plan, with the error column only when a partition has an error", () => {
    const partitions = [
      { dataset: "orders", layer: "raw", table: "orders", partition: "day=2026-11-30", action: "build", reason: "new" },
      { dataset: "orders", layer: "raw", table: "orders", partition: "day=2026-11-29", action: "skip", reason: "unchanged" },
    ] as const;
    const plain = planReport(JSON.parse(JSON.stringify(partitions)));
    expect(plain.totals).toEqual({ build: 1, skip: 1 });
    expect(planReportText(plain)).toBe(
      [
        "layer  table   partition       action  reason",
        "-----  ------  --------------  ------  ---------",
        "raw    orders  day=2026-11-30  build   new",
        "raw    orders  day=2026-11-29  skip    unchanged",
        "",
        "1 to build, 1 to skip",
      ].join("\n"),
    );
    const failed = planReport([{ dataset: "w", layer: "raw", table: "w", partition: "day=1", action: "skip", reason: "fetch failed", error: "HTTP 500" }]);
    expect(planReportText(failed).split("\n")[0]).toBe("layer  table  partition  action  reason        error");
  });
});
