// Child-process entry for tests: runs the CLI from the TypeScript sources, so tests never depend on a stale build.
import { main } from "../../src/cli/main.js";

process.exitCode = await main(process.argv);
