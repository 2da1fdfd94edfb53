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
//
// Other entries of CALLS_JSON (each adds an entry to "calls" too):
//   {"method": "resources/read", "params": {...}}: a request other than tools/call, sent as
//     it is (resources/list, resources/templates/list, resources/read, resources/subscribe,
//     resources/unsubscribe with the SDK's own functions, any other with client.request);
//     in params, "$session" inside a string becomes the session id, "$N.key" as above.
//     Recorded as {"method", "result"} or {"method", "rpcError": {code, message, data}}.
//   {"wait": "notifications/resources/updated", "uri": ..., "since": N, "timeout_ms": T}:
//     waits (at most T, default 15000) for a notification of that method (and params.uri)
//     that came once N entries of "calls" were done (default: any); {"wait", "notification"}
//     (null when none came).
//   {"sleep_ms": T}
// Every notification of the resources is recorded in "notifications" as {method, params,
// after}, after being the number of entries of "calls" done when it came.

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
const types = require("@modelcontextprotocol/sdk/types.js");
const client = new Client({ name: "sandboxd-integration-test", version: "1.0.0" });
// the SDK keeps the negotiated version to itself: it hands it to a transport that asks
// (the HTTP ones, for their header), so ask as one
let protocolVersion = null;
transport.setProtocolVersion = (v) => { protocolVersion = v; };
const notifications = [];
let waiter = null;
const outCalls = [];
for (const schema of [types.ResourceUpdatedNotificationSchema, types.ResourceListChangedNotificationSchema])
    client.setNotificationHandler(schema, (n) => {
        notifications.push({ method: n.method, params: n.params ?? null, after: outCalls.length });
        waiter?.();
    });
await client.connect(transport);

const out = {
    protocolVersion,
    server: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    tools: (await client.listTools()).tools,
    calls: outCalls,
    notifications,
};

const sdkMethods = {
    "resources/list": (p) => client.listResources(p),
    "resources/templates/list": (p) => client.listResourceTemplates(p),
    "resources/read": (p) => client.readResource(p),
    "resources/subscribe": (p) => client.subscribeResource(p),
    "resources/unsubscribe": (p) => client.unsubscribeResource(p),
};

async function waitFor(call) {
    const match = (n) => n.method === call.wait && n.after >= (call.since ?? 0) &&
        (call.uri === undefined || n.params?.uri === call.uri);
    const deadline = Date.now() + (call.timeout_ms ?? 15000);
    let found = notifications.find(match);
    while (!found && Date.now() < deadline) {
        await new Promise((resolve) => {
            waiter = resolve;
            setTimeout(resolve, Math.max(0, deadline - Date.now()));
        });
        waiter = null;
        found = notifications.find(match);
    }
    return found ?? null;
}

let session = null;
for (const call of JSON.parse(callsJson)) {
    const earlier = (v) => {
        const m = typeof v === "string" ? /^\$(\d+)\.(\w+)$/.exec(v) : null;
        return m ? out.calls[Number(m[1])]?.body?.data?.[m[2]] : v;
    };
    if (call.sleep_ms !== undefined) {
        await new Promise((resolve) => setTimeout(resolve, call.sleep_ms));
        out.calls.push({ sleep_ms: call.sleep_ms });
        continue;
    }
    if (call.wait !== undefined) {
        const subst = { ...call, uri: typeof call.uri === "string" ? call.uri.replaceAll("$session", session) : call.uri };
        out.calls.push({ wait: call.wait, notification: await waitFor(subst) });
        continue;
    }
    if (call.method !== undefined) {
        const substString = (x) => typeof x === "string" ? x.replaceAll("$session", session) : x;
        const subst = (v) => typeof v === "string" ? substString(earlier(v))
            : Array.isArray(v) ? v.map(subst)
            : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, subst(x)]))
            : v;
        const params = subst(call.params ?? {});
        try {
            const fn = sdkMethods[call.method];
            const result = fn ? await fn(params)
                : await client.request({ method: call.method, params }, types.ResultSchema);
            out.calls.push({ method: call.method, result });
        } catch (e) {
            out.calls.push({ method: call.method, rpcError: { code: e.code, message: e.message, data: e.data ?? null } });
        }
        continue;
    }
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
