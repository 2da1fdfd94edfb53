/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: the tools of commands: run and wait, and interactive commands on a terminal. */

#include <sys/timerfd.h>
#include <unistd.h>

#include "encoding.h"
#include "json-util.h"
#include "mcp.h"
#include "tail-buf.h"
#include "term-keys.h"
#include "term-text.h"
#include "time-util.h"
#include "validate.h"

typedef struct ExecProgress {
        McpCall *call;
        uint64_t output_bytes;
} ExecProgress;

static int exec_spec_from_args(json_object *args, ExecSpec *spec, size_t *ret_max, ToolError *e) {
        json_object *argv = NULL, *env = NULL;
        const char *command, *cwd, *in;
        uint64_t u;
        int r;

        *spec = (ExecSpec) {};
        *ret_max = arg_max_output;
        r = arg_string(args, "command", false, &command, e);
        if (r >= 0)
                r = arg_string(args, "cwd", false, &cwd, e);
        if (r >= 0)
                r = arg_string(args, "stdin", false, &in, e);
        if (r < 0)
                return r;
        json_object_object_get_ex(args, "argv", &argv);
        if (argv && json_object_is_type(argv, json_type_null))
                argv = NULL;
        if (!!argv == !!command)
                return tool_fail(e, "invalid_value", "Give either argv (a list of strings) or command (a shell command line).");
        if (argv) {
                size_t n;

                if (!json_object_is_type(argv, json_type_array) || (n = json_object_array_length(argv)) == 0)
                        return tool_fail(e, "invalid_value", "argv must be a non-empty list of strings.");
                spec->argv = calloc(n + 1, sizeof(char *));
                if (!spec->argv)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        json_object *a = json_object_array_get_idx(argv, i);
                        if (!json_object_is_type(a, json_type_string))
                                return tool_fail(e, "invalid_value", "argv must be a non-empty list of strings.");
                        if (!(spec->argv[i] = strdup(json_object_get_string(a))))
                                return -ENOMEM;
                }
        } else {
                spec->argv = calloc(4, sizeof(char *));
                if (!spec->argv || !(spec->argv[0] = strdup("/bin/sh")) || !(spec->argv[1] = strdup("-c")) ||
                    !(spec->argv[2] = strdup(command)))
                        return -ENOMEM;
        }
        if (cwd && !(spec->cwd = strdup(cwd)))
                return -ENOMEM;
        if (json_object_object_get_ex(args, "env", &env) && !json_object_is_type(env, json_type_null)) {
                size_t i = 0;

                if (!json_object_is_type(env, json_type_object))
                        return tool_fail(e, "invalid_value", "env must be an object of strings.");
                spec->env = calloc((size_t) json_object_object_length(env) + 1, sizeof(char *));
                if (!spec->env)
                        return -ENOMEM;
                json_object_object_foreach(env, key, val) {
                        if (!json_object_is_type(val, json_type_string))
                                return tool_fail(e, "invalid_value", "env must be an object of strings.");
                        if (asprintf(&spec->env[i++], "%s=%s", key, json_object_get_string(val)) < 0) {
                                spec->env[i - 1] = NULL;
                                return -ENOMEM;
                        }
                }
        }
        if (in) {
                spec->stdin_data = strdup(in);
                if (!spec->stdin_data)
                        return -ENOMEM;
                spec->stdin_size = strlen(in);
                spec->has_stdin = true;
        }
        if ((r = arg_range(args, "timeout_ms", 1, UINT64_MAX / USEC_PER_MSEC, 0, &u, e)) < 0)
                return r;
        spec->timeout_ms = u;
        if ((r = arg_uint(args, "max_output_bytes", &u, e)) < 0)
                return r;
        if (r > 0)
                *ret_max = (size_t) MIN(u, (uint64_t) SIZE_MAX / 2);
        return mcp_request_id(&spec->request_id);
}

static int on_exec_event(sandboxd_client *cl, const sandboxd_event *ev, void *userdata) {
        ExecProgress *p = userdata;

        (void) cl;
        if (ev->type == SANDBOXD_EVENT_STDOUT || ev->type == SANDBOXD_EVENT_STDERR) {
                p->output_bytes += ev->size;
                mcp_call_progress(p->call, p->output_bytes);
        }
        return 0;
}

/* Runs the command of args and waits for it: its events are followed for progress, then the
 * snapshot gives the kept output and what was cut. A cancelled call stops the command. */
static int exec_in(McpCall *c, const char *session, json_object *args, json_object **ret, ToolError *e) {
        ExecSpec spec;
        ExecProgress progress = { .call = c };
        sandboxd_result *res = NULL;
        _cleanup_free_ char *rid = NULL;
        size_t max;
        int r;

        r = exec_spec_from_args(args, &spec, &max, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "internal", "Out of memory.");
        if (r < 0)
                goto finish;
        if (spec.timeout_ms == 0)
                spec.timeout_ms = c->config->timeout_ms;
        r = exec_spec_start(c->client, session, &spec, &rid);
        if (r < 0 && mcp_call_cancelled(c)) {
                /* it may have been accepted before the cancellation cut the answer short */
                (void) mcp_call_stop_command(c, session, spec.request_id);
                goto finish;
        }
        if (r < 0) {
                r = tool_fail_client(c, e, r, "Starting the command failed");
                goto finish;
        }
        r = sandboxd_command_attach(c->client, session, rid, 0, on_exec_event, &progress, &res);
        sandboxd_result_free(res);
        res = NULL;
        if (r >= 0)
                r = sandboxd_command_wait(c->client, session, rid, 0, &res);
        if (r < 0 && mcp_call_cancelled(c)) {
                (void) mcp_call_stop_command(c, session, rid);
                goto finish;
        }
        if (r < 0) {
                r = tool_fail_client(c, e, r, "Waiting for the command failed");
                goto finish;
        }
        *ret = result_data(res, session, max);
        sandboxd_result_free(res);
        if (!*ret)
                r = -ENOMEM;
finish:
        exec_spec_done(&spec);
        return r;
}

static int tool_exec(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "argv", "command", "cwd", "env", "stdin", "timeout_ms",
                                               "max_output_bytes", NULL };
        const char *session;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        return exec_in(c, session, args, ret, e);
}

static int tool_run(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", "workspace", "argv", "command", "cwd", "env", "stdin",
                                               "timeout_ms", "max_output_bytes", NULL };
        _cleanup_(json_object_putp) json_object *rest = NULL;
        sandboxd_session *s = NULL;
        const char *user, *ws;
        bool oom = false;
        int r;

        r = check_args(args, allowed, e);
        if (r >= 0)
                r = scope_of(c, args, &user, &ws, e);
        if (r < 0)
                return r;
        r = sandboxd_session_create(c->client, user, ws, NULL, &s, NULL);
        if (r < 0)
                return tool_fail_client(c, e, r, "Getting the session failed");
        /* the command's arguments without the scope */
        rest = json_object_new_object();
        json_object_object_foreach(args, key, val)
                if (!streq(key, "user") && !streq(key, "workspace"))
                        json_put(rest, key, json_object_get(val), &oom);
        r = oom ? -ENOMEM : exec_in(c, s->id, rest, ret, e);
        sandboxd_session_free(s);
        return r;
}

/* --- terminals: an interactive command by rounds ------------------------------------------- */

/* Bounds of the terminal tools. The server answers one call at a time, so a call holds it
 * at most TERM_WAIT_MS_MAX (plus sandboxd's answers), and buffers at most max_bytes of
 * output plus one event of it. */
#define TERM_WAIT_MS_DEFAULT 2000
#define TERM_WAIT_MS_MAX 30000          /* the longest a call waits for output */
#define TERM_QUIET_MS_DEFAULT 300
#define TERM_QUIET_MS_MAX 30000         /* quiet longer than wait_ms is the same as wait_ms */
#define TERM_MAX_BYTES_DEFAULT 16384
#define TERM_MAX_BYTES_MAX (1024 * 1024) /* output returned by one call at most */
#define TERM_INPUT_MAX (64 * 1024)      /* input and keys of one send, in bytes */
#define TERM_KEYS_MAX 1024              /* key names in one send */
#define TERM_SIZE_MAX 1000              /* rows and cols, as sandboxd bounds them */
#define TERM_ROWS_DEFAULT 24
#define TERM_COLS_DEFAULT 80

typedef struct TermReadArgs {
        uint64_t wait_ms;
        uint64_t quiet_ms;
        uint64_t max_bytes;
        bool strip_ansi;
} TermReadArgs;

static int term_read_args(json_object *args, TermReadArgs *ret, ToolError *e) {
        int r;

        r = arg_range(args, "wait_ms", 0, TERM_WAIT_MS_MAX, TERM_WAIT_MS_DEFAULT, &ret->wait_ms, e);
        if (r >= 0)
                r = arg_range(args, "quiet_ms", 0, TERM_QUIET_MS_MAX, TERM_QUIET_MS_DEFAULT, &ret->quiet_ms, e);
        if (r >= 0)
                r = arg_range(args, "max_bytes", 1, TERM_MAX_BYTES_MAX, TERM_MAX_BYTES_DEFAULT, &ret->max_bytes, e);
        if (r >= 0)
                r = arg_bool(args, "strip_ansi", true, &ret->strip_ansi, e);
        return r;
}

typedef struct TermRead {
        int timer_fd;
        uint64_t deadline;   /* CLOCK_MONOTONIC µs: wait_ms after the call began */
        uint64_t quiet_usec;
        uint64_t stop_at;    /* when the timer is set to end the read */
        bool strip;
        TermText text;
        Buf chunk;           /* one event's output as text */
        TailBuf tail;
        uint64_t cursor;
        int error;
} TermRead;

static int term_read_arm(TermRead *t, uint64_t at) {
        struct itimerspec its = {};

        t->stop_at = at;
        /* 0 would disarm it: a time in the past fires at once */
        at = MAX(at, 1u);
        its.it_value.tv_sec = (time_t) (at / USEC_PER_SEC);
        its.it_value.tv_nsec = (long) (at % USEC_PER_SEC) * 1000;
        if (timerfd_settime(t->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
                return -errno;
        return 0;
}

static int on_term_event(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        TermRead *t = userdata;
        int r;

        (void) c;
        t->cursor = ev->offset;
        if ((ev->type != SANDBOXD_EVENT_STDOUT && ev->type != SANDBOXD_EVENT_STDERR) || ev->size == 0)
                return 0;
        if (t->strip) {
                t->chunk.len = 0;
                r = term_text_feed(&t->text, ev->data, ev->size, &t->chunk);
                if (r >= 0)
                        r = tail_buf_append(&t->tail, t->chunk.data, t->chunk.len);
        } else
                r = tail_buf_append(&t->tail, ev->data, ev->size);
        /* output came: end once it has been quiet for quiet_ms, or at the deadline */
        if (r >= 0)
                r = term_read_arm(t, MIN(t->deadline, now_usec(CLOCK_MONOTONIC) + t->quiet_usec));
        if (r < 0)
                t->error = r;
        return r;
}

static int on_term_timer(sandboxd_client *c, int fd, void *userdata) {
        TermRead *t = userdata;
        uint64_t ticks;

        (void) c;
        (void) !read(fd, &ticks, sizeof(ticks));
        if (now_usec(CLOCK_MONOTONIC) >= t->stop_at)
                return -ETIME; /* ends the attach: the answer is what came so far */
        return term_read_arm(t, t->stop_at);
}

/* Reads the command's output from the events byte offset cursor (sandboxd_command_attach)
 * until the command ends, the output was quiet for quiet_ms after some came, or wait_ms
 * passed; returns {request_id, output, cursor, running, exit, dropped_bytes}. */
static int term_read(McpCall *c, const char *session, const char *rid, uint64_t cursor, const TermReadArgs *a,
                     json_object **ret, ToolError *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        TermRead t = {
                .timer_fd = -EBADF,
                .quiet_usec = a->quiet_ms * USEC_PER_MSEC,
                .strip = a->strip_ansi,
                .cursor = cursor,
        };
        sandboxd_result *res = NULL;
        const char *text;
        uint64_t dropped = 0;
        bool oom = false;
        size_t n = 0;
        int r;

        tail_buf_init(&t.tail, (size_t) a->max_bytes);
        t.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (t.timer_fd < 0) {
                r = tool_fail(e, "internal", "timerfd_create: %s", strerror(errno));
                goto finish;
        }
        t.deadline = now_usec(CLOCK_MONOTONIC) + a->wait_ms * USEC_PER_MSEC;
        r = term_read_arm(&t, t.deadline);
        if (r < 0)
                goto finish;
        /* the timer is the client's wakeup for this call only: no other call is cut by it */
        r = sandboxd_client_set_wakeup(c->client, t.timer_fd, on_term_timer, &t);
        if (r < 0)
                goto finish;
        r = sandboxd_command_attach(c->client, session, rid, cursor, on_term_event, &t, &res);
        (void) sandboxd_client_set_wakeup(c->client, -1, NULL, NULL);
        if (t.error < 0) {
                r = tool_fail(e, "internal", "Reading the command's output failed: %s", strerror(-t.error));
                goto finish;
        }
        if (r < 0 && r != -ETIME) { /* -ETIME: the time was up, the command still runs */
                r = tool_fail_client(c, e, r, "Reading the command's output failed");
                goto finish;
        }

        text = tail_buf_finish(&t.tail, &n, &dropped);
        if (!text) {
                r = -ENOMEM;
                goto finish;
        }
        o = json_object_new_object();
        json_put(o, "session_id", json_object_new_string(session), &oom);
        json_put(o, "request_id", json_object_new_string(rid), &oom);
        add_bytes(o, "output", text, n, &oom);
        json_put(o, "cursor", json_object_new_int64((int64_t) t.cursor), &oom);
        json_put(o, "running", json_object_new_boolean(!res), &oom);
        if (res)
                json_put(o, "exit", exit_data(res, &oom), &oom);
        else
                json_put_null(o, "exit", &oom);
        json_put(o, "dropped_bytes", json_object_new_int64((int64_t) dropped), &oom);
        r = oom ? -ENOMEM : 0;
        if (r >= 0)
                *ret = TAKE_PTR(o);
finish:
        sandboxd_result_free(res);
        safe_close(t.timer_fd);
        buf_done(&t.chunk);
        tail_buf_done(&t.tail);
        return r;
}

static int tool_terminal_start(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "command", "rows", "cols", "env", "cwd", "timeout_ms",
                                               "wait_ms", "quiet_ms", "max_bytes", "strip_ansi", NULL };
        _cleanup_(json_object_putp) json_object *rest = NULL;
        _cleanup_free_ char *rid = NULL;
        json_object *command = NULL;
        const char *session;
        TermReadArgs ra = {};
        uint64_t rows = 0, cols = 0;
        ExecSpec spec = { .terminal_fd = -EBADF };
        bool oom = false;
        size_t max;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_range(args, "rows", 1, TERM_SIZE_MAX, TERM_ROWS_DEFAULT, &rows, e);
        if (r >= 0)
                r = arg_range(args, "cols", 1, TERM_SIZE_MAX, TERM_COLS_DEFAULT, &cols, e);
        if (r >= 0)
                r = term_read_args(args, &ra, e);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(args, "command", &command) || !json_object_is_type(command, json_type_array) ||
            json_object_array_length(command) == 0)
                return tool_fail(e, "invalid_value", "command must be a non-empty list of strings (the argv, no shell).");
        /* what sandbox_exec reads, with command as its argv */
        rest = json_object_new_object();
        json_object_object_foreach(args, key, val)
                if (streq(key, "cwd") || streq(key, "env") || streq(key, "timeout_ms"))
                        json_put(rest, key, json_object_get(val), &oom);
        json_put(rest, "argv", json_object_get(command), &oom);
        if (oom)
                return -ENOMEM;
        r = exec_spec_from_args(rest, &spec, &max, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "internal", "Out of memory.");
        if (r < 0)
                goto finish;
        spec.terminal_fd = -EBADF;
        spec.tty_rows = (unsigned) rows;
        spec.tty_cols = (unsigned) cols;
        r = exec_spec_start(c->client, session, &spec, &rid);
        if (r < 0) {
                r = tool_fail_client(c, e, r, "Starting the command failed");
                goto finish;
        }
        r = term_read(c, session, rid, 0, &ra, ret, e);
finish:
        exec_spec_done(&spec);
        return r;
}

/* input, then the bytes of keys, in one buffer of at most TERM_INPUT_MAX */
static int term_input(json_object *args, Buf *b, ToolError *e) {
        json_object *keys;
        const char *input;
        size_t n;
        int r;

        r = arg_string(args, "input", false, &input, e);
        if (r < 0)
                return r;
        if (input && buf_puts(b, input) < 0)
                return -ENOMEM;
        if (!json_object_object_get_ex(args, "keys", &keys) || json_object_is_type(keys, json_type_null))
                keys = NULL;
        if (keys && !json_object_is_type(keys, json_type_array))
                return tool_fail(e, "invalid_value", "keys must be a list of key names.");
        n = keys ? json_object_array_length(keys) : 0;
        if (n > TERM_KEYS_MAX)
                return tool_fail(e, "invalid_value", "At most %d keys at once.", TERM_KEYS_MAX);
        for (size_t i = 0; i < n; i++) {
                json_object *k = json_object_array_get_idx(keys, i);
                const char *bytes = json_object_is_type(k, json_type_string) ? term_key_bytes(json_object_get_string(k))
                                                                             : NULL;

                if (!bytes)
                        return tool_fail(e, "invalid_value",
                                         "Unknown key %.64s: keys are Enter, Tab, Escape, Backspace, Up, Down, Left, "
                                         "Right, Home, End, PageUp, PageDown, Delete, C-a..C-z, F1..F12.",
                                         json_object_to_json_string(k) ?: "?");
                if (buf_puts(b, bytes) < 0)
                        return -ENOMEM;
        }
        if (b->len > TERM_INPUT_MAX)
                return tool_fail(e, "invalid_value", "input and keys are %zu bytes; at most %d at once.", b->len,
                                 TERM_INPUT_MAX);
        return 0;
}

static int tool_terminal_send(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "request_id", "input", "keys", "eof", "cursor",
                                               "wait_ms", "quiet_ms", "max_bytes", "strip_ansi", NULL };
        const char *session, *rid;
        TermReadArgs ra = {};
        uint64_t cursor = 0;
        bool eof = false, has_cursor = false;
        Buf in = {};
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0)
                r = term_read_args(args, &ra, e);
        if (r >= 0)
                r = arg_bool(args, "eof", false, &eof, e);
        if (r >= 0)
                r = arg_uint(args, "cursor", &cursor, e);
        has_cursor = r > 0;
        if (r >= 0)
                r = term_input(args, &in, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "internal", "Out of memory.");
        if (r < 0)
                goto finish;
        if (!has_cursor) {
                /* no cursor: from the end of the output so far (the server keeps nothing per agent) */
                sandboxd_result *snap = NULL;

                r = sandboxd_command_get(c->client, session, rid, &snap);
                if (r < 0) {
                        r = tool_fail_client(c, e, r, "Looking up the command failed");
                        goto finish;
                }
                cursor = snap->events_bytes;
                sandboxd_result_free(snap);
        }
        if (in.len > 0 || eof) {
                r = sandboxd_command_write_stdin(c->client, session, rid, in.data, in.len, eof);
                if (r < 0) {
                        r = tool_fail_client(c, e, r, "Writing to the command failed");
                        goto finish;
                }
        }
        r = term_read(c, session, rid, cursor, &ra, ret, e);
finish:
        buf_done(&in);
        return r;
}

static int tool_terminal_resize(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "request_id", "rows", "cols", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *rid;
        uint64_t rows = 0, cols = 0;
        bool oom = false;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0 && !json_object_object_get_ex(args, "rows", NULL))
                r = tool_fail(e, "missing_field", "Missing argument 'rows'.");
        if (r >= 0 && !json_object_object_get_ex(args, "cols", NULL))
                r = tool_fail(e, "missing_field", "Missing argument 'cols'.");
        if (r >= 0)
                r = arg_range(args, "rows", 1, TERM_SIZE_MAX, 0, &rows, e);
        if (r >= 0)
                r = arg_range(args, "cols", 1, TERM_SIZE_MAX, 0, &cols, e);
        if (r < 0)
                return r;
        r = sandboxd_command_resize(c->client, session, rid, (unsigned) rows, (unsigned) cols);
        if (r < 0)
                return tool_fail_client(c, e, r, "Resizing the terminal failed");
        o = json_object_new_object();
        json_put(o, "request_id", json_object_new_string(rid), &oom);
        json_put(o, "rows", json_object_new_int((int) rows), &oom);
        json_put(o, "cols", json_object_new_int((int) cols), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

const McpTool mcp_exec_tools[] = {
        { "sandbox_exec",
          "\"description\":" "\"Run a command in a session and wait for it. Give argv (no shell), or command (run by /bin/sh -c). Returns status, exit_code, stdout, stderr and truncation metadata.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1},\"command\":{\"type\":\"string\",\"description\":\"a shell command line\"},\"cwd\":{\"type\":\"string\",\"description\":\"relative to the workspace\"},\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},\"stdin\":{\"type\":\"string\"},\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1},\"max_output_bytes\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"output returned per stream\"}},\"required\":[\"session_id\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_exec },
        { "sandbox_run",
          "\"description\":" "\"Run a command in the session of a user and workspace (created if needed) and wait for it. Like sandbox_exec, without a session id.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"user\":" MCP_USER ",\"workspace\":" MCP_WORKSPACE ",\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1},\"command\":{\"type\":\"string\"},\"cwd\":{\"type\":\"string\"},\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},\"stdin\":{\"type\":\"string\"},\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1},\"max_output_bytes\":{\"type\":\"integer\",\"minimum\":0}},\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_run },
        { "sandbox_terminal_start",
          "\"description\":" "\"Start an interactive command (a shell, a REPL, an editor) on a terminal of the sandbox and return its first output: request_id, output, cursor, running, exit (status, exit_code, signal, reason; null while it runs) and dropped_bytes (output before the returned part that did not fit in max_bytes). Go on with sandbox_terminal_send.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"command\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"description\":\"argv, no shell: e.g. [\\\"python3\\\", \\\"-i\\\"] or [\\\"bash\\\"]\"},\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,\"description\":\"default 24\"},\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,\"description\":\"default 80\"},\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},\"cwd\":{\"type\":\"string\",\"description\":\"relative to the workspace\"},\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"the command's whole run; default: sandboxd's\"},\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"how long to wait for output; default 2000\"},\"quiet_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"return once the output was quiet this long after some came; default 300\"},\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,\"description\":\"output returned at most: the last max_bytes, the rest is counted in dropped_bytes; default 16384\"},\"strip_ansi\":{\"type\":\"boolean\",\"description\":\"true (default): escape sequences dropped, CR LF as LF; false: the terminal's bytes\"}},\"required\":[\"session_id\",\"command\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_terminal_start },
        { "sandbox_terminal_send",
          "\"description\":" "\"Type into a command of sandbox_terminal_start (input, then keys, then eof), then return its output as sandbox_terminal_start does. Without cursor the output starts where the command's output stood before the input; give the cursor of an earlier answer to read from there again.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"request_id\":" MCP_REQUEST_ID ",\"input\":{\"type\":\"string\",\"maxLength\":65536,\"description\":\"text typed as it is (UTF-8): end a line with \\\"\\\\n\\\" or \\\"\\\\r\\\"\"},\"keys\":{\"type\":\"array\",\"maxItems\":1024,\"items\":{\"type\":\"string\",\"pattern\":\"\"},\"description\":\"keys pressed after input: Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, C-a..C-z (C-c interrupts), F1..F12\"},\"eof\":{\"type\":\"boolean\",\"description\":\"end of input (^D) after the rest\"},\"cursor\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"an earlier answer's cursor: read from there\"},\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"how long to wait for output; default 2000\"},\"quiet_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"return once the output was quiet this long after some came; default 300\"},\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,\"description\":\"output returned at most: the last max_bytes, the rest is counted in dropped_bytes; default 16384\"},\"strip_ansi\":{\"type\":\"boolean\",\"description\":\"true (default): escape sequences dropped, CR LF as LF; false: the terminal's bytes\"}},\"required\":[\"session_id\",\"request_id\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_terminal_send },
        { "sandbox_terminal_resize",
          "\"description\":" "\"Set the window size of a command of sandbox_terminal_start (it gets SIGWINCH).\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"request_id\":" MCP_REQUEST_ID ",\"rows\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},\"cols\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000}},\"required\":[\"session_id\",\"request_id\",\"rows\",\"cols\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_terminal_resize },
        {},
};
