import { BuildError } from "../model/errors.js";
import { partitionPath, partitionValue, type Partition } from "../model/partition.js";
import { quoteIdentifier, quoteLiteral } from "../model/sql.js";
import type { TableDefinition } from "../model/table.js";

/**
 * The checks every engine makes of a build's SELECT (DESIGN.md: a run holds
 * exactly its partition's rows): the declared columns are there, and, where
 * the SELECT returns partition columns, every row carries this partition's
 * values. Engines differ only in how they find the SELECT's columns and how a
 * query raises an error.
 */

/**
 * Fails unless the SELECT's columns hold the declared ones, a column added to the table in place excepted (the run
 * holds NULL there, as the runs written before it read: `outputValue`); with `strict`, also refuses columns the table lacks.
 */
export function checkOutputColumns(table: TableDefinition, partition: Partition, outputColumns: readonly string[], strict: boolean): void {
  const declared = table.columns.map((c) => c.name);
  const missing = table.columns.filter((c) => !c.added && !outputColumns.includes(c.name)).map((c) => c.name);
  const unknown = strict ? outputColumns.filter((name) => !declared.includes(name) && !table.partitionKeys.includes(name)) : [];
  if (missing.length === 0 && unknown.length === 0) return;
  const problems = [
    missing.length > 0 ? `it lacks column${missing.length > 1 ? "s" : ""} ${missing.join(", ")}` : "",
    unknown.length > 0 ? `table '${table.name}' has no column${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")}` : "",
  ].filter(Boolean);
  throw new BuildError(
    `the SELECT for ${table.name}/${partitionPath(partition)} does not match the table: ${problems.join("; ")} (declared columns: ${declared.join(", ")})`,
  );
}

/** A declared column's value in a build's output (the SELECT aliased `q`): NULL for an added column the SELECT does not give. */
export function outputValue(column: { readonly name: string }, outputColumns: readonly string[]): string {
  return outputColumns.includes(column.name) ? `q.${quoteIdentifier(column.name)}` : "NULL";
}

/**
 * A WHERE clause (or "") over the SELECT aliased `q` that raises, through
 * `raise(messageSql)`, on the first row whose partition column differs from
 * this partition's value.
 */
export function partitionRowsCheck(table: TableDefinition, partition: Partition, outputColumns: readonly string[], raise: (message: string) => string): string {
  const checks = table.partitionKeys
    .filter((key) => outputColumns.includes(key))
    .map((key) => {
      const column = `CAST(q.${quoteIdentifier(key)} AS VARCHAR)`;
      const message =
        `${quoteLiteral(`a row of the SELECT has ${key}=`)} || coalesce(${column}, 'NULL') || ` +
        `${quoteLiteral(`, which does not belong to partition ${partitionPath(partition)}`)}`;
      return `CASE WHEN ${column} IS DISTINCT FROM ${quoteLiteral(partitionValue(partition, key))} THEN ${raise(message)} ELSE true END`;
    });
  return checks.length > 0 ? ` WHERE ${checks.join(" AND ")}` : "";
}

/**
 * A build's SELECT with its partition's values taken out: the partitions of a layer differ only in them, so their
 * output columns are learned once per shape (both engines remember them so).
 */
export function selectShape(select: string, partition: Partition): string {
  let shape = select;
  for (const value of partition.values) shape = shape.split(quoteLiteral(value)).join("\u0000partition value\u0000");
  return shape;
}
