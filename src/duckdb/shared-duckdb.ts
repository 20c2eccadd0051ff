import type { DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import type { Signing } from "../model/signature.js";
import { openDuckDb, openRestrictedDuckDb, type OpenedDuckDb, type RestrictedDuckDb } from "./duckdb-open.js";
import { parseByteSize } from "./duckdb-text.js";

/**
 * Which instance a connection is of: the landing instance (`"landing"`, lakeswap's own SQL: landing, signatures,
 * landed builds, counts), an instance that runs users' SQL and reaches only the given folders (./duckdb-open.ts), or
 * (`"expressions"`) one that runs users' expressions over rows the query gives itself: expressions that the parser's
 * check left without a FROM or subquery (../engine/sql-guard.ts, assertOneExpression), so they read no table or file,
 * and any instance that runs users' SQL serves.
 */
export type DuckDbScope = "landing" | "expressions" | { readonly folders: readonly string[] };

/**
 * The DuckDB that a lake's engine and landing share (../engine/duckdb-engine.ts, ../landing/duckdb/): the landing
 * instance, opened on first use, and the restricted instances that run users' SQL, one per set of folders they may
 * reach, kept until close. `nativeSignatures: false` keeps signatures in the SQL form even where the native
 * extension is built (the signatures are the same); by default the extension is used where it loads.
 */
export class SharedDuckDb {
  private instance: Promise<OpenedDuckDb> | undefined;
  private readonly restricted = new Map<string, Promise<RestrictedDuckDb>>();
  /** The landing instance's memory limit in bytes, read once. */
  private memoryLimit: Promise<number> | undefined;
  private readonly connections = new Set<DuckDBConnection>();

  constructor(private readonly options: { readonly nativeSignatures?: boolean } = {}) {}

  /**
   * Runs `work` on a connection of its own, so builds of several partitions can run at once: of the landing
   * instance, or of the restricted instance that reaches `scope.folders`.
   */
  async withConnection<T>(work: (connection: DuckDBConnection) => Promise<T>, scope: DuckDbScope = "landing"): Promise<T> {
    const instance = scope === "landing" ? (await this.opened()).instance : scope === "expressions" ? await this.expressionsInstance() : await this.restrictedInstance(scope.folders);
    const connection = await instance.connect();
    this.connections.add(connection);
    try {
      return await work(connection);
    } finally {
      this.connections.delete(connection);
      connection.closeSync();
    }
  }

  /**
   * Opens the restricted instance that reaches `scope.folders` in the background, if it is not open yet: the next
   * connection to it then need not wait for it to start (15-35 ms). A failure to open is left to that connection.
   */
  prepare(scope: { readonly folders: readonly string[] }): void {
    this.restrictedInstance(scope.folders).catch(() => undefined);
  }

  /** Opens the landing instance in the background, if it is not open yet (see `prepare`). */
  prepareLanding(): void {
    this.opened().catch(() => undefined);
  }

  /** How the landing instance computes content signatures, and why in the SQL form when it does (./duckdb-open.ts). */
  async signing(): Promise<Signing> {
    return (await this.opened()).signing;
  }

  /** The landing instance's in-memory catalog (what lands well within the memory limit goes there), if it has one. */
  async memoryCatalog(): Promise<string | undefined> {
    return (await this.opened()).memoryCatalog;
  }

  /** The landing instance's memory limit in bytes (0 where DuckDB prints it in a way not understood), read once. */
  memoryLimitBytes(): Promise<number> {
    this.memoryLimit ??= this.withConnection(async (connection) => {
      const reader = await connection.runAndReadAll(`SELECT current_setting('memory_limit')`);
      return parseByteSize(String(reader.getRows()[0]?.[0] ?? "")) ?? 0;
    });
    return this.memoryLimit;
  }

  /** Stops the queries in flight and closes every instance; the next use opens them again. Closing twice is harmless. */
  async close(): Promise<void> {
    // Stop queries in flight first (Ctrl-C): closing an instance waits for them.
    for (const connection of this.connections) connection.interrupt();
    const instance = this.instance;
    const restricted = [...this.restricted.values()];
    this.instance = undefined;
    this.memoryLimit = undefined;
    this.restricted.clear();
    // An instance that failed to open has nothing to close (its error was thrown where it was first needed).
    if (instance) await (await instance.catch(() => undefined))?.close();
    await Promise.all(restricted.map(async (opened) => (await opened.catch(() => undefined))?.close()));
  }

  private opened(): Promise<OpenedDuckDb> {
    this.instance ??= openDuckDb({ native: this.options.nativeSignatures ?? true, spill: true });
    return this.instance;
  }

  /**
   * An instance for users' expressions (DuckDbScope): one already open for users' SQL (the layer before the one whose
   * partitions are mapped built in it), else the one that reaches no folder. Starting an instance costs 20-40 ms.
   */
  private expressionsInstance(): Promise<DuckDBInstance> {
    const open = this.restricted.values().next().value;
    if (!open) return this.restrictedInstance([]);
    return open.then(
      (restricted) => restricted.instance,
      () => this.restrictedInstance([]),
    );
  }

  /**
   * The instance that runs users' SQL over these folders: it reads and writes only them, or them and the other folders
   * of a set prepared for a sync's builds (`prepare`), never the lake's metadata or the working folder
   * (./duckdb-open.ts). Opened once per set of folders; a set opened already that holds every one of them serves.
   */
  private restrictedInstance(folders: readonly string[]): Promise<DuckDBInstance> {
    const key = folders.join("\n");
    let opened = this.restricted.get(key) ?? [...this.restricted].find(([open]) => covers(open, folders))?.[1];
    if (!opened) {
      opened = openRestrictedDuckDb(folders);
      this.restricted.set(key, opened);
    }
    return opened.then((restricted) => restricted.instance);
  }
}

/**
 * Whether the instance keyed `key` (its folders, one per line) reaches every one of `folders`. SQL that may reach no
 * folder (`folders` empty) never runs in an instance that reaches some: it gets the one that reaches none.
 */
function covers(key: string, folders: readonly string[]): boolean {
  const reached = new Set(key.split("\n"));
  return folders.length > 0 && folders.every((folder) => reached.has(folder));
}
