import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", ".vitest/", "node_modules/", "lake/", "coverage/", "build/", ".prof/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: "readonly", console: "readonly", setTimeout: "readonly", clearTimeout: "readonly", setInterval: "readonly", clearInterval: "readonly", Buffer: "readonly", URL: "readonly" } },
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
  {
    // The core holds the invariants once, over the ports: it never reaches a file, an adapter, AWS, DuckDB or the
    // config loader itself (config resolves files to text and fingerprints before core sees them).
    files: ["src/core/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: ["node:fs", "node:fs/*", "fs", "fs/*", "node:path", "path", "node:child_process"], message: "core does not touch files: a port (store, landing) or config does" },
            { group: ["@aws-sdk/*", "@duckdb/*"], message: "core uses the ports, never AWS or DuckDB directly" },
            { group: ["../config/*", "../cli/*", "../store/*-store.js", "../catalog/local-catalog.js", "../catalog/glue-catalog.js", "../engine/*-engine.js", "../engine/duckdb-*.js", "../landing/duckdb*"], message: "core imports ports only, never an adapter or the config loader", allowTypeImports: true },
          ],
        },
      ],
    },
  },
  {
    // Tests poke at parsed YAML and JSON reports, which are untyped by nature.
    files: ["test/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
