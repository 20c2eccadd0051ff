import { createReadStream } from "node:fs";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom, to as copyTo } from "pg-copy-streams";
import { LakeswapError, errorMessage } from "../../model/errors.js";
import { TargetUnavailableError } from "../sink.js";
import type { Query } from "./state-table.js";

/** The part of a `pg` client the sink calls (a test may hand in one of its own). */
export type PostgresClient = Pick<pg.Client, "connect" | "query" | "end" | "on">;

/** How a session names its target in messages, and the URL whose password it never prints. */
export interface SessionTarget {
  /** The sink's description, which prefixes every message. */
  readonly description: string;
  readonly url: string;
  readonly maskedUrl: string;
}

/**
 * One connection of the sink to its target: its statements and COPYs, with PostgreSQL's errors translated into
 * lakeswap's (`failure`), and a connection that dropped remembered, so that its next statement fails at once as
 * the target being unavailable.
 */
export class SinkSession {
  private connected?: Promise<void>;
  private broken?: Error;

  constructor(
    private readonly target: SessionTarget,
    private readonly client: PostgresClient,
  ) {
    // A connection that drops between queries must not crash the process: the next query fails instead.
    this.client.on("error", (error: Error) => {
      this.broken = error;
    });
  }

  /** A session on a connection of its own to the target. */
  static open(target: SessionTarget): SinkSession {
    // A host that never answers fails the sink after 15 s rather than holding the sync (and its leases) forever.
    return new SinkSession(target, new pg.Client({ connectionString: target.url, application_name: "lakeswap", connectionTimeoutMillis: 15_000, keepAlive: true }));
  }

  /** Connects once; every later call waits for the same connection. */
  async connect(): Promise<void> {
    this.connected ??= this.client.connect().then(() => undefined);
    try {
      await this.connected;
    } catch (error) {
      throw this.failure(error, "cannot connect");
    }
  }

  /** `query`, bound: what the state table's functions and PartitionSwap run their statements with. */
  readonly query: Query = async <Row extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<pg.QueryResult<Row>> => {
    if (this.broken) throw this.failure(this.broken, "connection lost");
    try {
      return await this.client.query<Row>(sql, values);
    } catch (error) {
      throw this.failure(error);
    }
  };

  /** Streams a file of rows into a `COPY ... FROM STDIN`; returns the rows PostgreSQL took. */
  async copy(sql: string, rowsFile: string): Promise<number> {
    try {
      const stream = (this.client as pg.Client).query(copyFrom(sql));
      await pipeline(createReadStream(rowsFile), stream);
      return stream.rowCount;
    } catch (error) {
      throw this.failure(error);
    }
  }

  /** The rows of a `COPY ... TO STDOUT`, as a stream (its errors are PostgreSQL's own). */
  copyOut(sql: string): NodeJS.ReadableStream {
    return (this.client as pg.Client).query(copyTo(sql));
  }

  /** Ends the connection, if it was made; never fails. */
  async end(): Promise<void> {
    if (!this.connected) return;
    this.connected = undefined;
    await this.client.end().catch(() => undefined);
  }

  /** The database's own message, prefixed with the target; never the URL's password. */
  private failure(error: unknown, what?: string): LakeswapError {
    if (error instanceof LakeswapError) return error;
    const pgError = error as { message?: string; detail?: string; where?: string; code?: string };
    const parts = [errorMessage(error) || String(pgError.code ?? "error")];
    if (pgError.detail) parts.push(pgError.detail);
    if (pgError.where && /COPY/.test(pgError.where)) parts.push(pgError.where.split("\n")[0]!);
    const { description, url, maskedUrl } = this.target;
    const message = `${description}: ${what ? `${what}: ` : ""}${parts.join(" ").split(url).join(maskedUrl)}`;
    // No connection: every write after this one would fail the same way (the caller stops and says so once).
    if (what === "cannot connect" || this.broken) return new TargetUnavailableError(message, error);
    return new LakeswapError("STORE_ERROR", message, { cause: error });
  }
}
