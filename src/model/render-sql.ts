import { InvalidInputError } from "./errors.js";
import type { Partition } from "./partition.js";
import { quoteLiteral } from "./sql.js";

/** Puts the partition into a layer's SQL: `{{ key }}` becomes the quoted value; any other placeholder is an error. */
export function renderSql(sql: string, partition: Partition, file: string): string {
  return sql.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_match, name: string) => {
    const index = partition.keys.indexOf(name);
    if (index < 0) {
      throw new InvalidInputError(`${file}: unknown placeholder {{ ${name} }}; this layer's partition keys are ${partition.keys.join(", ")}`);
    }
    return quoteLiteral(partition.values[index] as string);
  });
}
