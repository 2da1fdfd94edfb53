// SPDX-License-Identifier: LGPL-2.1-or-later
// The client: sessions, commands (NDJSON events as an async iterator), files.
// The wire types come from src/schema.ts, which openapi-typescript generates from
// docs/openapi.yaml in the build.

import type http from "node:http";
import { randomBytes } from "node:crypto";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { components } from "./schema.js";
import { TransportError } from "./errors.js";
import { scopeHeader, Transport, type Body, type TransportOptions } from "./transport.js";

type Schemas = components["schemas"];
export type Health = Schemas["Health"];
export type SessionInfo = Schemas["Session"];
export type SessionRequest = Schemas["SessionRequest"];
export type CommandRequest = Schemas["CommandRequest"];
export type CommandSummary = Schemas["Command"];
export type CommandSnapshot = Schemas["CommandSnapshot"];
export type Accepted = Schemas["Accepted"];
export type Usage = Schemas["Usage"];
export type Entry = Schemas["Entry"];
export type Listing = Schemas["Listing"];
export type Event = Schemas["Event"];
export type Image = Schemas["Image"];

/** A signal sandboxd sends to a command. */
export type SignalName = "SIGINT" | "SIGTERM" | "SIGKILL" | "SIGHUP" | "SIGUSR1" | "SIGUSR2";

/** One line of a command's event stream, as sent, plus what the client adds. */
export type ExecEvent = Event & {
    /** stdout and stderr: the bytes, decoded from data or data_b64. */
    bytes?: Buffer;
    /** The offset in the kept event log after this line: resume here with events(). */
    offset: number;
};

/** A line longer than this ends the stream with an error (sandboxd's are far shorter). */
const MAX_LINE_BYTES = 16 * 1024 * 1024;

export interface ExecOptions {
    /** The command line; or command. */
    argv?: string[];
    /** A shell command line, run as ["sh", "-c", command]. */
    command?: string;
    env?: Record<string, string>;
    /** Relative to the workspace (or absolute below it). */
    cwd?: string;
    /** All of stdin at once (a string or bytes), or "stream" to feed it with writeStdin(). */
    stdin?: string | Uint8Array | "stream";
    timeoutMs?: number;
    /** Makes the request idempotent; default: a random id made by the client, so that a dropped stream can be re-attached. */
    requestId?: string;
    /** Run on a pseudo-terminal of this size. */
    tty?: { rows: number; cols: number };
}

function commandRequest(o: ExecOptions): CommandRequest {
    if (o.argv !== undefined && o.command !== undefined)
        throw new TypeError("exec: give argv or command, not both");
    const argv = o.argv ?? (o.command !== undefined ? ["sh", "-c", o.command] : undefined);
    if (!argv || argv.length === 0)
        throw new TypeError("exec: argv or command is needed");
    const r: Record<string, unknown> = { argv, request_id: o.requestId ?? "ts-" + randomBytes(12).toString("hex") };
    if (o.env !== undefined)
        r.env = o.env;
    if (o.cwd !== undefined)
        r.cwd = o.cwd;
    if (o.timeoutMs !== undefined)
        r.timeout_ms = o.timeoutMs;
    if (o.tty !== undefined)
        r.tty = o.tty;
    if (o.stdin === "stream")
        r.stdin = "stream";
    else if (typeof o.stdin === "string")
        r.stdin = { text: o.stdin };
    else if (o.stdin instanceof Uint8Array)
        r.stdin = { base64: Buffer.from(o.stdin).toString("base64") };
    return r as CommandRequest;
}

/** How a command ended, with its output. */
export class Result {
    readonly requestId: string;
    /** succeeded, failed, timed_out, signaled or lost. */
    readonly status: string;
    readonly exitCode: number | null;
    readonly signal: string | null;
    readonly reason: string | null;
    readonly durationMs: number | null;
    readonly usage: Usage | undefined;
    readonly stdout: Buffer;
    readonly stderr: Buffer;
    /** Some output was not kept (a truncated event came). */
    readonly truncated: boolean;

    constructor(requestId: string, exit: Event, stdout: Buffer, stderr: Buffer, truncated: boolean) {
        const e = exit as Record<string, unknown>;
        this.requestId = requestId;
        this.status = String(e.status ?? "");
        this.exitCode = typeof e.exit_code === "number" ? e.exit_code : null;
        this.signal = typeof e.signal === "string" ? e.signal : null;
        this.reason = typeof e.reason === "string" ? e.reason : null;
        this.durationMs = typeof e.duration_ms === "number" ? e.duration_ms : null;
        this.usage = e.usage as Usage | undefined;
        this.stdout = stdout;
        this.stderr = stderr;
        this.truncated = truncated;
    }

    /** The command exited with 0. */
    get ok(): boolean {
        return this.status === "succeeded";
    }
    get stdoutText(): string {
        return this.stdout.toString("utf8");
    }
    get stderrText(): string {
        return this.stderr.toString("utf8");
    }
}

/**
 * A command's event stream (NDJSON): iterate it with `for await`, or take the Result with
 * result(). `offset` is the kept bytes received so far: events(requestId, { offset })
 * resumes there after a dropped stream.
 */
export class CommandStream implements AsyncIterable<ExecEvent> {
    readonly requestId: string;
    /** The offset in the kept event log after the last line read. */
    offset: number;
    private readonly res: http.IncomingMessage;
    private iterating = false;
    private readonly collected = { stdout: [] as Buffer[], stderr: [] as Buffer[], truncated: false };
    private exit: Event | undefined;

    constructor(requestId: string, res: http.IncomingMessage, offset: number) {
        this.requestId = requestId;
        this.res = res;
        this.offset = offset;
    }

    async *[Symbol.asyncIterator](): AsyncIterator<ExecEvent> {
        if (this.iterating)
            throw new Error("a command's event stream can be read once");
        this.iterating = true;
        let pending: Buffer = Buffer.alloc(0);
        try {
            for await (const chunk of this.res) {
                pending = pending.length ? Buffer.concat([pending, chunk as Buffer]) : (chunk as Buffer);
                let nl: number;
                while ((nl = pending.indexOf(10)) >= 0) {
                    const line = pending.subarray(0, nl + 1);
                    pending = pending.subarray(nl + 1);
                    const ev = this.parse(line);
                    yield ev;
                    if (ev.type === "exit")
                        return;
                }
                if (pending.length > MAX_LINE_BYTES)
                    throw new TransportError(`an event line longer than ${MAX_LINE_BYTES} bytes`);
            }
        } catch (e) {
            if (e instanceof TransportError)
                throw e;
            throw new TransportError(`the event stream of ${this.requestId} broke at offset ${this.offset}: ${(e as Error).message}`, { cause: e });
        } finally {
            this.res.destroy();
        }
        if (pending.length)
            throw new TransportError(`the event stream of ${this.requestId} ended within a line (offset ${this.offset})`);
        throw new TransportError(`the event stream of ${this.requestId} ended before its exit event (offset ${this.offset})`);
    }

    private parse(line: Buffer): ExecEvent {
        let ev: Record<string, unknown>;
        try {
            ev = JSON.parse(line.toString("utf8"));
        } catch (e) {
            throw new TransportError(`an event line is not JSON (offset ${this.offset})`, { cause: e });
        }
        if (!ev || typeof ev !== "object" || typeof ev.type !== "string")
            throw new TransportError(`an event line without a type (offset ${this.offset})`);
        // lines marked live are not kept and do not count in offsets
        if (ev.live !== true)
            this.offset += line.length;
        ev.offset = this.offset;
        if (ev.type === "stdout" || ev.type === "stderr") {
            const b = typeof ev.data_b64 === "string" ? Buffer.from(ev.data_b64, "base64")
                : Buffer.from(typeof ev.data === "string" ? ev.data : "", "utf8");
            ev.bytes = b;
            this.collected[ev.type].push(b);
        } else if (ev.type === "truncated") {
            this.collected.truncated = true;
        } else if (ev.type === "exit") {
            this.exit = ev as Event;
        }
        return ev as unknown as ExecEvent;
    }

    /** Reads the rest of the stream: the command's Result, with the output from this stream's start. */
    async result(): Promise<Result> {
        if (!this.iterating)
            for await (const _ of this) {
                // collected by parse()
            }
        if (!this.exit)
            throw new TransportError(`the event stream of ${this.requestId} ended before its exit event`);
        return new Result(this.requestId, this.exit, Buffer.concat(this.collected.stdout),
            Buffer.concat(this.collected.stderr), this.collected.truncated);
    }

    /** Stops reading (the command goes on). */
    close(): void {
        this.res.destroy();
    }
}

function enc(s: string): string {
    return encodeURIComponent(s);
}

type Query = Record<string, string | undefined>;

/** A workspace path as sent: .../files?path=PATH (the top of the workspace without it), with the other parameters. */
function fileLocation(sid: string, path: string, query: Query = {}): [string, Query] {
    const p = path.split("/").filter((s) => s !== "" && s !== ".").join("/");
    return [`/v1/sessions/${enc(sid)}/files`, { path: p || undefined, ...query }];
}

export interface UploadOptions {
    /** Permission bits, e.g. 0o644 (new files get 0600). */
    mode?: number;
    /** The length of a streamed source, if known (else it goes chunked). */
    length?: number;
}

/** A session's workspace. Paths are relative to the workspace. */
export class Files {
    constructor(private readonly t: Transport, private readonly sid: string) {}

    /** Uploads bytes, a string, a Readable or an async iterable of chunks (streamed, never held whole). */
    async upload(path: string, source: Body, opts: UploadOptions = {}): Promise<Entry> {
        const [url, query] = fileLocation(this.sid, path,
            { mode: opts.mode !== undefined ? opts.mode.toString(8).padStart(4, "0") : undefined });
        const { body } = await this.t.json<Entry>("PUT", url, {
            query, body: source ?? Buffer.alloc(0), length: opts.length, timeoutMs: this.t.streamTimeoutMs,
        });
        return body;
    }

    /**
     * A file's bytes as a Readable (streamed from sandboxd); from offset on, and at most length
     * bytes, if given (a Range request: resume a download that broke).
     */
    async download(path: string, opts: { offset?: number; length?: number } = {}): Promise<Readable> {
        const [url, query] = fileLocation(this.sid, path);
        const offset = opts.offset ?? 0;
        if (!Number.isSafeInteger(offset) || offset < 0)
            throw new RangeError("download: offset must be a non-negative integer");
        if (opts.length !== undefined && (!Number.isSafeInteger(opts.length) || opts.length < 1))
            throw new RangeError("download: length must be a positive integer");
        let headers: Record<string, string> | undefined;
        if (offset > 0 || opts.length !== undefined)
            headers = { Range: `bytes=${offset}-${opts.length !== undefined ? offset + opts.length - 1 : ""}` };
        const res = await this.t.stream("GET", url, { query, headers });
        if (headers && res.statusCode !== 206) {
            res.destroy();
            throw new TransportError(`download: asked for a range, answered ${res.statusCode} (the whole file)`);
        }
        return res;
    }

    /** Downloads into a Writable (a file stream, say); resolves with the byte count. */
    async downloadTo(path: string, dest: Writable): Promise<number> {
        const src = await this.download(path);
        let n = 0;
        src.on("data", (c: Buffer) => { n += c.length; });
        await pipeline(src, dest);
        return n;
    }

    /** A small file's bytes. */
    async read(path: string): Promise<Buffer> {
        const src = await this.download(path);
        const chunks: Buffer[] = [];
        for await (const c of src)
            chunks.push(c as Buffer);
        return Buffer.concat(chunks);
    }

    /** Writes a small file (string or bytes). */
    async write(path: string, data: string | Uint8Array, opts: { mode?: number } = {}): Promise<Entry> {
        return this.upload(path, typeof data === "string" ? Buffer.from(data, "utf8") : data, opts);
    }

    /** A directory's entries (default: the top of the workspace). */
    async list(path = ""): Promise<Listing> {
        const [url, query] = fileLocation(this.sid, path);
        return (await this.t.json<Listing>("GET", url, { query })).body;
    }

    /** The entry path resolves to, without its content. */
    async stat(path: string): Promise<Entry> {
        const [url, query] = fileLocation(this.sid, path, { stat: "true" });
        return (await this.t.json<Entry>("GET", url, { query })).body;
    }

    /** Makes a directory and its missing parents. */
    async mkdir(path: string): Promise<Entry> {
        const [url, query] = fileLocation(this.sid, path, { mkdir: "true" });
        return (await this.t.json<Entry>("POST", url, { query })).body;
    }

    /** Removes a file, a symlink or an empty directory; with recursive a directory and its content. */
    async remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
        const [url, query] = fileLocation(this.sid, path, { recursive: opts.recursive ? "true" : undefined });
        await this.t.json("DELETE", url, { query });
    }

    /** Renames within the workspace; an existing target only with overwrite. */
    async move(from: string, to: string, opts: { overwrite?: boolean } = {}): Promise<Entry> {
        const [url, query] = fileLocation(this.sid, from, { move_to: to, overwrite: opts.overwrite ? "true" : undefined });
        return (await this.t.json<Entry>("POST", url, { query })).body;
    }
}

/** A session: its last known state in info, its commands and files. */
export class Session {
    readonly id: string;
    info: SessionInfo;
    /** createSession(): false when the scope's active session was answered (200), not a new one (201). */
    readonly created: boolean;
    readonly files: Files;

    constructor(private readonly t: Transport, info: SessionInfo, created = false) {
        if (typeof info.id !== "string")
            throw new TransportError("a session without an id");
        this.id = info.id;
        this.info = info;
        this.created = created;
        this.files = new Files(t, this.id);
    }

    private get base(): string {
        return `/v1/sessions/${enc(this.id)}`;
    }

    private async update(method: string, path: string, query?: Record<string, string>): Promise<SessionInfo> {
        this.info = (await this.t.json<SessionInfo>(method, this.base + path, { query })).body;
        return this.info;
    }

    /** Fetches the session again. */
    refresh(): Promise<SessionInfo> {
        return this.update("GET", "");
    }

    /** Closes it (stops its commands); with purge its workspace, home and TMPDIR are emptied first. */
    close(opts: { purge?: boolean } = {}): Promise<SessionInfo> {
        return this.update("DELETE", "", opts.purge ? { purge: "true" } : undefined);
    }

    /** Pauses every process (cgroup v2 only: UnsupportedError, 501, elsewhere). */
    freeze(): Promise<SessionInfo> {
        return this.update("POST", "/freeze");
    }

    thaw(): Promise<SessionInfo> {
        return this.update("POST", "/thaw");
    }

    /** Pushes back the idle expiry. */
    touch(): Promise<SessionInfo> {
        return this.update("POST", "/activity");
    }

    /** Starts a command and streams its events. */
    async exec(opts: ExecOptions): Promise<CommandStream> {
        const req = commandRequest(opts);
        const res = await this.t.stream("POST", this.base + "/commands", { json: req });
        return new CommandStream(String(req.request_id), res, 0);
    }

    /** Runs a command to its end: its Result. */
    async run(opts: ExecOptions): Promise<Result> {
        return (await this.exec(opts)).result();
    }

    /** Starts a command without waiting (?wait=false): its summary. */
    async start(opts: ExecOptions): Promise<Accepted> {
        return (await this.t.json<Accepted>("POST", this.base + "/commands",
            { json: commandRequest(opts), query: { wait: "false" } })).body;
    }

    /** Re-attaches to a command's events from a byte offset of the kept log (0: all of them). */
    async events(requestId: string, opts: { offset?: number } = {}): Promise<CommandStream> {
        const offset = opts.offset ?? 0;
        if (!Number.isSafeInteger(offset) || offset < 0)
            throw new RangeError("events: offset must be a non-negative integer");
        const res = await this.t.stream("GET", `${this.base}/commands/${enc(requestId)}/events`,
            { query: offset ? { offset } : undefined });
        return new CommandStream(requestId, res, offset);
    }

    /** Waits for a command's end: its Result, with all its kept output. */
    async wait(requestId: string): Promise<Result> {
        return (await this.events(requestId)).result();
    }

    /** Writes to the stdin of a command started with stdin "stream"; eof closes it after. */
    async writeStdin(requestId: string, data: string | Uint8Array, opts: { eof?: boolean } = {}): Promise<number> {
        const { body } = await this.t.json<{ written?: number }>("POST",
            `${this.base}/commands/${enc(requestId)}/stdin`,
            { body: typeof data === "string" ? Buffer.from(data, "utf8") : data, query: opts.eof ? { eof: "true" } : undefined });
        return body.written ?? 0;
    }

    /** Sends a signal to every process of the command. */
    async signal(requestId: string, signal: SignalName): Promise<void> {
        await this.t.json("POST", `${this.base}/commands/${enc(requestId)}/signal`, { json: { signal } });
    }

    /** A command's snapshot, output included. */
    async command(requestId: string): Promise<CommandSnapshot> {
        return (await this.t.json<CommandSnapshot>("GET", `${this.base}/commands/${enc(requestId)}`)).body;
    }

    /** The session's commands, oldest first (no output). */
    async commands(): Promise<CommandSummary[]> {
        return (await this.t.json<{ commands?: CommandSummary[] }>("GET", this.base + "/commands")).body.commands ?? [];
    }
}

export interface ImportImageOptions {
    /** The length of a streamed tar, if known (else it goes chunked). */
    length?: number;
}

export interface ClientOptions extends TransportOptions {}

/**
 * sandboxd's HTTP API. `new Client()` talks to $SANDBOXD_URL (else /run/sandboxd/http.sock)
 * with $SANDBOXD_KEY; `new Client({ url: "http://127.0.0.1:8421", key })` over TCP.
 */
export class Client {
    private readonly t: Transport;

    constructor(opts: ClientOptions = {}) {
        this.t = new Transport(opts);
    }

    /** Closes the kept-alive connections (a process may exit without it). */
    close(): void {
        this.t.close();
    }

    async health(): Promise<Health> {
        return (await this.t.json<Health>("GET", "/v1/health")).body;
    }

    /** The sessions the caller may see (of one user, if given). */
    async listSessions(opts: { user?: string } = {}): Promise<Session[]> {
        const { body } = await this.t.json<{ sessions?: SessionInfo[] }>("GET", "/v1/sessions", { query: { user: opts.user } });
        return (body.sessions ?? []).map((s) => new Session(this.t, s));
    }

    /** Creates a session, or answers the scope's active one (created is false then); image: the image its commands run in. */
    async createSession(req: SessionRequest): Promise<Session> {
        const { status, body } = await this.t.json<SessionInfo>("POST", "/v1/sessions",
            { json: req, headers: scopeHeader(req.user, req.workspace) });
        return new Session(this.t, body, status === 201);
    }

    async getSession(id: string): Promise<Session> {
        return new Session(this.t, (await this.t.json<SessionInfo>("GET", `/v1/sessions/${enc(id)}`)).body);
    }

    /** The images sessions may run in (createSession({ image })), by name; every caller may list them. */
    async listImages(): Promise<Image[]> {
        return (await this.t.json<{ images?: Image[] }>("GET", "/v1/images")).body.images ?? [];
    }

    /** An image (NotFoundError, code image_not_found, when there is none). */
    async getImage(name: string): Promise<Image> {
        return (await this.t.json<Image>("GET", `/v1/images/${enc(name)}`)).body;
    }

    /**
     * Imports an image from a tar (plain or compressed): bytes, a Readable or an async iterable
     * of chunks, streamed as Files.upload() streams (refusals come before the body is sent).
     * Administrators only (ForbiddenError). BadRequestError invalid_image for an unsafe or
     * broken archive or a tree without /bin/sh or os-release, ConflictError exists for a name
     * taken, PayloadTooLargeError past [Images] MaxSize=.
     */
    async importImage(name: string, source: Body, opts: ImportImageOptions = {}): Promise<Image> {
        if (source === undefined || typeof source === "string")
            throw new TypeError("importImage: a tar is bytes, a Readable or an async iterable of chunks");
        const { body } = await this.t.json<Image>("PUT", `/v1/images/${enc(name)}`, {
            body: source, contentType: "application/x-tar", length: opts.length, timeoutMs: this.t.streamTimeoutMs,
        });
        return body;
    }

    /** Removes an image (administrators only; ConflictError image_in_use while a session that is not closed uses it): the image as it was. */
    async removeImage(name: string): Promise<Image> {
        return (await this.t.json<Image>("DELETE", `/v1/images/${enc(name)}`)).body;
    }
}
