// The esbuild options of the CLI bundle, shared by the published build (scripts/bundle.mjs) and the test suite's
// build of the same bundle from the TypeScript sources (test/support/build-bundles.ts), so the tests run what ships.

/**
 * The AWS SDK is imported when a command first needs it (`await import(...)`); in a CommonJS bundle such an import
 * must become a require() when it is first reached, as esbuild makes of bundled modules: a script compiled from V8's
 * code cache cannot import(). Each such import is served by a small module that requires the package.
 */
const requireExternalsOnDemand = {
  name: "require-externals-on-demand",
  setup(build) {
    build.onResolve({ filter: /^@aws-sdk\// }, (args) =>
      args.kind === "dynamic-import" ? { path: args.path, namespace: "required-on-demand" } : { path: args.path, external: true },
    );
    build.onLoad({ filter: /.*/, namespace: "required-on-demand" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
  },
};

/**
 * Options for esbuild's build() of a CommonJS bundle of the CLI. The AWS SDK and DuckDB's native binding stay
 * outside, loaded from node_modules when a command first needs them. The bundle must sit two folders below the
 * package root (as dist/bundle/cli.cjs does): the modules find files next to the package root from their own URL.
 */
export function cliBundleOptions() {
  return {
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    external: ["@duckdb/node-bindings", "@aws-sdk/*"],
    define: { "import.meta.url": "__lakeswapModuleUrl" },
    banner: { js: 'const __lakeswapModuleUrl = require("node:url").pathToFileURL(__filename).href;' },
    plugins: [requireExternalsOnDemand],
    // Without blanks and comments the bundle is 40% smaller: every command reads it, decodes it and checks its digest
    // before the first line runs. Names stay, so a stack trace still names its functions.
    minifyWhitespace: true,
    legalComments: "none",
    logLevel: "warning",
  };
}
