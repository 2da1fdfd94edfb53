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
        if (config->url)
                return backend_http_new(config->url, config->key, ret);

        /* Local sandboxd. The D-Bus API (io.sandboxd.sandbox1) is to become the default here,
         * with HTTP over the unix socket as the fallback when the bus name is not served:
         *         r = backend_dbus_new(ret);
         *         if (r != -EOPNOTSUPP) return r;
         * Until then the local transport is HTTP on /run/sandboxd/http.sock. */
        return backend_http_new(NULL, config->key, ret);
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
