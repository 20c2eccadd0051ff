import { execFile, execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";

/** Where Debian's `postgresql` package puts the server binaries (.ci/run installs it when initdb is missing). */
export const POSTGRES_BIN = process.env.LAKESWAP_POSTGRES_BIN ?? "/usr/lib/postgresql/15/bin";

/** A throwaway PostgreSQL cluster: made with initdb in a temporary folder, on a free port, trust auth. */
export interface PostgresServer {
  readonly url: string;
  readonly port: number;
  /** Runs SQL as the superuser; returns the rows. */
  query<Row extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<Row[]>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** Whether the server binaries are here (the tests start their own cluster with them). */
export function postgresAvailable(): boolean {
  return existsSync(path.join(POSTGRES_BIN, "initdb"));
}

/** Runs SQL on a server as its superuser, in a connection of its own; returns the rows. */
export async function queryAs<Row extends pg.QueryResultRow = pg.QueryResultRow>(url: string, sql: string, values?: unknown[]): Promise<Row[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<Row>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Starts a cluster: initdb (as the `postgres` user when running as root, which initdb refuses),
 * then `pg_ctl start` on 127.0.0.1 and a free port, with the socket in the temporary folder.
 */
export async function startPostgres(): Promise<PostgresServer> {
  const root = mkdtempSync(path.join(tmpdir(), "lakeswap-pg-"));
  const data = path.join(root, "data");
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(root, uid, gid);
    chmodSync(root, 0o755);
  }
  // Asynchronous, so that a cluster started in vitest's main process (test/support/global-services.ts) does not stall it.
  const run = async (binary: string, args: readonly string[]): Promise<void> => {
    const command = asRoot ? "runuser" : path.join(POSTGRES_BIN, binary);
    const argv = asRoot ? ["-u", "postgres", "--", path.join(POSTGRES_BIN, binary), ...args] : [...args];
    try {
      await promisify(execFile)(command, argv, { encoding: "utf8", cwd: root });
    } catch (error) {
      const failed = error as { code?: unknown; stderr?: string; stdout?: string };
      throw new Error(`${binary} ${args.join(" ")} failed (${String(failed.code)}): ${failed.stderr ?? ""}${failed.stdout ?? ""}`);
    }
  };
  await run("initdb", ["-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"]);
  let port = 0;
  for (let attempt = 0; ; attempt += 1) {
    port = await freePort();
    try {
      await run("pg_ctl", ["start", "-w", "-D", data, "-l", path.join(root, "log"), "-o", `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off`]);
      break;
    } catch (error) {
      if (attempt >= 2) throw error;
    }
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    query: (sql, values) => queryAs(url, sql, values),
    async stop() {
      try {
        await run("pg_ctl", ["stop", "-D", data, "-m", "immediate", "-w"]);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
  };
}
