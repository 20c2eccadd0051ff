import { quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import { faultPoint } from "../../shared/faults.js";
import { dropIfExists } from "./landing-relations.js";
import { GOOD, createNoRejects, findBadKeys, unsafeKey, type LandingPass, type PassSignature, type RowChecks } from "./landing-pass.js";
import type { Stage } from "./stage.js";

/** The message of the error that stops a write first at a delivery's first bad row. */
const BAD_ROW_MET = "lakeswap: a bad row stops the write first";

/**
 * A delivery whose every partition is built (a first load) read once: its typed rows (`pass.all`) are checked as they
 * are written into the runs' stage (`write`), the first bad row (a value that does not convert, a NULL in a column
 * declared not nullable, a partition value that is NULL or unsafe) stopping the write, and each partition is then
 * signed from the files written (`pass.names.groups`, every row good), which reads a fraction of what reading and
 * converting the delivery again would. The files hold each value as its storage type, which every declared type is
 * cast back to exactly (../../model/column-types.ts), so the signatures are those of the rows as landed; the partition
 * values are checked again from the signatures, and the rejected table is made empty.
 *
 * Undefined, with nothing of it left (the stage removed, `pass.all` kept), for a delivery with a bad row, records the
 * reader refused (`refused`, counted once the write ended), no row at all, or any failure of the write (out of memory,
 * a file the reader cannot read): that delivery is then landed the usual way, which finds and keeps its bad rows, or
 * fails naming what it could not read.
 */
export async function writeFirst(
  pass: LandingPass,
  checks: RowChecks,
  sign: PassSignature,
  write: (relation: string) => Promise<Stage>,
  refused: () => Promise<number> = async () => 0,
): Promise<Stage | undefined> {
  const { connection, request, tables, names, all } = pass;
  const keys = request.partition.map((p) => p.key);
  let stage: Stage | undefined;
  let written = false;
  try {
    faultPoint("signing-beside-write-ahead");
    const good = [`${checks.rowProblem} IS NULL`, ...keys.map((key) => `NOT coalesce(${unsafeKey(`r.${quoteIdentifier(key)}`)}, true)`)];
    await connection.run(
      `CREATE VIEW ${names.checked} AS SELECT r.* FROM ${all} r WHERE CASE WHEN ${good.join(" AND ")} THEN true ELSE error(${quoteLiteral(BAD_ROW_MET)}) END`,
    );
    stage = await write(names.checked);
    const files = Number((await connection.runAndReadAll(`SELECT count(*) FROM glob(${quoteLiteral(stage.files)})`)).getRowsJS()[0]?.[0]);
    if (files === 0 || (await refused()) > 0) return undefined;
    const values = request.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`);
    await connection.run(
      `CREATE VIEW ${names.written} AS SELECT ${[...values, ...keys.map(quoteIdentifier)].join(", ")}, true AS ${GOOD} ` +
        `FROM read_parquet(${quoteLiteral(stage.files)}, hive_partitioning = ${keys.length > 0}, hive_types_autocast = false)`,
    );
    await connection.run(`CREATE TABLE ${names.groups} AS ${sign(names.written, [...keys, GOOD])}`);
    await findBadKeys(pass, names.groups);
    await createNoRejects(connection, tables.rejected);
    written = true;
    return stage;
  } catch {
    // Whatever stopped the write (the first bad row, mostly), the usual way lands the delivery, and fails where it fails.
    return undefined;
  } finally {
    await dropIfExists(connection, [
      ["VIEW", names.written],
      ["VIEW", names.checked],
      ...(written ? [] : ([names.groups, names.badKeys, tables.rejected].map((table) => ["TABLE", table]) as ["TABLE", string][])),
    ]);
    if (!written) await stage?.remove();
  }
}
