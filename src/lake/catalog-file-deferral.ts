/**
 * Rewrites of the catalog file's views put off while a run of writes goes on (a collector landing a backlog of
 * segments, one lease of its table each): each rewrite copies the file and binds every file of the table's current runs,
 * which costs more than landing a small segment, and grows with the files of the days being written. Within a deferral
 * a table's view is rewritten when a write of it finds its view behind for `maxLagMs` or more, and every view left
 * behind is rewritten when the deferral ends, each under its table's lease, as every rewrite is.
 */
export class CatalogFileDeferral {
  /** Since when each table's view has been behind its pointers (ms since the epoch). */
  private readonly behind = new Map<string, number>();
  private depth = 0;
  private maxLagMs = 0;

  /**
   * Runs `work` with rewrites put off, then rewrites what was left behind (`flush`, with the tables' names; it takes
   * their leases). Nested deferrals end with the outermost.
   */
  async run<T>(work: () => Promise<T>, maxLagMs: number, flush: (tables: readonly string[]) => Promise<void>): Promise<T> {
    this.maxLagMs = this.depth === 0 ? maxLagMs : Math.min(this.maxLagMs, maxLagMs);
    this.depth += 1;
    try {
      return await work();
    } finally {
      this.depth -= 1;
      if (this.depth === 0) {
        const tables = [...this.behind.keys()];
        this.behind.clear();
        if (tables.length > 0) await flush(tables);
      }
    }
  }

  /**
   * Whether the views of `tables` (held now; those of them that moved are `moved`) are left behind rather than
   * rewritten now: inside a deferral, unless one of them has been behind for `maxLagMs`. Views rewritten now are no
   * longer behind.
   */
  putsOff(tables: readonly string[], moved: readonly string[]): boolean {
    if (this.depth === 0) return false;
    const now = Date.now();
    for (const table of moved) if (!this.behind.has(table)) this.behind.set(table, now);
    if (tables.some((table) => now - (this.behind.get(table) ?? now) >= this.maxLagMs)) {
      for (const table of tables) this.behind.delete(table);
      return false;
    }
    return true;
  }
}
