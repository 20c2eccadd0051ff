import { InvalidInputError } from "./errors.js";

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `90s`, `15m`, `6h`, `7d` or `0` into milliseconds. */
export function parseDuration(value: string, what: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!match || (match[2] === undefined && Number(match[1]) !== 0)) {
    throw new InvalidInputError(`${what} '${value}' is not a duration: use a number with a unit, for example 90s, 15m, 6h or 7d`);
  }
  return Math.round(Number(match[1]) * UNITS[match[2] ?? "ms"]!);
}

/** Formats milliseconds as a short duration (`6h`, `90s`, `1.5s`). */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return ms >= 1000 ? `${+(ms / 1000).toFixed(1)}s` : `${ms}ms`;
}
