// Issue 9, item 12: a corrupted metadata file is named with the fix; one bad outbox entry does not stop every command.
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseManifest } from "../../src/lake/manifest.js";
import { writeConsequence } from "../../src/lake/layout.js";
import { parseOutboxEntry } from "../../src/lake/outbox.js";
import { parseSyncRecord } from "../../src/lake/sync-record.js";
import { embeddedBackend, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

let backend: TestBackend & { lakeDir: string };
const cli = (...args: string[]) => runMain([...backend.cliArgs, ...args]);
const meta = (...parts: string[]) => path.join(backend.lakeDir, "_lakeswap", ...parts);

beforeAll(async () => {
  backend = await embeddedBackend();
  expect((await cli("create-table", "orders", "--partition-keys", "day", "--columns", "id BIGINT")).code).toBe(0);
  expect((await cli("create-table", "other", "--partition-keys", "day", "--columns", "id BIGINT")).code).toBe(0);
  for (const table of ["orders", "other"]) {
    const result = await cli("replace", table, "--partition", "day=2026-11-01", "--sql", "SELECT range AS id FROM range(10)");
    expect(result.code, result.stderr).toBe(0);
  }
});
afterAll(async () => backend.cleanup());

describe("corrupted metadata files", () => {
  it("a bad outbox entry is quarantined with a warning naming it, and every command keeps working", async () => {
    const bad = meta("outbox", "orders", "20261130T000000000Z-deadbeef.json");
    writeFileSync(bad, "{ this is not json");
    const tables = await cli("tables", "--json");
    expect(tables.code, tables.stderr).toBe(0);
    expect(JSON.parse(tables.stdout)).toHaveLength(2);
    expect(tables.stderr).toMatch(/warning: outbox entry '_lakeswap\/outbox\/orders\/20261130T000000000Z-deadbeef.json' cannot be read \(not valid JSON: .*\); it was moved to '_lakeswap\/quarantine\/outbox\/orders\/20261130T000000000Z-deadbeef.json'/);
    expect(existsSync(bad)).toBe(false);
    expect(existsSync(meta("quarantine", "outbox", "orders", "20261130T000000000Z-deadbeef.json"))).toBe(true);
    // Once moved, it warns no more.
    const again = await cli("history", "orders");
    expect(again.code).toBe(0);
    expect(again.stderr).toBe("");
  });

  it("a bad manifest is named, with the fix (exit 8)", async () => {
    const folder = meta("manifests", "other", "day=2026-11-01");
    const file = path.join(folder, readdirSync(folder)[0]!);
    writeFileSync(file, "garbage");
    const result = await cli("history", "other");
    expect(result.code).toBe(8);
    expect(result.stderr).toMatch(/run manifest '_lakeswap\/manifests\/other\/day=2026-11-01\/.*\.json' is not valid JSON \(.*\); move it away and rerun/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it("a bad pointer state file is named, with the fix (exit 8)", async () => {
    const file = meta("pointers", "orders", "day=2026-11-01.json");
    writeFileSync(file, "[1,");
    const result = await cli("history", "orders");
    expect(result.code).toBe(8);
    expect(result.stderr).toContain(`pointer state file '${file}' is not valid JSON`);
    expect(result.stderr).toMatch(/delete it and rerun: the pointer itself is intact/);
  });

  it("a bad table definition is named (exit 8)", async () => {
    const file = meta("tables", "other.json");
    writeFileSync(file, "");
    const result = await cli("history", "other");
    expect(result.code).toBe(8);
    expect(result.stderr).toContain(`table definition '${file}' is not valid JSON`);
  });
});

describe("parsers of stored records", () => {
  const bytes = (text: string) => new TextEncoder().encode(text);

  it("name the file of a bad sync record or manifest", () => {
    expect(() => parseSyncRecord(bytes("{"), "_lakeswap/syncs/x.json")).toThrow(/^sync record '_lakeswap\/syncs\/x.json' is not valid JSON/);
    expect(() => parseSyncRecord(bytes("{}"), "_lakeswap/syncs/x.json")).toThrow(/^'_lakeswap\/syncs\/x.json' is not a lakeswap sync record/);
    expect(parseSyncRecord(bytes("{"))).toBeUndefined();
    expect(() => parseManifest(bytes("null"), "_lakeswap/manifests/t/day=1/r.json")).toThrow(/^'_lakeswap\/manifests\/t\/day=1\/r.json' is not a lakeswap run manifest/);
  });

  it("say what an outbox entry lacks", () => {
    expect(parseOutboxEntry(bytes('{"id":"1","table":"t"}'))).toBe("no partition, runId, kind");
    expect(parseOutboxEntry(bytes('{"id":"1","table":"t","moves":[{"partition":"day=1","runId":"r","kind":"swap"},{"partition":"day=2"}]}'))).toBe(
      "move 2 has no runId, kind",
    );
  });

  it("say whether the pointer moved when a write of a metadata file fails", () => {
    expect(writeConsequence("_lakeswap/outbox/t/1.json")).toMatch(/before the swap: the pointer did not move/);
    expect(writeConsequence("_lakeswap/manifests/t/day=1/r.json")).toMatch(/after the swap: the pointer did move/);
  });
});
