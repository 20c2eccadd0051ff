import { readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { lakeIdentity } from "../../src/lake/lake-identity.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";

// A lake's id tells two lakes apart in records kept outside them (a PostgreSQL target's state rows): one id per lake,
// whoever makes it first, kept when the lake's folder moves.

const workspace = tempDir("lakeswap-lake-identity-");
afterAll(() => workspace.cleanup());
const storeAt = (dir: string) => new LocalStore(dir, { folders: METADATA_FOLDERS });

describe("the lake's id", () => {
  it("is made once, by whichever of several processes comes first, and stays with the lake when its folder moves", async () => {
    const dir = path.join(workspace.dir, "lake");
    const ids = await Promise.all(Array.from({ length: 8 }, () => lakeIdentity(storeAt(dir))));
    expect(new Set(ids.map((identity) => identity.id)).size).toBe(1);
    expect(ids[0]!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(ids[0]!.location).toBe(dir);
    expect(JSON.parse(readFileSync(path.join(dir, "_lakeswap", "lake-id.json"), "utf8"))).toMatchObject({ id: ids[0]!.id });

    const moved = path.join(workspace.dir, "lake-moved");
    renameSync(dir, moved);
    expect(await lakeIdentity(storeAt(moved))).toEqual({ id: ids[0]!.id, location: moved });
  });

  it("refuses a damaged id file, naming it and the fix, rather than making a second id", async () => {
    const dir = path.join(workspace.dir, "damaged");
    await lakeIdentity(storeAt(dir));
    const file = path.join(dir, "_lakeswap", "lake-id.json");
    writeFileSync(file, '{"id": "not-a-uuid"}\n');
    await expect(lakeIdentity(storeAt(dir))).rejects.toThrow(/lake-id\.json does not hold the lake's id .*changed by hand or damaged. Restore it from a backup of the lake/);
    expect(readFileSync(file, "utf8")).toBe('{"id": "not-a-uuid"}\n');
  });
});
