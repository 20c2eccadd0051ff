import type { SyncRollbackResult } from "../../lake/operations/rollback.js";

/** One line per schema change a rollback or a discard undid (`restored`) or kept (`skipped`, and why). */
export function schemaRestoreLines(schemas: SyncRollbackResult["schemas"]): string[] {
  return (schemas ?? []).map((s) =>
    s.action === "restored" ? `${s.table}: schema restored to before the sync (undone: ${s.changes.join("; ")})` : `${s.table}: schema kept (${s.reason ?? ""})`,
  );
}
