/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The HTTP transport: libsandboxd, over the local unix socket or TCP. */

#include "backend.h"

typedef struct HttpBackend {
        Backend backend;
        sandboxd_client *client;
        backend_wakeup_fn wakeup;
        void *wakeup_userdata;
} HttpBackend;

typedef struct EventForward {
        Backend *backend;
        backend_event_fn fn;
        void *userdata;
} EventForward;

static HttpBackend *http(Backend *b) {
        return (HttpBackend *) b;
}

static void http_free(Backend *b) {
        sandboxd_client_free(http(b)->client);
        free(b->description);
        free(b);
}

static const sandboxd_error *http_last_error(Backend *b) {
        return sandboxd_client_last_error(http(b)->client);
}

static int forward_wakeup(sandboxd_client *c, int fd, void *userdata) {
        HttpBackend *h = userdata;
        return h->wakeup(&h->backend, fd, h->wakeup_userdata);
}

static int http_set_wakeup(Backend *b, int fd, backend_wakeup_fn fn, void *userdata) {
        http(b)->wakeup = fn;
        http(b)->wakeup_userdata = userdata;
        return sandboxd_client_set_wakeup(http(b)->client, fd, fn ? forward_wakeup : NULL, b);
}

static int forward_event(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        EventForward *f = userdata;
        return f->fn ? f->fn(f->backend, ev, f->userdata) : 0;
}

static int http_health(Backend *b, char **ret) {
        return sandboxd_health(http(b)->client, ret);
}

static int http_drain(Backend *b, int drain, char **ret) {
        return sandboxd_drain(http(b)->client, drain, ret);
}

static int http_session_create(Backend *b, const char *user, const char *workspace, const char *options,
                               sandboxd_session **ret, bool *ret_created) {
        return sandboxd_session_create(http(b)->client, user, workspace, options, ret, ret_created);
}

static int http_session_get(Backend *b, const char *id, sandboxd_session **ret) {
        return sandboxd_session_get(http(b)->client, id, ret);
}

static int http_session_list(Backend *b, const char *user, sandboxd_session ***ret, size_t *ret_n) {
        return sandboxd_session_list(http(b)->client, user, ret, ret_n);
}

static int http_session_close(Backend *b, const char *id, bool purge, sandboxd_session **ret) {
        return sandboxd_session_close(http(b)->client, id, purge, ret);
}

static int http_session_freeze(Backend *b, const char *id, bool freeze, sandboxd_session **ret) {
        return sandboxd_session_freeze(http(b)->client, id, freeze, ret);
}

static int make_exec(const ExecSpec *s, sandboxd_exec **ret) {
        sandboxd_exec *e = NULL;
        int r;

        r = sandboxd_exec_new(&e);
        if (r < 0)
                return r;
        r = sandboxd_exec_set_argv(e, (const char *const *) s->argv);
        if (r >= 0 && s->cwd)
                r = sandboxd_exec_set_cwd(e, s->cwd);
        for (char **i = s->env; r >= 0 && i && *i; i++) {
                _cleanup_free_ char *name = strndup(*i, strcspn(*i, "="));
                const char *eq = strchr(*i, '=');
                r = !name ? -ENOMEM : !eq ? -EINVAL : sandboxd_exec_set_env(e, name, eq + 1);
        }
        if (r >= 0 && s->timeout_ms > 0)
                r = sandboxd_exec_set_timeout_ms(e, s->timeout_ms);
        if (r >= 0 && s->has_stdin)
                r = sandboxd_exec_set_stdin(e, s->stdin_data, s->stdin_size);
        if (r >= 0 && s->request_id)
                r = sandboxd_exec_set_request_id(e, s->request_id);
        if (r < 0) {
                sandboxd_exec_free(e);
                return r;
        }
        *ret = e;
        return 0;
}

static int http_exec_run(Backend *b, const char *session, const ExecSpec *spec, backend_event_fn fn, void *userdata,
                         sandboxd_result **ret) {
        EventForward f = { b, fn, userdata };
        sandboxd_exec *e = NULL;
        int r;

        r = make_exec(spec, &e);
        if (r < 0)
                return r;
        r = sandboxd_exec_run(http(b)->client, session, e, forward_event, &f, ret);
        sandboxd_exec_free(e);
        return r;
}

static int http_exec_start(Backend *b, const char *session, const ExecSpec *spec, char **ret_request_id) {
        sandboxd_exec *e = NULL;
        int r;

        r = make_exec(spec, &e);
        if (r < 0)
                return r;
        r = sandboxd_exec_start(http(b)->client, session, e, ret_request_id);
        sandboxd_exec_free(e);
        return r;
}

static int http_command_attach(Backend *b, const char *session, const char *rid, uint64_t offset, backend_event_fn fn,
                               void *userdata, sandboxd_result **ret) {
        EventForward f = { b, fn, userdata };
        return sandboxd_command_attach(http(b)->client, session, rid, offset, forward_event, &f, ret);
}

static int http_command_wait(Backend *b, const char *session, const char *rid, uint64_t timeout_usec,
                             sandboxd_result **ret) {
        return sandboxd_command_wait(http(b)->client, session, rid, timeout_usec, ret);
}

static int http_command_get(Backend *b, const char *session, const char *rid, sandboxd_result **ret) {
        return sandboxd_command_get(http(b)->client, session, rid, ret);
}

static int http_command_list(Backend *b, const char *session, sandboxd_result ***ret, size_t *ret_n) {
        return sandboxd_command_list(http(b)->client, session, ret, ret_n);
}

static int http_command_signal(Backend *b, const char *session, const char *rid, int sig) {
        return sandboxd_command_signal(http(b)->client, session, rid, sig);
}

static int http_file_upload(Backend *b, const char *session, const char *path, int fd, uint64_t size,
                            sandboxd_progress_fn fn, void *userdata) {
        return sandboxd_file_upload(http(b)->client, session, path, fd, size, fn, userdata);
}

static int http_file_write(Backend *b, const char *session, const char *path, const void *data, size_t size) {
        return sandboxd_file_write(http(b)->client, session, path, data, size);
}

static int http_file_download(Backend *b, const char *session, const char *path, int fd, sandboxd_progress_fn fn,
                              void *userdata) {
        return sandboxd_file_download(http(b)->client, session, path, fd, fn, userdata);
}

static int http_file_read(Backend *b, const char *session, const char *path, size_t max, char **ret, size_t *ret_size) {
        return sandboxd_file_read(http(b)->client, session, path, max, ret, ret_size);
}

static int http_file_stat(Backend *b, const char *session, const char *path, sandboxd_file_info **ret) {
        return sandboxd_file_stat(http(b)->client, session, path, ret);
}

static int http_file_list(Backend *b, const char *session, const char *path, sandboxd_file_info ***ret, size_t *ret_n,
                          bool *ret_truncated) {
        return sandboxd_file_list(http(b)->client, session, path, ret, ret_n, ret_truncated);
}

static int http_file_mkdir(Backend *b, const char *session, const char *path) {
        return sandboxd_file_mkdir(http(b)->client, session, path);
}

const BackendOps backend_http_ops = {
        .name = "http",
        .free = http_free,
        .last_error = http_last_error,
        .set_wakeup = http_set_wakeup,
        .health = http_health,
        .drain = http_drain,
        .session_create = http_session_create,
        .session_get = http_session_get,
        .session_list = http_session_list,
        .session_close = http_session_close,
        .session_freeze = http_session_freeze,
        .exec_run = http_exec_run,
        .exec_start = http_exec_start,
        .command_attach = http_command_attach,
        .command_wait = http_command_wait,
        .command_get = http_command_get,
        .command_list = http_command_list,
        .command_signal = http_command_signal,
        .file_upload = http_file_upload,
        .file_write = http_file_write,
        .file_download = http_file_download,
        .file_read = http_file_read,
        .file_stat = http_file_stat,
        .file_list = http_file_list,
        .file_mkdir = http_file_mkdir,
};

int backend_http_new(const char *url, const char *key, Backend **ret) {
        HttpBackend *h;
        int r;

        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->backend.ops = &backend_http_ops;
        r = sandboxd_client_new(url, key, &h->client);
        if (r >= 0) {
                if (!url || startswith(url, "unix:"))
                        r = asprintf(&h->backend.description, "the unix socket %s",
                                     url ? url + 5 : SANDBOXD_DEFAULT_SOCKET);
                else
                        r = asprintf(&h->backend.description, "%s", url);
                r = r < 0 ? -ENOMEM : 0;
        }
        if (r < 0) {
                h->backend.description = NULL;
                sandboxd_client_free(h->client);
                free(h);
                return r;
        }
        *ret = &h->backend;
        return 0;
}
