import { printable, quoteLiteral } from "../../model/sql.js";
import { shown, type LandColumn } from "./landing-sql.js";

const INTEGER_TYPES = /^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT)$/;

/** Why a NaN is a bad row: DuckDB holds NaN equal to itself, Athena (Trino) does not, so one table would answer two ways. */
const NAN_REASON = "is NaN, which lakeswap does not store (DuckDB and Athena compare NaN differently): send null, or an empty field, for a missing value";

/** The widest HUGEINT lakeswap stores: its Parquet files hold it as DECIMAL(38,0) (./../model/column-types.ts). */
const HUGEINT_LIMIT = "99999999999999999999999999999999999999::HUGEINT";

const HUGEINT_RANGE = "is out of range for HUGEINT as lakeswap stores it (DECIMAL(38,0): at most 38 digits)";

/**
 * Number notations DuckDB's casts read that are no decimal number: hexadecimal (0x1F) and binary (0b101), which only
 * its integer casts read (so an integer text that is no DOUBLE is one), and digit separators (1_000), which every
 * number cast reads. Two cheap tests, where one pattern over every value would cost twice as much.
 */
function notDecimalNotation(text: string, integer: boolean): string {
  return integer ? `(contains(${text}, '_') OR TRY_CAST(${text} AS DOUBLE) IS NULL)` : `contains(${text}, '_')`;
}

const NOTATION_REASON = "is not written in decimal digits (hexadecimal, binary and '_' digit separators are not read as numbers)";

/** A fraction of a second finer than microseconds that is not zeros: the types keep microseconds, and cutting the rest would change the value. */
const BEYOND_MICROSECONDS = "[.][0-9]{6}[0-9]*[1-9]";

/**
 * A UTC offset after a time of day that no clock has (`+24:00`, `+25`, `-99:00`, `+05:75`), which DuckDB's cast takes
 * and applies as it is: hours beyond 23, or minutes or seconds beyond 59, in any of its forms (`+HH`, `+HHMM`,
 * `+HH:MM`, `+HH:MM:SS`).
 */
const IMPOSSIBLE_OFFSET =
  "[0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]*)?)?[+-]((2[4-9]|[3-9][0-9])(:?[0-9]{2}){0,2}|[0-9]{2}:?[6-9][0-9](:?[0-9]{2})?|[0-9]{2}:?[0-9]{2}:?[6-9][0-9])$";

/**
 * Text shapes (LIKE patterns) of a timestamp without a UTC offset, as most exports write it: `2025-03-04 10:15:00`,
 * `2025-03-04T10:15:00`, `2025-03-04T10:15:00Z`. A text of one of them that reads as a TIMESTAMP has no room left for
 * an offset that would change it (its time fills the characters up to the end; `Z` is UTC), so it needs no check
 * against its reading as an instant: a LIKE costs a fifth of the character tests that find the other texts that may
 * have one.
 */
const PLAIN_TIMESTAMP_SHAPES = ["____-__-__ __:__:__", "____-__-__T__:__:__", "____-__-__T__:__:__Z"];

/** The event times an ingested row may have: its partition is named by the year (p_year), in four digits. */
const EVENT_TIME_RANGE = "is outside the years 0001 to 9999 that an event time may have (it names the event's partition)";

/** Why an event time sent as ISO 8601 text (time.format: iso8601, the default) does not read, with the other formats. */
const ISO_EVENT_TIME =
  "is not an ISO 8601 time such as 2025-03-04T10:15:00Z (time.format: iso8601; a number of seconds or milliseconds since 1970 needs time.format: epoch_s or epoch_ms)";

/** Each epoch format's unit in microseconds and the fraction digits it may have down to a microsecond. */
const EPOCH_UNITS = {
  epoch_ms: { micros: 1000, scale: 3, unit: "milliseconds", bound: "1e15" },
  epoch_s: { micros: 1_000_000, scale: 6, unit: "seconds", bound: "1e12" },
} as const;

/**
 * An event time sent as a number of milliseconds or seconds since 1970-01-01T00:00:00Z (a JSON number, or its
 * digits as text): exact to the microsecond, or a bad row naming the format. `roundedAway(scale)` is the text
 * conversion's check for digits a DECIMAL of that scale would round away.
 */
function epochConversion(
  column: LandColumn,
  index: number,
  says: (text: string, reason: string) => string,
  roundedAway: (scale: number) => string,
): { value: string; problem: string; computed: string[] } {
  const format = column.eventTime as keyof typeof EPOCH_UNITS;
  const { micros, scale, unit, bound } = EPOCH_UNITS[format];
  const s = `__s${index}`;
  const v = `__v${index}`;
  const since = `__u${index}`;
  // The instant's microseconds, where they are within the years 0001-9999 (make_timestamp takes no other); a number
  // far past them is not multiplied at all (a DECIMAL(38) product would overflow).
  const decimal = `TRY_CAST(${s} AS DECIMAL(38,${scale}))`;
  const computed = [`${decimal} AS ${v}`, `CASE WHEN abs(${decimal}) < ${bound} THEN CAST(${decimal} * ${micros} AS BIGINT) END AS ${since}`];
  const inRange = `${since} BETWEEN -62135596800000000 AND 253402300799999999`;
  const timestamp = `make_timestamp(CASE WHEN ${inRange} THEN ${since} END)`;
  const expected = `is not a number of ${unit} since 1970-01-01T00:00:00Z (time.format: ${format}; ISO 8601 text such as 2025-03-04T10:15:00Z needs time.format: iso8601)`;
  return {
    computed,
    value: column.type === "TIMESTAMPTZ" ? `CAST(${timestamp} AS TIMESTAMPTZ)` : timestamp,
    problem:
      `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL OR ${notDecimalNotation(s, false)} THEN ${says(s, expected)} ` +
      `WHEN ${roundedAway(scale)} THEN ${says(s, `has a fraction finer than a microsecond (time.format: ${format})`)} ` +
      `WHEN ${since} IS NULL OR NOT (${inRange}) THEN ${says(s, EVENT_TIME_RANGE)} END`,
  };
}

/** The SQL condition that a time value is outside years 0001-9999 (±infinity included). */
function outsideEventYears(value: string, type: string): string {
  return `(${value} < CAST('0001-01-01' AS ${type}) OR ${value} >= CAST('10000-01-01' AS ${type}))`;
}

/**
 * How one source value becomes its declared type: the value (NULL where it
 * does not convert) and the reason it is a bad row (NULL when it is not). A
 * value converts only exactly: `1.7` is not an integer, `1.005` does not fit
 * DECIMAL(10,2), a date with a time of day is not a DATE, `1e300` overflows a
 * FLOAT, a TIMESTAMP text with an offset would lose it, a fraction finer than
 * microseconds would be cut, `0x1F` and `1_000` are no decimal numbers, NaN is
 * refused, a HUGEINT must fit the 38 digits it is stored in. FLOAT and DOUBLE
 * are approximate by declaration: rounding to the nearest one is their nature.
 * Zone-less TIMESTAMPTZ text is UTC. An event time (`eventTime`) is read in its
 * format and must be in years 0001-9999.
 */
export function conversion(column: LandColumn, index: number, sourceType: string): { value: string; problem: string; computed: string[] } {
  const converted = valueConversion(column, index, sourceType);
  if (column.eventTime === undefined) return converted;
  // An event time names its partition (p_year=2026): ±infinity and years past 9999 or before 0001 would name one too.
  const says = `${quoteLiteral(`column ${column.name}: `)} || ${shown(`CAST(__s${index} AS VARCHAR)`)} || ${quoteLiteral(` ${EVENT_TIME_RANGE}`)}`;
  return {
    computed: converted.computed,
    value: converted.value,
    problem: `coalesce(${converted.problem}, CASE WHEN ${outsideEventYears(`(${converted.value})`, column.type)} THEN ${says} END)`,
  };
}

/**
 * The branch that passes a number whose text is exactly how DuckDB writes the value read (`123`, `-4`, `98.30` for
 * DECIMAL(10,2)): such a text has no other notation, no digit the type drops and no exponent, so the checks after it
 * have nothing to find; most values of an export are written so, and skip them.
 */
const WRITTEN_AS_READ = (text: string, value: string): string => `WHEN CAST(${value} AS VARCHAR) = ${text} THEN NULL`;

/**
 * The decimal places a number written with an exponent (`text`, `1.25e-3`) has, counted on its digits: those of the
 * fraction, less the exponent, less the zeros that end the digits (`100e-2` is 1: none). A number whose digits are all
 * zeros has none; an exponent too long to read has more than any type keeps.
 */
function exponentPlaces(text: string): string {
  const t = `trim(${text})`;
  const fraction = `regexp_extract(${t}, '\\.([0-9]*)', 1)`;
  const digits = `(regexp_extract(${t}, '^[+-]?([0-9]*)', 1) || ${fraction})`;
  const exponent = `TRY_CAST(regexp_extract(${t}, '[eE]([+-]?[0-9]+)$', 1) AS BIGINT)`;
  return (
    `CASE WHEN rtrim(${digits}, '0') = '' THEN 0 WHEN ${exponent} IS NULL THEN 1000 ` +
    `ELSE greatest(0, length(${fraction}) - ${exponent} - (length(${digits}) - length(rtrim(${digits}, '0')))) END`
  );
}

/** How one source value becomes its declared type (see conversion), the checks of every column. */
function valueConversion(column: LandColumn, index: number, sourceType: string): { value: string; problem: string; computed: string[] } {
  const type = column.type;
  const s = `__s${index}`;
  const prefix = quoteLiteral(`column ${column.name}: `);
  const says = (text: string, reason: string): string => `${prefix} || ${shown(text)} || ${quoteLiteral(` ${reason}`)}`;
  if (sourceType === type) return { value: s, problem: sameTypeProblem(column, s, says), computed: [] };
  if (sourceType !== "VARCHAR") return { ...typedConversion(column, s, sourceType, says), computed: [] };

  const v = `__v${index}`;
  const computed = [`TRY_CAST(${s} AS ${type}) AS ${v}`];
  const number = `TRY_CAST(${s} AS DOUBLE) IS NOT NULL`;
  // A fraction that the type would round away: digits after the first `scale` that are not zeros. A number in exponent
  // form has its decimal places counted exactly (exponentPlaces), never through a double (`1e-400` is 0.0 there).
  const exponent = `(contains(${s}, 'e') OR contains(${s}, 'E')) AND NOT contains(lower(${s}), 'x')`;
  const roundedAway = (scale: number): string =>
    `CASE WHEN contains(${s}, '.') AND NOT (${exponent}) THEN length(${s}) - strpos(${s}, '.') > ${scale} AND length(rtrim(split_part(${s}, '.', 2), '0 ')) > ${scale} ` +
    `WHEN ${exponent} THEN ${exponentPlaces(s)} > ${scale} ELSE false END`;
  if (column.eventTime === "epoch_ms" || column.eventTime === "epoch_s") return epochConversion(column, index, says, roundedAway);
  if (INTEGER_TYPES.test(type)) {
    return {
      computed,
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN CASE WHEN ${number} THEN ${says(s, `is out of range for ${type}`)} ELSE ${says(s, "is not an integer")} END ` +
        `${type === "HUGEINT" ? "" : `${WRITTEN_AS_READ(s, v)} `}` +
        `WHEN ${notDecimalNotation(s, true)} THEN ${says(s, NOTATION_REASON)} ` +
        `WHEN ${roundedAway(0)} THEN ${says(s, "is not an integer")} ` +
        `${type === "HUGEINT" ? `WHEN ${v} NOT BETWEEN -${HUGEINT_LIMIT} AND ${HUGEINT_LIMIT} THEN ${says(s, HUGEINT_RANGE)} ` : ""}END`,
    };
  }
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  if (decimal) {
    const scale = Number(decimal[2]);
    const tooPrecise = scale === 0 ? `is not a whole number (${type})` : `has more than ${scale} decimal place${scale > 1 ? "s" : ""} (${type})`;
    return {
      computed,
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN CASE WHEN ${number} THEN ${says(s, `is out of range for ${type}`)} ELSE ${says(s, "is not a number")} END ` +
        `${WRITTEN_AS_READ(s, v)} WHEN ${notDecimalNotation(s, false)} THEN ${says(s, NOTATION_REASON)} ` +
        `WHEN ${roundedAway(scale)} THEN ${says(s, tooPrecise)} END`,
    };
  }
  if (type === "FLOAT" || type === "DOUBLE") {
    return {
      computed,
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN ${says(s, "is not a number")} ` +
        `WHEN ${notDecimalNotation(s, false)} THEN ${says(s, NOTATION_REASON)} WHEN isnan(${v}) THEN ${says(s, NAN_REASON)} ` +
        `WHEN isinf(${v}) AND NOT regexp_matches(${s}, '^\\s*[+-]?inf', 'i') THEN ${says(s, `is out of range for ${type}`)} END`,
    };
  }
  return textTimeConversion(column, index, says);
}

/** How a text value becomes a declared time type (TIMESTAMPTZ, TIMESTAMP, DATE, TIME), text, a boolean or another type (see conversion). */
function textTimeConversion(column: LandColumn, index: number, says: (text: string, reason: string) => string): { value: string; problem: string; computed: string[] } {
  const type = column.type;
  const s = `__s${index}`;
  const v = `__v${index}`;
  const computed = [`TRY_CAST(${s} AS ${type}) AS ${v}`];
  // Times keep microseconds: DuckDB's cast cuts a finer fraction, which would change the value. A fraction needs a
  // '.': the regular expression runs only on a text that has one (most timestamps in exports have none).
  const finer = `(contains(${s}, '.') AND regexp_matches(${s}, '${BEYOND_MICROSECONDS}'))`;
  const cut = `has a fraction of a second finer than microseconds, which ${type} does not keep: round it to 6 digits`;
  // A time field that does not read names the format it expects, and the other formats.
  const notATime = column.eventTime === undefined ? "is not a timestamp" : ISO_EVENT_TIME;
  if (type === "TIMESTAMPTZ") {
    // An offset or zone in the text is honoured; text without one is UTC (the session's zone, set above), whatever the machine's zone.
    // An offset no clock has is refused, not applied (only a text with a sign after its date can have one).
    const impossible = `((contains(${s}, '+') OR contains(${s}[11:], '-')) AND regexp_matches(${s}, '${IMPOSSIBLE_OFFSET}'))`;
    const offset = "has a UTC offset no clock has (hours 00-23, minutes and seconds 00-59): send the offset the time was written with";
    return {
      value: v,
      problem: `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN ${says(s, notATime)} WHEN ${impossible} THEN ${says(s, offset)} WHEN ${finer} THEN ${says(s, cut)} END`,
      computed,
    };
  }
  if (type === "TIMESTAMP") {
    // A TIMESTAMP cast drops an offset: the text has one that matters where, read as an instant (zone-less text is UTC),
    // it is another time. A zero offset (`Z`, `+00`) changes nothing and is kept.
    const instant = `TRY_CAST(${s} AS TIMESTAMPTZ)`;
    const zoned = `__z${index}`;
    // Only a text with a sign or a letter after the date, or that does not end in a digit, can carry an offset; and
    // none in the plain shapes of exports (PLAIN_TIMESTAMP_SHAPES), told first because they cost least to tell: one
    // WHEN each, so that a text of the first shape is tested by one LIKE alone.
    const plain = PLAIN_TIMESTAMP_SHAPES.map((shape) => `WHEN ${s} LIKE '${shape}' THEN false `).join("");
    const mayHaveOffset = `(contains(${s}, '+') OR contains(${s}[11:], '-') OR NOT (right(${s}, 1) BETWEEN '0' AND '9'))`;
    const offset = `has a UTC offset or time zone, which column ${column.name} (TIMESTAMP, without time zone) cannot keep: declare it TIMESTAMPTZ, or drop the offset`;
    return {
      computed: [...computed, `CASE ${plain}WHEN ${mayHaveOffset} THEN ${instant} IS DISTINCT FROM timezone('UTC', ${v}) ELSE false END AS ${zoned}`],
      value: `CASE WHEN ${zoned} THEN NULL ELSE ${v} END`,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN CASE WHEN ${instant} IS NOT NULL THEN ${says(s, offset)} ELSE ${says(s, notATime)} END ` +
        `WHEN ${zoned} THEN ${says(s, offset)} WHEN ${finer} THEN ${says(s, cut)} END`,
    };
  }
  if (type === "DATE") {
    return {
      computed,
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN ${says(s, column.eventTime === undefined ? "is not a date (YYYY-MM-DD)" : ISO_EVENT_TIME)} ` +
        `WHEN contains(${s}, ':') AND TRY_CAST(${s} AS TIMESTAMP) IS DISTINCT FROM CAST(${v} AS TIMESTAMP) THEN ${says(s, "is not a date: it has a time of day")} END`,
    };
  }
  if (type === "VARCHAR") return { value: s, problem: "NULL::VARCHAR", computed: [] };
  if (type === "TIME") {
    // DuckDB's cast reads a time of day out of a timestamp's text and drops an offset: the value would not be the one sent.
    const dated = `regexp_matches(${s}, '[0-9]{4}-[0-9]{1,2}-[0-9]')`;
    // A zero offset (`Z`, `+00`) changes nothing and is kept, as in a TIMESTAMP.
    const zoned = `(regexp_matches(${s}, '[+-][0-9]{1,2}(:?[0-9]{2})?\\s*$') AND NOT regexp_matches(${s}, '[+-]00(:?00)?\\s*$'))`;
    return {
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN ${says(s, "does not convert to TIME")} ` +
        `WHEN ${dated} THEN ${says(s, "is not a time of day alone: it has a date (declare the column TIMESTAMP, or send the time of day)")} ` +
        `WHEN ${zoned} THEN ${says(s, "has a UTC offset, which TIME cannot keep: drop the offset, or send a TIMESTAMPTZ")} ` +
        `WHEN ${finer} THEN ${says(s, cut)} END`,
      computed,
    };
  }
  const what = type === "BOOLEAN" ? "is not a boolean (true or false)" : `does not convert to ${type}`;
  return { value: v, problem: `CASE WHEN ${s} IS NOT NULL AND ${v} IS NULL THEN ${says(s, what)} END`, computed };
}


/** A typed source value (Parquet) of another type than declared: converted, and refused if the conversion is not exact (it must read back the same). */
function typedConversion(column: LandColumn, source: string, sourceType: string, says: (text: string, reason: string) => string): { value: string; problem: string } {
  const type = column.type;
  const s = source;
  const text = `CAST(${s} AS VARCHAR)`;
  const instant = sourceType === "TIMESTAMPTZ";
  const wallClock = /^TIMESTAMP(_S|_MS|_NS)?$/.test(sourceType);
  // Wall clock time and instants meet in UTC, never in the machine's zone.
  // A FLOAT or DOUBLE is the number its shortest text names (the FLOAT -2.5 is -2.5): DuckDB's own cast of one into a
  // wide DECIMAL scales it in floating point, and is off in the last digits (-2.4999999488 in a DECIMAL(38,10)).
  const throughText = (sourceType === "FLOAT" || sourceType === "DOUBLE") && type.startsWith("DECIMAL");
  const value =
    type === "TIMESTAMPTZ" && wallClock
      ? `timezone('UTC', CAST(${s} AS TIMESTAMP))`
      : type === "TIMESTAMP" && instant
        ? `timezone('UTC', ${s})`
        : throughText
          ? `TRY_CAST(${text} AS ${type})`
          : `TRY_CAST(${s} AS ${type})`;
  const unconverted = `CASE WHEN ${s} IS NOT NULL AND (${value}) IS NULL THEN ${says(text, `(${sourceType}) does not convert to ${type}`)} END`;
  // Bytes without the UTF8 annotation (what Impala, older Hive and pyarrow's `binary` write for strings) are the text's
  // UTF-8 bytes: decoded, as DuckDB's binary_as_string reads them. A cast would write them as escaped text
  // (`caf\xC3\xA9`); bytes that are not UTF-8 are no text at all, and are a bad row, as a CSV that is not UTF-8 is.
  if (type === "VARCHAR" && sourceType === "BLOB") {
    const decoded = `try(decode(${s}))`;
    return { value: decoded, problem: `CASE WHEN ${s} IS NOT NULL AND ${decoded} IS NULL THEN ${says(text, "(BLOB) is not valid UTF-8 text: send the text encoded as UTF-8, or declare the column BLOB")} END` };
  }
  // A nested value (struct, list, map) cast to text would be DuckDB's rendering of it, not a value that was sent.
  if (type === "VARCHAR" && /^(STRUCT|MAP|UNION)\(|\]$/.test(sourceType)) {
    return { value: "NULL::VARCHAR", problem: `CASE WHEN ${s} IS NOT NULL THEN ${says(text, `(${printable(sourceType, 60)}) is a nested value, not text: declare the column from its fields, or store it as text in the file`)} END` };
  }
  // Nanoseconds would be cut: the declared types keep microseconds.
  if ((type === "TIMESTAMPTZ" || type === "TIMESTAMP") && sourceType === "TIMESTAMP_NS") {
    return { value, problem: `coalesce(${unconverted}, CASE WHEN epoch_ns(${s}) % 1000 <> 0 THEN ${says(text, `has nanoseconds, which ${type} does not keep (it keeps microseconds)`)} END)` };
  }
  if (type === "VARCHAR" || type === "TIMESTAMPTZ" || (type === "TIMESTAMP" && instant)) return { value, problem: unconverted };
  if (type === "FLOAT" || type === "DOUBLE") {
    return {
      value,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN (${value}) IS NULL OR (isinf(${value}) AND NOT isinf(TRY_CAST(${s} AS DOUBLE))) THEN ${says(text, `is out of range for ${type}`)} ` +
        `WHEN isnan(${value}) THEN ${says(text, NAN_REASON)} END`,
    };
  }
  if (type === "HUGEINT") {
    const exact = `CASE WHEN ${s} IS NOT NULL AND TRY_CAST(${value} AS ${sourceType}) IS DISTINCT FROM ${s} THEN ${says(text, "is not an integer")} END`;
    return { value, problem: `coalesce(${unconverted}, ${exact}, CASE WHEN (${value}) NOT BETWEEN -${HUGEINT_LIMIT} AND ${HUGEINT_LIMIT} THEN ${says(text, HUGEINT_RANGE)} END)` };
  }
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  const inexact = INTEGER_TYPES.test(type)
    ? "is not an integer"
    : decimal
      ? `has more than ${decimal[2]} decimal places (${type})`
      : type === "DATE"
        ? "is not a date: it has a time of day"
        : `does not convert exactly to ${type}`;
  return {
    value,
    problem: `coalesce(${unconverted}, CASE WHEN ${s} IS NOT NULL AND TRY_CAST(${value} AS ${sourceType}) IS DISTINCT FROM ${s} THEN ${says(text, inexact)} END)`,
  };
}

/** The checks of a typed source value (Parquet) already of the declared type: NaN, and a HUGEINT wider than it is stored. */
function sameTypeProblem(column: LandColumn, source: string, says: (text: string, reason: string) => string): string {
  const text = `CAST(${source} AS VARCHAR)`;
  if (column.type === "FLOAT" || column.type === "DOUBLE") return `CASE WHEN isnan(${source}) THEN ${says(text, NAN_REASON)} END`;
  if (column.type === "HUGEINT") return `CASE WHEN ${source} NOT BETWEEN -${HUGEINT_LIMIT} AND ${HUGEINT_LIMIT} THEN ${says(text, HUGEINT_RANGE)} END`;
  return "NULL::VARCHAR";
}

/**
 * The significant digits of a number's text (sign, exponent, point, and leading and trailing zeros taken off): two
 * texts that read as the same FLOAT or DOUBLE name the same number exactly when their digits are the same (numbers
 * whose digits are the same differ by a power of ten, which no rounding to the nearest double crosses).
 */
function significantDigits(text: string): string {
  return `ltrim(rtrim(replace(regexp_replace(lower(trim(${text})), '^[+-]|e.*$', '', 'g'), '.', ''), '0'), '0')`;
}

/**
 * How a value already stored becomes its column's new declared type in a rebuild by swap (`sync --rebuild-schema`,
 * docs/lake.md), from the type it is stored as (`storedType`, its Parquet file's): as a delivery's value of that type
 * converts (see conversion: a time of day is not a DATE, a TIMESTAMP text's offset is not dropped, -3 is no UBIGINT,
 * NaN is refused), and only where converting it back gives the same value. So, unlike a delivery's value, a stored
 * one is not rounded into FLOAT or DOUBLE either: its column held it exactly, and a rebuild never changes a value
 * silently (DECIMAL 12345678.91 is no FLOAT, a text of 20 digits no DOUBLE). A FLOAT or DOUBLE is the number its
 * shortest text names (DuckDB's own cast of one to a wide DECIMAL is off in the last digits: the FLOAT -2.5 as
 * -2.4999999488). A text is converted back as the text of the number it became (`1.50` is the DECIMAL 1.50 and the
 * DOUBLE 1.5); a TIME text must be a time of day alone (DuckDB's cast drops a date and an offset); a backslash in a
 * text would be read as an escape by a BLOB (`\x41` is the byte `A`).
 */
export function storedConversion(column: { readonly name: string; readonly type: string }, index: number, storedType: string): { value: string; problem: string; computed: string[] } {
  const type = column.type;
  const s = `__s${index}`;
  const approximate = storedType === "FLOAT" || storedType === "DOUBLE";
  const converted =
    approximate && type.startsWith("DECIMAL(")
      ? { value: `TRY_CAST(CAST(${s} AS VARCHAR) AS ${type})`, problem: "NULL::VARCHAR", computed: [] }
      : conversion({ name: column.name, type, nullable: true }, index, storedType);
  if (storedType === type) return converted;
  const value = `(${converted.value})`;
  const says = (reason: string): string => `${quoteLiteral(`column ${column.name}: `)} || ${shown(`CAST(${s} AS VARCHAR)`)} || ${quoteLiteral(` ${reason}`)}`;
  const differs =
    storedType !== "VARCHAR"
      ? `${value} IS NULL OR TRY_CAST(${value} AS ${storedType}) IS DISTINCT FROM ${s}`
      : type === "FLOAT" || type === "DOUBLE"
        ? `NOT isinf(${value}) AND ${significantDigits(s)} <> ${significantDigits(`CAST(${value} AS VARCHAR)`)}`
        : type === "TIME"
          ? `NOT regexp_matches(${s}, '^\\s*[0-9]{1,2}:[0-9]{2}(:[0-9]{2}([.][0-9]*)?)?\\s*$')`
          : type === "BLOB"
            ? `contains(${s}, '\\')`
            : "false";
  return { ...converted, problem: `coalesce(${converted.problem}, CASE WHEN ${s} IS NOT NULL AND (${differs}) THEN ${says(`(${storedType}) would not read back the same as ${type}`)} END)` };
}
