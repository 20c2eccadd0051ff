/** The collector server's default bounds, in a module of their own so that the CLI's `--help` loads no node:http. */

/** The default largest request body, after gunzip: 16 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

/** The default most body bytes held at once: 256 MiB (16 bodies of the largest size). */
export const DEFAULT_MAX_BYTES_IN_FLIGHT = 256 * 1024 * 1024;

/** The default most connections open at once. */
export const DEFAULT_MAX_CONNECTIONS = 1024;
