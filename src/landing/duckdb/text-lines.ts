import { isUtf8 } from "node:buffer";
import { open } from "node:fs/promises";
import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../model/errors.js";
import type { LandRequest } from "../landing.js";

/**
 * Bytes read from a text file at a time; a longer line is read whole, in as many reads as it takes. Binding a
 * chunk to the insert copies it on the JavaScript thread, which then answers nothing else (a collector's
 * requests wait): 1 MiB keeps that to about a millisecond, and lands as fast as larger chunks.
 */
const TEXT_CHUNK_BYTES = 1024 * 1024;

/**
 * Loads the lines of text files (UTF-8) into a new table `(__file, __line,
 * __raw, ...extra)`, numbered from 1, streamed in chunks of whole lines so that
 * no file is ever one string: a UTF-8 byte order mark at the start of a file,
 * the `\r` of a CRLF line end, and the empty lines at the end of a file are
 * dropped. `extra` are more columns computed from `__raw`. A file that is not
 * UTF-8 is refused, naming it.
 */
export async function loadLines(connection: DuckDBConnection, request: LandRequest, table: string, extra: readonly string[] = []): Promise<void> {
  const computed = extra.map((column) => `, ${column}`).join("");
  await connection.run(`CREATE TABLE ${table} AS SELECT *${computed} FROM (SELECT NULL::INTEGER AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __raw) WHERE false`);
  // generate_subscripts next to unnest: DuckDB numbers the list's elements without copying the list per row.
  const insert = await connection.prepare(
    `INSERT INTO ${table} SELECT *${computed} FROM (SELECT $1::INTEGER AS __file, __line, CASE WHEN ends_with(__raw, chr(13)) THEN rtrim(__raw, chr(13)) ELSE __raw END AS __raw ` +
      `FROM (SELECT $2::BIGINT + generate_subscripts(lines, 1) AS __line, unnest(lines) AS __raw FROM (SELECT string_split(decode($3::BLOB), chr(10)) AS lines)))`,
  );
  try {
    for (const [index, file] of request.files.entries()) {
      let lineCount = 0;
      // The last line with anything but line ends on it: empty lines after it are not rows.
      let lastLine = 0;
      const flush = async (chunk: Buffer): Promise<void> => {
        if (!isUtf8(chunk)) {
          throw new InvalidInputError(`${file} is not UTF-8 text: lakeswap reads ${request.format} files as UTF-8; convert it (e.g. iconv -f latin1 -t utf-8)`);
        }
        insert.bindInteger(1, index + 1);
        insert.bindBigInt(2, BigInt(lineCount));
        insert.bindBlob(3, chunk);
        const added = (await insert.run()).rowsChanged;
        let end = chunk.length;
        let emptyAtEnd = 0;
        while (end > 0 && (chunk[end - 1] === 10 || chunk[end - 1] === 13)) if (chunk[--end] === 10) emptyAtEnd++;
        if (end > 0) lastLine = lineCount + added - emptyAtEnd;
        lineCount += added;
      };
      const handle = await open(file, "r");
      try {
        let buffer = Buffer.alloc(TEXT_CHUNK_BYTES);
        let held = 0;
        // Where the text starts in the buffer: after a byte order mark at the start of the file.
        let start = -1;
        for (;;) {
          if (held === buffer.length) buffer = Buffer.concat([buffer, Buffer.alloc(buffer.length)]);
          const { bytesRead } = await handle.read(buffer, held, buffer.length - held);
          const end = held + bytesRead;
          if (start < 0) start = end >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
          if (bytesRead === 0) {
            if (end > start) await flush(buffer.subarray(start, end));
            break;
          }
          // Whole lines go to DuckDB; the rest of the last one waits for the next read. A line end is never inside a
          // UTF-8 character, so each chunk is whole characters too.
          const cut = buffer.lastIndexOf(10, end - 1);
          if (cut < start) {
            held = end;
            continue;
          }
          await flush(buffer.subarray(start, cut));
          buffer.copy(buffer, 0, cut + 1, end);
          held = end - cut - 1;
          start = 0;
        }
      } finally {
        await handle.close();
      }
      if (lastLine < lineCount) await connection.run(`DELETE FROM ${table} WHERE __file = ${index + 1} AND __line > ${lastLine}`);
    }
  } finally {
    insert.destroySync();
  }
}
