#!/usr/bin/env node
// The published entry point runs the compiled CLI, bundled (scripts/bundle.mjs); `npm ci` builds it (the `prepare` script).
import { main } from "../dist/bundle/main.mjs";

process.exitCode = await main(process.argv);
