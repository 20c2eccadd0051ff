import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { resolvePipelineConfig } from "../../src/config/pipeline-config.js";

// Issue 13: `source.http`, `replace_partition`, `lookback_days` (and their companions contract, timezone,
// allow_empty) are accepted where they mean something and refused, with the key and the fix, where they do not.

const dir = mkdtempSync(path.join(os.tmpdir(), "lakeswap-source-config-"));
const FILE = path.join(dir, "lakeswap.yaml");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const HTTP = `datasets:
  ga4:
    source:
      http:
        url: https://api.example.com/report?date={{ date }}
        headers: {Authorization: "Bearer \${GA4_TOKEN}"}
        rows: rows
        fields: {sessions: "metricValues[0].value"}
        pagination: {cursor: next_cursor, param: cursor}
        requests_per_second: 5
        timeout: 20s
      replace_partition: true
      lookback_days: 3
      timezone: America/Los_Angeles
    columns: {page: VARCHAR, sessions: BIGINT}
`;

const FILES = `datasets:
  orders:
    source: {format: csv, path: orders.csv, lookback_days: 2}
    columns: {order_id: BIGINT, order_ts: TIMESTAMP}
    partition: {day: "strftime(order_ts, '%Y-%m-%d')"}
`;

const resolve = (yaml: string) => resolvePipelineConfig(parse(yaml), FILE, {});

describe("source config: http, replace_partition, lookback_days", () => {
  it("resolves an http source: its contract key is the one partition key, the window and the request settings", () => {
    const [dataset] = resolve(HTTP).datasets;
    expect(dataset!.partition.map((p) => p.key)).toEqual(["date"]);
    expect(dataset!.window).toEqual({ key: "date", lookbackDays: 3, timezone: "America/Los_Angeles", allowEmpty: false });
    expect(dataset!.http).toEqual({
      concurrency: 4,
      spec: {
        url: "https://api.example.com/report?date={{ date }}",
        headers: { Authorization: "Bearer ${GA4_TOKEN}" },
        rows: "rows",
        fields: { sessions: "metricValues[0].value" },
        pagination: { kind: "cursor", path: "next_cursor", param: "cursor" },
        requestsPerSecond: 5,
        timeoutMs: 20_000,
        maxAttempts: 5,
        maxPages: 10_000,
      },
    });
  });

  it("resolves a file source's lookback window over its only partition key, or the one contract names", () => {
    expect(resolve(FILES).datasets[0]!.window).toEqual({ key: "day", lookbackDays: 2, timezone: "UTC", allowEmpty: false });
    const twoKeys = FILES.replace("partition: {day:", "partition: {region: \"'eu'\", day:");
    expect(() => resolve(twoKeys)).toThrow(/datasets\.orders\.source\.contract: the dataset has partition keys region, day: name the one that holds the day/);
    expect(resolve(twoKeys.replace("lookback_days: 2}", "lookback_days: 2, contract: day}")).datasets[0]!.window?.key).toBe("day");
    expect(() => resolve(twoKeys.replace("lookback_days: 2}", "lookback_days: 2, contract: dya}"))).toThrow(/'dya' \(did you mean 'day'\?\) is not a partition key of the dataset \(region, day\)/);
  });

  it.each([
    ["a file key beside http", HTTP.replace("      replace_partition: true", "      format: csv\n      replace_partition: true"), /source\.format: an http source is fetched, not read from files/],
    ["partition beside http", `${HTTP}    partition: {day: "x"}\n`, /datasets\.ga4\.partition: an http source is partitioned by its contract key, 'date'/],
    ["write: append with http", `${HTTP}    write: append\n`, /datasets\.ga4\.write: an http source replaces each day it fetches/],
    ["replace_partition: false with http", HTTP.replace("replace_partition: true", "replace_partition: false"), /replace_partition: an http source always replaces the days it fetches/],
    ["a placeholder that is not the contract key", HTTP.replace("{{ date }}", "{{ day }}"), /unknown placeholder \{\{ day \}\}; the URL takes \{\{ date \}\}/],
    ["a URL without the day", HTTP.replace("?date={{ date }}", ""), /the URL does not say which day to return: put \{\{ date \}\}/],
    ["a URL that is not http", HTTP.replace("https://api.example.com", "file:///etc"), /is not an http:\/\/ or https:\/\/ URL/],
    ["a time zone that does not exist", HTTP.replace("America/Los_Angeles", "Mars/Olympus"), /source\.timezone: 'Mars\/Olympus' is not a time zone/],
    ["a bad timeout", HTTP.replace("timeout: 20s", "timeout: soon"), /source\.http\.timeout 'soon' is not a duration/],
    ["a column named like the contract key", HTTP.replace("columns: {page: VARCHAR", "columns: {date: VARCHAR, page: VARCHAR"), /'date' is also a column/],
    ["lookback_days with write: upsert", `${FILES}    write: upsert\n    primary_key: [order_id]\n`, /lookback_days: a lookback window replaces the days it takes again: it needs replace_partition: true \(write: partition_replace\), not write: upsert/],
    ["lookback_days with replace_partition: false", FILES.replace("lookback_days: 2}", "lookback_days: 2, replace_partition: false}"), /it needs replace_partition: true/],
    ["allow_empty without a window", FILES.replace("lookback_days: 2}", "allow_empty: true}"), /source\.allow_empty: applies to http sources and to sources with lookback_days/],
    ["replace_partition: true with write: append", `${FILES.replace("lookback_days: 2}", "replace_partition: true}")}    write: append\n`, /replace_partition: true replaces each delivered partition, which contradicts write: append/],
    ["a rows path that is not a path", HTTP.replace("rows: rows", "rows: \"a..b\""), /datasets\.ga4\.source\.http: HTTP source: rows 'a\.\.b' is not a path/],
    ["a negative lookback", FILES.replace("lookback_days: 2", "lookback_days: -1"), /lookback_days/],
  ])("refuses %s, naming the key and the fix", (_name, yaml, message) => {
    expect(() => resolve(yaml)).toThrow(message);
  });
});

describe("source.fields: the names a file source's columns have in the files", () => {
  const MAPPED = `datasets:
  orders:
    source:
      format: csv
      path: orders.csv
      fields: {order_id: "Order ID", amount: "Amount ($)"}
    columns: {order_id: BIGINT, amount: "DECIMAL(10,2)", order_ts: TIMESTAMP}
    partition: {day: "strftime(order_ts, '%Y-%m-%d')"}
`;

  it("gives each mapped column its field; the others keep their own names", () => {
    const columns = resolve(MAPPED).datasets[0]!.columns;
    expect(columns.map((c) => [c.name, c.field])).toEqual([["order_id", "Order ID"], ["amount", "Amount ($)"], ["order_ts", undefined]]);
  });

  it.each([
    ["a column that is not declared", MAPPED.replace("amount: \"Amount", "amout: \"Amount"), /source\.fields\.amout: no column amout is declared \(did you mean 'amount'\?\)/],
    ["two columns read from one name", MAPPED.replace('"Amount ($)"', '"order id"'), /source\.fields: columns order_id and amount would both be read from 'order id'/],
    ["a mapped name that is another column's own", MAPPED.replace('"Amount ($)"', "ORDER_TS"), /columns amount and order_ts would both be read from 'order_ts'/],
    ["spaces around a name", MAPPED.replace('"Order ID"', '" Order ID"'), /source\.fields\.order_id: ' Order ID' has spaces around it/],
    ["a control character", MAPPED.replace('"Order ID"', '"Order\\tID"'), /source\.fields\.order_id: 'Order\\x09ID' holds a control character/],
    ["a JSONL name a JSON path cannot spell", MAPPED.replace("format: csv", "format: jsonl").replace('"Order ID"', '"Order*"'), /source\.fields\.order_id: 'Order\*' holds/],
    ["fields with header: false", MAPPED.replace("path: orders.csv", "path: orders.csv\n      header: false"), /source\.fields: with header: false a CSV file's fields are the declared columns in order/],
    ["fields beside http", HTTP.replace("      replace_partition: true", "      fields: {page: Page}\n      replace_partition: true"), /source\.fields: an http source reads its columns by source\.http\.fields/],
    ["an empty name", MAPPED.replace('"Order ID"', '""'), /fields/],
  ])("refuses %s, naming the key and the fix", (_name, yaml, message) => {
    expect(() => resolve(yaml)).toThrow(message);
  });
});
