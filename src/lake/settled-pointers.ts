import type { Catalog, Pointer } from "../catalog/catalog.js";
import { LeaseHeldError } from "../model/errors.js";
import { partitionPath } from "../model/partition.js";
import type { TableDefinition } from "../model/table.js";
import type { Outbox } from "./outbox.js";
import { DEFAULT_LEASE_WAIT_MS } from "./lease.js";

/** How long a reader sleeps between looks at a table whose pointers another writer is moving (doubling up to the last). */
const FIRST_PAUSE_MS = 20;
const LONGEST_PAUSE_MS = 500;

/** What a settled read needs: the catalog, the outbox, and how long a writer waits for another. */
export interface SettledContext {
  readonly catalog: Pick<Catalog, "listPointers">;
  readonly outbox: Pick<Outbox, "pendingIds">;
  /** The lake's settings, where the caller has them (LakeParts); else a writer's default wait. */
  readonly settings?: { readonly leaseWaitMs?: number };
}

/**
 * The pointers of a table this command does not hold the lease of (a lookup of another pipeline, an ingested raw
 * table), as some finished batch of its writer left them: never halfway through a batch's moves. A writer records a
 * batch in the outbox before its first move and acknowledges it after its last (./commit/swap.ts `moveChunk`,
 * ./operations/register-segment.ts), so: wait until the table has no pending entry, list its pointers, look again for
 * a pending entry, and list them once more. With no entry pending between the two listings, and the two the same,
 * every pointer held the same run (and signature) before and after a moment when no batch was under way: the state
 * some finished batch left. Otherwise a batch moved meanwhile, and the read starts again. Only the writer's batch of
 * moves is waited for, never its whole command (its lease); an entry that stays pending longer than a writer waits
 * for a lease (its writer died mid-batch and no command that writes the table has replayed it yet) fails the read.
 */
export async function settledPointers(ctx: SettledContext, table: TableDefinition): Promise<Pointer[]> {
  const waitMs = ctx.settings?.leaseWaitMs ?? DEFAULT_LEASE_WAIT_MS;
  const deadline = Date.now() + waitMs;
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    const pending = await ctx.outbox.pendingIds(table.name);
    if (pending.length === 0) {
      const first = await ctx.catalog.listPointers(table);
      if ((await ctx.outbox.pendingIds(table.name)).length === 0) {
        const second = await ctx.catalog.listPointers(table);
        if (samePointers(first, second)) return second;
      }
    } else if (Date.now() >= deadline) {
      throw new LeaseHeldError(
        `table '${table.name}' has a batch of pointer moves pending (outbox entry ${pending[0]}) for longer than ${Math.round(waitMs / 1000)}s, ` +
          `so it cannot be read at a state a finished batch left: its writer is still moving them, or died doing so. ` +
          `Rerun once its writer is done (a command that writes '${table.name}', or the next sync's open of the lake, finishes what a dead writer left).`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(pause, deadline - Date.now()))));
    pause = Math.min(pause * 2, LONGEST_PAUSE_MS);
  }
}

/** Whether two listings name the same partitions, each at the same run with the same signature (an ingested partition's run stays, its signature moves). */
function samePointers(a: readonly Pointer[], b: readonly Pointer[]): boolean {
  if (a.length !== b.length) return false;
  const key = (p: Pointer): string => `${partitionPath(p.partition)}\n${p.runId}\n${p.signature ?? ""}`;
  const seen = new Set(a.map(key));
  return b.every((p) => seen.has(key(p)));
}
