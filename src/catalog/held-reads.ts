/**
 * Answers a catalog keeps for the tables whose writer lease this process holds (Catalog.holdTable): meanwhile only
 * this process changes them, through the catalog that keeps them, which forgets a table's answer when it writes it.
 */
export class HeldReads<T> {
  private readonly held = new Map<string, { holders: number; answer?: Promise<T> }>();

  /** Keeps `name`'s answers until the returned release is called (as often as it is held). */
  hold(name: string): () => void {
    const entry = this.held.get(name) ?? { holders: 0 };
    entry.holders += 1;
    this.held.set(name, entry);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      entry.holders -= 1;
      if (entry.holders === 0) this.held.delete(name);
    };
  }

  /** `read`'s answer for `name`: asked once while it is held (a failed read is not kept), every time otherwise. */
  read(name: string, read: () => Promise<T>): Promise<T> {
    const entry = this.held.get(name);
    if (!entry) return read();
    if (entry.answer) return entry.answer;
    const reading = read();
    entry.answer = reading;
    reading.catch(() => {
      if (entry.answer === reading) entry.answer = undefined;
    });
    return reading;
  }

  /** Runs `write`, which changes `name`: what was kept of it is forgotten before and after (also when it fails midway). */
  async writing<R>(name: string, write: () => Promise<R>): Promise<R> {
    this.forget(name);
    try {
      return await write();
    } finally {
      this.forget(name);
    }
  }

  private forget(name: string): void {
    const entry = this.held.get(name);
    if (entry) entry.answer = undefined;
  }
}
