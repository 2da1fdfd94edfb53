/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>

#include "error-table.h"
#include "internal.h"
#include "validate.h"

static const char *const kind_table[_SANDBOXD_ERROR_KIND_MAX] = {
        [SANDBOXD_ERROR_NONE] = "none",
        [SANDBOXD_ERROR_TRANSPORT] = "transport",
        [SANDBOXD_ERROR_PROTOCOL] = "protocol",
        [SANDBOXD_ERROR_INVALID] = "invalid",
        [SANDBOXD_ERROR_UNAUTHORIZED] = "unauthorized",
        [SANDBOXD_ERROR_FORBIDDEN] = "forbidden",
        [SANDBOXD_ERROR_NOT_FOUND] = "not_found",
        [SANDBOXD_ERROR_CONFLICT] = "conflict",
        [SANDBOXD_ERROR_TOO_LARGE] = "too_large",
        [SANDBOXD_ERROR_RANGE] = "range",
        [SANDBOXD_ERROR_UNSUPPORTED] = "unsupported",
        [SANDBOXD_ERROR_SYSTEMD] = "systemd",
        [SANDBOXD_ERROR_UNAVAILABLE] = "unavailable",
        [SANDBOXD_ERROR_SERVER] = "server",
        [SANDBOXD_ERROR_CANCELLED] = "cancelled",
        [SANDBOXD_ERROR_LOCAL] = "local",
        [SANDBOXD_ERROR_WRONG_NODE] = "wrong_node",
};

_public_ const char *sandboxd_error_kind_to_string(sandboxd_error_kind kind) {
        if ((int) kind < 0 || kind >= _SANDBOXD_ERROR_KIND_MAX)
                return NULL;
        return kind_table[kind];
}

int errno_from_curl(CURLcode code, long os_errno) {
        switch (code) {
        case CURLE_OK:
                return 0;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_URL_MALFORMAT:
                return -EINVAL;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_COULDNT_CONNECT:
                /* ENOENT (no socket there), EACCES (not in group sandboxd), ECONNREFUSED, ... */
                return os_errno > 0 ? -(int) os_errno : -ECONNREFUSED;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
                return -ECONNRESET;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
                return -EPROTO;
        case CURLE_WEIRD_SERVER_REPLY:
                return -EBADMSG;
        case CURLE_ABORTED_BY_CALLBACK:
        case CURLE_WRITE_ERROR:
        case CURLE_READ_ERROR:
                return -ECANCELED;
        default:
                return -EIO;
        }
}

void error_clear(sandboxd_error *e) {
        *e = (sandboxd_error) {};
}

int error_set(sandboxd_error *e, sandboxd_error_kind kind, int error, const char *fmt, ...) {
        va_list ap;

        e->kind = kind;
        e->error = error;
        va_start(ap, fmt);
        (void) vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        return error;
}

int error_from_http(sandboxd_error *e, long status, const char *body, size_t size) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *err = NULL;
        const char *code = NULL, *message = NULL, *node = NULL;
        sandboxd_error_kind kind = api_error_kind_from_http(status);

        if (kind == SANDBOXD_ERROR_NONE)
                kind = SANDBOXD_ERROR_PROTOCOL;
        error_clear(e);
        e->kind = kind;
        e->error = api_error_kind_errno(kind);
        e->http_status = status;

        if (body && size > 0 && json_parse_text(body, size, &o) >= 0 &&
            json_object_object_get_ex(o, "error", &err) && json_object_is_type(err, json_type_object)) {
                code = json_get_string(err, "code");
                message = json_get_string(err, "message");
                node = json_get_string(err, "node");
        }
        /* only a name a node may have: it goes into messages and is looked up in SANDBOXD_NODES */
        if (code && streq(code, "wrong_node") && node && node_name_is_valid(node))
                snprintf(e->node, sizeof(e->node), "%s", node);
        if (code)
                snprintf(e->code, sizeof(e->code), "%s", code);
        if (message)
                snprintf(e->message, sizeof(e->message), "%s", message);
        else if (body && size > 0 && size < 200 && !memchr(body, 0, size)) {
                /* the first line; body need not be NUL-terminated */
                size_t k = 0;
                while (k < size && body[k] != '\r' && body[k] != '\n')
                        k++;
                snprintf(e->message, sizeof(e->message), "HTTP %ld: %.*s", status, (int) k, body);
        }
        else
                snprintf(e->message, sizeof(e->message), "HTTP status %ld", status);
        return e->error;
}

int client_fail(sandboxd_client *c, int err) {
        if (err >= 0)
                return err;
        if (c->error.kind == SANDBOXD_ERROR_NONE)
                error_set(&c->error, err == -ECANCELED ? SANDBOXD_ERROR_CANCELLED : SANDBOXD_ERROR_LOCAL, err, "%s",
                          strerror(-err));
        return err;
}

void client_begin(sandboxd_client *c) {
        error_clear(&c->error);
}

int client_done(sandboxd_client *c, int r) {
        if (r < 0)
                return client_fail(c, r);
        error_clear(&c->error);
        return r;
}
