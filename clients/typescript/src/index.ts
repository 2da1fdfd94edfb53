// SPDX-License-Identifier: LGPL-2.1-or-later
// @sandboxd/client: a client for sandboxd's HTTP API.
export * from "./client.js";
export * from "./errors.js";
export { DEFAULT_SOCKET, parseNodes, scopeHeader, type TransportOptions, type Body } from "./transport.js";
export type { components, paths, operations } from "./schema.js";
