// The floors of src/ (../shared/DESIGN.md, "Architecture"): every import points down. A folder may import its own floor
// and the floors below it; `npm run lint` fails on an import that runs up and on any circle.
const floors = [
  ["model"],
  ["shared"],
  ["duckdb"],
  ["store", "catalog", "engine", "landing", "sinks", "sources"],
  ["lake"],
  ["config"],
  ["pipeline", "ingest"],
  ["open"],
  ["demo", "cli"],
];

const folder = (names) => `^src/(${names.join("|")})/`;

/** For each floor, the folders above it: none of its files may import them. */
const upImports = floors.slice(0, -1).map((floor, index) => ({
  name: `${floor.join("-")}-imports-down`,
  comment: `src/{${floor.join(",")}} sits below src/{${floors.slice(index + 1).flat().join(",")}}: it must not import them`,
  severity: "error",
  from: { path: folder(floor) },
  to: { path: folder(floors.slice(index + 1).flat()) },
}));

/* global module */
module.exports = {
  forbidden: [
    ...upImports,
    { name: "no-circular", comment: "a circle of imports: break it by moving the shared part down a floor", severity: "error", from: {}, to: { circular: true } },
    { name: "only-open-names-adapters", comment: "only src/open names the adapters (and the ports' own folders, the CLI's demo)", severity: "error",
      from: { path: "^src/(lake|pipeline|ingest|config)/" },
      to: { path: "^src/(store/(local-store|s3/)|catalog/(local|glue)-catalog|engine/(duckdb|athena)-engine|landing/duckdb/|sinks/postgres/|sources/http/)", dependencyTypesNot: ["type-only"] } },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
  },
};
