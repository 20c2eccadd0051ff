// The wall clock that lakeswap's time rules read (a lease's expiry, a delivery's files settling), so that a test can
// let time pass without waiting for it. Only those rules read it: timers, deadlines and waits keep the real time.

let offsetMs = 0;

/** Milliseconds since the epoch: Date.now(), moved forward by whatever `advanceClock` added in this process. */
export function now(): number {
  return Date.now() + offsetMs;
}

/**
 * Moves this process's clock forward by `ms` (tests only: as if that much time had passed, for a lease to expire or a
 * file to settle, without sleeping); `resetClock` puts it back.
 */
export function advanceClock(ms: number): void {
  offsetMs += ms;
}

/** Puts this process's clock back to the real time. */
export function resetClock(): void {
  offsetMs = 0;
}
