import type { z } from "zod";
import { printable } from "../model/sql.js";
import { pipelineSchema } from "./pipeline-schema.js";

/**
 * Formats zod issues: each starts with its key path, names what was expected and quotes the value
 * given (`concurrency: expected a number, got "four"`); unknown keys get a did-you-mean.
 */
export function formatIssues(issues: readonly z.core.$ZodIssue[], raw: unknown): string {
  return issues.map((issue) => formatIssue(issue, raw, [])).join("; ");
}

function formatIssue(issue: z.core.$ZodIssue, raw: unknown, basePath: readonly PropertyKey[]): string {
  const fullPath = [...basePath, ...issue.path];
  const where = keyPath(fullPath);
  const value = valueAt(raw, fullPath);
  switch (issue.code) {
    case "unrecognized_keys": {
      const known = knownKeys(pipelineSchema, fullPath);
      return issue.keys
        .map((key) => `${where === "(top level)" ? key : `${where}.${key}`}: unknown key${didYouMean(key, known)}${known.length > 0 ? ` (allowed: ${known.join(", ")})` : ""}`)
        .join("; ");
    }
    case "invalid_type":
      return `${where}: expected ${typeName(issue.expected)}, got ${shown(value)}`;
    case "invalid_union": {
      // Each alternative failed: name what each one expected at this key.
      const expected = [...new Set(issue.errors.map((branch) => {
        const first = branch.find((inner) => inner.path.length === 0 && inner.code === "invalid_type");
        return first && first.code === "invalid_type" ? typeName(first.expected) : undefined;
      }))].filter((name): name is string => name !== undefined);
      if (expected.length === issue.errors.length) return `${where}: expected ${expected.join(" or ")}, got ${shown(value)}`;
      // An alternative of the right shape failed inside: report that one's issues.
      const inner = issue.errors.find((branch) => !branch.some((i) => i.path.length === 0 && i.code === "invalid_type")) ?? issue.errors[0] ?? [];
      return inner.map((i) => formatIssue(i, raw, fullPath)).join("; ");
    }
    case "invalid_key": {
      const key = String(fullPath.at(-1));
      const parent = keyPath(fullPath.slice(0, -1));
      // `{amount: DECIMAL(10,2)}`: YAML splits a flow mapping at the comma, leaving a key `2)` (and a type `DECIMAL(10`).
      const split = /^\s*\d+\s*\)$/.test(key) ? ` (a type with a comma inside {...} is split there by YAML: quote it, e.g. {amount: "DECIMAL(10,2)"})` : "";
      return `${parent}: key '${key}' is not allowed: ${issue.issues.map((i) => i.message).join("; ")}${split}`;
    }
    case "invalid_value": {
      const hint = typeof value === "string" ? didYouMean(value, issue.values.map(String)) : "";
      return `${where}: expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}, got ${shown(value)}${hint}`;
    }
    case "too_small":
    case "too_big":
    case "invalid_format":
      return `${where}: ${issue.message.replace(/^(Too big|Too small|Invalid string): /, "")}, got ${shown(value)}`;
    default:
      return `${where}: ${issue.message}, got ${shown(value)}`;
  }
}

function keyPath(parts: readonly PropertyKey[]): string {
  return parts.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("").replace(/^\./, "") || "(top level)";
}

function valueAt(raw: unknown, parts: readonly PropertyKey[]): unknown {
  let current = raw;
  for (const part of parts) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[part];
  }
  return current;
}

/** A zod type name as a user reads it. */
function typeName(expected: string): string {
  const names: Record<string, string> = {
    string: "a string", number: "a number", int: "a whole number", boolean: "true or false", object: "a mapping (key: value)",
    record: "a mapping (key: value)", array: "a list", null: "null",
  };
  return names[expected] ?? expected;
}

/** A value as a message quotes it: its YAML type, and its text cut short. */
function shown(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null (an empty value)";
  if (Array.isArray(value)) return `a list (${printable(JSON.stringify(value), 60)})`;
  if (typeof value === "object") return `a mapping (${printable(JSON.stringify(value), 60)})`;
  if (typeof value === "string") return `the string ${printable(JSON.stringify(value), 80)}`;
  return `${typeof value === "number" ? "the number" : `the ${typeof value}`} ${String(value)}`;
}

/** The keys an object schema allows at `keyPath`, for did-you-mean hints. */
function knownKeys(schema: z.ZodType, keyPath: readonly PropertyKey[]): string[] {
  let current: z.ZodType | undefined = schema;
  const unwrap = (s: z.ZodType | undefined): z.ZodType | undefined => {
    let inner = s;
    while (inner && "innerType" in (inner.def as object)) inner = (inner.def as unknown as { innerType: z.ZodType }).innerType;
    return inner;
  };
  for (const step of keyPath) {
    current = unwrap(current);
    if (!current) return [];
    const def = current.def as unknown as { type: string; valueType?: z.ZodType; element?: z.ZodType; shape?: Record<string, z.ZodType>; options?: z.ZodType[] };
    if (def.type === "object") current = (current as z.ZodObject).shape[String(step)];
    else if (def.type === "record") current = def.valueType;
    else if (def.type === "array") current = def.element;
    else if (def.type === "union") current = def.options?.find((o) => unwrap(o)?.def.type === "object");
    else return [];
  }
  current = unwrap(current);
  if (current?.def.type === "union") current = unwrap((current.def as unknown as { options: z.ZodType[] }).options.find((o) => unwrap(o)?.def.type === "object"));
  return current?.def.type === "object" ? Object.keys((current as z.ZodObject).shape) : [];
}

/** ` (did you mean 'x'?)` when a known name is close to `value`. */
export function didYouMean(value: string, known: readonly string[]): string {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(value, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  const close = bestDistance <= Math.max(2, Math.floor(value.length / 3));
  const prefix = known.find((candidate) => candidate.startsWith(value) || value.startsWith(candidate));
  const suggestion = close ? best : prefix;
  return suggestion !== undefined ? ` (did you mean '${suggestion}'?)` : "";
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i += 1) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j += 1) {
      const above = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}
