// The sink contract (./sink.contract.ts) against the PostgreSQL sink, on the run's shared cluster (a database of each
// test's own).
import { PostgresSink } from "../../src/sinks/postgres/postgres-sink.js";
import type { Sink } from "../../src/sinks/sink.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { sinkContract } from "./sink.contract.js";

const postgres = usePostgres("contract");

if (postgresAvailable()) {
  sinkContract("PostgresSink", async () => {
    const { url, query } = await postgres.database();
    const opened: Sink[] = [];
    return {
      open(mode, primaryKey) {
        const sink = new PostgresSink({ kind: "postgres", url, maskedUrl: url, schema: "public", table: "orders", mode, primaryKey, hardDelete: false });
        opened.push(sink);
        return sink;
      },
      async rows() {
        const live = await query<{ row: string }>(
          `SELECT id || '|' || COALESCE(amount::text, 'null') || '|' || day AS row FROM public.orders` +
            ` WHERE NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'orders' AND column_name = '_lakeswap_deleted_at')` +
            ` OR (to_jsonb(orders) ->> '_lakeswap_deleted_at') IS NULL ORDER BY 1`,
        );
        return live.map((r) => r.row);
      },
      cleanup: async () => {
        for (const sink of opened) await sink.close();
      },
    };
  });
}
