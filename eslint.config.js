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
    // The lake holds the invariants once, over the ports, and the model is pure values: neither reaches a file, AWS or
    // DuckDB itself (config resolves files to text and fingerprints before they see them). Which folder may import
    // which is the floors rule of .dependency-cruiser.cjs (`npm run lint` runs both).
    files: ["src/model/**/*.ts", "src/lake/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: ["node:fs", "node:fs/*", "fs", "fs/*", "node:path", "path", "node:child_process"], message: "the lake and the model do not touch files: a port (store, landing) or config does" },
            { group: ["@aws-sdk/*", "@duckdb/*"], message: "the lake uses the ports, never AWS or DuckDB directly" },
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
