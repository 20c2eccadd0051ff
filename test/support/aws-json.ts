/**
 * What the Glue and Athena emulators share: the AWS JSON 1.1 protocol over
 * HTTP (request body in, JSON out with timestamps as epoch seconds) and the
 * client configuration their tests hand to the real SDK clients.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

/** Where the emulators listen. */
export const HOST = "127.0.0.1";

/** Any keys do: the emulators do not check signatures. */
export const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" } as const;

/**
 * Two access key ids stand for refused credentials, as in the S3 test server:
 * `denied` (valid, but a policy allows nothing: AccessDeniedException naming
 * the action and resource) and `unknown` (UnrecognizedClientException).
 */
export function credentialRefusal(
  headers: IncomingMessage["headers"],
  action: string,
  resource: string,
): { code: string; message: string } | undefined {
  const accessKey = /Credential=([^/,\s]+)\//.exec(String(headers.authorization ?? ""))?.[1];
  if (accessKey === "unknown") return { code: "UnrecognizedClientException", message: "The security token included in the request is invalid." };
  if (accessKey === "denied") {
    return {
      code: "AccessDeniedException",
      message: `User: arn:aws:iam::123456789012:user/denied is not authorized to perform: ${action} on resource: ${resource} because no identity-based policy allows the ${action} action`,
    };
  }
  return undefined;
}

/** A ready configuration for an SDK client (`new GlueClient(...)`, `new AthenaClient(...)`). */
export interface EmulatorClientConfig {
  readonly endpoint: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

export type JsonObject = Record<string, unknown>;

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A request's body as text. */
export async function readText(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Answers with a JSON 1.1 body; Dates go out as epoch seconds, as AWS JSON protocols send timestamps. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body, function (this: Record<string, unknown>, key: string, replaced: unknown) {
    const raw = this[key];
    return raw instanceof Date ? raw.getTime() / 1000 : replaced;
  });
  res.writeHead(status, {
    "content-type": "application/x-amz-json-1.1",
    "content-length": Buffer.byteLength(text),
    "x-amzn-requestid": randomUUID(),
    ...headers,
  });
  res.end(text);
}
