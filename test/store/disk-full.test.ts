// Issue 9, item 12: a full disk during a metadata write is exit 10, naming the file and whether the pointer moved.
// The lake sits on a real, small tmpfs, mounted in a private mount namespace (unshare), so nothing is mocked.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { bundleOf } from "../support/bundles.js";
import { tempDir } from "../support/lake-fixture.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
// The mount lives and dies with the namespace; where user namespaces are not allowed, the test is skipped.
const canUnshare = spawnSync("unshare", ["--user", "--map-root-user", "--mount", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"]).status === 0;
const { dir, cleanup } = tempDir("lakeswap-full-");
afterAll(() => cleanup());

describe.skipIf(!canUnshare)("a full disk", () => {
  it("pin on a full disk: exit 10, the file and 'no pointer moved', and no temporary file left", () => {
    const mount = path.join(dir, "fs");
    const lake = path.join(mount, "lake");
    const cli = `node ${bundleOf("run-cli.ts")} --lake ${lake}`;
    const script = [
      `mkdir -p ${mount} && mount -t tmpfs -o size=8m tmpfs ${mount}`,
      `${cli} create-table orders --partition-keys day --columns 'id BIGINT' >/dev/null`,
      `${cli} replace orders --partition day=2026-11-01 --sql 'SELECT range AS id FROM range(10)' >/dev/null`,
      `dd if=/dev/zero of=${mount}/filler bs=4k >/dev/null 2>&1 || true`,
      `${cli} pin orders --partition day=2026-11-01 --json; echo "exit=$?"`,
      `ls ${lake}/_lakeswap/tmp | wc -l | sed 's/^/tmp-files=/'`,
      `ls ${lake}/_lakeswap/pins/orders 2>/dev/null | wc -l | sed 's/^/pins=/'`,
    ].join(" && ");
    const result = spawnSync("unshare", ["--user", "--map-root-user", "--mount", "sh", "-c", script], { cwd: REPO, encoding: "utf8", env: { ...process.env, NODE_NO_WARNINGS: "1" } });
    expect(result.stdout).toMatch(/exit=10/);
    expect(result.stderr).toContain(`no space left on the device (ENOSPC) writing '${lake}/_lakeswap/pins/orders/day=2026-11-01.json': writing a pin: no pointer moved. Free space in the lake's folder and rerun`);
    expect(JSON.parse(result.stdout.slice(0, result.stdout.indexOf("exit=")))).toMatchObject({ error: { code: "NO_SPACE" } });
    expect(result.stdout).toMatch(/tmp-files=0/);
    expect(result.stdout).toMatch(/pins=0/);
  }, 120_000);
});
