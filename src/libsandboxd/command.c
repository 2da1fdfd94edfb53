/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <signal.h>
#include <time.h>

#include "encoding.h"
#include "internal.h"

_public_ int sandboxd_exec_new(sandboxd_exec **ret) {
        sandboxd_exec *e;

        if (!ret)
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->body = json_object_new_object();
        if (!e->body) {
                free(e);
                return -ENOMEM;
        }
        e->output_fd[0] = e->output_fd[1] = e->terminal_fd = -EBADF;
        *ret = e;
        return 0;
}

_public_ sandboxd_exec *sandboxd_exec_free(sandboxd_exec *e) {
        if (!e)
                return NULL;
        json_object_put(e->body);
        free(e);
        return NULL;
}

static int object_set(json_object *o, const char *key, json_object *v) {
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

static int exec_set(sandboxd_exec *e, const char *key, json_object *v) {
        return object_set(e->body, key, v);
}

_public_ int sandboxd_exec_set_argv(sandboxd_exec *e, const char *const *argv) {
        json_object *a;

        if (!e || !argv || !argv[0])
                return -EINVAL;
        a = json_object_new_array();
        if (!a)
                return -ENOMEM;
        for (const char *const *i = argv; *i; i++) {
                json_object *s = json_object_new_string(*i);
                if (!s || json_object_array_add(a, s) < 0) {
                        json_object_put(s);
                        json_object_put(a);
                        return -ENOMEM;
                }
        }
        return exec_set(e, "argv", a);
}

_public_ int sandboxd_exec_set_cwd(sandboxd_exec *e, const char *cwd) {
        if (!e)
                return -EINVAL;
        if (!cwd) {
                json_object_object_del(e->body, "cwd");
                return 0;
        }
        return exec_set(e, "cwd", json_object_new_string(cwd));
}

_public_ int sandboxd_exec_set_env(sandboxd_exec *e, const char *name, const char *value) {
        json_object *env;

        if (!e || !name || !*name || strchr(name, '=') || !value)
                return -EINVAL;
        if (!json_object_object_get_ex(e->body, "env", &env)) {
                /* the first variable: the object goes in with it, or not at all (no "env":{}) */
                int r;

                env = json_object_new_object();
                if (!env)
                        return -ENOMEM;
                r = object_set(env, name, json_object_new_string(value));
                if (r < 0) {
                        json_object_put(env);
                        return r;
                }
                return exec_set(e, "env", env);
        }
        return object_set(env, name, json_object_new_string(value));
}

_public_ int sandboxd_exec_set_timeout_ms(sandboxd_exec *e, uint64_t ms) {
        if (!e || ms > INT64_MAX)
                return -EINVAL;
        if (ms == 0) {
                json_object_object_del(e->body, "timeout_ms");
                return 0;
        }
        return exec_set(e, "timeout_ms", json_object_new_int64((int64_t) ms));
}

_public_ int sandboxd_exec_set_stdin(sandboxd_exec *e, const void *data, size_t size) {
        json_object *o;
        Buf b = {};
        int r;

        if (!e || (!data && size > 0))
                return -EINVAL;
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        r = base64_encode(&b, data ?: "", size);
        if (r >= 0)
                r = object_set(o, "base64", json_object_new_string_len(b.data ?: "", (int) b.len));
        buf_done(&b);
        if (r < 0) {
                json_object_put(o);
                return r;
        }
        return exec_set(e, "stdin", o);
}

_public_ int sandboxd_exec_set_stdin_stream(sandboxd_exec *e, bool stream) {
        if (!e)
                return -EINVAL;
        if (!stream) {
                json_object_object_del(e->body, "stdin");
                return 0;
        }
        return exec_set(e, "stdin", json_object_new_string("stream"));
}

_public_ int sandboxd_exec_set_tty(sandboxd_exec *e, unsigned rows, unsigned cols) {
        json_object *o;
        int r;

        if (!e || (rows == 0) != (cols == 0) || rows > 1000 || cols > 1000)
                return -EINVAL;
        if (rows == 0) {
                json_object_object_del(e->body, "tty");
                return 0;
        }
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        r = object_set(o, "rows", json_object_new_int64(rows));
        if (r >= 0)
                r = object_set(o, "cols", json_object_new_int64(cols));
        if (r < 0) {
                json_object_put(o);
                return r;
        }
        return exec_set(e, "tty", o);
}

_public_ int sandboxd_exec_set_terminal_fd(sandboxd_exec *e, int fd) {
        if (!e)
                return -EINVAL;
        e->terminal_fd = fd >= 0 ? fd : -EBADF;
        return 0;
}

_public_ int sandboxd_exec_set_output_fds(sandboxd_exec *e, int stdout_fd, int stderr_fd) {
        if (!e || (stdout_fd < 0) != (stderr_fd < 0))
                return -EINVAL;
        e->output_fd[0] = stdout_fd >= 0 ? stdout_fd : -EBADF;
        e->output_fd[1] = stderr_fd >= 0 ? stderr_fd : -EBADF;
        return 0;
}

_public_ int sandboxd_exec_set_request_id(sandboxd_exec *e, const char *request_id) {
        if (!e)
                return -EINVAL;
        if (!request_id) {
                json_object_object_del(e->body, "request_id");
                return 0;
        }
        return exec_set(e, "request_id", json_object_new_string(request_id));
}

/* --- streams ------------------------------------------------------------------------------ */

static int ndjson_sink(HttpCall *call, const char *p, size_t n) {
        return event_reader_feed(call->userdata, p, n);
}

/* Reads a stream of events to its exit event. */
static int stream_events(sandboxd_client *c, const char *method, const char *url, const char *body,
                         const char *session, uint64_t offset, uint64_t timeout_usec, const int *output_fd,
                         sandboxd_event_fn fn, void *userdata, sandboxd_result **ret) {
        EventReader er = { .offset = offset, .client = c, .fn = fn, .userdata = userdata,
                           .output_fds = output_fd && output_fd[0] >= 0,
                           .output_fd = { output_fd ? output_fd[0] : -EBADF, output_fd ? output_fd[1] : -EBADF } };
        HttpCall call = HTTP_CALL_INIT;
        int r;

        call.method = method;
        call.url = url;
        call.body = body;
        call.body_size = body ? strlen(body) : 0;
        call.stream = true;
        call.timeout_usec = timeout_usec;
        call.sink = ndjson_sink;
        call.userdata = &er;
        r = http_call_perform(c, &call);
        if (r < 0 && er.error < 0)
                error_set(&c->error, SANDBOXD_ERROR_CANCELLED, er.error, "Stopped by the event callback.");
        else if (r == -EBADMSG || r == -EMSGSIZE)
                error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "%s %s: not a valid NDJSON event stream.",
                          method, url);
        if (r >= 0 && line_splitter_finish(&er.lines) < 0)
                r = error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "%s %s: the stream ended inside a line.",
                              method, url);
        if (r >= 0 && !er.result)
                /* the connection ended early: sandboxd restarted, say; attach again */
                r = error_set(&c->error, SANDBOXD_ERROR_TRANSPORT, -ECONNRESET,
                              "%s %s: the stream ended before the command's exit event.", method, url);
        if (r < 0) {
                http_call_done(&call);
                event_reader_done(&er);
                return r;
        }
        r = event_reader_take_result(&er, session, ret);
        http_call_done(&call);
        event_reader_done(&er);
        return r < 0 ? client_fail(c, r) : 0;
}

_public_ int sandboxd_exec_run(sandboxd_client *c, const char *session, const sandboxd_exec *e, sandboxd_event_fn fn,
                               void *userdata, sandboxd_result **ret) {
        _cleanup_free_ char *body = NULL;
        Buf url = {};
        int r;

        if (!c || !session || !e)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_exec_run(c, session, e, fn, userdata, ret));
        if (e->terminal_fd >= 0)
                return client_fail(c, error_set(&c->error, SANDBOXD_ERROR_LOCAL, -EOPNOTSUPP,
                                                "A terminal of the caller's own goes over D-Bus only."));
        body = json_to_text(e->body);
        if (!body)
                return client_fail(c, -ENOMEM);
        r = url_session(&url, c, session, "commands");
        if (r >= 0)
                r = stream_events(c, "POST", url.data, body, session, 0, 0, e->output_fd, fn, userdata, ret);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_exec_start(sandboxd_client *c, const char *session, const sandboxd_exec *e,
                                 char **ret_request_id) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        const char *rid;
        Buf url = {};
        int r;

        if (!c || !session || !e)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_exec_start(c, session, e, ret_request_id));
        if (e->terminal_fd >= 0)
                return client_fail(c, error_set(&c->error, SANDBOXD_ERROR_LOCAL, -EOPNOTSUPP,
                                                "A terminal of the caller's own goes over D-Bus only."));
        r = url_session(&url, c, session, "commands");
        if (r >= 0)
                r = url_append_query(&url, "wait", "false");
        if (r >= 0)
                r = http_json(c, "POST", url.data, e->body, NULL, &answer);
        buf_done(&url);
        if (r < 0)
                return client_done(c, r);
        rid = json_get_string(answer, "request_id");
        if (!rid)
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "The answer has no request id.");
        if (ret_request_id && !(*ret_request_id = strdup(rid)))
                return client_fail(c, -ENOMEM);
        return client_done(c, 0);
}

_public_ int sandboxd_command_attach(sandboxd_client *c, const char *session, const char *request_id,
                                    uint64_t offset, sandboxd_event_fn fn, void *userdata, sandboxd_result **ret) {
        char num[32];
        Buf url = {};
        int r;

        if (!c || !session || !request_id)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_command_attach(c, session, request_id, offset, fn, userdata, ret));
        snprintf(num, sizeof(num), "%llu", (unsigned long long) offset);
        r = url_command(&url, c, session, request_id, "events");
        if (r >= 0)
                r = url_append_query(&url, "offset", num);
        if (r >= 0)
                r = stream_events(c, "GET", url.data, NULL, session, offset, 0, NULL, fn, userdata, ret);
        buf_done(&url);
        return client_done(c, r);
}

/* --- snapshots ---------------------------------------------------------------------------- */

static int command_get(sandboxd_client *c, const char *session, const char *request_id, sandboxd_result **ret) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        Buf url = {};
        int r;

        r = url_command(&url, c, session, request_id, NULL);
        if (r >= 0)
                r = http_json(c, "GET", url.data, NULL, NULL, &answer);
        buf_done(&url);
        if (r < 0)
                return r;
        r = result_from_json(answer, ret);
        if (r == -EBADMSG)
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, r, "The answer is not a command.");
        return client_fail(c, r);
}

_public_ int sandboxd_command_get(sandboxd_client *c, const char *session, const char *request_id,
                                 sandboxd_result **ret) {
        if (!c || !session || !request_id || !ret)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_command_get(c, session, request_id, ret));
        return client_done(c, command_get(c, session, request_id, ret));
}

static uint64_t now_monotonic(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

_public_ int sandboxd_command_wait(sandboxd_client *c, const char *session, const char *request_id,
                                  uint64_t timeout_usec, sandboxd_result **ret) {
        uint64_t deadline = timeout_usec > 0 ? now_monotonic() + timeout_usec : 0;
        Buf url = {};
        int r;

        if (!c || !session || !request_id || !ret)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_command_wait(c, session, request_id, timeout_usec, ret));
        for (;;) {
                sandboxd_result *snap = NULL;
                uint64_t left = 0, now;
                char num[32];

                r = command_get(c, session, request_id, &snap);
                if (r < 0)
                        break;
                if (snap->terminal) {
                        *ret = snap;
                        break;
                }
                /* follow the events from where the log is now, to the exit event */
                if (deadline > 0) {
                        now = now_monotonic();
                        if (now >= deadline) {
                                sandboxd_result_free(snap);
                                r = error_set(&c->error, SANDBOXD_ERROR_LOCAL, -ETIMEDOUT,
                                              "The command is still running.");
                                break;
                        }
                        left = deadline - now;
                }
                snprintf(num, sizeof(num), "%llu", (unsigned long long) snap->events_bytes);
                sandboxd_result_free(snap);
                url.len = 0;
                r = url_command(&url, c, session, request_id, "events");
                if (r >= 0)
                        r = url_append_query(&url, "offset", num);
                if (r >= 0)
                        r = stream_events(c, "GET", url.data, NULL, session, 0, left, NULL, NULL, NULL, NULL);
                if (r == -ETIMEDOUT) {
                        error_set(&c->error, SANDBOXD_ERROR_LOCAL, r, "The command is still running.");
                        break;
                }
                /* a broken stream: look again */
                if (r < 0 && r != -ECONNRESET)
                        break;
        }
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_command_list(sandboxd_client *c, const char *session, sandboxd_result ***ret, size_t *ret_n) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        sandboxd_result **list;
        json_object *arr;
        Buf url = {};
        size_t n;
        int r;

        if (!c || !session || !ret)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_command_list(c, session, ret, ret_n));
        r = url_session(&url, c, session, "commands");
        if (r >= 0)
                r = http_json(c, "GET", url.data, NULL, NULL, &answer);
        buf_done(&url);
        if (r < 0)
                return client_done(c, r);
        if (!json_object_object_get_ex(answer, "commands", &arr) || !json_object_is_type(arr, json_type_array))
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "The answer has no list of commands.");
        n = json_object_array_length(arr);
        list = calloc(n + 1, sizeof(*list));
        if (!list)
                return client_fail(c, -ENOMEM);
        for (size_t i = 0; i < n; i++) {
                r = result_from_json(json_object_array_get_idx(arr, i), &list[i]);
                if (r < 0) {
                        sandboxd_result_list_free(list);
                        return r == -EBADMSG ? error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, r,
                                                         "The answer is not a list of commands.")
                                             : client_fail(c, r);
                }
        }
        *ret = list;
        if (ret_n)
                *ret_n = n;
        return client_done(c, 0);
}

static const char *signal_name(int sig) {
        switch (sig) {
        case SIGINT:
                return "SIGINT";
        case SIGTERM:
                return "SIGTERM";
        case SIGKILL:
                return "SIGKILL";
        case SIGHUP:
                return "SIGHUP";
        case SIGUSR1:
                return "SIGUSR1";
        case SIGUSR2:
                return "SIGUSR2";
        default:
                return NULL;
        }
}

_public_ int sandboxd_command_signal(sandboxd_client *c, const char *session, const char *request_id, int sig) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        const char *name = signal_name(sig);
        Buf url = {};
        int r;

        if (!c || !session || !request_id)
                return -EINVAL;
        client_begin(c);
        if (!name)
                return error_set(&c->error, SANDBOXD_ERROR_LOCAL, -EINVAL,
                                 "Only SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGUSR1 and SIGUSR2 can be sent.");
        BUS_DISPATCH(c, bus_command_signal(c, session, request_id, sig));
        body = json_object_new_object();
        if (!body || object_set(body, "signal", json_object_new_string(name)) < 0)
                return client_fail(c, -ENOMEM);
        r = url_command(&url, c, session, request_id, "signal");
        if (r >= 0)
                r = http_json(c, "POST", url.data, body, NULL, NULL);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_command_resize(sandboxd_client *c, const char *session, const char *request_id, unsigned rows,
                                     unsigned cols) {
        _cleanup_(json_object_putp) json_object *body = NULL;
        Buf url = {};
        int r;

        if (!c || !session || !request_id)
                return -EINVAL;
        client_begin(c);
        if (rows < 1 || rows > 1000 || cols < 1 || cols > 1000)
                return error_set(&c->error, SANDBOXD_ERROR_LOCAL, -EINVAL, "Rows and columns must be 1 to 1000.");
        BUS_DISPATCH(c, bus_command_resize(c, session, request_id, rows, cols));
        body = json_object_new_object();
        if (!body || object_set(body, "rows", json_object_new_int64(rows)) < 0 ||
            object_set(body, "cols", json_object_new_int64(cols)) < 0)
                return client_fail(c, -ENOMEM);
        r = url_command(&url, c, session, request_id, "resize");
        if (r >= 0)
                r = http_json(c, "POST", url.data, body, NULL, NULL);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_command_write_stdin(sandboxd_client *c, const char *session, const char *request_id,
                                         const void *data, size_t size, bool eof) {
        HttpCall call = HTTP_CALL_INIT;
        Buf url = {};
        int r;

        if (!c || !session || !request_id || (!data && size > 0))
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_command_write_stdin(c, session, request_id, data, size, eof));
        r = url_command(&url, c, session, request_id, "stdin");
        if (r >= 0 && eof)
                r = url_append_query(&url, "eof", "1");
        if (r >= 0) {
                call.method = "POST";
                call.url = url.data;
                call.content_type = "application/octet-stream";
                call.body = data ?: "";
                call.body_size = size;
                r = http_call_perform(c, &call);
                http_call_done(&call);
        }
        buf_done(&url);
        return client_done(c, r);
}
