#!/usr/bin/env node
// The published entry point runs the compiled CLI; `npm ci` builds it (the `prepare` script).
import { main } from "../dist/cli/main.js";

process.exitCode = await main(process.argv);
