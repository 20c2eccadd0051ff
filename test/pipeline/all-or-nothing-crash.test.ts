import { afterAll, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { BACKEND_FACTORIES, cloneBackend, runCli, selectedBackends, type CliResult, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

// `publish: all_or_nothing` killed at any point: before the publication commits, no pointer of the dataset has
// moved (its entries are dropped on the next open); after, the next open finishes it. Either way a reader finds
// every table of the dataset at delivery A or every table at delivery B, never a mix; the rerun converges to B.

const DAYS = 4;
const A = orders(DAYS, 4);
const B = orders(DAYS, 5).map((r) => ({ ...r, amount: `${r.id}.50` }));

/** Kill points: staging (raw's batch is the first `after-build`, stage's the second), then the publication of three tables. */
const BEFORE_COMMIT = ["after-build", "after-build@2", "during-build@3", "before-publish-commit"];
const AFTER_COMMIT = ["after-outbox", "after-outbox@3", "before-swap-rename@2", "during-batch-swap@5", "after-swap", "after-swap@3", "after-manifest@2"];
/**
 * On AWS (S3, Glue's batch calls, Athena building from scratch tables), where the adapters differ. Glue's batches:
 * the scratch tables over staged raw and stage runs are the first two (staging), the publication's the next three.
 */
const AWS_BEFORE_COMMIT = ["during-build@2", "during-batch-swap@2", "before-publish-commit"];
const AWS_AFTER_COMMIT = ["after-outbox@2", "during-batch-swap@4"];
const POINTS: Record<string, { readonly before: readonly string[]; readonly after: readonly string[] }> = {
  local: { before: BEFORE_COMMIT, after: AFTER_COMMIT },
  aws: { before: AWS_BEFORE_COMMIT, after: AWS_AFTER_COMMIT },
};

/** `table -> day -> sorted amounts`, what the dataset's three tables hold. */
async function holdings(lake: Lake): Promise<string> {
  const raw = await lake.query("SELECT day, string_agg(CAST(amount AS VARCHAR), ',' ORDER BY order_id) FROM orders_raw GROUP BY day ORDER BY day");
  const stage = await lake.query("SELECT day, string_agg(CAST(amount AS VARCHAR), ',' ORDER BY order_id) FROM orders_stage GROUP BY day ORDER BY day");
  const monthly = await lake.query("SELECT month, CAST(revenue AS VARCHAR) AS revenue FROM orders_monthly ORDER BY ALL");
  return JSON.stringify([raw.rows, stage.rows, monthly.rows]);
}

describe.each(selectedBackends())("a publish: all_or_nothing sync killed at any point (%s)", (backendName) => {
  const ws = new PipelineWorkspace({ concurrency: 2 });
  ws.editConfig((yaml) => yaml.replace("    layers:\n", "    publish: all_or_nothing\n    layers:\n"));
  const [fileA, fileB] = [ws.delivery(A), ws.delivery(B)];
  const args = (backend: TestBackend, file: string): string[] => [...backend.cliArgs, "sync", "-c", ws.configFile, "--input", file, "--json"];
  let base: Promise<{ backend: TestBackend; a: string; b: string }> | undefined;
  /** The lake with A synced, and what the dataset holds at A and at B (from a copy synced to B). */
  const synced = () =>
    (base ??= (async () => {
      const backend = await BACKEND_FACTORIES[backendName]!();
      const first = await runMain(args(backend, fileA), backend.cliEnv);
      expect(first.code, first.stderr).toBe(0);
      const a = await read(backend);
      const copy = await cloneBackend(backend);
      const second = await runMain(args(copy, fileB), copy.cliEnv);
      expect(second.code, second.stderr).toBe(0);
      const b = await read(copy);
      await copy.cleanup();
      expect(a).not.toBe(b);
      return { backend, a, b };
    })());
  const read = async (backend: TestBackend, settings = {}): Promise<string> => {
    const lake = await backend.open(settings);
    try {
      return await holdings(lake);
    } finally {
      await lake.close();
    }
  };
  afterAll(async () => {
    await (await base?.catch(() => undefined))?.backend.cleanup();
    ws.cleanup();
  });

  const points = POINTS[backendName] ?? { before: [], after: [] };
  it.concurrent.each([...points.before, ...points.after])("killed at %s: every table at A or every table at B; the rerun converges", async (point) => {
    const { backend: source, a, b } = await synced();
    const backend = await cloneBackend(source);
    try {
      const [name, nth] = point.split("@");
      const killed: CliResult = await runCli(args(backend, fileB), { ...backend.cliEnv, LAKESWAP_FAULT: `${name}:kill${nth ? `@${nth}` : ""}` });
      expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");
      // Read-only: what readers see before anyone finishes the dead writer's work. Before the commit, nothing moved.
      const committed = points.after.includes(point);
      if (!committed) expect(await read(backend, { readOnly: true })).toBe(a);
      // Opened for writing (the outbox replayed): all of A, or, once the publication committed, all of B.
      expect(await read(backend)).toBe(committed ? b : a);
      const rerun = await runMain(args(backend, fileB), backend.cliEnv);
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(await read(backend)).toBe(b);
      const resend = JSON.parse((await runMain(args(backend, fileB), backend.cliEnv)).stdout) as { totals: { built: number } };
      expect(resend.totals.built).toBe(0);
    } finally {
      await backend.cleanup();
    }
  }, 300_000);
});
