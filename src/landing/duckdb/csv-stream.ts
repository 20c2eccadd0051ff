import { open } from "node:fs/promises";
import { quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import { csvLayout } from "./csv-input.js";
import { sqlList, type SourceRows } from "./landing-sql.js";

/** Bytes read from the start of a file to find its first line; a longer one leaves the file to the exact reader. */
const FIRST_LINE_BYTES = 64 * 1024;

/**
 * The reader's buffer (DuckDB's default, 32 MiB, does not fit a small memory limit; each reading thread holds one):
 * twice its longest line (2 MiB by default: a longer line fails the scan, and the exact reader takes the delivery).
 */
const READ_BUFFER_BYTES = 4 * 1024 * 1024;

/**
 * A CSV delivery as DuckDB's streaming `read_csv` reads it (in parallel, never whole in memory), every field as text,
 * for a delivery expected clean and without quotes: its rows have no line numbers and no text, so a delivery that is not clean (a record
 * the reader refuses, in its strict mode, fails the scan; a field holding a quote, a value that does not convert, a
 * bad partition value make a bad row) goes to the exact reader (./csv-input.ts), which keeps each bad row's file, line
 * and text. Undefined where the exact reader must read it at once: the files' first lines
 * differ in layout, or one is blank or quoted or longer than FIRST_LINE_BYTES. A header lacking a declared column is
 * refused as the exact reader refuses it.
 */
export async function streamedCsv(request: LandRequest): Promise<SourceRows | undefined> {
  const layouts: ReturnType<typeof csvLayout>[] = [];
  for (const file of request.files) {
    const first = await firstLine(file);
    if (first === undefined || first.trim() === "" || first.includes('"')) return undefined;
    layouts.push(csvLayout(request, file, 1, first.split(request.delimiter)));
  }
  const layout = layouts[0];
  if (layout === undefined || layouts.some((l) => l.width !== layout.width || l.positions.join() !== layout.positions.join())) return undefined;
  const fields = Array.from({ length: layout.width }, (_, i) => `c${i + 1}`);
  const read =
    `read_csv(${sqlList(request.files)}, header = ${request.header}, auto_detect = false, ` +
    `columns = {${fields.map((f) => `${quoteLiteral(f)}: 'VARCHAR'`).join(", ")}}, delim = ${quoteLiteral(request.delimiter)}, quote = '', escape = '', ` +
    `strict_mode = true, buffer_size = ${READ_BUFFER_BYTES}, filename = true)`;
  // Quoting is off: DuckDB's reader forgives what the exact reader refuses (a space around a quoted field) and keeps a
  // CRLF inside one, so a quote anywhere is a problem here, and the exact reader decides. Without quotes both split
  // a line on the delimiter alike.
  const quoted = `CASE WHEN contains(concat(${fields.map(quoteIdentifier).join(", ")}), '"') THEN 'a field holds a quote' END`;
  const select =
    `SELECT list_position(${sqlList(request.files)}, filename)::INTEGER AS __file, NULL::BIGINT AS __line, ${quoted} AS __structural, ` +
    `${request.columns.map((_, i) => `nullif(${quoteIdentifier(`c${layout.positions[i]}`)}, '') AS __s${i}`).join(", ")} FROM ${read}`;
  return { select, types: request.columns.map(() => "VARCHAR") };
}

/** The first line of a file (a byte order mark and a line end's `\r` dropped), or undefined where it is not within FIRST_LINE_BYTES. */
async function firstLine(file: string): Promise<string | undefined> {
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(FIRST_LINE_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, FIRST_LINE_BYTES, 0);
    const start = bytesRead >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
    const end = buffer.subarray(0, bytesRead).indexOf(10);
    if (end < 0 && bytesRead === FIRST_LINE_BYTES) return undefined;
    return buffer.toString("utf8", start, end < 0 ? bytesRead : end).replace(/\r$/, "");
  } finally {
    await handle.close();
  }
}
