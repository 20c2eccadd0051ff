/**
 * dt-sql-parser's Trino grammar, imported from its own folder: the package's
 * index loads the parsers of all eight dialects it ships (20 MB of
 * JavaScript, about 5 s per process on a busy machine), and every test file
 * that starts the Athena emulator, or a child process that imports the test
 * fixtures, would pay that for one dialect.
 */
export { TrinoSQL } from "dt-sql-parser/dist/parser/trino/index.js";
export { TrinoSqlListener } from "dt-sql-parser/dist/lib/trino/TrinoSqlListener.js";
