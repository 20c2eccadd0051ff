import type { z } from "zod";
import { InvalidInputError } from "../../model/errors.js";
import { normalizeColumnType } from "../../model/table.js";
import type { PipelineColumn } from "../ingest-config.js";
import type { columnType } from "../pipeline-schema.js";

/** Runs a check, prefixing its message with the key path. */
export function wrapAt(at: string, check: () => unknown): void {
  try {
    check();
  } catch (error) {
    if (error instanceof InvalidInputError) throw new InvalidInputError(`${at}: ${error.message}`);
    throw error;
  }
}

/** The declared columns, each type normalized; an error names the column. */
export function resolveColumns(columns: Readonly<Record<string, z.output<typeof columnType>>>, at: string): PipelineColumn[] {
  const entries = Object.entries(columns);
  if (entries.length === 0) throw new InvalidInputError(`${at}: declare at least one column`);
  return entries.map(([name, spec]) => {
    const type = typeof spec === "string" ? spec : spec.type;
    const nullable = typeof spec === "string" ? true : spec.nullable;
    const renamedFrom = typeof spec === "string" ? undefined : spec.renamed_from;
    if (renamedFrom !== undefined && (renamedFrom === name || Object.hasOwn(columns, renamedFrom))) {
      throw new InvalidInputError(`${at}.${name}.renamed_from: '${renamedFrom}' is ${renamedFrom === name ? "the column's own name" : "declared as a column too"}; name the column's old name, which is no longer declared`);
    }
    try {
      return { name, type: normalizeColumnType(name, type), nullable, ...(renamedFrom !== undefined ? { renamedFrom } : {}) };
    } catch (error) {
      throw new InvalidInputError(`${at}.${name}: ${(error as Error).message}`);
    }
  });
}

