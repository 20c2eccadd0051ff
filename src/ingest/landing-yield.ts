/**
 * When the timed landing leaves sealed segments for later: while appends were waiting for the log at least `demand`
 * of the recent past (`WriteAheadLog.demand`: a burst of requests, each waiting for a group commit), as long as no
 * more than `maxSegments` segments are sealed, the oldest has waited less than `maxMs`, and the log holds less than
 * half its size limit (`wal.max_bytes`, where backpressure starts). Landing a segment takes the CPU and the disk
 * that the answers to requests wait for; a burst is answered first, and landed right after it (or once the log
 * holds more, or after `maxMs`). A flush (SIGTERM, `lakeswap ingest`) lands all.
 */
export interface LandingYield {
  readonly demand: number;
  readonly maxSegments: number;
  readonly maxMs: number;
}

/** The state of a log that `LandingYield` decides on: its demand, sealed segments, how long the oldest has waited, its bytes and limit. */
interface LogState {
  readonly demand: number;
  readonly sealed: number;
  readonly waitedMs: number;
  readonly bytes: number;
  readonly maxBytes: number;
}

/** Whether the timed landing leaves the oldest sealed segment for later (see `LandingYield`). */
export function landingYields(policy: LandingYield, log: LogState): boolean {
  return log.demand >= policy.demand && log.sealed <= policy.maxSegments && log.waitedMs < policy.maxMs && log.bytes * 2 < log.maxBytes;
}

/**
 * `lakeswap serve`'s: appends waiting half the time or more (a client that posts again as soon as it is answered
 * keeps one waiting about that much; a steady 20,000 events/s in requests of 1,000, a few hundredths); at most 3
 * sealed segments (192 MiB by default) or 10 seconds.
 */
export const LANDING_YIELDS: LandingYield = { demand: 0.5, maxSegments: 3, maxMs: 10_000 };
