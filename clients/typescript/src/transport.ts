// SPDX-License-Identifier: LGPL-2.1-or-later
// HTTP/1.1 over Node's http module: the unix socket (socketPath) or TCP with a bearer key.
// No runtime dependency.

import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";
import { errorFor, SandboxdError, TransportError, WrongNodeError } from "./errors.js";

export const DEFAULT_SOCKET = "/run/sandboxd/http.sock";

/** A JSON answer larger than this is refused (a listing of 100000 entries fits). */
const MAX_JSON_BYTES = 256 * 1024 * 1024;
/** An error body larger than this is cut (sandboxd's are a few hundred bytes). */
const MAX_ERROR_BYTES = 64 * 1024;

export interface TransportOptions {
    /** "unix:/path", a socket path ("/run/..."), or "http://host:port"; default $SANDBOXD_URL, else the local socket. */
    url?: string;
    /** The bearer key for TCP; default $SANDBOXD_KEY. */
    key?: string;
    /** Idle timeout of a request that is answered at once, in ms (default 60000; 0: none). */
    timeoutMs?: number;
    /** Idle timeout of an event stream or a file transfer, in ms (default 0: none; a command may be silent for long). */
    streamTimeoutMs?: number;
}

export type Query = Record<string, string | number | boolean | undefined>;
export type Body = undefined | Buffer | Uint8Array | string | Readable | AsyncIterable<Uint8Array>;

export interface RequestOptions {
    query?: Query;
    /** JSON to send (application/json); or see body. */
    json?: unknown;
    /** Raw bytes to send (application/octet-stream, or contentType), streamed when a Readable. */
    body?: Body;
    /** The Content-Type of body (default application/octet-stream). */
    contentType?: string;
    /** The length of a streamed body, if known (else it goes chunked). */
    length?: number;
    /** The idle timeout of this request (ms). */
    timeoutMs?: number;
    /** More request headers. */
    headers?: Record<string, string>;
}

interface Target {
    socketPath?: string;
    host?: string;
    port?: number;
    prefix: string;
    tls: boolean;
}

function parseUrl(url: string): Target {
    if (url.startsWith("unix:"))
        url = url.slice(5);
    if (url.startsWith("/"))
        return { socketPath: url, prefix: "", tls: false };
    let u: URL;
    try {
        u = new URL(url);
    } catch {
        throw new TypeError(`${url}: not a URL (expected http://HOST:PORT, unix:/PATH or a socket path)`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:")
        throw new TypeError(`${url}: only http://, https:// and unix: are supported`);
    if (u.search || u.hash || u.username || u.password)
        throw new TypeError(`${url}: a query, a fragment or credentials in the URL are not supported`);
    const tls = u.protocol === "https:";
    return {
        host: u.hostname.replace(/^\[(.*)\]$/, "$1"),
        port: u.port ? Number(u.port) : tls ? 443 : 80,
        prefix: u.pathname.replace(/\/+$/, ""),
        tls,
    };
}

const NODE_RE = /^[a-z][a-z0-9]{0,31}$/;
const NODES_SPEC_MAX = 64 * 1024;

/**
 * $SANDBOXD_NODES: NAME=URL entries separated by commas or whitespace, as a Map. Throws a
 * TypeError for an entry that is not NAME=URL, a name no node has, a node named twice, a URL
 * not http(s)://, or more than 64 KiB.
 */
export function parseNodes(spec: string | undefined): Map<string, string> {
    const nodes = new Map<string, string>();
    if (!spec)
        return nodes;
    if (spec.length > NODES_SPEC_MAX)
        throw new TypeError("$SANDBOXD_NODES is longer than 64 KiB");
    for (const entry of spec.split(/[,\s]+/)) {
        if (!entry)
            continue;
        const eq = entry.indexOf("=");
        if (eq < 0)
            throw new TypeError(`$SANDBOXD_NODES: ${JSON.stringify(entry.slice(0, 80))} is not NAME=URL`);
        const name = entry.slice(0, eq), url = entry.slice(eq + 1);
        if (!NODE_RE.test(name))
            throw new TypeError(`$SANDBOXD_NODES: ${JSON.stringify(name.slice(0, 40))} is not a node name (a-z, 0-9, a letter first)`);
        if (nodes.has(name))
            throw new TypeError(`$SANDBOXD_NODES names node ${name} twice`);
        if (!/^https?:\/\/[^/\s]+\/*$/.test(url))
            throw new TypeError(`$SANDBOXD_NODES: the URL of ${name} is not http://HOST[:PORT] or https://...`);
        nodes.set(name, url.replace(/\/+$/, ""));
    }
    return nodes;
}

/** The X-Sandboxd-Scope header of a new session, for a load balancer to place the scope by it. */
export function scopeHeader(user: string, workspace: string): Record<string, string> {
    return { "X-Sandboxd-Scope": `${encodeURIComponent(user)}/${encodeURIComponent(workspace)}` };
}

function queryString(q?: Query): string {
    if (!q)
        return "";
    const parts: string[] = [];
    for (const [k, v] of Object.entries(q)) {
        if (v === undefined)
            continue;
        parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
    }
    return parts.length ? "?" + parts.join("&") : "";
}

/** Reads a whole body, at most max bytes (else a TransportError). */
export async function readBody(res: http.IncomingMessage, max: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let n = 0;
    try {
        for await (const c of res) {
            n += (c as Buffer).length;
            if (n > max) {
                res.destroy();
                throw new TransportError(`the answer is larger than ${max} bytes`);
            }
            chunks.push(c as Buffer);
        }
    } catch (e) {
        if (e instanceof TransportError)
            throw e;
        throw new TransportError(`reading the answer: ${(e as Error).message}`, { cause: e });
    }
    return Buffer.concat(chunks);
}

/** The error of an answer with status >= 400. */
export async function answerError(res: http.IncomingMessage): Promise<SandboxdError> {
    const status = res.statusCode ?? 0;
    let code = `http_${status}`, message = res.statusMessage ?? "";
    let body: Buffer;
    try {
        body = await readBody(res, MAX_ERROR_BYTES);
    } catch {
        body = Buffer.alloc(0);
    }
    let node: string | undefined;
    try {
        const j = JSON.parse(body.toString("utf8"));
        if (j && typeof j.error?.code === "string") {
            code = j.error.code;
            message = typeof j.error.message === "string" ? j.error.message : "";
            if (typeof j.error.node === "string" && NODE_RE.test(j.error.node))
                node = j.error.node;
        }
    } catch {
        // not sandboxd's JSON (libmicrohttpd's own HTML, say): keep the status line
    }
    const ra = Number(res.headers["retry-after"]);
    return errorFor(status, code, message, Number.isFinite(ra) ? ra : undefined, node);
}

export class Transport {
    private readonly target: Target;
    private readonly key: string | undefined;
    private readonly agent: http.Agent;
    readonly timeoutMs: number;
    readonly streamTimeoutMs: number;

    constructor(opts: TransportOptions = {}) {
        this.target = parseUrl(opts.url ?? process.env.SANDBOXD_URL ?? DEFAULT_SOCKET);
        this.key = opts.key ?? process.env.SANDBOXD_KEY ?? undefined;
        this.timeoutMs = opts.timeoutMs ?? 60_000;
        this.streamTimeoutMs = opts.streamTimeoutMs ?? 0;
        const AgentClass = this.target.tls ? https.Agent : http.Agent;
        this.agent = new AgentClass({ keepAlive: true });
    }

    /** Closes the kept-alive connections. */
    close(): void {
        this.agent.destroy();
    }

    /**
     * Sends a request and resolves with the answer's head (any status); the body is the caller's
     * to read. A 421 wrong_node is sent again, once, to the node's URL in $SANDBOXD_NODES when its
     * body can be sent twice (JSON or bytes, not a stream); otherwise it throws WrongNodeError
     * saying which node has the session and why it was not asked.
     */
    async request(method: string, path: string, opts: RequestOptions = {}): Promise<http.IncomingMessage> {
        const res = await this.requestAt(this.target, this.agent, method, path, opts);
        if (res.statusCode !== 421)
            return res;
        const err = await answerError(res);
        if (!(err instanceof WrongNodeError) || !err.node)
            throw err;
        const node = err.node;
        const fail = (why: string) => {
            const e = new WrongNodeError(err.status, err.code, `the session is on node ${node}, ${why}`);
            e.node = node;
            return e;
        };
        let url: string | undefined;
        try {
            url = parseNodes(process.env.SANDBOXD_NODES).get(node);
        } catch (e) {
            throw fail(`and ${(e as Error).message}`);
        }
        if (url === undefined)
            throw fail(`and $SANDBOXD_NODES does not name it (NAME=URL entries, e.g. ${node}=http://HOST:8421)`);
        const b = opts.body;
        if (b !== undefined && typeof b !== "string" && !(b instanceof Uint8Array))
            throw fail(`(${url}): a streamed body cannot be sent twice; send it there`);
        const target = parseUrl(url);
        const agent = new (target.tls ? https.Agent : http.Agent)({ keepAlive: false });
        const again = await this.requestAt(target, agent, method, path, opts);
        again.once("close", () => agent.destroy());
        return again;
    }

    private requestAt(t: Target, agent: http.Agent, method: string, path: string, opts: RequestOptions): Promise<http.IncomingMessage> {
        const headers: http.OutgoingHttpHeaders = { Accept: "application/json, application/x-ndjson, */*", ...opts.headers };
        if (this.key && !t.socketPath)
            headers.Authorization = `Bearer ${this.key}`;
        let payload: Buffer | undefined;
        let stream: Readable | undefined;
        if (opts.json !== undefined) {
            payload = Buffer.from(JSON.stringify(opts.json), "utf8");
            headers["Content-Type"] = "application/json";
        } else if (opts.body !== undefined) {
            headers["Content-Type"] = opts.contentType ?? "application/octet-stream";
            const b = opts.body;
            if (typeof b === "string")
                payload = Buffer.from(b, "utf8");
            else if (b instanceof Uint8Array)
                payload = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
            else
                stream = b instanceof Readable ? b : Readable.from(b);
        }
        if (stream)
            // refusals (no such directory, too large) come before the body is sent
            headers.Expect = "100-continue";
        if (payload)
            headers["Content-Length"] = payload.length;
        else if (stream && opts.length !== undefined)
            headers["Content-Length"] = opts.length;
        else if (!stream && method !== "GET" && method !== "HEAD")
            headers["Content-Length"] = 0;

        const reqOpts: http.RequestOptions = {
            method,
            path: t.prefix + path + queryString(opts.query),
            headers,
            agent,
        };
        if (t.socketPath) {
            reqOpts.socketPath = t.socketPath;
            reqOpts.host = "localhost";
        } else {
            reqOpts.host = t.host;
            reqOpts.port = t.port;
        }
        const timeout = opts.timeoutMs ?? this.timeoutMs;
        const mod = t.tls ? https : http;

        return new Promise((resolve, reject) => {
            let answered = false;
            const req = mod.request(reqOpts, (res) => {
                answered = true;
                resolve(res);
            });
            req.on("error", (e) => {
                if (answered)
                    return;
                reject(e instanceof TransportError ? e :
                    new TransportError(`${method} ${path}: ${e.message}`, { cause: e }));
            });
            // idle time of the connection, answer included (a stream that stalls ends)
            if (timeout > 0)
                req.setTimeout(timeout, () => req.destroy(new TransportError(`${method} ${path}: nothing moved for ${timeout} ms`)));
            if (stream) {
                const body = stream;
                let sending = false;
                const send = () => {
                    if (sending || answered)
                        return;
                    sending = true;
                    clearTimeout(fallback);
                    body.on("error", (e) => req.destroy(new TransportError(`reading the body to send: ${e.message}`, { cause: e })));
                    body.pipe(req);
                };
                // a server (or a proxy) that does not answer 100 Continue gets the body after a second, as curl does
                const fallback = setTimeout(send, 1000);
                req.on("continue", send);
                // an answer before the whole body went (413, say): stop sending
                req.on("response", (res) => {
                    clearTimeout(fallback);
                    if (req.writableFinished)
                        return;
                    if (sending)
                        body.unpipe(req);
                    body.destroy();
                    // the request's body is unfinished: its connection cannot carry another request
                    res.once("end", () => req.destroy());
                });
                req.on("close", () => clearTimeout(fallback));
                req.flushHeaders();
            } else {
                req.end(payload);
            }
        });
    }

    /** A request whose answer is JSON: the parsed body, or the SandboxdError of the answer. */
    async json<T>(method: string, path: string, opts: RequestOptions = {}): Promise<{ status: number; body: T }> {
        const res = await this.request(method, path, opts);
        const status = res.statusCode ?? 0;
        if (status >= 400)
            throw await answerError(res);
        const raw = await readBody(res, MAX_JSON_BYTES);
        try {
            return { status, body: JSON.parse(raw.toString("utf8")) as T };
        } catch (e) {
            throw new TransportError(`${method} ${path}: the answer (status ${status}) is not JSON`, { cause: e });
        }
    }

    /** A request whose answer is streamed: the answer, or the SandboxdError of an error status. */
    async stream(method: string, path: string, opts: RequestOptions = {}): Promise<http.IncomingMessage> {
        const res = await this.request(method, path, { timeoutMs: this.streamTimeoutMs, ...opts });
        if ((res.statusCode ?? 0) >= 400)
            throw await answerError(res);
        return res;
    }
}
