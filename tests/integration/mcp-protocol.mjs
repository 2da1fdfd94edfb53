// SPDX-License-Identifier: LGPL-2.1-or-later
// Protocol scenarios of `sandboxctl mcp` driven by the official SDK client: concurrency,
// progress and cancellation, with the times the client saw. Run by test_mcp_protocol.py and
// bench/mcp.py:
//
//   node mcp-protocol.mjs SDK_DIR SANDBOXCTL SCENARIO ARGS_JSON [ARGS_FOR_SANDBOXCTL_MCP...]
//
// It prints one JSON object with the scenario's measurements.

import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, sandboxctl, scenario, argsJson, ...mcpArgs] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(sdkDir), "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const args = JSON.parse(argsJson);
const transport = new StdioClientTransport({
    command: sandboxctl,
    args: ["mcp", ...mcpArgs],
    env: { PATH: process.env.PATH, LANG: "C.UTF-8" },
    stderr: "inherit",
});
const client = new Client({ name: "sandboxd-protocol-test", version: "1.0.0" });
await client.connect(transport);

const now = () => performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const body = (result) => JSON.parse(result.content[0].text);
const exec = (argv, options = {}, extra = {}) =>
    client.callTool({ name: "sandbox_exec", arguments: { session_id: args.session_id, argv, ...extra } },
                    undefined, { timeout: 120000, ...options });

const out = { scenario };

if (scenario === "pings") {
    // pings with nothing else in flight: the baseline of "ping"
    out.pings = [];
    for (let i = 0; i < (args.pings ?? 5); i++) {
        const t = now();
        await client.ping();
        out.pings.push({ ms: now() - t });
        await sleep(50);
    }
} else if (scenario === "ping") {
    // pings while a long call runs: each answer's latency, and whether the call was still running
    let done = false;
    const t0 = now();
    const long = exec(["sleep", String(args.long_s)]).then((r) => { done = true; return r; });
    await sleep(args.delay_ms ?? 300);
    out.pings = [];
    for (let i = 0; i < (args.pings ?? 5); i++) {
        const t = now();
        await client.ping();
        out.pings.push({ ms: now() - t, call_running: !done });
        await sleep(50);
    }
    out.long = body(await long);
    out.long_ms = now() - t0;
} else if (scenario === "parallel") {
    // n calls at once, and the same n one after the other
    const argv = args.argv ?? ["sleep", String(args.sleep_s)];
    let t = now();
    const results = await Promise.all(Array.from({ length: args.n }, () => exec(argv)));
    out.parallel_ms = now() - t;
    out.parallel = results.map(body);
    if (args.serial) {
        t = now();
        for (let i = 0; i < args.n; i++)
            await exec(argv);
        out.serial_ms = now() - t;
    }
} else if (scenario === "progress") {
    out.progress = [];
    const t0 = now();
    const r = await exec(["sh", "-c", args.script], {
        onprogress: (p) => out.progress.push({ ...p, at_ms: now() - t0 }),
        resetTimeoutOnProgress: true,
    });
    out.result = body(r);
} else if (scenario === "cancel") {
    // the client gives up after cancel_ms; then a short call must not wait for the long one
    const ac = new AbortController();
    const t0 = now();
    const long = exec(["sleep", String(args.long_s)], { signal: ac.signal });
    await sleep(args.cancel_ms);
    ac.abort("the test gave up");
    try {
        await long;
        out.long = "answered";
    } catch (e) {
        out.long = "rejected";
        out.error = String(e?.message ?? e);
    }
    out.cancelled_after_ms = now() - t0;
    const t = now();
    out.next = body(await exec(["echo", "next"]));
    out.next_ms = now() - t;
} else if (scenario === "timeout") {
    // the SDK's own request timeout (what an agent's client does): it cancels the request
    const t0 = now();
    try {
        await exec(["sleep", String(args.long_s)], { timeout: args.timeout_ms });
        out.long = "answered";
    } catch (e) {
        out.long = "rejected";
        out.error = String(e?.message ?? e);
    }
    out.gave_up_after_ms = now() - t0;
} else {
    throw new Error("unknown scenario " + scenario);
}

await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
