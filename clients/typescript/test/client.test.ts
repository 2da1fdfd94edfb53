// SPDX-License-Identifier: LGPL-2.1-or-later
// Live tests of @sandboxd/client against a running sandboxd (node --test), driven by
// tests/integration/test_client_typescript.py inside the testbed. Environment:
//   SANDBOXD_TEST_SOCKET   the unix socket (the caller is root)
//   SANDBOXD_TEST_TCP_URL  http://127.0.0.1:8421
//   SANDBOXD_TEST_KEY      a tenant's key for TCP
//   SANDBOXD_TEST_USER     a user name no other test uses (sessions are made for it)

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Readable, Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import {
    Client, ConflictError, ForbiddenError, NotFoundError, SandboxdError, Session, TransportError, UnauthorizedError,
    UnavailableError, UnsupportedError, WrongNodeError, parseNodes, scopeHeader, type ExecEvent,
} from "../src/index.js";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

function env(name: string): string {
    const v = process.env[name];
    if (!v)
        throw new Error(`${name} is not set: run through tests/integration/test_client_typescript.py`);
    return v;
}

const SOCKET = env("SANDBOXD_TEST_SOCKET");
const TCP_URL = env("SANDBOXD_TEST_TCP_URL");
const KEY = env("SANDBOXD_TEST_KEY");
const USER = env("SANDBOXD_TEST_USER");

const unix = new Client({ url: "unix:" + SOCKET });
let session: Session;

before(async () => {
    session = await unix.createSession({ user: USER, workspace: "ts-main" });
});

after(async () => {
    await session?.close({ purge: true }).catch(() => undefined);
    unix.close();
});

describe("sessions", () => {
    test("health", async () => {
        const h = await unix.health();
        assert.ok(h.status === "ok" || h.status === "degraded", JSON.stringify(h));
        assert.equal(typeof h.version, "string");
    });

    test("create is idempotent, get, list, touch", async () => {
        assert.equal(session.created, true);
        assert.equal(session.info.state, "active");
        assert.equal(session.info.user, USER);
        assert.match(session.id, /^[a-z][a-z0-9]{0,31}_[0-9a-f]{16}$/);
        const again = await unix.createSession({ user: USER, workspace: "ts-main" });
        assert.equal(again.created, false);
        assert.equal(again.id, session.id);
        const got = await unix.getSession(session.id);
        assert.equal(got.info.workspace, "ts-main");
        const listed = await unix.listSessions({ user: USER });
        assert.deepEqual(listed.map((s) => s.id), [session.id]);
        const before = session.info.last_activity_usec ?? 0;
        const touched = await session.touch();
        assert.ok((touched.last_activity_usec ?? 0) >= before);
    });

    test("options: limits, ttl, network, exec mode; close with purge", async () => {
        const s = await unix.createSession({
            user: USER, workspace: "ts-opts", limits: { tasks_max: 32, memory_max: "256M" }, ttl_s: 600,
            network: { mode: "none" }, exec_mode: "unit",
        });
        assert.equal(s.created, true);
        assert.equal(s.info.limits?.tasks_max, 32);
        assert.equal(s.info.ttl_s, 600);
        assert.equal(s.info.exec_mode, "unit");
        assert.equal((s.info.network as { mode?: string }).mode, "none");
        const closed = await s.close({ purge: true });
        assert.equal(closed.state, "closed");
        await assert.rejects(s.run({ argv: ["true"] }), (e: unknown) =>
            e instanceof ConflictError && e.status === 409 && e.code === "session_not_active");
    });
});

describe("commands", () => {
    test("exec streams typed events, run() gives the result", async () => {
        const stream = await session.exec({ command: "echo out; echo err >&2; printf '\\377\\376'; exit 3", env: { A: "1" } });
        const events: ExecEvent[] = [];
        for await (const ev of stream)
            events.push(ev);
        assert.equal(events[0].type, "accepted");
        assert.equal(events[0].request_id, stream.requestId);
        const last = events[events.length - 1];
        assert.equal(last.type, "exit");
        assert.equal(last.status, "failed");
        assert.equal(last.exit_code, 3);
        const out = Buffer.concat(events.filter((e) => e.type === "stdout").map((e) => e.bytes!));
        const err = Buffer.concat(events.filter((e) => e.type === "stderr").map((e) => e.bytes!));
        assert.deepEqual(out, Buffer.concat([Buffer.from("out\n"), Buffer.from([0xff, 0xfe])]));
        assert.equal(err.toString(), "err\n");
        // offsets grow with each kept line, the last one is the whole log
        for (let i = 1; i < events.length; i++)
            assert.ok(events[i].offset > events[i - 1].offset);
        assert.equal(stream.offset, last.offset);

        const r = await session.run({ argv: ["sh", "-c", "cat; echo \"$A\" >&2"], stdin: "fed", env: { A: "x" }, cwd: "." });
        assert.equal(r.ok, true);
        assert.equal(r.status, "succeeded");
        assert.equal(r.exitCode, 0);
        assert.equal(r.stdoutText, "fed");
        assert.equal(r.stderrText, "x\n");
        assert.equal(typeof r.durationMs, "number");

        const t = await session.run({ argv: ["sleep", "30"], timeoutMs: 300 });
        assert.equal(t.status, "timed_out");
    });

    test("output past OutputMax: a truncated event, live lines that do not count in offsets", async () => {
        const total = 1536 * 1024;
        const stream = await session.exec({ command: `head -c ${total} /dev/zero | tr '\\0' a` });
        let kept = 0, live = 0, truncated = 0, beforeExit = 0;
        for await (const ev of stream) {
            if (ev.type !== "exit")
                beforeExit = ev.offset;
            const raw = ev as { live?: boolean };
            if (ev.type === "stdout")
                raw.live ? (live += ev.bytes!.length) : (kept += ev.bytes!.length);
            else if (ev.type === "truncated") {
                truncated++;
                assert.equal(ev.reason, "output_max");
                assert.equal(ev.stream, "stdout");
            }
        }
        assert.equal(truncated, 1);
        assert.equal(kept + live, total, "an attached client gets every byte");
        assert.ok(live > 0 && kept < total, `kept ${kept}, live ${live}`);
        const r = await session.wait(stream.requestId);
        assert.equal(r.truncated, true);
        assert.equal(r.stdout.length, kept, "a replay has the kept bytes only");
        // re-attached where the exit line starts (the live lines not counted): the exit event alone
        const tail = await session.events(stream.requestId, { offset: beforeExit });
        const after: string[] = [];
        for await (const ev of tail)
            after.push(ev.type);
        assert.deepEqual(after, ["exit"]);
        assert.equal(tail.offset, stream.offset);
    });

    test("re-attach by offset after a dropped stream", async () => {
        const requestId = "ts-reattach-" + randomBytes(4).toString("hex");
        const stream = await session.exec({ command: "echo one; sleep 0.3; echo two; sleep 0.3; echo three", requestId });
        assert.equal(stream.requestId, requestId);
        const seen: ExecEvent[] = [];
        for await (const ev of stream) {
            seen.push(ev);
            if (ev.type === "stdout")
                break; // drop the stream after the first line of output
        }
        assert.equal(seen.map((e) => e.type).join(","), "accepted,stdout");
        assert.equal(seen[1].bytes!.toString(), "one\n");

        const rest = await session.events(requestId, { offset: stream.offset });
        const r = await rest.result();
        assert.equal(r.stdoutText, "two\nthree\n", "the re-attached stream starts after what was received");
        assert.equal(r.status, "succeeded");

        // from 0 (wait()): everything kept, the same bytes
        const all = await session.wait(requestId);
        assert.equal(all.stdoutText, "one\ntwo\nthree\n");
        // an offset past the end: 416
        await assert.rejects(session.events(requestId, { offset: 1 << 30 }), (e: unknown) =>
            e instanceof SandboxdError && e.status === 416 && e.code === "invalid_offset");

        const snap = await session.command(requestId);
        assert.equal(snap.status, "succeeded");
        assert.equal(snap.stdout, "one\ntwo\nthree\n");
        const list = await session.commands();
        assert.ok(list.some((c) => c.request_id === requestId));
    });

    test("stdin streamed, then eof", async () => {
        const acc = await session.start({ argv: ["cat"], stdin: "stream" });
        assert.equal(typeof acc.request_id, "string");
        const rid = acc.request_id!;
        assert.equal(await session.writeStdin(rid, "hello "), 6);
        assert.equal(await session.writeStdin(rid, Buffer.from([0x00, 0x41, 0x0a]), { eof: true }), 3);
        const r = await session.wait(rid);
        assert.equal(r.status, "succeeded");
        assert.deepEqual(r.stdout, Buffer.from("hello \u0000A\n", "latin1"));
        await assert.rejects(session.writeStdin(rid, "late"), (e: unknown) => e instanceof ConflictError);
    });

    test("signal", async () => {
        const stream = await session.exec({ command: "trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.1; done" });
        for await (const ev of stream) {
            if (ev.type === "stdout" && ev.bytes!.toString().includes("ready"))
                break;
        }
        await session.signal(stream.requestId, "SIGTERM");
        const r = await session.wait(stream.requestId);
        assert.equal(r.exitCode, 7);
        assert.match(r.stdoutText, /got TERM/);
        await assert.rejects(session.signal(stream.requestId, "SIGKILL"), (e: unknown) =>
            e instanceof ConflictError && e.code === "not_running");

        const acc = await session.start({ argv: ["sleep", "60"] });
        await session.signal(acc.request_id!, "SIGKILL");
        const k = await session.wait(acc.request_id!);
        assert.equal(k.status, "signaled");
        assert.equal(k.signal, "SIGKILL");
    });

    test("freeze and thaw (501 unsupported on cgroup v1)", async (t) => {
        let frozen;
        try {
            frozen = await session.freeze();
        } catch (e) {
            assert.ok(e instanceof UnsupportedError, String(e));
            t.diagnostic("freezing is unsupported here (501): the refusal was checked");
            assert.equal(e.status, 501);
            assert.equal(e.code, "unsupported");
            await assert.rejects(session.thaw(), (e2: unknown) => e2 instanceof UnsupportedError && e2.status === 501);
            return;
        }
        t.diagnostic("frozen and thawed");
        assert.equal(frozen.frozen, true);
        const thawed = await session.thaw();
        assert.equal(thawed.frozen, false);
        assert.equal((await session.run({ argv: ["true"] })).ok, true);
    });
});

describe("files", () => {
    test("10 MiB streamed up and down", async () => {
        const size = 10 * 1024 * 1024, chunk = 64 * 1024;
        const up = createHash("sha256");
        async function* source() {
            for (let i = 0; i < size / chunk; i++) {
                const b = randomBytes(chunk);
                up.update(b);
                yield b;
            }
        }
        await session.files.mkdir("big/dir");
        const entry = await session.files.upload("big/dir/blob.bin", Readable.from(source()), { mode: 0o640 });
        assert.equal(entry.size, size);
        assert.equal(entry.type, "file");
        assert.equal(entry.mode, "0640");

        const down = createHash("sha256");
        let n = 0;
        const sink = new Writable({
            write(c: Buffer, _enc, cb) {
                n += c.length;
                down.update(c);
                cb();
            },
        });
        assert.equal(await session.files.downloadTo("big/dir/blob.bin", sink), size);
        assert.equal(n, size);
        assert.equal(down.digest("hex"), up.digest("hex"));

        const st = await session.files.stat("big/dir/blob.bin");
        assert.equal(st.size, size);

        // a part (Range), and the rest from an offset, are the same bytes as the whole
        const whole = await session.files.read("big/dir/blob.bin");
        const part = Buffer.concat(await (await session.files.download("big/dir/blob.bin", { offset: 1000, length: 5000 })).toArray());
        assert.deepEqual(part, whole.subarray(1000, 6000));
        const rest = Buffer.concat(await (await session.files.download("big/dir/blob.bin", { offset: size - 123 })).toArray());
        assert.deepEqual(rest, whole.subarray(size - 123));
        await assert.rejects(session.files.download("big/dir/blob.bin", { offset: size + 1 }), (e: unknown) =>
            e instanceof SandboxdError && e.status === 416);
        await session.files.remove("big", { recursive: true });
        await assert.rejects(session.files.stat("big"), NotFoundError);
    });

    test("a refused upload stops before its body, and the client goes on", async () => {
        const chunks = 160, chunk = 64 * 1024;
        let read = 0;
        async function* source() {
            for (let i = 0; i < chunks; i++) {
                read++;
                yield Buffer.alloc(chunk, 1);
            }
        }
        await assert.rejects(session.files.upload("no/such/dir/f.bin", Readable.from(source())), (e: unknown) =>
            e instanceof NotFoundError && e.status === 404);
        assert.ok(read < chunks, `the refused upload's body was read whole (${read} chunks)`);
        const e = await session.files.write("after-refusal.txt", "ok");
        assert.equal(e.size, 2);
        await session.files.remove("after-refusal.txt");
    });

    test("small files, odd names, list, move, remove", async () => {
        const name = "dir one/a b%c?d#e.txt";
        await session.files.mkdir("dir one");
        const created = await session.files.write(name, "hello\n");
        assert.equal(created.size, 6);
        assert.equal((await session.files.read(name)).toString(), "hello\n");
        await session.files.write(name, Buffer.from([1, 2, 3]));
        assert.deepEqual(await session.files.read(name), Buffer.from([1, 2, 3]));

        const listing = await session.files.list("dir one");
        assert.deepEqual(listing.entries?.map((e) => e.name), ["a b%c?d#e.txt"]);
        const top = await session.files.list();
        assert.ok(top.entries?.some((e) => e.name === "dir one" && e.type === "dir"));

        const moved = await session.files.move(name, "dir one/moved.txt");
        assert.equal(moved.name, "moved.txt");
        await session.files.write("dir one/other.txt", "x");
        await assert.rejects(session.files.move("dir one/other.txt", "dir one/moved.txt"), (e: unknown) =>
            e instanceof ConflictError && e.code === "exists");
        await session.files.move("dir one/other.txt", "dir one/moved.txt", { overwrite: true });
        assert.equal((await session.files.read("dir one/moved.txt")).toString(), "x");

        await assert.rejects(session.files.remove("dir one"), (e: unknown) =>
            e instanceof ConflictError && e.code === "not_empty");
        await session.files.remove("dir one/moved.txt");
        await session.files.remove("dir one");
        await assert.rejects(session.files.read("dir one/moved.txt"), (e: unknown) =>
            e instanceof NotFoundError && e.status === 404 && e.code === "not_found");
        // the file a command wrote is there for the file API, and the other way round
        await session.run({ command: "echo from-cmd > w.txt" });
        assert.equal((await session.files.read("w.txt")).toString(), "from-cmd\n");
    });
});

describe("errors and transports", () => {
    test("404 with its code", async () => {
        await assert.rejects(unix.getSession("0000000000000000"), (e: unknown) =>
            e instanceof NotFoundError && e.status === 404 && e.code === "not_found" && e.message.length > 0);
        await assert.rejects(session.command("no-such-command"), NotFoundError);
    });

    test("TCP with the key; 401 with a wrong one", async () => {
        const tcp = new Client({ url: TCP_URL, key: KEY });
        try {
            const h = await tcp.health();
            assert.equal(typeof h.status, "string");
            const s = await tcp.createSession({ user: USER, workspace: "ts-tcp" });
            const r = await s.run({ argv: ["echo", "over tcp"] });
            assert.equal(r.stdoutText, "over tcp\n");
            await s.files.write("t.txt", "tcp");
            assert.equal((await s.files.read("t.txt")).toString(), "tcp");
            await s.close({ purge: true });
        } finally {
            tcp.close();
        }
        const wrong = new Client({ url: TCP_URL, key: "not-the-key" });
        try {
            await assert.rejects(wrong.health(), (e: unknown) =>
                e instanceof UnauthorizedError && e.status === 401 && e.code === "unauthorized");
        } finally {
            wrong.close();
        }
    });

    test("SANDBOXD_URL and SANDBOXD_KEY are the defaults", async () => {
        const saved = { url: process.env.SANDBOXD_URL, key: process.env.SANDBOXD_KEY };
        process.env.SANDBOXD_URL = TCP_URL;
        process.env.SANDBOXD_KEY = KEY;
        const c = new Client();
        try {
            assert.equal(typeof (await c.health()).status, "string");
        } finally {
            c.close();
            process.env.SANDBOXD_URL = saved.url ?? "";
            process.env.SANDBOXD_KEY = saved.key ?? "";
            if (saved.url === undefined) delete process.env.SANDBOXD_URL;
            if (saved.key === undefined) delete process.env.SANDBOXD_KEY;
        }
    });

    test("a socket that is not there is a TransportError", async () => {
        const c = new Client({ url: "/nonexistent/sandboxd.sock" });
        await assert.rejects(c.health(), (e: unknown) => e instanceof TransportError && !(e instanceof SandboxdError));
        assert.throws(() => new Client({ url: "ftp://x" }), TypeError);
    });
});

/**
 * The tree of the least image a command runs in: /bin/sh (the host's dash), the libraries it
 * loads at the paths ldd names, an os-release.
 */
function runnableImageTree(): string {
    const root = mkdtempSync(join(tmpdir(), "ts-image-"));
    const files: Record<string, string> = { "bin/sh": "/bin/dash" };
    const ldd = execFileSync("ldd", ["/bin/dash"], { encoding: "utf8" });
    for (const m of ldd.matchAll(/(\/\S+) \(0x[0-9a-f]+\)/g))
        files[m[1].slice(1)] = m[1];
    assert.ok(Object.keys(files).some((p) => p.includes("libc.so")) && Object.keys(files).some((p) => p.includes("ld-linux")), ldd);
    for (const [path, src] of Object.entries(files)) {
        mkdirSync(join(root, dirname(path)), { recursive: true });
        copyFileSync(src, join(root, path));
    }
    mkdirSync(join(root, "etc"));
    writeFileSync(join(root, "etc/os-release"), 'ID=tsclient\nVERSION_ID="5"\nPRETTY_NAME="TypeScript client image 5"\n');
    return root;
}

/** The tree as a tar streamed from tar(1): a Readable of unknown length (sent chunked). */
function tarStream(root: string): Readable {
    const p = spawn("tar", ["--numeric-owner", "-C", root, "-c", "."], { stdio: ["ignore", "pipe", "inherit"] });
    return p.stdout;
}

describe("images", () => {
    test("import (admin only), get, list, a session on it, remove", async () => {
        const name = "tsc-" + randomBytes(3).toString("hex");
        const root = runnableImageTree();
        const tenant = new Client({ url: TCP_URL, key: KEY });
        try {
            // not by a tenant that is no administrator: refused before the body, nothing imported
            await assert.rejects(tenant.importImage(name, tarStream(root)), (e: unknown) =>
                e instanceof ForbiddenError && e.status === 403 && e.code === "forbidden");
            await assert.rejects(unix.getImage(name), (e: unknown) =>
                e instanceof NotFoundError && e.status === 404 && e.code === "image_not_found");

            // root on the unix socket is an administrator
            const img = await unix.importImage(name, tarStream(root));
            assert.equal(img.name, name);
            assert.deepEqual(img.os, { id: "tsclient", version_id: "5", pretty_name: "TypeScript client image 5" });
            assert.ok((img.size_bytes ?? 0) > 0 && img.created_usec > 0, JSON.stringify(img));
            assert.equal(img.sessions, 0);
            assert.equal(img.user_names, false);
            // a Buffer too; the name is taken
            const whole = execFileSync("tar", ["--numeric-owner", "-C", root, "-c", "."], { maxBuffer: 64 << 20 });
            await assert.rejects(unix.importImage(name, whole), (e: unknown) =>
                e instanceof ConflictError && e.code === "exists");
            assert.deepEqual(await tenant.getImage(name), img);
            const listed = await tenant.listImages();
            assert.equal(listed.find((i) => i.name === name)?.os.id, "tsclient");

            const s = await unix.createSession({ user: USER, workspace: "ts-image", image: name });
            try {
                assert.equal(s.info.image, name);
                const r = await s.run({ argv: ["/bin/sh", "-c", 'echo $0; . /etc/os-release; echo "$ID $PRETTY_NAME"; [ -e /usr/bin/cat ] && echo host-root; exit 0'] });
                assert.equal(r.status, "succeeded", r.stderrText);
                assert.equal(r.stdoutText, "/bin/sh\ntsclient TypeScript client image 5\n");
                assert.equal((await unix.getImage(name)).sessions, 1);
                await assert.rejects(unix.removeImage(name), (e: unknown) =>
                    e instanceof ConflictError && e.status === 409 && e.code === "image_in_use");
                await assert.rejects(tenant.removeImage(name), ForbiddenError);
            } finally {
                await s.close();
            }
            assert.equal(session.info.image, null, "a session without one runs on the host's root");

            const gone = await unix.removeImage(name);
            assert.equal(gone.name, name);
            assert.ok(!(await unix.listImages()).some((i) => i.name === name));
            await assert.rejects(unix.getImage(name), (e: unknown) =>
                e instanceof NotFoundError && e.code === "image_not_found");
        } finally {
            tenant.close();
            rmSync(root, { recursive: true, force: true });
        }
    });
});

describe("nodes", () => {
    test("parseNodes", () => {
        const m = parseNodes(" n1=http://10.0.0.1:8421, n2=https://b:1/\n");
        assert.deepEqual([...m.entries()], [["n1", "http://10.0.0.1:8421"], ["n2", "https://b:1"]]);
        assert.equal(parseNodes(undefined).size, 0);
        assert.throws(() => parseNodes("n1"), /NAME=URL/);
        assert.throws(() => parseNodes("N1=http://a"), /node name/);
        assert.throws(() => parseNodes("n1=ftp://a"), /http/);
        assert.throws(() => parseNodes("n1=http://a,n1=http://b"), /twice/);
        assert.deepEqual(scopeHeader("alice", "w-1"), { "X-Sandboxd-Scope": "alice/w-1" });
    });

    test("a 421 wrong_node is followed once to the node SANDBOXD_NODES names", async () => {
        // a stand-in "node" that answers everything 421, naming n2
        const seen: { method: string; url: string; scope: string | undefined }[] = [];
        const server = createServer((req, res) => {
            seen.push({ method: req.method!, url: req.url!, scope: req.headers["x-sandboxd-scope"] as string | undefined });
            req.resume();
            const body = JSON.stringify({ error: { code: "wrong_node", message: "Session is on node n2.", node: "n2" } });
            res.writeHead(421, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), Connection: "close" });
            res.end(body);
        });
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        const port = (server.address() as AddressInfo).port;
        const saved = process.env.SANDBOXD_NODES;
        const c = new Client({ url: `http://127.0.0.1:${port}`, key: KEY });
        try {
            process.env.SANDBOXD_NODES = `n1=http://127.0.0.1:9,n2=${TCP_URL}/`;
            const s = await c.createSession({ user: USER, workspace: "ts-followed" });
            assert.match(s.id, /^[a-z][a-z0-9]{0,31}_[0-9a-f]{16}$/);
            assert.equal(seen.at(-1)?.method, "POST");
            assert.equal(seen.at(-1)?.scope, `${USER}/ts-followed`);
            const r = await s.run({ argv: ["sh", "-c", "echo followed"] });
            assert.equal(r.stdoutText, "followed\n");
            assert.ok(seen.at(-1)!.url.startsWith(`/v1/sessions/${s.id}/commands`), seen.at(-1)!.url);
            await s.files.write("f.txt", "replayed");
            assert.equal((await s.files.read("f.txt")).toString(), "replayed");
            // a stream is not sent twice
            await assert.rejects(s.files.upload("g.txt", Readable.from([Buffer.from("x")])),
                (e: unknown) => e instanceof WrongNodeError && e.node === "n2" && /cannot be sent twice/.test(e.message));
            // a node SANDBOXD_NODES does not name
            process.env.SANDBOXD_NODES = `n1=${TCP_URL}`;
            await assert.rejects(c.getSession(s.id),
                (e: unknown) => e instanceof WrongNodeError && e.status === 421 && e.node === "n2" &&
                    /does not name it/.test(e.message));
            delete process.env.SANDBOXD_NODES;
            await assert.rejects(c.getSession(s.id), /does not name it/);
            const direct = new Client({ url: TCP_URL, key: KEY });
            await (await direct.getSession(s.id)).close();
            direct.close();
        } finally {
            if (saved === undefined)
                delete process.env.SANDBOXD_NODES;
            else
                process.env.SANDBOXD_NODES = saved;
            c.close();
            server.close();
        }
    });

    test("a balancer's 503 and 504 node_unavailable are UnavailableError, naming the node", async () => {
        // a stand-in HAProxy answering as contrib/haproxy/haproxy.cfg does: 503 first, then 504
        let n = 0;
        const server = createServer((req, res) => {
            req.resume();
            const status = n++ === 0 ? 503 : 504;
            const body = JSON.stringify({ error: { code: "node_unavailable", node: "n3", message: "No sandboxd node is available." } });
            res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), Connection: "close" });
            res.end(body);
        });
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        const port = (server.address() as AddressInfo).port;
        const c = new Client({ url: `http://127.0.0.1:${port}`, key: KEY });
        try {
            for (const status of [503, 504])
                await assert.rejects(c.getSession("n3_0123456789abcdef"),
                    (e: unknown) => e instanceof UnavailableError && e.status === status &&
                        e.code === "node_unavailable" && e.node === "n3");
        } finally {
            c.close();
            server.close();
        }
    });
});
