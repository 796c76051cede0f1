// A typed client for the Quire gateway: the paths and schemas are generated from
// openapi/gateway.json (src/schema.d.ts, `make openapi`), the calls go through openapi-fetch.
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };
/** Typed by the JSON answers; other representations (NDJSON, raw bytes, the bulk entries
 * format) are read with `parseAs: "text" | "arrayBuffer" | "stream"` and an Accept header. */
export type QuireClient = Client<paths, "application/json">;
/** The body of every error answer: `{"error": code, "message": text}` (docs/api.md). */
export type QuireErrorBody = { error: string; message: string };

/** The thrown form of an error answer: its HTTP status and docs/api.md code. */
export class QuireError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = "QuireError";
  }
}

export interface Options {
  /** The gateway's base URL, e.g. http://127.0.0.1:8080 */
  baseUrl: string;
  /** The API (or admin) token, when the gateway has one. */
  token?: string;
  fetch?: typeof globalThis.fetch;
}

/** A client for one gateway; every call is typed by the gateway's OpenAPI document. */
export function createQuireClient(options: Options): QuireClient {
  const headers: Record<string, string> = {};
  if (options.token) headers.Authorization = `Bearer ${options.token}`;
  return createClient<paths, "application/json">({ baseUrl: options.baseUrl, headers, fetch: options.fetch });
}

/** The data of a call's answer, or a QuireError with the answer's code. */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await call;
  if (error !== undefined || !response.ok) {
    const body = (error ?? {}) as Partial<QuireErrorBody>;
    throw new QuireError(response.status, body.error ?? String(response.status), body.message ?? "");
  }
  return data as T;
}
