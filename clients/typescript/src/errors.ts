// SPDX-License-Identifier: LGPL-2.1-or-later
// Errors: SandboxdError is an answer of sandboxd ({"error":{"code","message"}} and its
// HTTP status); TransportError is a failure to talk to it at all.

/** An error answer of sandboxd: the shared error code, its message and the HTTP status. */
export class SandboxdError extends Error {
    /** The shared error code, e.g. "not_found", "conflict", "unsupported". */
    readonly code: string;
    /** The HTTP status of the answer. */
    readonly status: number;
    /** Seconds from the Retry-After header, when sandboxd sent one. */
    readonly retryAfter: number | undefined;

    constructor(status: number, code: string, message: string, retryAfter?: number) {
        super(message ? `${code}: ${message}` : code);
        this.name = new.target.name;
        this.status = status;
        this.code = code;
        this.retryAfter = retryAfter;
    }
}

/** 400: invalid input. */
export class BadRequestError extends SandboxdError {}
/** 401: no key, or a wrong one (TCP). */
export class UnauthorizedError extends SandboxdError {}
/** 403: not allowed. */
export class ForbiddenError extends SandboxdError {}
/** 404: no such route, session, command or file. */
export class NotFoundError extends SandboxdError {}
/** 409: a conflict (session_not_active, not_running, exists, not_empty, busy, ...). */
export class ConflictError extends SandboxdError {}
/** 413: a body over its limit. */
export class PayloadTooLargeError extends SandboxdError {}
/** 416: an offset past the end. */
export class InvalidOffsetError extends SandboxdError {}
/** 421 wrong_node: the session is another node's, node (sandboxd-api(7), NODES). */
export class WrongNodeError extends SandboxdError {
    /** The node that has the session, as sandboxd named it. */
    node: string | undefined;
}
/** 429: a quota (too_many_sessions, too_many_running, too_many_file_operations, ...). */
export class TooManyRequestsError extends SandboxdError {}
/** 501: not supported on this host (freezing on cgroup v1). */
export class UnsupportedError extends SandboxdError {}
/**
 * 503: draining, overloaded or stopping; see retryAfter. Also a load balancer's
 * node_unavailable (503, or 504 when the node did not answer in time; HAProxy with
 * contrib/haproxy/haproxy.cfg, sandboxd-api(7), NODES), node naming the session's node
 * when the balancer did.
 */
export class UnavailableError extends SandboxdError {
    /** The session's node, when a balancer's node_unavailable named it. */
    node: string | undefined;
}

/** A load balancer's code for its own 503 and 504 (contrib/haproxy/haproxy.cfg). */
export const NODE_UNAVAILABLE = "node_unavailable";

const BY_STATUS: Record<number, typeof SandboxdError> = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    416: InvalidOffsetError,
    421: WrongNodeError,
    429: TooManyRequestsError,
    501: UnsupportedError,
    503: UnavailableError,
};

/**
 * The error for an answer: the subclass of its status, else SandboxdError; a balancer's
 * node_unavailable is UnavailableError whether 503 or 504 (sandboxd's own 504,
 * upstream_timeout of a port, stays SandboxdError).
 */
export function errorFor(status: number, code: string, message: string, retryAfter?: number, node?: string): SandboxdError {
    const cls = code === NODE_UNAVAILABLE && status !== 421 ? UnavailableError : BY_STATUS[status] ?? SandboxdError;
    const e = new cls(status, code, message, retryAfter);
    if (e instanceof WrongNodeError || e instanceof UnavailableError)
        e.node = node;
    return e;
}

/** sandboxd could not be reached, or the connection broke, timed out or carried garbage. */
export class TransportError extends Error {
    constructor(message: string, options?: { cause?: unknown }) {
        super(message, options);
        this.name = "TransportError";
    }
}
