/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "backend.h"

void exec_spec_done(ExecSpec *s) {
        strv_free(s->argv);
        strv_free(s->env);
        free(s->cwd);
        free(s->stdin_data);
        free(s->request_id);
        *s = (ExecSpec) {};
}

int backend_open(const BackendConfig *config, Backend **ret) {
        /* a remote sandboxd: HTTP, always */
        if (config->url) {
                if (config->transport == BACKEND_TRANSPORT_DBUS)
                        return -EPROTONOSUPPORT;
                return backend_http_new(config->url, config->key, ret);
        }
        if (config->transport == BACKEND_TRANSPORT_HTTP)
                return backend_http_new(NULL, config->key, ret);
        /* the local sandboxd: D-Bus. If the bus is not there, that is an error, not a reason
         * to try something else behind the caller's back. */
        return backend_dbus_new(ret);
}

Backend *backend_free(Backend *b) {
        if (!b)
                return NULL;
        b->ops->free(b);
        return NULL;
}

const sandboxd_error *backend_error(Backend *b) {
        return b->ops->last_error(b);
}

const char *backend_error_message(Backend *b) {
        const sandboxd_error *e = backend_error(b);
        return e && e->message[0] ? e->message : "unknown error";
}
