import type { DuckDBConnection, DuckDBResultReader } from "@duckdb/node-api";
import { partitionOfValues, partitionPath, type Partition } from "../../model/partition.js";
import { signatureColumnOrder } from "../../model/signature.js";
import { quoteIdentifier, quoteLiteral, quoteRelation } from "../../model/sql.js";
import type { TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import type { LandRequest, LandedDelivery, LandedPart, LandedPartition, RejectedRow, Signing } from "../landing.js";
import { assertStillAsRead, fileStateTexts, type DeliveryIds, type ReadFiles } from "./delivery-identity.js";
import { landDelivery, outOfMemory } from "./land-delivery.js";
import type { LandingTables } from "./landing-relations.js";
import { addSums, rowContentKey, signatureColumnNames, signatureOfSums, signatureQuery, sumsOfRow, type RowSums, type SignatureColumn } from "./signature-sql.js";
import { tableShape, type Stage } from "./stage.js";
import { FILE, LINE } from "./landing-pass.js";
import type { StreamedCsv } from "./csv-stream.js";
import { gunzipDelivery, type GunzippedDelivery } from "./gunzipped-files.js";
import { withRejectedFiles } from "./rejected-files.js";
import { heldLines } from "./unterminated-lines.js";

/** A stage written while a delivery was landed, and the table shape it was written for (`tableShape`). */
export interface WrittenAhead {
  readonly definition: string;
  readonly stage: Stage;
}

/** What landing asks of the landing that runs it: delivery ids, the signing form, and where a write ahead goes. */
export interface LandHooks {
  readonly ids: DeliveryIds;
  signing(): Promise<Signing>;
  /** Writes every partition of the landed rows into a stage, on a connection of its own. */
  writeAhead(table: TableDefinition): Promise<Stage>;
  /** Writes every partition of a relation's rows into a stage, on the landing's connection (a write first: ./write-first.ts). */
  writeFirst(connection: DuckDBConnection, table: TableDefinition, relation: string): Promise<Stage>;
  /** Keeps a stage written ahead (dropped by the caller if landing fails after all). */
  wroteAhead(ahead: WrittenAhead): void;
  /** The CSV scan read ahead while the delivery was identified, if there is one of its files as `read` found them. */
  scanned?(request: LandRequest, read: ReadFiles): Promise<StreamedCsv | undefined> | undefined;
}

/**
 * Lands a delivery (`request.files` expanded, partition expressions checked) into `tables` and signs each partition:
 * the delivery is named before it is read and checked unchanged after, so its id names exactly the rows landed.
 * Returns the landed delivery and the files' states it was read with.
 */
export async function landAndSign(
  connection: DuckDBConnection,
  request: LandRequest,
  tables: LandingTables,
  hooks: LandHooks,
): Promise<{ readonly delivery: LandedDelivery; readonly read: ReadFiles; readonly gunzipped?: GunzippedDelivery }> {
  const files = request.files;
  const id = request.id ?? (await hooks.ids.idOf(files)).id;
  const delivered = { files, states: await fileStateTexts(files) };
  // Compressed files are read decompressed (./gunzipped-files.ts); what a user is shown names the files delivered.
  const gunzipped = await gunzipDelivery(files);
  // An append's bad rows are kept per file, each file named by its bytes as delivered.
  const byFile = (delivery: LandedDelivery) => (request.fileParts ? withRejectedFiles(connection, delivery, hooks.ids, delivered) : delivery);
  if (!gunzipped) return { delivery: await byFile((await landRead(connection, request, tables, hooks, id, delivered)).delivery), read: delivered };
  try {
    const read = { files: gunzipped.files, states: await fileStateTexts(gunzipped.files) };
    const landed = await landRead(connection, { ...request, files: gunzipped.files }, tables, hooks, id, read, gunzipped);
    await assertStillAsRead(delivered, "while it was landed");
    return { delivery: await byFile({ ...landed.delivery, files }), read, gunzipped };
  } catch (error) {
    await gunzipped.remove();
    if (error instanceof Error) error.message = gunzipped.originalNames(error.message);
    throw error;
  }
}

/** Lands and signs the files `read` names, as they were read (`read.states`); `gunzipped` names the rejected rows' files as delivered. */
async function landRead(
  connection: DuckDBConnection,
  request: LandRequest,
  tables: LandingTables,
  hooks: LandHooks,
  id: string,
  read: ReadFiles,
  gunzipped?: GunzippedDelivery,
): Promise<{ readonly delivery: LandedDelivery }> {
  const files = request.files;
  const signing = await hooks.signing();
  const keys = request.partition.map((p) => p.key);
  const signed = signatureColumnOrder(request.columns.filter((c) => request.signatureColumns.includes(c.name)));
  // A delivery signed per file (append) keeps its rows' files, which a run written ahead would not.
  const table = request.fileParts ? undefined : request.writeAhead;
  const writeFirst = table ? (relation: string) => hooks.writeFirst(connection, table, relation) : undefined;
  // An append's last records that their writers are halfway through are held back (./unterminated-lines.ts).
  const hold = heldLines(request, new Set(gunzipped?.renamed.map(([decompressed]) => decompressed)));
  const options = { writeFirst, scanned: hooks.scanned?.(request, read), hold };
  const inPass = await landDelivery(connection, request, tables, (relation, groupKeys) => signatureQuery(relation, groupKeys, signed, signing.form), options);
  if (inPass?.stage && table) hooks.wroteAhead({ definition: tableShape(table), stage: inPass.stage });
  // The bad rows are few and already apart: counted first, so that a clean delivery's runs can be written ahead.
  const rejected = Number((await connection.runAndReadAll(`SELECT count(*) FROM ${tables.rejected}`)).getRowsJS()[0]?.[0] ?? 0);
  const writeAhead = table && rejected === 0 && !inPass?.stage ? table : undefined;
  // The parts name the files as delivered (a compressed one by its own name, not its decompressed copy's).
  const parts = request.fileParts ? files.map((file) => gunzipped?.renamed.find(([read]) => read === file)?.[1] ?? file) : undefined;
  const signedPartitions = inPass
    ? await signedInPass(connection, inPass.signatures, keys, signed, writeAhead, hooks, parts)
    : await signBesideWriteAhead(connection, request, tables.landed, signing, writeAhead, hooks, parts);
  const partitions = parts ? await withLastLines(connection, tables.landed, keys, signed, signedPartitions, parts) : signedPartitions;
  // The good rows are the partitions' rows (no second pass over a delivery read in place); the bad ones are few.
  const loaded = partitions.reduce((sum, p) => sum + p.rows, 0);
  if (gunzipped && rejected > 0) await nameDeliveredFiles(connection, tables.rejected, gunzipped);
  const firstRejects = rejected > 0 ? await firstRejectsOf(connection, tables.rejected) : [];
  await assertStillAsRead(read, "while it was landed");
  const delivery = {
    files,
    id,
    relation: tables.landed,
    rejectedRelation: tables.rejected,
    rowsRead: loaded + rejected,
    rowsLoaded: loaded,
    rowsRejected: rejected,
    firstRejects,
    partitions,
    signing,
    ...(hold && hold.held.size > 0 ? { unterminated: [...hold.held].sort((a, b) => a - b).map((index) => files[index - 1]!) } : {}),
  };
  return { delivery };
}

/** The rejected rows' files named as delivered, not as decompressed. */
async function nameDeliveredFiles(connection: DuckDBConnection, rejected: string, gunzipped: GunzippedDelivery): Promise<void> {
  const cases = gunzipped.renamed.map(([read, delivered]) => `WHEN ${quoteLiteral(read)} THEN ${quoteLiteral(delivered)}`).join(" ");
  await connection.run(`UPDATE ${rejected} SET file = CASE file ${cases} ELSE file END`);
}

/**
 * Signs the landed rows per partition and, with `writeAhead`, writes them into a stage at once, on two connections:
 * the write alone leaves cores idle.
 */
async function signBesideWriteAhead(
  connection: DuckDBConnection,
  request: LandRequest,
  landed: string,
  signing: Signing,
  writeAhead: TableDefinition | undefined,
  hooks: LandHooks,
  files: readonly string[] | undefined,
): Promise<LandedPartition[]> {
  const keys = request.partition.map((p) => p.key);
  const signed = signatureColumnOrder(request.columns.filter((c) => request.signatureColumns.includes(c.name)));
  const sign = () => connection.runAndReadAll(signatureQuery(landed, files ? [...keys, FILE] : keys, signed, signing.form));
  const [signature, written] = await Promise.allSettled([
    writeAhead ? Promise.resolve().then(() => faultPoint("signing-beside-write-ahead")).then(sign) : sign(),
    writeAhead ? hooks.writeAhead(writeAhead) : undefined,
  ]);
  if (written.status === "fulfilled" && written.value && writeAhead) hooks.wroteAhead({ definition: tableShape(writeAhead), stage: written.value });
  // A write ahead that failed (out of memory beside the signature, say) is only not used: the runs are then
  // written when they are built, where a failure is the build's. The two share the memory limit, and the write
  // of thousands of partitions holds most of it: a signature that ran out of memory beside it is taken again,
  // alone (a delivery of 2,500 partitions at 32 MB failed so about one time in four).
  if (signature.status === "rejected" && !(writeAhead && outOfMemory(signature.reason))) throw signature.reason;
  const reader = signature.status === "fulfilled" ? signature.value : await sign();
  return landedPartitions(reader, keys, signed, files);
}

/** The signatures of a delivery signed in the pass that read it (every row good), with its runs written ahead meanwhile. */
async function signedInPass(
  connection: DuckDBConnection,
  signatures: string,
  keys: readonly string[],
  signed: readonly SignatureColumn[],
  writeAhead: TableDefinition | undefined,
  hooks: LandHooks,
  files: readonly string[] | undefined,
): Promise<LandedPartition[]> {
  const grouped = files ? [...keys, FILE] : keys;
  const reader = await connection.runAndReadAll(
    `SELECT ${grouped.map((key) => `${quoteIdentifier(key)}, `).join("")}${signatureColumnNames(signed).join(", ")} FROM ${signatures} WHERE __good ORDER BY ALL`,
  );
  if (writeAhead) {
    // As beside a signature: a write ahead that failed is only not used (the runs are then written when built).
    const stage = await Promise.resolve()
      .then(() => faultPoint("signing-beside-write-ahead"))
      .then(() => hooks.writeAhead(writeAhead))
      .catch(() => undefined);
    if (stage) hooks.wroteAhead({ definition: tableShape(writeAhead), stage });
  }
  return landedPartitions(reader, keys, signed, files);
}

/**
 * Each partition's rows and signature from the signature query's rows (a table without keys is one group, perhaps
 * empty: then no partition). With `files` (the delivery's, by `__file`), the query's groups are per partition and
 * file: each partition is the sum of its files' groups, and each group is one of its parts.
 */
function landedPartitions(reader: DuckDBResultReader, keys: readonly string[], signed: readonly SignatureColumn[], files?: readonly string[]): LandedPartition[] {
  const offset = keys.length + (files ? 1 : 0);
  const groups = new Map<string, { partition: Partition; sums: RowSums; parts: LandedPart[] }>();
  for (const row of reader.getRowsJS()) {
    const sums = sumsOfRow(signed, row, offset);
    if (sums.rows === 0n) continue;
    const partition = partitionOfValues(keys, row);
    const path = partitionPath(partition);
    const group = groups.get(path);
    if (group) group.sums = addSums(group.sums, sums);
    else groups.set(path, { partition, sums, parts: [] });
    if (files) groups.get(path)!.parts.push({ file: files[Number(row[keys.length]) - 1]!, rows: Number(sums.rows), signature: signatureOfSums(signed, sums) });
  }
  return [...groups.values()].map(({ partition, sums, parts }) => ({
    partition,
    rows: Number(sums.rows),
    signature: signatureOfSums(signed, sums),
    lanes: { upper: laneText(sums.upper), lower: laneText(sums.lower) },
    ...(files ? { parts } : {}),
  }));
}

/**
 * Each part with the last line of its file that holds a row of it (`LandedPart.through`), where every row of the part
 * has a line: a file that later only grew at its end is then appended from the next line (../../pipeline/plan.ts). And
 * with its first row's content (`LandedPart.head`): a file copied or renamed is known by it wherever it is found next.
 */
async function withLastLines(
  connection: DuckDBConnection,
  landed: string,
  keys: readonly string[],
  signed: readonly SignatureColumn[],
  partitions: LandedPartition[],
  files: readonly string[],
): Promise<LandedPartition[]> {
  // A way of reading numbers every row's line or none (a large CSV read in place): its first row tells, without a pass over it.
  const first = (await connection.runAndReadAll(`SELECT ${LINE} FROM ${quoteRelation(landed)} LIMIT 1`)).getRowsJS()[0];
  if (first === undefined || first[0] === null) return partitions;
  const keyList = keys.map((key) => `${quoteIdentifier(key)}, `).join("");
  // Each part's lines, then the content of its first row alone (a join on that line: no row's content is computed but those).
  const bounds = `SELECT ${keyList}${FILE}, min(${LINE}) AS __first, max(${LINE}) AS __last, count(*) = count(${LINE}) AS __all FROM ${quoteRelation(landed)} GROUP BY ALL`;
  const on = [...keys.map((key) => `b.${quoteIdentifier(key)} IS NOT DISTINCT FROM l.${quoteIdentifier(key)}`), `b.${FILE} = l.${FILE}`, `b.__first = l.${LINE}`].join(" AND ");
  const columns = [...keys.map((key, i) => `b.${quoteIdentifier(key)} AS __key${i}`), `b.${FILE} AS __file`, "b.__last", "b.__all"];
  const casts = signed.map((c) => `CAST(l.${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`);
  const heads = `SELECT ${[...columns, ...casts].join(", ")} FROM (${bounds}) b JOIN ${quoteRelation(landed)} l ON ${on}`;
  const grouped = [...keys.map((_, i) => `__key${i}`), "__file", "__last", "__all"].join(", ");
  const reader = await connection.runAndReadAll(`SELECT ${grouped}, min(${rowContentKey(signed)})::VARCHAR FROM (${heads}) GROUP BY ALL`);
  const lines = new Map<string, { through: number; head: string }>();
  for (const row of reader.getRowsJS()) {
    const at = keys.length;
    const file = files[Number(row[at]) - 1];
    if (row[at + 2] === true && row[at + 1] !== null && file !== undefined) {
      lines.set(`${partitionPath(partitionOfValues(keys, row))}\0${file}`, { through: Number(row[at + 1]), head: String(row[at + 3]) });
    }
  }
  return partitions.map((p) => ({
    ...p,
    parts: p.parts?.map((part) => {
      const known = lines.get(`${partitionPath(p.partition)}\0${part.file}`);
      return known === undefined ? part : { ...part, ...known };
    }),
  }));
}

/** The first bad rows, for messages. */
async function firstRejectsOf(connection: DuckDBConnection, rejected: string): Promise<RejectedRow[]> {
  const first = await connection.runAndReadAll(`SELECT file, line, reason, raw FROM ${rejected} ORDER BY file, line LIMIT 5`);
  return first.getRowsJS().map(([file, line, reason, raw]) => ({
    file: String(file),
    line: line === null ? null : Number(line),
    reason: String(reason),
    raw: raw === null ? null : String(raw),
  }));
}

/** A lane sum as decimal text, modulo 2^64 (as `finishRawSignature` reduces it). */
function laneText(value: bigint): string {
  return (value % (1n << 64n)).toString();
}
