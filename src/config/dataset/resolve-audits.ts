import type { AuditCheck, AuditSpec } from "../../model/audit.js";
import { parseDuration } from "../../model/duration.js";
import { InvalidInputError } from "../../model/errors.js";
import { didYouMean } from "../config-messages.js";
import type { AuditInput } from "../pipeline-schema.js";

/** The checks an `audits:` entry may hold, one of them per entry. */
const CHECKS = ["not_null", "unique", "accepted_values", "range", "row_count", "freshness", "sql"] as const;

/**
 * A layer's `audits:` (at `where`), resolved against its columns and partition keys: each entry holds exactly one
 * check, names columns the layer has, and is expanded to one audit per column where it maps several
 * (`accepted_values`, `range`). Audit names are unique within the layer, so a report names one audit.
 */
export function resolveAudits(inputs: readonly AuditInput[], columns: readonly { readonly name: string }[], partitionKeys: readonly string[], where: string): AuditSpec[] {
  const known = [...columns.map((c) => c.name), ...partitionKeys];
  const audits: AuditSpec[] = [];
  inputs.forEach((input, index) => {
    const at = `${where}.audits[${index}]`;
    const present = CHECKS.filter((check) => input[check] !== undefined);
    if (present.length !== 1) {
      throw new InvalidInputError(
        `${at}: ${present.length === 0 ? "no check given" : `${present.join(" and ")} in one entry`}; ` +
          `an audit holds exactly one of ${CHECKS.join(", ")} (write two entries for two checks)`,
      );
    }
    const column = (name: string, key: string): string => {
      if (!known.includes(name)) throw new InvalidInputError(`${at}.${key}: column '${name}' is not a column of this layer${didYouMean(name, known)} (its columns: ${known.join(", ")})`);
      return name;
    };
    const checks = checksOf(input, present[0]!, column, at);
    for (const check of checks) {
      const name = input.name !== undefined && checks.length === 1 ? input.name : input.name !== undefined ? `${input.name}(${columnOf(check)})` : defaultName(check);
      if (audits.some((a) => a.name === name)) throw new InvalidInputError(`${at}: audit '${name}' is declared twice in this layer; give one of them a name:`);
      audits.push({ name, severity: input.severity, check });
    }
  });
  return audits;
}

function checksOf(input: AuditInput, kind: (typeof CHECKS)[number], column: (name: string, key: string) => string, at: string): AuditCheck[] {
  switch (kind) {
    case "not_null":
      return [{ kind, columns: input.not_null!.map((c) => column(c, kind)) }];
    case "unique": {
      const unique = input.unique!;
      const [columns, scope] = Array.isArray(unique) ? [unique, "partition" as const] : [unique.columns, unique.scope];
      return [{ kind, columns: columns.map((c) => column(c, kind)), scope }];
    }
    case "accepted_values":
      return Object.entries(input.accepted_values!).map(([name, values]): AuditCheck => ({ kind, column: column(name, `${kind}.${name}`), values }));
    case "range":
      return Object.entries(input.range!).map(([name, bounds]): AuditCheck => {
        if (bounds.min === undefined && bounds.max === undefined) throw new InvalidInputError(`${at}.range.${name}: give min, max or both`);
        return { kind, column: column(name, `${kind}.${name}`), min: bounds.min, max: bounds.max };
      });
    case "row_count": {
      const { min, max, max_change } = input.row_count!;
      if (min === undefined && max === undefined && max_change === undefined) throw new InvalidInputError(`${at}.row_count: give min, max or max_change (e.g. max_change: 50%)`);
      if (min !== undefined && max !== undefined && min > max) throw new InvalidInputError(`${at}.row_count: min ${min} is above max ${max}`);
      return [{ kind, min, max, maxChange: max_change === undefined ? undefined : Number(max_change.slice(0, -1)) / 100 }];
    }
    case "freshness": {
      const { column: name, max_age } = input.freshness!;
      return [{ kind, column: column(name, "freshness.column"), maxAgeMs: parseDuration(max_age, `${at}.freshness.max_age`), maxAge: max_age }];
    }
    case "sql":
      return [{ kind, sql: input.sql! }];
  }
}

function columnOf(check: AuditCheck): string {
  return "column" in check ? check.column : "columns" in check ? check.columns.join(", ") : "";
}

/** `not_null(amount)`, `unique(order_id)`, `range(amount)`, `row_count`, `sql`. */
function defaultName(check: AuditCheck): string {
  if (check.kind === "unique" && check.scope === "table") return `unique(${check.columns.join(", ")}; table)`;
  const columns = columnOf(check);
  return columns === "" ? check.kind : `${check.kind}(${columns})`;
}
