import { rm } from "node:fs/promises";
import path from "node:path";
import { errorMessage } from "../model/errors.js";
import { mapLimited } from "../shared/map-limited.js";
import { freshProcessFolder } from "../shared/process-folders.js";
import { HttpFetcher } from "./http/http-fetcher.js";
import type { FetchRequest, FetchedPartitionFile, FetchedSource } from "./source.js";

/**
 * Fetches each partition of a request into its own JSONL file in a fresh temporary folder, `source.concurrency`
 * at a time. A partition whose fetch fails (after the fetcher's retries) is reported with its error; the others
 * are fetched all the same.
 */
export async function fetchSource(request: FetchRequest, env: NodeJS.ProcessEnv = process.env): Promise<FetchedSource> {
  HttpFetcher.check(request.source.spec, [request.key], env);
  const fetcher = new HttpFetcher(request.source.spec, { env });
  // A sync killed while it fetched leaves its folder behind: the next fetch removes it.
  const dir = await freshProcessFolder("lakeswap-fetch-");
  let done = 0;
  try {
    const partitions = await mapLimited(request.values, request.source.concurrency, async (value): Promise<FetchedPartitionFile> => {
      const file = path.join(dir, `${request.key}=${value}.jsonl`);
      try {
        const fetched = await fetcher.fetchPartition({ [request.key]: value }, request.columns, file);
        return { value, file, rows: fetched.rows };
      } catch (error) {
        return { value, rows: 0, error: errorMessage(error) };
      } finally {
        done += 1;
        request.onFetched?.(value, done, request.values.length);
      }
    });
    return { partitions, release: () => rm(dir, { recursive: true, force: true }) };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}
