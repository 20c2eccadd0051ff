import { randomBytes, randomInt } from "node:crypto";

const RUN_ID = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z-([0-9a-f]{6})$/;

let lastIssued = "";

/**
 * A new run id: UTC `YYYYMMDDTHHMMSSZ-` + 6 random hex chars. Ids sort by time;
 * within one process they also sort by issue order, and the random suffix keeps
 * ids of different processes apart (the run prefix is also created exclusively).
 */
export function newRunId(now: Date = new Date()): string {
  const stamp = stampOf(now);
  const random = randomBytes(3);
  // The first id of a second starts in the lower half, leaving room to count up within the second.
  let suffix = random.readUIntBE(0, 3) & 0x7fffff;
  if (lastIssued.startsWith(stamp)) {
    const next = Number.parseInt(lastIssued.slice(-6), 16) + 1 + (random[2] as number);
    if (next <= 0xffffff) suffix = next;
  }
  const id = `${stamp}-${suffix.toString(16).padStart(6, "0")}`;
  lastIssued = id;
  return id;
}

/** The most a run id issued after another of the same second steps past it: far apart, yet room for many steps. */
const STEP_AFTER = 1 << 20;

/**
 * A new run id that sorts after `latest` (the newest run of the partition, or the newest sync), so run order is swap
 * order even for two writers on different hosts within one second. Where the id issued now would not sort after
 * `latest`, it steps past it by a random amount, not by one: two writers that read the same `latest` (a compaction,
 * which places its run before it takes the lease; two syncs of one lake) never pick the same id by rule.
 */
export function newRunIdAfter(latest: string | undefined, now: Date = new Date()): string {
  const id = newRunId(now);
  if (latest === undefined || id > latest) return id;
  const match = RUN_ID.exec(latest);
  if (!match) return id;
  const suffix = Number.parseInt(match[7] as string, 16);
  const room = 0xffffff - suffix;
  // Too little room left in latest's second for steps that keep writers apart: the next second's ids have it.
  if (room < STEP_AFTER / 16) return newRunId(new Date(runIdTime(latest).getTime() + 1000));
  const step = 1 + randomInt(Math.min(room, STEP_AFTER));
  const after = `${latest.slice(0, -6)}${(suffix + step).toString(16).padStart(6, "0")}`;
  // This process's next id of the same second sorts after this one.
  if (after > lastIssued) lastIssued = after;
  return after;
}

/** The first run id of the second `at` is in: every id issued at or after it sorts at or after this one. */
export function firstRunIdOf(at: Date): string {
  return `${stampOf(at)}-000000`;
}

/** A run id's time part, `YYYYMMDDTHHMMSSZ` (UTC, to the second). */
function stampOf(at: Date): string {
  return at.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}Z$/, "Z");
}

/** True when `value` is a well-formed run id. */
export function isRunId(value: string): boolean {
  return RUN_ID.test(value);
}

/** The UTC time a run id was issued at (second precision). */
export function runIdTime(runId: string): Date {
  const match = RUN_ID.exec(runId);
  if (!match) throw new Error(`'${runId}' is not a run id (expected YYYYMMDDTHHMMSSZ-xxxxxx)`);
  const [, y, mo, d, h, mi, s] = match;
  return new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)));
}
