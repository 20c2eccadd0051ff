import { createHash, timingSafeEqual } from "node:crypto";

/**
 * Who may post: each pipeline's bearer token (`Authorization: Bearer <token>`), compared in constant time. A post to
 * a pipeline with a token, to one the server does not know, and GET /metrics need a token (its own, or for the last
 * two any of them); GET /healthz answers its status to anyone and its detail only with a token.
 */
export interface IngestAuth {
  /** The token a post to `pipeline` must carry; undefined: the pipeline is known and takes posts without one; null: unknown. */
  tokenFor(pipeline: string): string | undefined | null;
  /** Every token: a request that needs any one of them takes any. */
  readonly tokens: readonly string[];
}

/** The SHA-256 of a token: digests of equal length, so that comparing them takes the same time whatever the token. */
export function tokenDigest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Whether an Authorization header carries a bearer token of `digests`, compared in constant time with every one. */
export function bearerMatches(authorization: string | undefined, digests: readonly Buffer[]): boolean {
  const given = tokenDigest(/^Bearer +(\S+) *$/i.exec(authorization ?? "")?.[1] ?? "");
  let matched = false;
  for (const digest of digests) matched = timingSafeEqual(given, digest) || matched;
  return matched && authorization !== undefined;
}
