// SPDX-License-Identifier: LGPL-2.1-or-later
// An MCP client made with the official SDK (@modelcontextprotocol/sdk): it starts
// `sandboxctl mcp` over stdio, lists the tools, calls the ones named on the command line
// and prints what it got as one JSON object (with the protocol version it negotiated). Run by test_mcp.py:
//
//   node mcp-client.mjs SDK_DIR SANDBOXCTL CALLS_JSON [ARGS_FOR_SANDBOXCTL_MCP...]
//
// CALLS_JSON is a list of {"name": tool, "arguments": {...}}; an argument value
// "$session" is replaced by the session id of the last result that had one, and "$N.key"
// by the value of key in the data of the result of call N (from 0), e.g. "$0.request_id".
// A call may also say "progress": true (its notifications/progress are collected in the
// call's "progress"), and "cancel_after_ms": N (the SDK cancels it after N ms: it sends
// notifications/cancelled, and the call ends as a protocolError).

import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, sandboxctl, callsJson, ...mcpArgs] = process.argv.slice(2);
// the SDK lives in the build directory, not next to this script
const require = createRequire(path.join(path.resolve(sdkDir), "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const transport = new StdioClientTransport({
    command: sandboxctl,
    args: ["mcp", ...mcpArgs],
    env: { PATH: process.env.PATH, LANG: "C.UTF-8" },
    stderr: "inherit",
});
const client = new Client({ name: "sandboxd-integration-test", version: "1.0.0" });
// the SDK keeps the negotiated version to itself: it hands it to a transport that asks
// (the HTTP ones, for their header), so ask as one
let protocolVersion = null;
transport.setProtocolVersion = (v) => { protocolVersion = v; };
await client.connect(transport);

const out = {
    protocolVersion,
    server: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    tools: (await client.listTools()).tools,
    calls: [],
};

let session = null;
for (const call of JSON.parse(callsJson)) {
    const earlier = (v) => {
        const m = typeof v === "string" ? /^\$(\d+)\.(\w+)$/.exec(v) : null;
        return m ? out.calls[Number(m[1])]?.body?.data?.[m[2]] : v;
    };
    const args = Object.fromEntries(Object.entries(call.arguments ?? {}).map(
        ([k, v]) => [k, v === "$session" ? session : earlier(v)]));
    const progress = [];
    const options = {};
    if (call.progress)
        options.onprogress = (p) => progress.push(p);
    if (call.cancel_after_ms)
        options.signal = AbortSignal.timeout(call.cancel_after_ms);
    const began = Date.now();
    let result;
    try {
        result = await client.callTool({ name: call.name, arguments: args }, undefined, options);
    } catch (e) {
        out.calls.push({ name: call.name, protocolError: { code: e.code, message: e.message }, progress,
                         ms: Date.now() - began });
        continue;
    }
    const text = result.content?.[0]?.text;
    const body = text === undefined ? null : JSON.parse(text);
    const id = body?.data?.session_id ?? (call.name === "sandbox_create_session" ? body?.data?.id : undefined);
    if (id)
        session = id;
    out.calls.push({ name: call.name, isError: result.isError ?? false, body, structured: result.structuredContent,
                     progress, ms: Date.now() - began });
}

await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
