import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { version } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signatureColumnOrder } from "../../src/model/signature.js";
import { signatureQuery } from "../../src/landing/duckdb/signature-sql.js";
import { NATIVE_EXTENSION_PATH, checkNativeLanes, openDuckDb, type OpenedDuckDb } from "../../src/duckdb/duckdb-open.js";
import { REPO_ROOT, tempDir } from "../support/lake-fixture.js";

/** Whether this machine has the C compiler `npm ci` builds the native extension with. */
function hasCompiler(): boolean {
  try {
    execFileSync(process.env.CC || "cc", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** Runs scripts/build-native.mjs into `out` with extra environment; returns what it printed. */
function buildNative(out: string, env: Record<string, string> = {}): string {
  return execFileSync(process.execPath, [path.join(REPO_ROOT, "scripts", "build-native.mjs")], {
    env: { ...process.env, LAKESWAP_NATIVE_OUT: out, ...env },
    encoding: "utf8",
  });
}

/** The partition signatures of a small table, through an opened instance, in the form it supports. */
async function signatures(opened: OpenedDuckDb): Promise<unknown[][]> {
  const connection = await opened.instance.connect();
  try {
    await connection.run(
      "CREATE TABLE t AS SELECT (range % 3)::VARCHAR AS p, range::BIGINT AS id, CASE WHEN range % 4 = 0 THEN NULL ELSE 'v' || (range % 5) END AS s, " +
        "CASE range % 6 WHEN 0 THEN NULL WHEN 1 THEN 'nan'::DOUBLE WHEN 2 THEN -(0.0::DOUBLE) WHEN 3 THEN 'inf'::DOUBLE ELSE range / 7.0 - 30 END AS d, " +
        "CASE range % 5 WHEN 0 THEN NULL WHEN 1 THEN 'nan'::FLOAT WHEN 2 THEN -(0.0::FLOAT) ELSE (range / 3.0 - 80)::FLOAT END AS f FROM range(500)",
    );
    const signed = signatureColumnOrder([
      { name: "id", type: "BIGINT" },
      { name: "s", type: "VARCHAR" },
      { name: "d", type: "DOUBLE" },
      { name: "f", type: "FLOAT" },
    ]);
    return (await connection.runAndReadAll(signatureQuery("t", ["p"], signed, opened.signing.form))).getRowsJS();
  } finally {
    connection.closeSync();
  }
}

describe("the native signature extension: build, load, and the fallback to the SQL form", () => {
  let workspace: ReturnType<typeof tempDir>;
  beforeAll(() => {
    workspace = tempDir("lakeswap-native-");
  });
  afterAll(() => workspace.cleanup());

  it("loads the native extension wherever npm ci had a C compiler", async () => {
    const opened = await openDuckDb();
    try {
      if (hasCompiler() && process.env.LAKESWAP_NATIVE !== "off") expect(opened.signing).toEqual({ form: "native" });
      expect(opened.signing.form).toBe(opened.signing.reason === undefined ? "native" : "sql");
    } finally {
      opened.instance.closeSync();
    }
  });

  it("passes DOUBLE and FLOAT to the extension as their declared type (it reads their bits), never as text", () => {
    const signed = signatureColumnOrder([{ name: "d", type: "DOUBLE" }, { name: "f", type: "FLOAT" }, { name: "s", type: "VARCHAR" }]);
    const sql = signatureQuery("t", ["p"], signed, "native");
    expect(sql).toContain(`lakeswap_signature(CAST("d" AS DOUBLE), CAST("f" AS FLOAT), CAST("s" AS VARCHAR))`);
    expect(sql).not.toMatch(/printf|md5/);
  });

  it.runIf(existsSync(NATIVE_EXTENSION_PATH))("signs doubles and floats as the SQL form does, NaN as NULL whether the column is nullable or not", async () => {
    const opened = await openDuckDb();
    const sql = await openDuckDb({ native: false });
    try {
      expect(opened.signing).toEqual({ form: "native" });
      const run = async (db: OpenedDuckDb, nullable: boolean): Promise<unknown[][]> => {
        const connection = await db.instance.connect();
        try {
          await connection.run(
            "CREATE OR REPLACE TABLE n AS SELECT (range % 4)::VARCHAR AS p, CASE WHEN range % 3 = 0 THEN 'nan'::DOUBLE ELSE range * 0.1 END AS d, " +
              "CASE WHEN range % 5 = 0 THEN 'nan'::FLOAT ELSE (range * 0.1)::FLOAT END AS f FROM range(200)",
          );
          const signed = signatureColumnOrder([{ name: "d", type: "DOUBLE", nullable }, { name: "f", type: "FLOAT", nullable }]);
          return (await connection.runAndReadAll(signatureQuery("n", ["p"], signed, db.signing.form))).getRowsJS();
        } finally {
          connection.closeSync();
        }
      };
      for (const nullable of [true, false]) expect(await run(opened, nullable)).toEqual(await run(sql, nullable));
    } finally {
      opened.instance.closeSync();
      sql.instance.closeSync();
    }
  });

  it.runIf(existsSync(NATIVE_EXTENSION_PATH))(
    "signs texts as the SQL form does across chunks, columns and queries: its per-thread cache of short texts never answers for another text",
    async () => {
      const opened = await openDuckDb();
      const sql = await openDuckDb({ native: false });
      try {
        // More distinct short texts than the cache holds, repeated out of order over many chunks, the same texts in two
        // columns, texts of 12 and 13 bytes (inline and not), empty ones and NULLs; then the same query again (a warm
        // cache) and other texts of the same lengths.
        const run = async (db: OpenedDuckDb, salt: string): Promise<unknown[][]> => {
          const connection = await db.instance.connect();
          try {
            await connection.run(
              `CREATE OR REPLACE TABLE texts AS SELECT (range % 7)::VARCHAR AS p, ` +
                `CASE WHEN range % 97 = 0 THEN NULL WHEN range % 89 = 0 THEN '' ELSE '${salt}' || ((range * 7919) % 40000)::VARCHAR END AS a, ` +
                `CASE WHEN range % 3 = 0 THEN lpad(((range * 31) % 50000)::VARCHAR, 12, 'x') ELSE lpad((range % 50000)::VARCHAR, 13, 'y') END AS b, ` +
                `'${salt}' || ((range * 104729) % 40000)::VARCHAR AS c FROM range(300000)`,
            );
            const signed = signatureColumnOrder([{ name: "a", type: "VARCHAR" }, { name: "b", type: "VARCHAR" }, { name: "c", type: "VARCHAR" }]);
            const query = signatureQuery("texts", ["p"], signed, db.signing.form);
            const first = (await connection.runAndReadAll(query)).getRowsJS();
            expect((await connection.runAndReadAll(query)).getRowsJS()).toEqual(first);
            return first;
          } finally {
            connection.closeSync();
          }
        };
        for (const salt of ["k", "q"]) expect(await run(opened, salt)).toEqual(await run(sql, salt));
        expect(await run(opened, "k")).not.toEqual(await run(opened, "q"));
      } finally {
        opened.instance.closeSync();
        sql.instance.closeSync();
      }
    },
    120_000,
  );

  it("the load check catches a native extension that disagrees with the reference", async () => {
    const opened = await openDuckDb();
    const connection = await opened.instance.connect();
    try {
      if (opened.signing.form === "native") {
        const honest = async (sql: string): Promise<unknown[][]> => (await connection.runAndReadAll(sql)).getRowsJS();
        expect(await checkNativeLanes(honest)).toBeUndefined();
      }
      // An extension off by one in a lane (or one answering nothing) is refused, with what differs.
      const offByOne = async (): Promise<unknown[][]> => [[1n, 2n]];
      expect(await checkNativeLanes(offByOne)).toMatch(/native extension's lanes \(1, 2\) differ from the reference/);
      expect(await checkNativeLanes(async () => [])).toMatch(/differ from the reference/);
    } finally {
      connection.closeSync();
      opened.instance.closeSync();
    }
  });

  it("the load check runs once per build of the extension and DuckDB version: its verdict is kept beside the extension", async () => {
    const out = path.join(workspace.dir, "checked-once");
    const extension = path.join(out, "lakeswap_signature.duckdb_extension");
    mkdirSync(out);
    copyFileSync(NATIVE_EXTENSION_PATH, extension);
    const record = `${extension}.checked`;
    const digest = createHash("sha256").update(readFileSync(extension)).digest("hex");
    const open = async (): Promise<string> => {
      const opened = await openDuckDb({ extensionPath: extension });
      opened.instance.closeSync();
      return opened.signing.form;
    };
    expect(await open()).toBe("native");
    expect(readFileSync(record, "utf8")).toBe(`${digest} duckdb ${version()}\n`);
    // A verdict kept for other bytes (another build) is not this build's: it is checked again, and the verdict replaced.
    writeFileSync(record, `${"0".repeat(64)} duckdb ${version()}\n`);
    expect(await open()).toBe("native");
    expect(readFileSync(record, "utf8")).toBe(`${digest} duckdb ${version()}\n`);
    // Where nothing can be written beside it, every open checks, and loads it.
    rmSync(record);
    chmodSync(out, 0o555);
    try {
      if (process.getuid?.() !== 0) {
        expect(await open()).toBe("native");
        expect(existsSync(record)).toBe(false);
      }
    } finally {
      chmodSync(out, 0o755);
    }
  });

  it("without a C compiler the build says so, exits 0, and signatures fall back to the SQL form with the same results", async () => {
    const out = path.join(workspace.dir, "no-compiler");
    const printed = buildNative(out, { CC: path.join(workspace.dir, "no-such-cc") });
    expect(printed).toMatch(/could not build native\/lakeswap_signature\.c .*signatures use the SQL form/);
    const extension = path.join(out, "lakeswap_signature.duckdb_extension");
    expect(existsSync(extension)).toBe(false);

    const fallback = await openDuckDb({ extensionPath: extension });
    const sql = await openDuckDb({ native: false });
    try {
      expect(fallback.signing).toMatchObject({ form: "sql", reason: expect.stringContaining("the native extension is not built") });
      expect(await signatures(fallback)).toEqual(await signatures(sql));
    } finally {
      fallback.instance.closeSync();
      sql.instance.closeSync();
    }
  });

  it("LAKESWAP_NATIVE=off skips the build", () => {
    const out = path.join(workspace.dir, "off");
    expect(buildNative(out, { LAKESWAP_NATIVE: "off" })).toMatch(/skipped \(LAKESWAP_NATIVE=off\)/);
    expect(existsSync(path.join(out, "lakeswap_signature.duckdb_extension"))).toBe(false);
  });

  it.runIf(existsSync(NATIVE_EXTENSION_PATH))("a damaged extension file is not loaded; signatures stay right in the SQL form", async () => {
    const damaged = path.join(workspace.dir, "damaged.duckdb_extension");
    copyFileSync(NATIVE_EXTENSION_PATH, damaged);
    // The footer names the platform DuckDB checks before loading: claim another one.
    const bytes = readFileSync(damaged);
    const platform = bytes.indexOf(Buffer.from("linux_amd64"), bytes.length - 600);
    bytes.write(platform >= 0 ? "windows_arm" : "\0\0\0\0", platform >= 0 ? platform : bytes.length - 300, "ascii");
    writeFileSync(damaged, bytes);

    const opened = await openDuckDb({ extensionPath: damaged });
    const sql = await openDuckDb({ native: false });
    try {
      expect(opened.signing).toMatchObject({ form: "sql", reason: expect.stringMatching(/the native extension did not load/) });
      expect(await signatures(opened)).toEqual(await signatures(sql));
    } finally {
      opened.instance.closeSync();
      sql.instance.closeSync();
    }
  });

  it.runIf(existsSync(NATIVE_EXTENSION_PATH))("a fresh build loads, passes its check, and signs as the SQL form does", async () => {
    const out = path.join(workspace.dir, "built");
    expect(buildNative(out)).toMatch(/built .*lakeswap_signature\.duckdb_extension for \w+/);
    const opened = await openDuckDb({ extensionPath: path.join(out, "lakeswap_signature.duckdb_extension") });
    const sql = await openDuckDb({ native: false });
    try {
      expect(opened.signing).toEqual({ form: "native" });
      expect(await signatures(opened)).toEqual(await signatures(sql));
    } finally {
      opened.instance.closeSync();
      sql.instance.closeSync();
    }
  });
});
