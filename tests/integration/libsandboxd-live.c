/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libsandboxd against a running sandboxd, through its public header and shared library
 * only, as a program that uses it would. Run by test_libsandboxd.py:
 *
 *   libsandboxd-live URL USER WORKSPACE     (URL "" for the local unix socket, "dbus" for
 *                                            sandboxd_client_new_bus())
 *
 * Over D-Bus it also asks an HTTP client of the unix socket for the same session and
 * command, and checks that both transports fill the structs alike.
 * Prints one line per check; exits 0 when all passed. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libsandboxd.h"

static int failed;

#define CHECK(expr)                                                                               \
        do {                                                                                      \
                if (!(expr)) {                                                                    \
                        failed++;                                                                 \
                        fprintf(stderr, "FAIL %s:%d: %s (last error: %s %s)\n", __FILE__, __LINE__, #expr, \
                                sandboxd_error_kind_to_string(sandboxd_client_last_error(c)->kind), \
                                sandboxd_client_last_error(c)->message);                        \
                }                                                                                 \
        } while (0)

typedef struct Collected {
        char out[4096], err[4096];
        size_t n_out, n_err;
        unsigned accepted, exits, events;
        uint64_t offset_after_first_output;
} Collected;

static int collect(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        Collected *col = userdata;

        col->events++;
        switch (ev->type) {
        case SANDBOXD_EVENT_ACCEPTED:
                col->accepted++;
                break;
        case SANDBOXD_EVENT_STDOUT:
                if (col->n_out == 0)
                        col->offset_after_first_output = ev->offset;
                memcpy(col->out + col->n_out, ev->data, ev->size);
                col->n_out += ev->size;
                break;
        case SANDBOXD_EVENT_STDERR:
                memcpy(col->err + col->n_err, ev->data, ev->size);
                col->n_err += ev->size;
                break;
        case SANDBOXD_EVENT_EXIT:
                col->exits++;
                break;
        default:
                break;
        }
        return 0;
}

static bool same_str(const char *a, const char *b) {
        return a && b ? strcmp(a, b) == 0 : a == b;
}

/* the fields that do not move between two looks at an idle session */
static bool same_session(const sandboxd_session *a, const sandboxd_session *b) {
        return same_str(a->id, b->id) && same_str(a->user, b->user) && same_str(a->workspace, b->workspace) &&
               same_str(a->state, b->state) && same_str(a->unit, b->unit) &&
               same_str(a->workspace_path, b->workspace_path) && a->frozen == b->frozen && a->ttl_s == b->ttl_s &&
               a->created_at_usec == b->created_at_usec && a->memory_max == b->memory_max &&
               a->cpu_quota == b->cpu_quota && a->tasks_max == b->tasks_max && a->commands == b->commands &&
               a->running == b->running && same_str(a->exec_mode, b->exec_mode);
}

static bool same_result(const sandboxd_result *a, const sandboxd_result *b) {
        return same_str(a->request_id, b->request_id) && same_str(a->unit, b->unit) &&
               same_str(a->session, b->session) && a->status == b->status && a->terminal == b->terminal &&
               a->exit_code == b->exit_code && a->signal == b->signal && same_str(a->signal_name, b->signal_name) &&
               same_str(a->reason, b->reason) && a->stdout_bytes == b->stdout_bytes &&
               a->stderr_bytes == b->stderr_bytes;
}

static size_t drain_pipe(int fd, char *buf, size_t size) {
        size_t n = 0;
        ssize_t l;

        while (n < size && (l = read(fd, buf + n, size - n)) > 0)
                n += (size_t) l;
        return n;
}

static int stop_at_first_output(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        return ev->type == SANDBOXD_EVENT_STDOUT ? -ECANCELED : 0;
}

int main(int argc, char *argv[]) {
        const char *argv1[] = { "sh", "-c", "echo out; echo err >&2; exit 3", NULL };
        const char *argv2[] = { "sh", "-c", "echo first; sleep 1; echo second", NULL };
        const char *argv3[] = { "sleep", "60", NULL };
        const char *argv4[] = { "sh", "-c", "echo out; echo err >&2; exit 4", NULL };
        sandboxd_client *c = NULL, *h = NULL;
        bool bus;
        sandboxd_session *s = NULL, *s2 = NULL, **list = NULL;
        sandboxd_result *res = NULL;
        sandboxd_exec *e = NULL;
        Collected col = {};
        char *rid = NULL, *json = NULL;
        bool created = false;
        size_t n = 0;
        int r;

        if (argc != 4) {
                fprintf(stderr, "usage: %s URL USER WORKSPACE\n", argv[0]);
                return 2;
        }
        bus = strcmp(argv[1], "dbus") == 0;
        r = bus ? sandboxd_client_new_bus(&c) : sandboxd_client_new(argv[1][0] ? argv[1] : NULL, getenv("SANDBOXD_KEY"), &c);
        if (r < 0) {
                fprintf(stderr, "sandboxd_client_new: %s\n", strerror(-r));
                return 1;
        }
        CHECK(sandboxd_client_is_bus(c) == bus);
        /* the same sandboxd over HTTP, to compare with */
        if (bus && sandboxd_client_new(NULL, NULL, &h) < 0)
                return 1;

        /* health */
        CHECK(sandboxd_health(c, &json) == 0 && strstr(json, "\"status\""));
        free(json);

        /* sessions */
        CHECK(sandboxd_session_create(c, argv[2], argv[3], "{\"ttl_s\":600,\"exec_mode\":\"session\"}", &s, &created) == 0);
        if (!s)
                return 1;
        /* NODE_HEX: the node's name, '_', 16 hex digits */
        CHECK(created && s->node && strncmp(s->id, s->node, strlen(s->node)) == 0 && s->id[strlen(s->node)] == '_' &&
              strlen(s->id) == strlen(s->node) + 17 && strcmp(s->state, "active") == 0 && s->ttl_s == 600);
        CHECK(same_str(s->exec_mode, "session"));
        /* asked again, with another mode: the same session, as it is */
        CHECK(sandboxd_session_create(c, argv[2], argv[3], "{\"exec_mode\":\"unit\"}", &s2, &created) == 0 && !created &&
              strcmp(s2->id, s->id) == 0 && same_str(s2->exec_mode, "session"));
        sandboxd_session_free(s2);
        /* a mode sandboxd does not have: refused, nothing created (the list below has one) */
        s2 = NULL;
        CHECK(sandboxd_session_create(c, argv[2], "other", "{\"exec_mode\":\"fast\"}", &s2, NULL) == -EINVAL && !s2);
        CHECK(sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_INVALID &&
              strcmp(sandboxd_client_last_error(c)->code, "invalid_value") == 0);
        CHECK(sandboxd_session_get(c, s->id, &s2) == 0 && strcmp(s2->user, argv[2]) == 0 && s2->json);
        sandboxd_session_free(s2);
        CHECK(sandboxd_session_list(c, argv[2], &list, &n) == 0 && n == 1 && strcmp(list[0]->id, s->id) == 0);
        sandboxd_session_list_free(list);
        CHECK(sandboxd_session_touch(c, s->id) == 0);
        if (h) {
                sandboxd_session *a = NULL, *b = NULL;
                CHECK(sandboxd_session_get(c, s->id, &a) == 0 && sandboxd_session_get(h, s->id, &b) == 0 &&
                      same_session(a, b));
                sandboxd_session_free(a);
                sandboxd_session_free(b);
        }
        CHECK(sandboxd_session_touch(c, "0123456789abcdef") == -ENOENT &&
              sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_NOT_FOUND);
        CHECK(sandboxd_session_freeze(c, "0123456789abcdef", true, NULL) == -ENOENT &&
              strcmp(sandboxd_client_last_error(c)->code, "not_found") == 0);

        /* typed errors */
        CHECK(sandboxd_session_get(c, "0123456789abcdef", &s2) == -ENOENT);
        CHECK(sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_NOT_FOUND &&
              sandboxd_client_last_error(c)->http_status == 404 &&
              strcmp(sandboxd_client_last_error(c)->code, "not_found") == 0);
        CHECK(sandboxd_session_create(c, "Bad User", "w", NULL, &s2, NULL) == -EINVAL);
        CHECK(sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_INVALID &&
              sandboxd_client_last_error(c)->message[0]);

        /* exec, streaming */
        CHECK(sandboxd_exec_new(&e) == 0);
        CHECK(sandboxd_exec_set_argv(e, argv1) == 0 && sandboxd_exec_set_request_id(e, "lib-1") == 0);
        CHECK(sandboxd_exec_run(c, s->id, e, collect, &col, &res) == 0);
        CHECK(res && res->status == SANDBOXD_STATUS_FAILED && res->exit_code == 3 &&
              sandboxd_result_exit_status(res) == 3 && strcmp(res->request_id, "lib-1") == 0);
        CHECK(col.accepted == 1 && col.exits == 1);
        CHECK(col.n_out == 4 && memcmp(col.out, "out\n", 4) == 0 && col.n_err == 4 && memcmp(col.err, "err\n", 4) == 0);
        sandboxd_result_free(res);
        res = NULL;

        /* the output to file descriptors instead of events */
        {
                int out[2], err[2];
                char ob[64] = {}, eb[64] = {};

                CHECK(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0);
                sandboxd_exec *e4 = NULL;
                CHECK(sandboxd_exec_new(&e4) == 0 && sandboxd_exec_set_argv(e4, argv4) == 0 &&
                      sandboxd_exec_set_request_id(e4, "lib-fds") == 0);
                CHECK(sandboxd_exec_set_output_fds(e4, out[1], -1) == -EINVAL);
                CHECK(sandboxd_exec_set_output_fds(e4, out[1], err[1]) == 0);
                memset(&col, 0, sizeof(col));
                CHECK(sandboxd_exec_run(c, s->id, e4, collect, &col, &res) == 0);
                close(out[1]);
                close(err[1]);
                CHECK(res && res->status == SANDBOXD_STATUS_FAILED && res->exit_code == 4 &&
                      strcmp(res->request_id, "lib-fds") == 0);
                /* no stdout or stderr events: their bytes went to the fds */
                CHECK(col.accepted == 1 && col.exits == 1 && col.n_out == 0 && col.n_err == 0);
                CHECK(drain_pipe(out[0], ob, sizeof(ob)) == 4 && memcmp(ob, "out\n", 4) == 0);
                CHECK(drain_pipe(err[0], eb, sizeof(eb)) == 4 && memcmp(eb, "err\n", 4) == 0);
                close(out[0]);
                close(err[0]);
                if (h && res) {
                        sandboxd_result *b = NULL;
                        CHECK(sandboxd_command_get(h, s->id, "lib-fds", &b) == 0 && same_result(res, b));
                        sandboxd_result_free(b);
                }
                sandboxd_result_free(res);
                res = NULL;
                sandboxd_exec_free(e4);
        }

        /* the same request id again: the first command, not a second one */
        memset(&col, 0, sizeof(col));
        CHECK(sandboxd_exec_run(c, s->id, e, collect, &col, &res) == 0 && res->exit_code == 3);
        sandboxd_result_free(res);
        res = NULL;

        /* result recovery: the snapshot */
        CHECK(sandboxd_command_get(c, s->id, "lib-1", &res) == 0 && res->terminal && res->stdout_size == 4 &&
              memcmp(res->stdout_data, "out\n", 4) == 0 && res->stdout_bytes == 4 && res->events_bytes > 0);
        sandboxd_result_free(res);
        res = NULL;

        /* stopped by the callback, then re-attached where it stopped */
        sandboxd_exec_free(e);
        CHECK(sandboxd_exec_new(&e) == 0 && sandboxd_exec_set_argv(e, argv2) == 0 &&
              sandboxd_exec_set_request_id(e, "lib-2") == 0);
        CHECK(sandboxd_exec_run(c, s->id, e, stop_at_first_output, NULL, &res) == -ECANCELED);
        CHECK(sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_CANCELLED);
        memset(&col, 0, sizeof(col));
        CHECK(sandboxd_command_attach(c, s->id, "lib-2", 0, collect, &col, &res) == 0);
        CHECK(col.n_out == strlen("first\nsecond\n") && memcmp(col.out, "first\nsecond\n", col.n_out) == 0);
        sandboxd_result_free(res);
        res = NULL;
        {
                uint64_t off = col.offset_after_first_output;
                memset(&col, 0, sizeof(col));
                CHECK(sandboxd_command_attach(c, s->id, "lib-2", off, collect, &col, &res) == 0);
                CHECK(col.accepted == 0 && col.n_out == 7 && memcmp(col.out, "second\n", 7) == 0);
                sandboxd_result_free(res);
                res = NULL;
        }
        CHECK(sandboxd_command_attach(c, s->id, "lib-2", 1 << 30, collect, &col, &res) == -ERANGE);

        /* started without waiting, then waited for; signalled */
        sandboxd_exec_free(e);
        CHECK(sandboxd_exec_new(&e) == 0 && sandboxd_exec_set_argv(e, argv3) == 0);
        CHECK(sandboxd_exec_start(c, s->id, e, &rid) == 0 && rid);
        CHECK(sandboxd_command_wait(c, s->id, rid, 300 * 1000, &res) == -ETIMEDOUT);
        CHECK(sandboxd_command_signal(c, s->id, rid, SIGTERM) == 0);
        CHECK(sandboxd_command_wait(c, s->id, rid, 30 * 1000000ULL, &res) == 0 &&
              res->status == SANDBOXD_STATUS_SIGNALED && res->signal == SIGTERM &&
              sandboxd_result_exit_status(res) == 128 + SIGTERM);
        sandboxd_result_free(res);
        res = NULL;
        CHECK(sandboxd_command_signal(c, s->id, rid, SIGTERM) == -EBUSY);
        CHECK(sandboxd_command_signal(c, s->id, "no-such-command", SIGTERM) == -ENOENT &&
              sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_NOT_FOUND);
        CHECK(sandboxd_command_signal(c, s->id, rid, SIGSEGV) == -EINVAL);
        {
                sandboxd_result **cmds = NULL;
                CHECK(sandboxd_command_list(c, s->id, &cmds, &n) == 0 && n == 4 &&
                      strcmp(cmds[0]->request_id, "lib-1") == 0);
                sandboxd_result_list_free(cmds);
        }
        free(rid);
        sandboxd_exec_free(e);

        /* exposed ports (nothing listens on them: the socket is there all the same) */
        {
                sandboxd_port *p = NULL, *q = NULL, **ports = NULL;
                const sandboxd_error *le = sandboxd_client_last_error(c);

                CHECK(sandboxd_port_expose(c, s->id, 8000, false, &p) == 0 && p && p->port == 8000 &&
                      p->host_port == 0 && !p->url && p->socket && strstr(p->socket, "/8000.sock") &&
                      p->unit && strstr(p->unit, "-port-8000.socket") && p->json);
                /* the same again: the same port; with the other host: busy */
                CHECK(sandboxd_port_expose(c, s->id, 8000, false, &q) == 0 && q && p &&
                      strcmp(q->socket, p->socket) == 0);
                sandboxd_port_free(q);
                q = NULL;
                CHECK(sandboxd_port_expose(c, s->id, 8000, true, &q) == -EBUSY && !q && strcmp(le->code, "busy") == 0 &&
                      le->http_status == 409);
                CHECK(sandboxd_port_expose(c, s->id, 9001, true, &q) == 0 && q && q->host_port > 0 && q->url &&
                      strstr(q->url, "http://127.0.0.1:"));
                CHECK(sandboxd_port_expose(c, s->id, 80, false, NULL) == -EINVAL &&
                      le->kind == SANDBOXD_ERROR_INVALID && strcmp(le->code, "invalid_value") == 0);
                CHECK(sandboxd_port_expose(c, s->id, 0, false, NULL) == -EINVAL);
                CHECK(sandboxd_port_list(c, s->id, &ports, &n) == 0 && n == 2 && ports[0]->port == 8000 &&
                      ports[1]->port == 9001 && q && ports[1]->host_port == q->host_port && !ports[2]);
                sandboxd_port_list_free(ports);
                ports = NULL;
                if (h && p && q) {
                        /* both transports fill the structs alike */
                        sandboxd_port *a = NULL, *b = NULL;
                        CHECK(sandboxd_port_get(c, s->id, 9001, &a) == 0 && sandboxd_port_get(h, s->id, 9001, &b) == 0 &&
                              a->port == b->port && a->host_port == b->host_port && same_str(a->socket, b->socket) &&
                              same_str(a->url, b->url) && same_str(a->unit, b->unit));
                        sandboxd_port_free(a);
                        sandboxd_port_free(b);
                        a = b = NULL;
                        CHECK(sandboxd_port_get(c, s->id, 8000, &a) == 0 && sandboxd_port_get(h, s->id, 8000, &b) == 0 &&
                              a->host_port == 0 && b->host_port == 0 && !a->url && !b->url &&
                              same_str(a->socket, b->socket) && same_str(a->unit, b->unit));
                        sandboxd_port_free(a);
                        sandboxd_port_free(b);
                }
                {
                        sandboxd_port *none = NULL;
                        CHECK(sandboxd_port_get(c, s->id, 9999, &none) == -ENOENT && !none);
                }
                CHECK(le->kind == SANDBOXD_ERROR_NOT_FOUND && strcmp(le->code, "port_not_exposed") == 0 &&
                      le->http_status == 404);
                CHECK(sandboxd_port_unexpose(c, s->id, 9001) == 0);
                CHECK(sandboxd_port_unexpose(c, s->id, 9001) == -ENOENT && strcmp(le->code, "port_not_exposed") == 0);
                CHECK(sandboxd_port_list(c, "0123456789abcdef", &ports, &n) == -ENOENT && strcmp(le->code, "not_found") == 0);
                CHECK(sandboxd_port_list(c, s->id, &ports, &n) == 0 && n == 1 && ports[0]->port == 8000);
                sandboxd_port_list_free(ports);
                sandboxd_port_free(p);
                sandboxd_port_free(q);
        }

        /* close */
        CHECK(sandboxd_session_close(c, s->id, false, &s2) == 0 && strcmp(s2->state, "closed") == 0);
        sandboxd_session_free(s2);
        CHECK(sandboxd_exec_new(&e) == 0 && sandboxd_exec_set_argv(e, argv3) == 0);
        CHECK(sandboxd_exec_run(c, s->id, e, NULL, NULL, &res) == -EBUSY &&
              sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_CONFLICT);
        CHECK(sandboxd_exec_start(c, s->id, e, NULL) == -EBUSY &&
              sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_CONFLICT &&
              strcmp(sandboxd_client_last_error(c)->code, "session_not_active") == 0 &&
              sandboxd_client_last_error(c)->http_status == 409);
        sandboxd_exec_free(e);

        sandboxd_session_free(s);
        sandboxd_client_free(c);
        sandboxd_client_free(h);

        /* nobody listening */
        CHECK(sandboxd_client_new("unix:/run/no-such-sandboxd.sock", NULL, &c) == 0);
        CHECK(sandboxd_health(c, &json) == -ENOENT && sandboxd_client_last_error(c)->kind == SANDBOXD_ERROR_TRANSPORT);
        sandboxd_client_free(c);

        printf("%s\n", failed ? "FAILED" : "ok");
        return failed ? 1 : 0;
}
