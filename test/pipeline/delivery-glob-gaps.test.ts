import { renameSync, symlinkSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { queryEmbeddedLake } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { orders, PipelineWorkspace } from "../support/pipeline-fixture.js";

// A delivery named by a glob whose match is a symbolic link to a file that is gone (an export linked from a share that
// is not mounted): the matcher leaves such a link out without a word, and a sync that went on would replace the
// partitions from the other files alone, dropping that file's rows. The sync is refused instead, naming the link, and
// the tables keep what they showed.

const cleanups: (() => void)[] = [];
afterAll(() => cleanups.forEach((cleanup) => cleanup()));

describe("a delivery glob that matches a broken symbolic link", () => {
  it("is refused before anything lands, naming the link, and every table keeps its rows", async () => {
    const ws = new PipelineWorkspace();
    cleanups.push(() => ws.cleanup());
    const rows = orders(2, 10);
    ws.delivery(rows.filter((_, i) => i % 2 === 0));
    const second = ws.delivery(rows.filter((_, i) => i % 2 === 1));
    const sync = () => runMain(["--lake", ws.lakeDir, "sync", "-c", ws.configFile, "--json"], {}, { cwd: ws.dir });
    const first = await sync();
    expect(first.code, first.stderr).toBe(0);
    const counts = () => queryEmbeddedLake(ws.lakeDir, "SELECT (SELECT count(*) FROM orders_raw), (SELECT sum(orders) FROM orders_monthly)");
    const before = await counts();
    expect(before[0]?.[0]).toBe(20);

    // The second file moves to a share that is then gone; the delivery folder keeps a link to it.
    const moved = path.join(ws.dir, "share", "part.csv");
    renameSync(second, path.join(ws.dir, "moved-away.csv"));
    symlinkSync(moved, second);
    const refused = await sync();
    expect(refused.code).toBe(2);
    const error = JSON.parse(refused.stdout) as { error: { code: string; message: string } };
    expect(error.error.code).toBe("INVALID_INPUT");
    expect(error.error.message).toContain(`the source file '${second}', which '${path.join(ws.dir, "deliveries", "*.csv")}' matches, is a symbolic link to '${moved}', which does not exist`);
    expect(await counts()).toEqual(before);
  });
});
