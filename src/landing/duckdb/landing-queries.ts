/** The tables a SELECT names, CTE names aside, from DuckDB's parse tree of it (json_serialize_sql); undefined when it is no tree. */
export function tablesOfParseTree(serialized: string): string[] | undefined {
  let tree: unknown;
  try {
    tree = JSON.parse(serialized);
  } catch {
    return undefined;
  }
  if (typeof tree !== "object" || tree === null || (tree as { error?: unknown }).error === true) return undefined;
  const tables = new Set<string>();
  const cteNames = new Set<string>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) walk(item);
      return;
    }
    if (typeof node !== "object" || node === null) return;
    const record = node as Record<string, unknown>;
    if (record.type === "BASE_TABLE" && typeof record.table_name === "string") tables.add(record.table_name);
    const cteMap = record.cte_map as { map?: { key?: unknown }[] } | undefined;
    for (const entry of cteMap?.map ?? []) if (typeof entry.key === "string") cteNames.add(entry.key.toLowerCase());
    for (const value of Object.values(record)) walk(value);
  };
  walk(tree);
  return [...tables].filter((name) => !cteNames.has(name.toLowerCase())).sort();
}
