import { performance } from "node:perf_hooks";
import type { TableDefinition } from "../../model/table.js";
import { icebergPendingKey } from "../layout.js";
import { commitIceberg, waitsForRebuild, type IcebergCommit, type IcebergContext } from "./iceberg-commit.js";
import { latestMetadata } from "./iceberg-pointer.js";

/**
 * When an `iceberg: true` table's Iceberg view can be behind its Hive pointers, and the commits that bring it back.
 * A command under the table's lease marks the table before its work (so before any pointer of it moves: its outbox
 * entries and moves come later, and a replay moves only what an entry recorded) and clears the mark once its commit
 * is made. The next command recovers (commits the current runs' files: `commitIceberg` is derived from the pointers)
 * only where a mark was left, by a writer killed or failed between its moves and its commit, or where nothing was
 * ever published (`iceberg: true` just added to a loaded table). Without the mark, every command would list every
 * pointer of the table twice to find, nearly always, nothing to recover.
 */

/** Before a command's work, under the table's lease: recovers a view left behind, then marks the table. Returns its wall time. */
export async function beginIcebergCommand(ctx: IcebergContext, table: TableDefinition): Promise<number> {
  const started = performance.now();
  const key = icebergPendingKey(table.name);
  const marked = (await ctx.store.get(key)) !== undefined;
  if (marked || !(await latestMetadata(ctx, table))) await commitIceberg(ctx, table, { "lakeswap.command": "recover" });
  if (!marked) await ctx.store.put(key, `${JSON.stringify({ markedAt: new Date().toISOString() })}\n`);
  return performance.now() - started;
}

/**
 * After a command's work, under the table's lease: commits what it moved, then clears the mark (kept if the commit
 * fails). The commit's time includes the command's other Iceberg work: `beganMs`, what `beginIcebergCommand` took.
 */
export async function endIcebergCommand(ctx: IcebergContext, table: TableDefinition, summary: Readonly<Record<string, string>>, beganMs: number): Promise<IcebergCommit | undefined> {
  const started = performance.now();
  const committed = await commitIceberg(ctx, table, summary);
  // A rebuild left unfinished (killed): the view was not committed, and the mark stays for the command that finishes it.
  if (waitsForRebuild(table)) return undefined;
  await ctx.leaseCheck(table.name);
  await ctx.store.delete([icebergPendingKey(table.name)]);
  return committed && { ...committed, ms: beganMs + (performance.now() - started) };
}
