/**
 * The loop of a child reader (./reader-loop.ts, ./catalog-reader-loop.ts): reads in a tight loop until its stdin
 * closes, printing one JSON line per read, `{"start","end",...fields}` or `{"start","end","error"}`.
 */
export async function readUntilStdinEnds(read: () => Promise<Record<string, unknown>>): Promise<void> {
  let stopping = false;
  process.stdin.on("end", () => (stopping = true));
  process.stdin.resume();
  while (!stopping) {
    const start = Date.now();
    try {
      const fields = await read();
      process.stdout.write(`${JSON.stringify({ start, end: Date.now(), ...fields })}\n`);
    } catch (error) {
      process.stdout.write(`${JSON.stringify({ start, end: Date.now(), error: error instanceof Error ? error.message : String(error) })}\n`);
    }
  }
}
