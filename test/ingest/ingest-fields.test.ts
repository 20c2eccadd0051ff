import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

// A namespace's `fields:` reads events whose fields are named otherwise than the columns (camelCase, as most event
// producers write them): the landing, the time field, the dedupe id and the extra column all read the events' names.

const cleanups: (() => void)[] = [];
afterAll(() => cleanups.forEach((cleanup) => cleanup()));

const CONFIG = `lake: ./lake
pipelines:
  events:
    namespaces:
      clicks:
        columns: {event_id: {type: VARCHAR, nullable: false}, user_id: BIGINT, received_at: {type: TIMESTAMPTZ, nullable: false}}
        fields: {event_id: eventId, user_id: userId, received_at: receivedAt}
        time: {field: received_at}
        dedupe: {field: event_id}
    wal: {dir: ./wal}
`;

describe("ingest namespaces' fields:", () => {
  it("read events by their own field names: values, time partitions, dedupe ids and the extra column", async () => {
    const { dir, cleanup } = tempDir("lakeswap-ingest-fields-");
    cleanups.push(cleanup);
    const config = path.join(dir, "lakeswap.yaml");
    writeFileSync(config, CONFIG);
    const events = [
      { eventId: "a", userId: 7, receivedAt: "2026-11-01T23:59:59Z", page: "/x" },
      { eventId: "a", userId: 7, receivedAt: "2026-11-01T23:59:59Z", page: "/x" },
      { EVENTID: "b", userid: 99, ReceivedAt: "2026-11-02T00:00:00Z" },
      { eventId: "b", userId: 8, receivedAt: "2026-11-02T00:00:01Z" },
    ];
    const file = path.join(dir, "events.ndjson");
    // userid is a 64-bit id, written with its digits (a JavaScript number would round it).
    writeFileSync(file, `${events.map((e) => JSON.stringify(e)).join("\n").replace('"userid":99', '"userid":1234567890123456789')}\n`);
    const result = await runMain(["ingest", "events", file, "-c", config, "--json"]);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ accepted: 2, deduplicated: 2 });
    const lake = await openEmbeddedLake(path.join(dir, "lake"));
    try {
      const rows = await lake.query("SELECT event_id, CAST(user_id AS VARCHAR), strftime(received_at, '%Y-%m-%d %H:%M:%S'), p_day, extra FROM clicks ORDER BY event_id");
      expect(rows.rows).toEqual([
        ["a", "7", "2026-11-01 23:59:59", "01", JSON.stringify({ page: "/x" })],
        ["b", "1234567890123456789", "2026-11-02 00:00:00", "02", null],
      ]);
    } finally {
      await lake.close();
    }
  });

  it("are refused where they name no column or two columns read one field", async () => {
    const { dir, cleanup } = tempDir("lakeswap-ingest-fields-");
    cleanups.push(cleanup);
    const config = path.join(dir, "lakeswap.yaml");
    const file = path.join(dir, "events.ndjson");
    writeFileSync(file, "{}\n");
    writeFileSync(config, CONFIG.replace("user_id: userId", "user: userId"));
    const unknown = await runMain(["ingest", "events", file, "-c", config]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/pipelines\.events\.namespaces\.clicks\.fields\.user: no column user is declared \(did you mean 'user_id'\?\)/);
    writeFileSync(config, CONFIG.replace("user_id: userId", "user_id: EventId"));
    const twice = await runMain(["ingest", "events", file, "-c", config]);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toMatch(/pipelines\.events\.namespaces\.clicks\.fields: columns event_id and user_id would both be read from 'eventid'/);
  });
});
