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

/** The part of a stream that `Progress` writes to: stderr, or a stand-in terminal in tests. */
export type ProgressStream = Pick<NodeJS.WriteStream, "write" | "isTTY" | "columns">;

/**
 * A one-line progress bar on stderr for long syncs and gc, shown only on a terminal and never under --json. Kept by
 * hand rather than taken from a library: these few lines are all lakeswap needs (the maintained bar libraries bring
 * their own dependencies, formats and timers for what is one redrawn line).
 */
export class Progress {
  /** Where the bar goes; undefined when it is not shown (a pipe or a file would fill with carriage returns). */
  private readonly stream: ProgressStream | undefined;
  private shown = false;

  constructor(json: boolean, stream: ProgressStream = process.stderr) {
    this.stream = !json && stream.isTTY === true ? stream : undefined;
  }

  /** Redraws the bar with `done` of `total` and `label`, cut to the terminal's width. */
  update(done: number, total: number, label: string): void {
    if (!this.stream) return;
    const width = 20;
    const filled = total > 0 ? Math.round((done / total) * width) : 0;
    const bar = `[${"#".repeat(filled)}${".".repeat(width - filled)}]`;
    // A line that wrapped would not be cleared by the next redraw (\r goes back to the start of its last row only).
    const room = Math.max(1, (this.stream.columns ?? 80) - 1);
    const line = Array.from(`${bar} ${done}/${total} ${label}`);
    const shown = line.length > room ? `${line.slice(0, room - 1).join("")}…` : line.join("");
    this.stream.write(`\r\x1b[K${shown}`);
    this.shown = true;
  }

  /** Clears the bar, so that the report starts on a clean line. */
  done(): void {
    if (this.shown) this.stream?.write("\r\x1b[K");
    this.shown = false;
  }
}
