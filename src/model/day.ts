import { InvalidInputError } from "./errors.js";

/** Calendar days as `YYYY-MM-DD` text, the values of a day partition key (`date=2026-11-30`). */

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;

/** `value` if it is a real calendar day written YYYY-MM-DD; otherwise an error naming `what` and the fix. */
export function assertDay(value: string, what: string): string {
  const match = DAY.exec(value);
  const time = match ? Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) : Number.NaN;
  if (!match || Number.isNaN(time) || new Date(time).toISOString().slice(0, 10) !== value) {
    throw new InvalidInputError(`${what}: '${value}' is not a day; write it as YYYY-MM-DD, e.g. 2026-11-30`);
  }
  return value;
}

/** The day `days` days after `day` (before, when negative). */
export function addDays(day: string, days: number): string {
  const [year, month, date] = day.split("-").map(Number) as [number, number, number];
  return new Date(Date.UTC(year, month - 1, date + days)).toISOString().slice(0, 10);
}

/** Today's date in an IANA time zone (the zone a source's days are counted in). */
export function todayIn(timeZone: string, now: Date = new Date()): string {
  // en-CA writes dates as YYYY-MM-DD.
  return new Intl.DateTimeFormat("en-CA", { timeZone, year: "numeric", month: "2-digit", day: "2-digit" }).format(now);
}
