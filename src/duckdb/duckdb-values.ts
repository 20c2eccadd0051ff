import type * as DuckDb from "@duckdb/node-api";
import type { DuckDBDecimalValue, DuckDBValueConverter } from "@duckdb/node-api";

/** A query's value as lakeswap prints it: JSON-ready, and exactly what DuckDB holds. */
export type ExactValue = string | number | boolean | null | readonly ExactValue[] | { readonly [key: string]: ExactValue };

/**
 * The converter of query results (`lakeswap query`): nothing passes through a JavaScript double
 * unless it is one. Integers (BIGINT, UBIGINT, HUGEINT, UHUGEINT, DECIMAL(p,0), which is how the
 * lake stores the unsigned and huge ones) are numbers while exact, else their digits as a string;
 * a DECIMAL with a scale is its exact text ("9999999999999999.99"); a FLOAT or DOUBLE that is
 * not finite is "NaN", "Infinity" or "-Infinity", as JSON has no such number; times and dates are
 * DuckDB's own text (microseconds kept); a BLOB is base64. Lists and structs convert their items.
 */
export function exactValueConverter(duckdb: typeof DuckDb): DuckDBValueConverter<ExactValue> {
  const { DuckDBTypeId: id, JsonDuckDBValueConverter } = duckdb;
  // A TIMESTAMPTZ is written in UTC, the zone lakeswap's SQL runs in (strftime there names the day its partition
  // has), never in the machine's: the module writes it with the offset this property holds (the machine's, else).
  duckdb.DuckDBTimestampTZValue.timezoneOffsetInMinutes = 0;
  const convert: DuckDBValueConverter<ExactValue> = (value, type, self) => {
    if (value === null || value === undefined) return null;
    switch (type.typeId) {
      case id.DATE:
      case id.TIMESTAMP:
      case id.TIMESTAMP_S:
      case id.TIMESTAMP_MS:
      case id.TIMESTAMP_NS:
      case id.TIMESTAMP_TZ: {
        // DuckDB's infinity and -infinity, which the module would write as dates in years 5881580 and -5877641.
        const time = value as { readonly isFinite: boolean; readonly days?: number; readonly micros?: bigint; readonly millis?: bigint; readonly seconds?: bigint; readonly nanos?: bigint };
        if (!time.isFinite) return (time.days ?? time.micros ?? time.millis ?? time.seconds ?? time.nanos ?? 0) > 0 ? "infinity" : "-infinity";
        return JsonDuckDBValueConverter(value, type, self as DuckDBValueConverter<DuckDb.Json>) as ExactValue;
      }
      case id.BIGINT:
      case id.UBIGINT:
      case id.HUGEINT:
      case id.UHUGEINT:
        return exactInteger(value as bigint);
      case id.DECIMAL: {
        const decimal = value as DuckDBDecimalValue;
        return decimal.scale === 0 ? exactInteger(decimal.value) : decimal.toString();
      }
      case id.FLOAT:
      case id.DOUBLE:
        return Number.isFinite(value) ? (value as number) : String(value);
      case id.BLOB:
        return Buffer.from((value as DuckDb.DuckDBBlobValue).bytes).toString("base64");
      default:
        return JsonDuckDBValueConverter(value, type, self as DuckDBValueConverter<DuckDb.Json>) as ExactValue;
    }
  };
  return convert;
}

/** An integer as a number while a double holds it exactly, else as its digits. */
function exactInteger(value: bigint): number | string {
  return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(value) : value.toString();
}
