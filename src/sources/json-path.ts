import { isLosslessNumber } from "lossless-json";
import { InvalidInputError } from "../model/errors.js";

/**
 * The small path language of an http source's `rows`, `fields` and `pagination`: `$.a.b[0].c`, dots between
 * object keys and `[n]` array indices; "" or "$" is the value itself. The values are JSON as lossless-json parses it:
 * a number is a LosslessNumber that keeps its digits, never a double.
 */

/** One step of a path: an object key or an array index. */
export type Step = string | number;

/** Parses `$.a.b[0].c` (or "" / "$" for the value itself) into steps. */
export function parsePath(path: string): Step[] {
  let rest = path.trim();
  if (rest === "" || rest === "$") return [];
  if (rest.startsWith("$.")) rest = rest.slice(2);
  else if (rest.startsWith("$[")) rest = rest.slice(1);
  const steps: Step[] = [];
  for (const segment of rest.split(".")) {
    const match = /^([^[\]]*)((?:\[\d+\])*)$/.exec(segment);
    if (!match || (match[1] === "" && match[2] === "")) throw new InvalidInputError(`'${path}' is not a path`);
    if (match[1]) steps.push(match[1]);
    for (const index of (match[2] ?? "").matchAll(/\[(\d+)\]/g)) steps.push(Number(index[1]));
  }
  return steps;
}

/** The value at `steps`: undefined when a step is missing or meets null; a mismatch when a step meets the wrong kind of value. */
export function lookUp(value: unknown, steps: readonly Step[]): { value: unknown } | { mismatch: string } {
  let current = value;
  for (const [depth, step] of steps.entries()) {
    if (current === undefined || current === null) return { value: undefined };
    const wanted = typeof step === "number" ? Array.isArray(current) : isObject(current);
    if (!wanted) {
      const at = depth === 0 ? "the value" : `'${pathText(steps.slice(0, depth))}'`;
      return { mismatch: `${at} is ${kindOf(current)}, not ${typeof step === "number" ? "an array" : "an object"}` };
    }
    current = Object.hasOwn(current, step) ? (current as Record<string | number, unknown>)[step] : undefined;
  }
  return { value: current };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !isLosslessNumber(value);
}

export function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (isLosslessNumber(value)) return `a number (${value.toString().slice(0, 40)})`;
  return typeof value === "object" ? "an object" : `a ${typeof value} (${JSON.stringify(value).slice(0, 40)})`;
}

export function pathText(steps: readonly Step[]): string {
  return steps.map((step, i) => (typeof step === "number" ? `[${step}]` : i === 0 ? step : `.${step}`)).join("") || "$";
}
