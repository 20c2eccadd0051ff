/** Writes a command's report: one JSON document with --json, readable text otherwise. */
export function report(json: boolean, value: unknown, text: () => string): void {
  if (json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  else {
    const body = text();
    if (body.length > 0) process.stdout.write(body.endsWith("\n") ? body : `${body}\n`);
  }
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
