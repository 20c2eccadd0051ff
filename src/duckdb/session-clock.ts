import type { DuckDBConnection } from "@duckdb/node-api";

/**
 * The clock of every DuckDB session of lakeswap that reads, computes or writes times: UTC and the Gregorian calendar,
 * as on Athena. DuckDB otherwise takes them from the machine (ICU reads TZ and the locale), and then times depend on
 * where lakeswap runs: under TZ=Asia/Tokyo a TIMESTAMPTZ's date or hour in a layer's SQL, an audit or a query is
 * Tokyo's; under a Thai locale (LANG=th_TH.UTF-8) ICU's calendar is the Buddhist one, `year(ts)` of 2026 is 2569 and
 * the text '2026-11-01 23:30:00' read as a TIMESTAMPTZ is a time in 1483. A local time is asked for by name:
 * `timezone('Europe/Berlin', ts)`.
 */
export const CLOCK_SETTINGS: readonly string[] = ["TimeZone = 'UTC'", "Calendar = 'gregorian'"];

/** Sets the clock (CLOCK_SETTINGS) for `connection`'s session, or with `GLOBAL` for every session of its instance. */
export async function setClock(connection: DuckDBConnection, scope: "GLOBAL" | "SESSION"): Promise<void> {
  for (const setting of CLOCK_SETTINGS) await connection.run(`SET ${scope} ${setting}`);
}
