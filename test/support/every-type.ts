/**
 * Rows of every declared type of the signature spec (docs/signatures.md) as DuckDB SQL over `range`: extremes,
 * negatives, pre-1970 dates and NULLs; `ts` is declared not nullable. Shared by the tests that sign such rows.
 */
export const EVERY_TYPE: readonly { readonly name: string; readonly type: string; readonly sql: string; readonly nullable?: boolean }[] = [
  { name: "i8", type: "TINYINT", sql: "CASE WHEN range % 2 = 0 THEN -128 ELSE (range % 255) - 127 END::TINYINT" },
  { name: "i16", type: "SMALLINT", sql: "((range * 37) % 65535 - 32767)::SMALLINT" },
  { name: "i32", type: "INTEGER", sql: "CASE WHEN range % 13 = 0 THEN NULL ELSE (range * -7919)::INTEGER END" },
  { name: "i64", type: "BIGINT", sql: "CASE range % 5 WHEN 0 THEN -9223372036854775808 WHEN 1 THEN 9223372036854775807 WHEN 2 THEN NULL ELSE range * 104729 - 4294967296 END::BIGINT" },
  { name: "u8", type: "UTINYINT", sql: "(range % 256)::UTINYINT" },
  { name: "u16", type: "USMALLINT", sql: "(range * 31 % 65536)::USMALLINT" },
  { name: "u32", type: "UINTEGER", sql: "(range * 2654435761 % 4294967296)::UINTEGER" },
  { name: "u64", type: "UBIGINT", sql: "CASE WHEN range % 3 = 0 THEN 18446744073709551615 ELSE range * 1000003 END::UBIGINT" },
  { name: "h", type: "HUGEINT", sql: "(range::HUGEINT * 99999999999999999 - 170141183460469231731687303715884105727::HUGEINT)" },
  { name: "flag", type: "BOOLEAN", sql: "CASE WHEN range % 6 = 0 THEN NULL ELSE range % 2 = 0 END" },
  { name: "amount", type: "DECIMAL(10,2)", sql: "CASE WHEN range % 7 = 0 THEN NULL ELSE CAST((range * 37 % 100000) / 100 - 300 AS DECIMAL(10,2)) END" },
  { name: "wide", type: "DECIMAL(18,6)", sql: "CAST(999999999999.999999 - range * 12345.678901 AS DECIMAL(18,6))" },
  { name: "huge", type: "DECIMAL(38,10)", sql: "CAST(range * -1234567890123.0123456789 AS DECIMAL(38,10))" },
  { name: "ratio", type: "DOUBLE", sql: "CASE WHEN range % 9 = 0 THEN NULL ELSE range / 7.0 - 100 END" },
  { name: "small", type: "FLOAT", sql: "(range / 3.0)::FLOAT" },
  { name: "day", type: "DATE", sql: "CASE WHEN range % 4 = 0 THEN NULL ELSE DATE '1900-01-01' + (range * 17 % 80000)::INTEGER END" },
  { name: "clock", type: "TIME", sql: "TIME '00:00:00' + to_microseconds(range * 123456789 % 86400000000)" },
  { name: "ts", type: "TIMESTAMP", sql: "TIMESTAMP '1950-01-01' + to_microseconds(range * 1234567891)", nullable: false },
  { name: "tz", type: "TIMESTAMPTZ", sql: "CASE WHEN range % 8 = 0 THEN NULL ELSE TIMESTAMPTZ '1960-06-01 00:00:00+00' + to_microseconds(range * 987654321) END" },
  { name: "note", type: "VARCHAR", sql: "CASE range % 4 WHEN 0 THEN NULL WHEN 1 THEN 'héllo|' || range WHEN 2 THEN '' ELSE repeat('x', (range % 130)::INTEGER) END" },
  { name: "id", type: "UUID", sql: "('00000000-0000-4000-8000-' || lpad(range::VARCHAR, 12, '0'))::UUID" },

];
