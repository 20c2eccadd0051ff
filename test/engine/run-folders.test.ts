// A build writes into a run folder of its own: made fresh (with its partition's folder where that is the first run), never
// one that exists (another writer's run, or a leftover), which is refused before anything is written into it.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileAccessFor, runFileName } from "../../src/engine/duckdb-file-access.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { RunTakenError } from "../../src/model/errors.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";

let dir: string;
let cleanup: () => void;

beforeAll(() => {
  ({ dir, cleanup } = tempDir("lakeswap-run-folders-"));
});
afterAll(() => cleanup());

describe("a run's folder", () => {
  it("is made with its partition's folder for a partition's first run, and beside the others for the next", async () => {
    const files = fileAccessFor(new LocalStore(dir, { folders: METADATA_FOLDERS }));
    for (const runId of ["20261201T000000Z-aaaaaa", "20261201T000001Z-bbbbbb"]) {
      const file = await files.newRunFile(`t/_runs/day=2026-11-01/run=${runId}/`, runFileName(runId));
      expect(file.path).toBe(path.join(dir, "t/_runs/day=2026-11-01", `run=${runId}`, runFileName(runId)));
      writeFileSync(file.path, runId);
      await file.publish();
      expect(readFileSync(file.path, "utf8")).toBe(runId);
    }
  });

  it("that exists already is refused, and what it holds is left as it is", async () => {
    const files = fileAccessFor(new LocalStore(dir, { folders: METADATA_FOLDERS }));
    const runId = "20261201T000002Z-cccccc";
    const prefix = `t/_runs/day=2026-11-02/run=${runId}/`;
    const first = await files.newRunFile(prefix, runFileName(runId));
    writeFileSync(first.path, "another writer's run");
    await expect(files.newRunFile(prefix, runFileName(runId))).rejects.toThrow(RunTakenError);
    expect(readFileSync(first.path, "utf8")).toBe("another writer's run");
    // A failed build's discard removes only its own folder.
    const other = await files.newRunFile(`t/_runs/day=2026-11-02/run=20261201T000003Z-dddddd/`, runFileName("20261201T000003Z-dddddd"));
    await other.discard();
    expect(existsSync(path.dirname(other.path))).toBe(false);
    expect(existsSync(first.path)).toBe(true);
  });
});
