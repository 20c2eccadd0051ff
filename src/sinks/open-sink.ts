import type { Sink, SinkSpec } from "./sink.js";

/** Opens the adapter of a declared sink (PostgreSQL; loaded on first use, so a sync without sinks never loads `pg`). */
export async function openSink(spec: SinkSpec): Promise<Sink> {
  const { PostgresSink } = await import("./postgres/postgres-sink.js");
  return new PostgresSink(spec);
}
