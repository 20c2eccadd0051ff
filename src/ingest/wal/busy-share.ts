/**
 * The share of time something was busy, weighted to the recent past: the busy signal (1 while busy, 0 while not)
 * averaged with weights that fall by e every `timeConstantMs` into the past.
 */
export class BusyShare {
  private share = 0;
  private busy = false;

  constructor(
    private readonly timeConstantMs: number,
    private since = performance.now(),
  ) {}

  /** Marks a change from busy to idle or back, at `now`. */
  set(busy: boolean, now = performance.now()): void {
    this.share = this.at(now);
    this.since = now;
    this.busy = busy;
  }

  /** The share at `now` (0 to 1). */
  at(now = performance.now()): number {
    const kept = Math.exp(-Math.max(0, now - this.since) / this.timeConstantMs);
    return this.busy ? 1 - (1 - this.share) * kept : this.share * kept;
  }
}
