/**
 * The last steps of a writer's batches (their runs' manifests and outbox acknowledgements, ./swap.ts
 * `SwapOptions.afterMove`), by table, still under way after the batches returned: a sync's next layer builds
 * meanwhile. A step of a table is awaited before the writer does anything else with that table (its manifests are
 * then written) but read the states it keeps of it (../operations/partition-states.ts `HeldStates`: its own moves, in
 * memory), and every step before the writer's leases go.
 */
export class AfterMoves {
  private readonly steps = new Map<string, Promise<void>[]>();

  add(table: string, step: Promise<void>): void {
    // Awaited by `settled` or `all`: never an unhandled rejection meanwhile.
    step.catch(() => undefined);
    this.steps.set(table, [...(this.steps.get(table) ?? []), step]);
  }

  /**
   * Waits for the steps of `tables`; throws the first that failed (the moves stand: the outbox entry's replay ends
   * it). The steps are kept, so that `all` still throws a failure an earlier wait saw (and a caller swallowed).
   */
  async settled(...tables: readonly string[]): Promise<void> {
    const steps = tables.flatMap((table) => this.steps.get(table) ?? []);
    if (steps.length > 0) await Promise.all(steps);
  }

  /** Waits for every step. */
  async all(): Promise<void> {
    await this.settled(...this.steps.keys());
  }
}
