import { fileMetrics, type FileMetrics } from "../../catalog/iceberg/file-metrics.js";
import { icebergSchemaFields } from "../../catalog/iceberg/table-metadata.js";
import { readFooters } from "../../landing/parquet-footers.js";
import type { TableDefinition } from "../../model/table.js";
import type { ObjectStore } from "../../store/object-store.js";

/** What the audit of a new run learnt of one of its files, for the Iceberg commit after it: no footer read twice. */
export interface FileFact {
  readonly size: number;
  readonly rows: number;
  /** Column metrics keyed by the field ids of the table's schema as its definition derives it (`icebergSchemaFields`). */
  readonly metrics: FileMetrics;
}

/** Facts kept at most: a sync's batch of new files (a few hundred bytes each); the oldest go first. */
const MAX_FACTS = 20_000;

/**
 * The facts the audits of this process's swaps learnt of the files of `iceberg: true` tables, by store key, until
 * the commit that publishes them reads them. A fact is used only for a file of the same size (so never for another
 * file at the same key); one missing is read from the file's footer again.
 */
export class FileFacts {
  private readonly facts = new Map<string, FileFact>();

  remember(key: string, fact: FileFact): void {
    this.facts.delete(key);
    this.facts.set(key, fact);
    for (const oldest of this.facts.keys()) {
      if (this.facts.size <= MAX_FACTS) break;
      this.facts.delete(oldest);
    }
  }

  /** The fact of `key` if it was learnt of a file of `size` bytes; it is forgotten (a commit publishes a file once). */
  take(key: string, size: number): FileFact | undefined {
    const fact = this.facts.get(key);
    this.facts.delete(key);
    return fact?.size === size ? fact : undefined;
  }

  /** The size learnt of `key`, if any (kept for `take`). */
  size(key: string): number | undefined {
    return this.facts.get(key)?.size;
  }
}

/** Rows of each file from its footer, remembering each file's size, rows and Iceberg metrics for the commit. */
export async function footerFacts(store: ObjectStore, facts: FileFacts, table: TableDefinition, files: readonly { readonly key: string; readonly size: number }[]): Promise<number[]> {
  const footers = await readFooters(store, files);
  const fields = icebergSchemaFields(table);
  return footers.map((footer, i) => {
    const file = files[i] as { readonly key: string; readonly size: number };
    const rows = Number(footer.num_rows);
    facts.remember(file.key, { size: file.size, rows, metrics: fileMetrics(footer, fields) });
    return rows;
  });
}
