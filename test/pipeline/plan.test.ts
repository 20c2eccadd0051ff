import { describe, expect, it } from "vitest";
import type { DatasetConfig, LayerConfig, PipelineConfig } from "../../src/config/pipeline-config.js";
import type { PartitionState } from "../../src/lake/lake.js";
import { makePartition } from "../../src/model/partition.js";
import { appendSignature, chainSignature } from "../../src/model/signature.js";
import { checkPartitionFilters, partitionSelected } from "../../src/pipeline/partition-filter.js";
import { decide, grownKey, planLayer, planRaw, predict, type PlanChoices } from "../../src/pipeline/plan.js";

// The plan's decisions as pure functions: no DuckDB, no lake, only states and signatures.

const choices = (options: { fullRefresh?: boolean; allowDuplicates?: boolean; partitions?: string[] } = {}): PlanChoices => ({
  ...options,
  selected: (partition, keys, dataset) => partitionSelected(options.partitions, partition, keys, dataset),
});

const state = (partition: string, fields: Partial<PartitionState> = {}): PartitionState => ({ partition, runId: "run-1", pinned: false, ...fields });
const states = (...list: PartitionState[]): Map<string, PartitionState> => new Map(list.map((s) => [s.partition, s]));

const dataset = (fields: Partial<DatasetConfig> = {}): DatasetConfig => ({
  name: "orders",
  source: { format: "csv", path: "orders.csv", header: true, delimiter: "," },
  table: "orders_raw",
  columns: [{ name: "day", type: "VARCHAR", nullable: false }],
  partition: [{ key: "day", expression: "day" }],
  signatureColumns: ["day"],
  compression: "snappy",
  write: "partition_replace",
  layers: [],
  sinks: [],
  audits: [],
  ...fields,
});

const layer = (fields: Partial<LayerConfig> = {}): LayerConfig => ({
  name: "monthly",
  table: "orders_monthly",
  sqlPath: "monthly.sql",
  sql: "SELECT 1",
  fingerprint: "f1",
  columns: [],
  partitionKeys: ["month"],
  from: "raw",
  inputMap: [{ key: "month", expression: "substr(day, 1, 7)" }],
  lookups: [],
  compression: "snappy",
  sinks: [],
  audits: [],
  ...fields,
});

const day = (value: string, signature: string, rows = 1) => ({ partition: makePartition([["day", value]]), rows, signature });
const noAppends = { appendedBefore: new Map<string, readonly string[]>(), emptyDays: [] };

describe("decide", () => {
  it("gives each reason in the rule's order", () => {
    expect(decide(state("d", { pinned: true }), "v3:a", "content changed", true)).toEqual({ action: "skip", reason: "pinned" });
    expect(decide(state("d", { signature: "v3:a" }), "v3:a", "content changed", true)).toEqual({ action: "build", reason: "forced" });
    expect(decide(undefined, "v3:a", "content changed")).toEqual({ action: "build", reason: "new" });
    expect(decide(state("d", { runId: "" }), "v3:a", "content changed")).toEqual({ action: "build", reason: "new" });
    expect(decide(state("d", { signature: "v3:a", movedBy: "rollback" }), "v3:a", "content changed")).toEqual({ action: "build", reason: "rolled back" });
    expect(decide(state("d"), "v3:a", "content changed")).toEqual({ action: "build", reason: "never signed" });
    expect(decide(state("d", { signature: "v3:a" }), undefined, "content changed")).toEqual({ action: "build", reason: "never signed" });
    expect(decide(state("d", { signature: "v2:a" }), "v3:a", "content changed")).toEqual({ action: "build", reason: "signature version changed" });
    expect(decide(state("d", { signature: "v3:a" }), "v3:b", "upstream changed")).toEqual({ action: "build", reason: "upstream changed" });
    expect(decide(state("d", { signature: "v3:a" }), "v3:a", "content changed")).toEqual({ action: "skip", reason: "unchanged" });
  });
});

describe("planRaw", () => {
  it("builds the partitions whose signature changed and skips the rest", () => {
    const current = states(state("day=2026-11-01", { signature: "v3:a" }), state("day=2026-11-02", { signature: "v3:b" }));
    const delivery = { partitions: [day("2026-11-01", "v3:a", 3), day("2026-11-02", "v3:x", 4), day("2026-11-03", "v3:c", 5)] };
    const { plan, appended } = planRaw({ dataset: dataset(), delivery, states: current, ...noAppends }, choices());
    expect(plan.map((p) => [p.partition, p.action, p.reason, p.signature, p.rows])).toEqual([
      ["day=2026-11-01", "skip", "unchanged", "v3:a", 3],
      ["day=2026-11-02", "build", "content changed", "v3:x", 4],
      ["day=2026-11-03", "build", "new", "v3:c", 5],
    ]);
    expect(appended.size).toBe(0);
  });

  it("plans only the partitions --partition names", () => {
    const delivery = { partitions: [day("2026-11-01", "v3:a"), day("2026-11-02", "v3:b")] };
    const { plan } = planRaw({ dataset: dataset(), delivery, states: new Map(), ...noAppends }, choices({ partitions: ["day=2026-11-02"] }));
    expect(plan.map((p) => p.partition)).toEqual(["day=2026-11-02"]);
  });

  it("appends a delivery part once, and again only with allowDuplicates", () => {
    const current = states(state("day=2026-11-01", { signature: "v3:s" }), state("day=2026-11-02", { signature: "v3:t" }));
    const delivery = { partitions: [day("2026-11-01", "v3:part"), day("2026-11-02", "v3:other"), day("2026-11-03", "v3:new")] };
    const appendedBefore = new Map<string, readonly string[]>([["day=2026-11-01", ["v3:part"]], ["day=2026-11-02", ["v3:first"]]]);
    const input = { dataset: dataset({ write: "append" }), delivery, states: current, appendedBefore, emptyDays: [] };
    const { plan, appended } = planRaw(input, choices());
    expect(plan.map((p) => [p.partition, p.action, p.reason, p.signature])).toEqual([
      ["day=2026-11-01", "skip", "already appended", "v3:s"],
      ["day=2026-11-02", "build", "appended", appendSignature("v3:t", "v3:other")],
      ["day=2026-11-03", "build", "new", "v3:new"],
    ]);
    expect(Object.fromEntries(appended)).toEqual({ "day=2026-11-02": { record: ["v3:first", "v3:other"], taken: 1 }, "day=2026-11-03": { record: ["v3:new"], taken: 1 } });
    const again = planRaw(input, choices({ allowDuplicates: true }));
    expect(again.plan[0]).toMatchObject({ action: "build", reason: "appended" });
  });

  it("appends only the files whose part of a partition it does not hold (a glob that matched files appended before)", () => {
    const current = states(state("day=2026-11-01", { signature: "v3:s" }), state("day=2026-11-02", { signature: "v3:t" }));
    const parts = (...list: [string, string, number][]) => list.map(([file, signature, rows]) => ({ file, signature, rows }));
    const delivery = {
      partitions: [
        // Day 1: e1's part is held, e2 is new, e3 holds the same rows as e2 (a copy: taken once, as one sync apart).
        { ...day("2026-11-01", "v3:whole1", 6), parts: parts(["e1", "v3:e1", 1], ["e2", "v3:e2", 2], ["e3", "v3:e2", 3]) },
        // Day 2: every part held, one of them as rows another file brought before.
        { ...day("2026-11-02", "v3:whole2", 3), parts: parts(["e1", "v3:d2", 1], ["e2", "v3:copy", 2]) },
        // Day 3 is new: every file's rows, recorded part by part.
        { ...day("2026-11-03", "v3:whole3", 2), parts: parts(["e2", "v3:f", 1], ["e3", "v3:g", 1]) },
      ],
    };
    const appendedBefore = new Map<string, readonly string[]>([["day=2026-11-01", ["v3:e1"]], ["day=2026-11-02", ["v3:d2", "v3:copy"]]]);
    const { plan, appended } = planRaw({ dataset: dataset({ write: "append" }), delivery, states: current, appendedBefore, emptyDays: [] }, choices());
    expect(plan.map((p) => [p.partition, p.action, p.reason, p.rows, p.signature])).toEqual([
      ["day=2026-11-01", "build", "appended", 2, appendSignature("v3:s", "v3:e2")],
      ["day=2026-11-02", "skip", "already appended", 3, "v3:t"],
      ["day=2026-11-03", "build", "new", 2, "v3:whole3"],
    ]);
    expect(Object.fromEntries(appended)).toEqual({
      "day=2026-11-01": { record: ["v3:e1", "v3:e2"], taken: 2, files: ["e2"] },
      "day=2026-11-03": { record: ["v3:f", "v3:g"], taken: 2 },
    });
    // A first load of two copies of one file: the first is taken, signed as the parts appended one by one would be.
    const copies = { partitions: [{ ...day("2026-11-04", "v3:both", 2), parts: parts(["e1", "v3:h", 1], ["e2", "v3:h", 1]) }] };
    const firstLoad = planRaw({ dataset: dataset({ write: "append" }), delivery: copies, states: new Map(), appendedBefore: new Map(), emptyDays: [] }, choices());
    expect(firstLoad.plan.map((p) => [p.reason, p.rows, p.signature])).toEqual([["new", 1, "v3:h"]]);
    expect(firstLoad.appended.get("day=2026-11-04")).toEqual({ record: ["v3:h"], taken: 1, files: ["e1"] });
    // A run appended from the whole delivery before parts were recorded per file: the same delivery is held.
    const legacy = new Map<string, readonly string[]>([["day=2026-11-01", ["v3:whole1"]], ["day=2026-11-02", []]]);
    const again = planRaw({ dataset: dataset({ write: "append" }), delivery, states: current, appendedBefore: legacy, emptyDays: [] }, choices());
    expect(again.plan.map((p) => `${p.partition} ${p.reason} ${p.rows}`)).toEqual(["day=2026-11-01 already appended 6", "day=2026-11-02 appended 3", "day=2026-11-03 new 2"]);
  });

  it("appends only the new lines of a file that grew at its end since its partition took it; a rewritten file whole", () => {
    const current = states(state("day=2026-11-01", { signature: "v3:s" }), state("day=2026-11-02", { signature: "v3:t" }));
    const delivery = {
      partitions: [
        // Day 1: log grew from line 3 to 5 (its rows through line 3 sign as then: `grown`); b is a new file.
        { ...day("2026-11-01", "v3:whole1", 5), parts: [{ file: "log", signature: "v3:log5", rows: 4, through: 5 }, { file: "b", signature: "v3:b", rows: 1, through: 1 }] },
        // Day 2: log was rewritten (its rows through line 2 sign otherwise: not in `grown`), taken whole.
        { ...day("2026-11-02", "v3:whole2", 2), parts: [{ file: "log", signature: "v3:log2x", rows: 2, through: 4 }] },
      ],
    };
    const appendedBefore = new Map<string, readonly string[]>([["day=2026-11-01", ["v3:log3"]], ["day=2026-11-02", ["v3:log2"]]]);
    const appendedFilesBefore = new Map([
      ["day=2026-11-01", [{ file: "log", through: 3, signature: "v3:log3" }]],
      ["day=2026-11-02", [{ file: "log", through: 2, signature: "v3:log2" }]],
    ]);
    const grown = new Map([[grownKey("day=2026-11-01", "log"), { through: 3, rows: 2, signature: "v3:new2" }]]);
    const input = { dataset: dataset({ write: "append" }), delivery, states: current, appendedBefore, appendedFilesBefore, grown, emptyDays: [] };
    const { plan, appended } = planRaw(input, choices());
    expect(plan.map((p) => [p.partition, p.action, p.reason, p.rows, p.signature])).toEqual([
      ["day=2026-11-01", "build", "appended", 3, appendSignature(appendSignature("v3:s", "v3:new2"), "v3:b")],
      ["day=2026-11-02", "build", "appended", 2, appendSignature("v3:t", "v3:log2x")],
    ]);
    expect(appended.get("day=2026-11-01")).toEqual({
      record: ["v3:log3", "v3:new2", "v3:log5", "v3:b"],
      taken: 3,
      files: ["log", "b"],
      after: { log: 3 },
      rows: 3,
      appendedFiles: [{ file: "log", through: 5, signature: "v3:log5", rows: 4 }, { file: "b", through: 1, signature: "v3:b", rows: 1 }],
    });
    expect(appended.get("day=2026-11-02")).toEqual({ record: ["v3:log2", "v3:log2x"], taken: 2, appendedFiles: [{ file: "log", through: 4, signature: "v3:log2x", rows: 2 }] });
    // A file that grew with no new rows for a partition adds nothing to it; allowDuplicates takes every part whole.
    const none = new Map([[grownKey("day=2026-11-01", "log"), { through: 3, rows: 0, signature: "v3:none" }]]);
    const onlyLog = { partitions: [{ ...delivery.partitions[0]!, parts: [delivery.partitions[0]!.parts[0]!] }] };
    expect(planRaw({ ...input, delivery: onlyLog, grown: none }, choices()).plan.map((p) => p.reason)).toEqual(["already appended"]);
    expect(planRaw({ ...input, delivery: onlyLog }, choices({ allowDuplicates: true })).plan.map((p) => p.rows)).toEqual([4]);
  });

  it("leaves the days before a lookback window alone, and reports the days a source answered empty", () => {
    const window = { key: "day", lookbackDays: 1, timezone: "UTC", allowEmpty: false };
    const current = states(state("day=2026-11-01", { signature: "v3:old" }), state("day=2026-11-03", { signature: "v3:empty" }));
    const delivery = { partitions: [day("2026-11-01", "v3:new"), day("2026-11-02", "v3:b")] };
    const input = {
      dataset: dataset({ window }), delivery, states: current, window: new Set(["2026-11-02", "2026-11-03"]),
      appendedBefore: new Map(), emptyDays: [{ partition: "day=2026-11-03", signature: "v3:empty" }],
    };
    expect(planRaw(input, choices()).plan.map((p) => [p.partition, p.action, p.reason])).toEqual([
      ["day=2026-11-01", "skip", "outside lookback"],
      ["day=2026-11-02", "build", "new"],
      ["day=2026-11-03", "skip", "empty in source"],
    ]);
    const allowEmpty = planRaw({ ...input, dataset: dataset({ window: { ...window, allowEmpty: true } }) }, choices());
    expect(allowEmpty.plan[2]).toMatchObject({ partition: "day=2026-11-03", action: "skip", reason: "unchanged", rows: 0 });
  });
});

describe("planLayer", () => {
  const upstream = new Map([["day=2026-10-31", "v3:a"], ["day=2026-11-01", "v3:b"], ["day=2026-11-02", "v3:c"]]);
  const mapped = [["2026-10"], ["2026-11"], ["2026-11"]];

  it("groups upstream partitions by the partition they map to and chains their signatures", () => {
    const expected = chainSignature(["orders_raw/day=2026-11-01=v3:b", "orders_raw/day=2026-11-02=v3:c"], "f1", "month=2026-11");
    const current = states(state("month=2026-10", { signature: chainSignature(["orders_raw/day=2026-10-31=v3:a"], "f1", "month=2026-10") }), state("month=2026-11", { signature: "v3:old" }));
    const plan = planLayer({ dataset: dataset(), layer: layer(), upstreamTable: "orders_raw", upstream, mapped, states: current, lookups: [] }, choices());
    expect(plan.map((p) => [p.partition, p.action, p.reason, p.inputPartitions])).toEqual([
      ["month=2026-10", "skip", "unchanged", ["day=2026-10-31"]],
      ["month=2026-11", "build", "upstream changed", ["day=2026-11-01", "day=2026-11-02"]],
    ]);
    expect(plan[1]?.signature).toBe(expected);
  });

  it("builds unsigned what an unsigned upstream partition feeds, and a lookup enters the signature", () => {
    const unsigned = new Map<string, string | undefined>([...upstream, ["day=2026-11-02", undefined]]);
    const plan = planLayer({ dataset: dataset(), layer: layer(), upstreamTable: "orders_raw", upstream: unsigned, mapped, states: new Map(), lookups: ["rates/*=x"] }, choices());
    expect(plan[1]).toMatchObject({ partition: "month=2026-11", action: "build", reason: "new", signature: undefined, inputs: undefined });
    expect(plan[0]?.inputs).toEqual(["orders_raw/day=2026-10-31=v3:a", "rates/*=x"]);
  });

  it("refuses a partition value inputs.map gives that a path cannot hold", () => {
    const bad = [["2026-10"], ["../x"], ["2026-11"]];
    expect(() => planLayer({ dataset: dataset(), layer: layer(), upstreamTable: "orders_raw", upstream, mapped: bad, states: new Map(), lookups: [] }, choices())).toThrow(
      /datasets\.orders\.layers\.monthly\.inputs\.map\.month: for upstream partition day=2026-11-01 it gives '\.\.\/x'/,
    );
  });

  it("refuses a partition value inputs.map gives that readers read as NULL (null in any case, __HIVE_DEFAULT_PARTITION__)", () => {
    for (const value of ["null", "NULL", "Null", "__HIVE_DEFAULT_PARTITION__"]) {
      const bad = [["2026-10"], ["2026-11"], [value]];
      expect(() => planLayer({ dataset: dataset(), layer: layer(), upstreamTable: "orders_raw", upstream, mapped: bad, states: new Map(), lookups: [] }, choices())).toThrow(
        `datasets.orders.layers.monthly.inputs.map.month: for upstream partition day=2026-11-02 it gives '${value}': partition value '${value}' for key 'month' is not allowed, which readers read as a NULL partition value, not as text`,
      );
    }
  });
});

describe("predict", () => {
  it("gives built partitions their planned signature and keeps the others'", () => {
    const current = states(state("day=1", { signature: "v3:a" }), state("day=2", { signature: "v3:b" }), state("day=3", { runId: "" }));
    const plan = [
      { dataset: "d", layer: "raw", table: "t", partition: "day=2", action: "build" as const, reason: "content changed" as const, signature: "v3:x" },
      { dataset: "d", layer: "raw", table: "t", partition: "day=4", action: "build" as const, reason: "new" as const, signature: "v3:y" },
    ];
    expect(Object.fromEntries(predict(current, plan))).toEqual({ "day=1": "v3:a", "day=2": "v3:x", "day=4": "v3:y" });
  });
});

describe("checkPartitionFilters", () => {
  const config = (datasets: DatasetConfig[]): PipelineConfig => ({ file: "/x/lakeswap.yaml", concurrency: 1, datasets, ingest: [] });
  const orders = config([dataset({ layers: [layer()] })]);

  it("lets through a filter that gives every key of one table", () => {
    expect(() => checkPartitionFilters(orders, ["day=2026-11-01", "month=2026-11"])).not.toThrow();
    expect(() => checkPartitionFilters(orders, undefined)).not.toThrow();
  });

  it("names a misspelled key once, with the keys there are (plan and sync, CLI and library alike)", () => {
    expect(() => checkPartitionFilters(orders, ["dya=2026-11-02"])).toThrow(
      "--partition 'dya=2026-11-02': 'dya' (did you mean 'day'?) is not a partition key of any table of lakeswap.yaml; the keys are: day (orders_raw); month (orders_monthly)",
    );
    expect(() => checkPartitionFilters(orders, ["day=2026-11-02,month=2026-11"])).toThrow(/gives keys day,month, which no table of lakeswap.yaml has all of, alone/);
  });

  it("refuses any filter on a dataset written by upsert", () => {
    const upsert = config([dataset({ write: "upsert", upsert: { primaryKey: ["day"], orderBy: [] } })]);
    expect(() => checkPartitionFilters(upsert, ["day=2026-11-01"])).toThrow(/--partition cannot limit a sync of datasets\.orders, which writes by upsert/);
  });
});
