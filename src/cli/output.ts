/** The --json document of the running command, printed once by src/cli/main.ts when the command ends. */
let pendingJson: { readonly value: unknown } | undefined;

/**
 * Writes a command's report: readable text at once, or, with --json, keeps the value as the
 * command's one JSON document (src/cli/main.ts prints it, with the error added if the command fails).
 */
export function report(json: boolean, value: unknown, text: () => string): void {
  if (json) pendingJson = { value };
  else {
    const body = text();
    if (body.length > 0) writeStdout(body.endsWith("\n") ? body : `${body}\n`);
  }
}

/** Takes the --json document a command reported, if any (for src/cli/main.ts). */
export function takeJsonReport(): { readonly value: unknown } | undefined {
  const taken = pendingJson;
  pendingJson = undefined;
  return taken;
}

/** JSON text of a report: bigints as numbers when exact, else as strings. */
export function toJson(value: unknown): string {
  return JSON.stringify(
    value,
    (_key, v: unknown) => (typeof v === "bigint" ? (v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v.toString()) : v),
    2,
  );
}

/** Writes to stdout unless its reader has gone (`lakeswap tables | head -1`): then the rest is dropped quietly. */
export function writeStdout(text: string): void {
  if (process.stdout.destroyed || !process.stdout.writable) return;
  process.stdout.write(text);
}

/** Formats rows as an aligned text table. */
export function formatTable(columns: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const cells = rows.map((row) => row.map(formatCell));
  const widths = columns.map((column, i) => Math.max(column.length, ...cells.map((row) => (row[i] ?? "").length)));
  const line = (values: readonly string[]) => values.map((v, i) => v.padEnd(widths[i] ?? 0)).join("  ").trimEnd();
  return [line(columns), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n");
}

function formatCell(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A one-line progress indicator on stderr, shown only on a terminal. */
export class Progress {
  private readonly enabled: boolean;
  private shown = false;

  constructor(enabled = process.stderr.isTTY === true) {
    this.enabled = enabled;
  }

  update(done: number, total: number, label: string): void {
    if (!this.enabled) return;
    const width = 20;
    const filled = total > 0 ? Math.round((done / total) * width) : 0;
    const bar = `[${"#".repeat(filled)}${".".repeat(width - filled)}]`;
    process.stderr.write(`\r\x1b[K${bar} ${done}/${total} ${label}`);
    this.shown = true;
  }

  done(): void {
    if (this.shown) process.stderr.write("\r\x1b[K");
    this.shown = false;
  }
}
