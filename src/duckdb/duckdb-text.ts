import { errorMessage } from "../model/errors.js";

/** Bytes of a size as DuckDB prints it (`976.5 MiB`, `1.0 GiB`, `512MB`), or undefined. */
export function parseByteSize(text: string): number | undefined {
  const match = /^\s*([\d.]+)\s*(bytes?|[KMGT]i?B)?\s*$/i.exec(text);
  if (!match) return undefined;
  const unit = (match[2] ?? "bytes").toUpperCase();
  const power = { B: 0, BYTE: 0, BYTES: 0, KB: 1, KIB: 1, MB: 2, MIB: 2, GB: 3, GIB: 3, TB: 4, TIB: 4 }[unit] ?? 0;
  const base = unit.includes("I") || power === 0 ? 1024 : 1000;
  return Number(match[1]) * base ** power;
}

/** DuckDB's error message on one line. */
export function cleanDuckDbMessage(error: unknown): string {
  return errorMessage(error).replace(/\s+/g, " ").trim();
}
