/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: the tools of commands: run and wait, and interactive commands on a terminal. */

#include <sys/timerfd.h>
#include <unistd.h>

#include "encoding.h"
#include "json-util.h"
#include "log.h"
#include "mcp.h"
#include "result.h"
#include "tail-buf.h"
#include "term-keys.h"
#include "term-text.h"
#include "time-util.h"
#include "validate.h"

/* Bounds of the command tools (the terminal tools' are below). */
#define EXEC_OUTPUT_MAX (16u * 1024 * 1024) /* max_output_bytes at most, a stream */
#define EXEC_ENV_MAX 256                    /* variables of one command */
#define EXEC_INPUT_MAX (64 * 1024)          /* input of one sandbox_exec_write */
#define WAIT_MS_MAX 30000                   /* the longest sandbox_wait, _exec_poll and _read_output wait */
#define WAIT_MS_DEFAULT 10000
#define POLL_WAIT_MS_DEFAULT 5000
#define POLL_QUIET_MS 100                   /* output came, then nothing for this long: answer */
#define POLL_BACKLOG_MS 200                 /* taken at least to read what is kept already */
#define POLL_MAX_BYTES_DEFAULT 65536
#define POLL_MAX_BYTES_MAX (1024 * 1024)

/* A timer that ends a read (sandboxd_command_attach()) at stop_at, CLOCK_MONOTONIC µs. */
typedef struct ReadTimer {
        int fd;
        uint64_t stop_at;
} ReadTimer;

static int read_timer_arm(ReadTimer *t, uint64_t at) {
        struct itimerspec its = {};

        t->stop_at = at;
        /* 0 would disarm it: a time in the past fires at once */
        at = MAX(at, 1u);
        its.it_value.tv_sec = (time_t) (at / USEC_PER_SEC);
        its.it_value.tv_nsec = (long) (at % USEC_PER_SEC) * 1000;
        if (timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
                return -errno;
        return 0;
}

/* The timer's fd became readable (mcp_call_watch()): the read ends with -ETIME at stop_at. */
static int on_read_timer(sandboxd_client *c, int fd, void *userdata) {
        ReadTimer *t = userdata;
        uint64_t ticks;

        (void) c;
        (void) !read(fd, &ticks, sizeof(ticks));
        if (now_usec(CLOCK_MONOTONIC) >= t->stop_at)
                return -ETIME; /* ends the attach: the answer is what came so far */
        return read_timer_arm(t, t->stop_at);
}

/* A timer of this call, armed for at and watched while libsandboxd waits. */
static int read_timer_start(McpCall *c, ReadTimer *t, uint64_t at, ToolError *e) {
        int r;

        t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (t->fd < 0)
                return tool_fail(e, "internal", "timerfd_create: %s", strerror(errno));
        r = read_timer_arm(t, at);
        if (r >= 0)
                /* the client's wakeup is mcp.c's (cancellation, progress): the timer joins it */
                r = mcp_call_watch(c, t->fd, on_read_timer, t);
        if (r < 0)
                return tool_fail(e, "internal", "Setting up the timer failed: %s", strerror(-r));
        return 0;
}

static void read_timer_stop(McpCall *c, ReadTimer *t) {
        if (t->fd >= 0)
                (void) mcp_call_watch(c, -1, NULL, NULL);
        t->fd = safe_close(t->fd);
}

/* argv or command, cwd, env, stdin, timeout_ms and max_output_bytes of args */
static int exec_spec_from_args(json_object *args, ExecSpec *spec, size_t *ret_max, ToolError *e) {
        json_object *argv = NULL, *env = NULL;
        const char *command, *cwd, *in;
        size_t in_len = 0;
        uint64_t u;
        int r;

        *spec = (ExecSpec) { .terminal_fd = -EBADF };
        *ret_max = MIN(arg_max_output, (size_t) EXEC_OUTPUT_MAX);
        r = arg_string(args, "command", false, &command, e);
        if (r >= 0)
                r = arg_string(args, "cwd", false, &cwd, e);
        if (r >= 0)
                r = arg_text(args, "stdin", &in, &in_len, e);
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
                if (json_object_object_length(env) > EXEC_ENV_MAX)
                        return tool_fail(e, "invalid_value", "env has more than %d variables.", EXEC_ENV_MAX);
                spec->env = calloc((size_t) json_object_object_length(env) + 1, sizeof(char *));
                if (!spec->env)
                        return -ENOMEM;
                json_object_object_foreach(env, key, val) {
                        /* sandboxd's own checks and codes (request_check_env_name()) */
                        if (!env_name_is_valid(key))
                                return tool_fail(e, "invalid_value", "Invalid environment variable name '%.64s'.", key);
                        if (env_name_is_reserved(key))
                                return tool_fail(e, "reserved_env",
                                                 "Environment variable '%.64s' is set by sandboxd and cannot be overridden.",
                                                 key);
                        if (!json_object_is_type(val, json_type_string))
                                return tool_fail(e, "invalid_value", "env must be an object of strings.");
                        if (asprintf(&spec->env[i++], "%s=%s", key, json_object_get_string(val)) < 0) {
                                spec->env[i - 1] = NULL;
                                return -ENOMEM;
                        }
                }
        }
        if (in) {
                spec->stdin_data = malloc(in_len + 1);
                if (!spec->stdin_data)
                        return -ENOMEM;
                memcpy(spec->stdin_data, in, in_len + 1); /* NUL bytes and all */
                spec->stdin_size = in_len;
                spec->has_stdin = true;
        }
        if ((r = arg_range(args, "timeout_ms", 1, UINT64_MAX / USEC_PER_MSEC, 0, &u, e)) < 0)
                return r;
        spec->timeout_ms = u;
        if ((r = arg_range(args, "max_output_bytes", 0, EXEC_OUTPUT_MAX, *ret_max, &u, e)) < 0)
                return r;
        *ret_max = (size_t) u;
        return mcp_request_id(&spec->request_id);
}

/* Starts spec in session and returns its request id; stdin_stream: its stdin stays open for
 * sandbox_exec_write (and takes spec's stdin as its first input). */
static int start_spec(McpCall *c, const char *session, const ExecSpec *spec, bool stdin_stream, char **ret_rid,
                      ToolError *e) {
        _cleanup_free_ char *rid = NULL;
        ExecSpec s = *spec;
        int r;

        /* the first input, if any, is written once it runs; events: the output is read from
         * sandboxd's events, never written to our stdout (the protocol's) */
        s.stdin_stream = stdin_stream;
        s.events = true;
        r = exec_spec_start(c->client, session, &s, &rid);
        if (r < 0 && mcp_call_cancelled(c) && spec->request_id)
                /* it may have been accepted before the cancellation cut the answer short */
                (void) mcp_call_stop_command(c, session, spec->request_id);
        if (r < 0)
                return tool_fail_client(c, e, r, "Starting the command failed");
        if (stdin_stream && spec->has_stdin && spec->stdin_size > 0) {
                r = sandboxd_command_write_stdin(c->client, session, rid, spec->stdin_data, spec->stdin_size, false);
                if (r < 0) {
                        tool_fail_client(c, e, r, "Writing the first input failed");
                        (void) mcp_call_stop_command(c, session, rid);
                        return r;
                }
        }
        *ret_rid = TAKE_PTR(rid);
        return 0;
}

typedef struct Follow {
        McpCall *call;
        uint64_t output_bytes;
} Follow;

static int on_follow_event(sandboxd_client *cl, const sandboxd_event *ev, void *userdata) {
        Follow *f = userdata;

        (void) cl;
        if (ev->type == SANDBOXD_EVENT_STDOUT || ev->type == SANDBOXD_EVENT_STDERR) {
                f->output_bytes += ev->size;
                mcp_call_progress(f->call, f->output_bytes);
        }
        return 0;
}

/* Follows the command's events (progress as its output comes) until it ends, at most
 * timeout_usec (0: as long as it runs): 0 and its snapshot (kept output, what was cut),
 * -ETIME when the time was up, or a failure with e set (also when cancelled). */
static int follow_command(McpCall *c, const char *session, const char *rid, uint64_t timeout_usec,
                          sandboxd_result **ret, ToolError *e) {
        ReadTimer t = { .fd = -EBADF };
        Follow f = { .call = c };
        sandboxd_result *res = NULL;
        int r;

        if (timeout_usec > 0) {
                r = read_timer_start(c, &t, now_usec(CLOCK_MONOTONIC) + timeout_usec, e);
                if (r < 0) {
                        read_timer_stop(c, &t);
                        return r;
                }
        }
        r = sandboxd_command_attach(c->client, session, rid, 0, on_follow_event, &f, &res);
        read_timer_stop(c, &t);
        sandboxd_result_free(res);
        res = NULL;
        if (r == -ETIME && !mcp_call_cancelled(c)) {
                /* the time was up, maybe before the replay of an ended command's log was */
                r = sandboxd_command_get(c->client, session, rid, &res);
                if (r < 0)
                        return tool_fail_client(c, e, r, "Looking up the command failed");
                if (res->status < SANDBOXD_STATUS_SUCCEEDED) {
                        sandboxd_result_free(res);
                        return -ETIME;
                }
        } else if (r >= 0)
                r = sandboxd_command_wait(c->client, session, rid, 0, &res);
        if (r < 0)
                return tool_fail_client(c, e, r, "Waiting for the command failed");
        *ret = res;
        return 0;
}

/* Runs spec in session and waits for it; a cancelled call stops the command. */
static int exec_in(McpCall *c, const char *session, const ExecSpec *spec, size_t max, json_object **ret,
                   ToolError *e) {
        _cleanup_free_ char *rid = NULL;
        sandboxd_result *res = NULL;
        int r;

        r = start_spec(c, session, spec, false, &rid, e);
        if (r < 0)
                return r;
        r = follow_command(c, session, rid, 0, &res, e);
        if (r < 0) {
                if (mcp_call_cancelled(c))
                        (void) mcp_call_stop_command(c, session, rid);
                return r;
        }
        *ret = result_data(res, session, max);
        sandboxd_result_free(res);
        return *ret ? 0 : -ENOMEM;
}

static int tool_exec(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "argv", "command", "cwd", "env", "stdin", "timeout_ms",
                                               "max_output_bytes", NULL };
        ExecSpec spec = {};
        const char *session;
        size_t max;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = exec_spec_from_args(args, &spec, &max, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "internal", "Out of memory.");
        if (r >= 0) {
                if (spec.timeout_ms == 0)
                        spec.timeout_ms = c->config->timeout_ms;
                r = exec_in(c, session, &spec, max, ret, e);
        }
        exec_spec_done(&spec);
        return r;
}

/* The options of a session sandbox_run creates, as sandboxd_session_create() takes them. */
static int run_session_options(json_object *args, char **ret, ToolError *e) {
        _cleanup_(json_object_putp) json_object *opts = json_object_new_object(), *limits = json_object_new_object();
        const char *mem, *mode, *text;
        bool oom = !opts || !limits;
        uint64_t u;
        int r;

        r = arg_string(args, "memory_max", false, &mem, e);
        if (r >= 0)
                r = arg_string(args, "exec_mode", false, &mode, e);
        if (r < 0)
                return r;
        if (mem) /* sandboxd judges them */
                json_put(limits, "memory_max", json_object_new_string(mem), &oom);
        if (mode)
                json_put(opts, "exec_mode", json_object_new_string(mode), &oom);
        if ((r = arg_uint(args, "cpu_quota", &u, e)) < 0)
                return r;
        if (r > 0)
                json_put(limits, "cpu_quota", json_object_new_int64((int64_t) u), &oom);
        if ((r = arg_uint(args, "tasks_max", &u, e)) < 0)
                return r;
        if (r > 0)
                json_put(limits, "tasks_max", json_object_new_int64((int64_t) u), &oom);
        if (!oom && json_object_object_length(limits) > 0)
                json_put(opts, "limits", json_object_get(limits), &oom);
        text = oom ? NULL : json_object_to_json_string(opts);
        if (!text || !(*ret = strdup(text)))
                return -ENOMEM;
        return 0;
}

static int tool_run(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", "workspace", "memory_max", "cpu_quota", "tasks_max",
                                               "exec_mode", "argv", "command", "cwd", "env", "stdin",
                                               "timeout_ms", "max_output_bytes", NULL };
        _cleanup_(json_object_putp) json_object *data = NULL;
        _cleanup_free_ char *opts = NULL;
        sandboxd_session *s = NULL;
        ExecSpec spec = {};
        const char *user, *ws;
        bool created = false, removed = false, oom = false;
        size_t max;
        int r;

        /* all the arguments first: a refused one creates no session */
        r = check_args(args, allowed, e);
        if (r >= 0)
                r = scope_of(c, args, &user, &ws, e);
        if (r >= 0)
                r = exec_spec_from_args(args, &spec, &max, e);
        if (r >= 0)
                r = run_session_options(args, &opts, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "internal", "Out of memory.");
        if (r < 0)
                goto finish;
        if (spec.timeout_ms == 0)
                spec.timeout_ms = c->config->timeout_ms;
        r = sandboxd_session_create(c->client, user, ws, opts, &s, &created);
        if (r < 0) {
                r = tool_fail_client(c, e, r, "Getting the session failed");
                goto finish;
        }
        r = exec_in(c, s->id, &spec, max, &data, e);
        if (created) {
                /* the session this call made goes (its workspace stays); one that was
                 * there already stays open, for whoever made it */
                int k;

                if (mcp_call_cancelled(c))
                        mcp_call_cleanup_begin(c); /* what is left is cleaning up */
                k = sandboxd_session_close(c->client, s->id, false, NULL);
                if (k < 0)
                        log_warning_errno(k, "Closing session %s that sandbox_run created failed: %s", s->id,
                                          sandboxd_client_last_error(c->client)->message);
                removed = k >= 0;
        }
        if (r < 0)
                goto finish;
        json_put(data, "session_created", json_object_new_boolean(created), &oom);
        json_put(data, "session_removed", json_object_new_boolean(removed), &oom);
        if (oom)
                r = -ENOMEM;
        else
                *ret = TAKE_PTR(data);
finish:
        sandboxd_session_free(s);
        exec_spec_done(&spec);
        return r;
}

static int tool_wait(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "request_id", "timeout_ms", "max_output_bytes", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_result *res = NULL;
        const char *session, *rid;
        uint64_t timeout = 0, max = 0;
        bool oom = false;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0)
                r = arg_range(args, "timeout_ms", 1, WAIT_MS_MAX, WAIT_MS_DEFAULT, &timeout, e);
        if (r >= 0)
                r = arg_range(args, "max_output_bytes", 0, EXEC_OUTPUT_MAX, MIN(arg_max_output, EXEC_OUTPUT_MAX), &max,
                              e);
        if (r < 0)
                return r;
        r = follow_command(c, session, rid, timeout * USEC_PER_MSEC, &res, e);
        if (r == -ETIME) {
                /* not an error: the command runs on, wait again */
                o = json_object_new_object();
                json_put(o, "session_id", json_object_new_string(session), &oom);
                json_put(o, "request_id", json_object_new_string(rid), &oom);
                json_put(o, "running", json_object_new_boolean(true), &oom);
                json_put(o, "status", json_object_new_string("running"), &oom);
        } else if (r >= 0) {
                o = result_data(res, session, (size_t) max);
                sandboxd_result_free(res);
                json_put(o, "running", json_object_new_boolean(false), &oom);
        } else
                return r;
        if (!o || oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- commands by rounds: start, poll, write, signal, close ---------------------------------- */

static int tool_exec_start(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "argv", "command", "cwd", "env", "stdin", "stdin_stream",
                                               "timeout_ms", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *rid = NULL;
        ExecSpec spec = {};
        const char *session;
        bool stream = false, oom = false;
        size_t max;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_bool(args, "stdin_stream", false, &stream, e);
        if (r >= 0)
                r = exec_spec_from_args(args, &spec, &max, e);
        if (r == -ENOMEM)
                r = tool_fail(e, "internal", "Out of memory.");
        if (r >= 0)
                /* no timeout_ms: sandboxd's, this is for what takes longer than a call */
                r = start_spec(c, session, &spec, stream, &rid, e);
        exec_spec_done(&spec);
        if (r < 0)
                return r;
        if (mcp_call_cancelled(c)) {
                /* the answer would not reach the client: nobody would know the command */
                (void) mcp_call_stop_command(c, session, rid);
                return -ECANCELED;
        }
        o = json_object_new_object();
        json_put(o, "session_id", json_object_new_string(session), &oom);
        json_put(o, "request_id", json_object_new_string(rid), &oom);
        json_put(o, "cursor", json_object_new_int(0), &oom);
        json_put(o, "stdin_stream", json_object_new_boolean(stream), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

typedef struct PollRead {
        ReadTimer timer;
        McpCall *call;
        uint64_t deadline;
        Buf out[2];          /* stdout, stderr */
        size_t max;
        uint64_t cursor;
        uint64_t output_bytes;
        bool full;           /* stopped before an event that would not fit in max */
        bool truncated;      /* sandboxd stopped keeping a stream's output (OutputMax=) */
        int error;
} PollRead;

static int on_poll_event(sandboxd_client *cl, const sandboxd_event *ev, void *userdata) {
        PollRead *p = userdata;
        size_t have = p->out[0].len + p->out[1].len;
        int r;

        (void) cl;
        if ((ev->type == SANDBOXD_EVENT_STDOUT || ev->type == SANDBOXD_EVENT_STDERR) && ev->size > 0) {
                /* whole events only: the cursor is a place in sandboxd's log of events, and the
                 * next read starts with the one left out (one larger than max alone comes whole) */
                if (have > 0 && have + ev->size > p->max) {
                        p->full = true;
                        return -ENOBUFS;
                }
                r = buf_append(&p->out[ev->type == SANDBOXD_EVENT_STDERR], ev->data, ev->size);
                if (r < 0)
                        return (p->error = r);
                have += ev->size;
                p->output_bytes += ev->size;
                mcp_call_progress(p->call, p->output_bytes);
                /* output came: answer once it has been quiet a moment, or at the deadline */
                r = read_timer_arm(&p->timer, MIN(p->deadline, now_usec(CLOCK_MONOTONIC) + POLL_QUIET_MS * USEC_PER_MSEC));
                if (r < 0)
                        return (p->error = r);
        } else if (ev->type == SANDBOXD_EVENT_TRUNCATED)
                p->truncated = true;
        p->cursor = ev->offset;
        if (have >= p->max && ev->type != SANDBOXD_EVENT_EXIT) {
                p->full = true;
                return -ENOBUFS;
        }
        return 0;
}

static void add_exit(json_object *o, const sandboxd_result *res, bool *oom) {
        json_put(o, "running", json_object_new_boolean(!res), oom);
        if (res)
                json_put(o, "exit", exit_data(res, oom), oom);
        else
                json_put_null(o, "exit", oom);
}

/* Reads the command's output from the event log's byte offset cursor until the command ended,
 * the output was quiet a moment after some came, max bytes came, or wait_ms passed; returns
 * {stdout, stderr, cursor, running, exit, more}: each byte once across reads that go on from
 * the cursor each returns. */
static int poll_read(McpCall *c, const char *session, const char *rid, uint64_t cursor, uint64_t wait_ms, size_t max,
                     json_object **ret, ToolError *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        PollRead p = {
                .timer.fd = -EBADF,
                .call = c,
                .max = max,
                .cursor = cursor,
        };
        sandboxd_result *res = NULL, *snap = NULL;
        bool oom = false;
        int r;

        p.deadline = now_usec(CLOCK_MONOTONIC) + MAX(wait_ms, (uint64_t) POLL_BACKLOG_MS) * USEC_PER_MSEC;
        r = read_timer_start(c, &p.timer, p.deadline, e);
        if (r >= 0)
                r = sandboxd_command_attach(c->client, session, rid, cursor, on_poll_event, &p, &res);
        read_timer_stop(c, &p.timer);
        if (p.error < 0) {
                r = tool_fail(e, "internal", "Reading the command's output failed: %s", strerror(-p.error));
                goto finish;
        }
        if (r < 0 && !e->code && !mcp_call_cancelled(c) && (r == -ETIME || (r == -ENOBUFS && p.full)))
                r = 0; /* the time was up, or max was reached: the command may still run */
        else if (r < 0 && !e->code) {
                r = tool_fail_client(c, e, r, "Reading the command's output failed");
                /* at the very end of an ended command's log there is nothing to follow: its
                 * snapshot says how it ended */
                if (!mcp_call_cancelled(c) && p.output_bytes == 0 && p.cursor > 0 &&
                    sandboxd_command_get(c->client, session, rid, &snap) >= 0 &&
                    snap->status >= SANDBOXD_STATUS_SUCCEEDED && cursor == snap->events_bytes) {
                        *e = (ToolError) {};
                        r = 0;
                }
        }
        if (r < 0)
                goto finish;
        o = json_object_new_object();
        json_put(o, "session_id", json_object_new_string(session), &oom);
        json_put(o, "request_id", json_object_new_string(rid), &oom);
        add_bytes(o, "stdout", p.out[0].data ?: "", p.out[0].len, &oom);
        add_bytes(o, "stderr", p.out[1].data ?: "", p.out[1].len, &oom);
        json_put(o, "cursor", json_object_new_int64((int64_t) p.cursor), &oom);
        add_exit(o, res ?: snap, &oom);
        json_put(o, "more", json_object_new_boolean(p.full), &oom);
        json_put(o, "sandboxd_truncated", json_object_new_boolean(p.truncated), &oom);
        if (oom)
                r = -ENOMEM;
        else
                *ret = TAKE_PTR(o);
finish:
        sandboxd_result_free(res);
        sandboxd_result_free(snap);
        buf_done(&p.out[0]);
        buf_done(&p.out[1]);
        return r;
}

/* sandbox_exec_poll (wait_ms) and sandbox_read_output (follow_ms): the same read */
static int poll_tool(McpCall *c, json_object *args, const char *wait_key, uint64_t wait_default, json_object **ret,
                     ToolError *e) {
        const char *const allowed[] = { "session_id", "request_id", "cursor", wait_key, "max_bytes", NULL };
        const char *session, *rid;
        uint64_t cursor = 0, wait_ms = 0, max = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0)
                r = arg_uint(args, "cursor", &cursor, e);
        if (r >= 0)
                r = arg_range(args, wait_key, 0, WAIT_MS_MAX, wait_default, &wait_ms, e);
        if (r >= 0)
                r = arg_range(args, "max_bytes", 1, POLL_MAX_BYTES_MAX, POLL_MAX_BYTES_DEFAULT, &max, e);
        if (r < 0)
                return r;
        return poll_read(c, session, rid, cursor, wait_ms, (size_t) max, ret, e);
}

static int tool_exec_poll(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        return poll_tool(c, args, "wait_ms", POLL_WAIT_MS_DEFAULT, ret, e);
}

static int tool_read_output(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        return poll_tool(c, args, "follow_ms", 0, ret, e);
}

static int tool_exec_write(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "request_id", "input", "eof", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *rid, *input;
        bool eof = false, oom = false;
        size_t n;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0)
                r = arg_text(args, "input", &input, &n, e);
        if (r >= 0)
                r = arg_bool(args, "eof", false, &eof, e);
        if (r < 0)
                return r;
        if (n > EXEC_INPUT_MAX)
                return tool_fail(e, "invalid_value", "input is %zu bytes; at most %d at once.", n, EXEC_INPUT_MAX);
        if (n == 0 && !eof)
                return tool_fail(e, "missing_field", "Give input, eof or both.");
        r = sandboxd_command_write_stdin(c->client, session, rid, input ?: "", n, eof);
        if (r < 0)
                return tool_fail_client(c, e, r, "Writing to the command's stdin failed");
        o = json_object_new_object();
        json_put(o, "request_id", json_object_new_string(rid), &oom);
        json_put(o, "written_bytes", json_object_new_int64((int64_t) n), &oom);
        json_put(o, "eof", json_object_new_boolean(eof), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* what sandboxd sends (command_signal_from_string()) */
static const char *const exec_signals[] = { "SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", NULL };

static int tool_exec_signal(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "request_id", "signal", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *rid, *name;
        bool oom = false;
        int r, sig = -1;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0)
                r = arg_string(args, "signal", true, &name, e);
        if (r < 0)
                return r;
        for (const char *const *s = exec_signals; *s; s++)
                if (streq(*s, name))
                        sig = signal_from_string(name);
        if (sig <= 0)
                return tool_fail(e, "invalid_value", "signal must be one of SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGUSR1, SIGUSR2; not '%.32s'.",
                                 name);
        r = sandboxd_command_signal(c->client, session, rid, sig);
        if (r < 0)
                return tool_fail_client(c, e, r, "Sending the signal failed");
        o = json_object_new_object();
        json_put(o, "request_id", json_object_new_string(rid), &oom);
        json_put(o, "signal", json_object_new_string(name), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_exec_close(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "request_id", "max_output_bytes", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_result *res = NULL;
        const char *session, *rid;
        bool stopped = false, oom = false;
        uint64_t max = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_request(args, &rid, e);
        if (r >= 0)
                r = arg_range(args, "max_output_bytes", 0, EXEC_OUTPUT_MAX, MIN(arg_max_output, EXEC_OUTPUT_MAX), &max,
                              e);
        if (r < 0)
                return r;
        r = sandboxd_command_get(c->client, session, rid, &res);
        if (r < 0)
                return tool_fail_client(c, e, r, "Looking up the command failed");
        if (res->status < SANDBOXD_STATUS_SUCCEEDED) {
                /* SIGTERM, SIGKILL after the grace, and the wait */
                sandboxd_result_free(res);
                res = NULL;
                stopped = true;
                r = mcp_call_stop_command(c, session, rid);
                if (r >= 0)
                        r = sandboxd_command_get(c->client, session, rid, &res);
                if (r < 0)
                        return tool_fail_client(c, e, r, "Stopping the command failed");
        }
        o = result_data(res, session, (size_t) max);
        sandboxd_result_free(res);
        json_put(o, "stopped", json_object_new_boolean(stopped), &oom);
        if (!o || oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- the session's commands -------------------------------------------------------------- */

static int tool_list_commands(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", NULL };
        /* of sandboxd's object of the command */
        static const char *const keys[] = { "request_id", "argv", "status", "exit_code", "signal", "reason",
                                            "created_at_usec", "duration_ms", "stdin", "tty", "stdout_bytes",
                                            "stderr_bytes", "events_bytes", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_result **list = NULL;
        const char *session;
        json_object *arr;
        bool oom = false;
        size_t n = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = sandboxd_command_list(c->client, session, &list, &n);
        if (r < 0)
                return tool_fail_client(c, e, r, "Listing the commands failed");
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                _cleanup_(json_object_putp) json_object *full = json_from_text(list[i]->json);
                json_object *one = json_object_new_object(), *v;

                for (const char *const *k = keys; *k; k++)
                        if (full && json_object_object_get_ex(full, *k, &v)) {
                                if (v)
                                        json_put(one, *k, json_object_get(v), &oom);
                                else
                                        json_put_null(one, *k, &oom);
                        }
                /* the struct's, should the JSON lack them */
                if (!json_object_object_get_ex(one, "request_id", NULL))
                        json_put(one, "request_id", json_object_new_string(list[i]->request_id ?: ""), &oom);
                if (!json_object_object_get_ex(one, "status", NULL))
                        json_put(one, "status",
                                 json_object_new_string(sandboxd_status_to_string(list[i]->status) ?: "unknown"), &oom);
                json_put(one, "running", json_object_new_boolean(list[i]->status < SANDBOXD_STATUS_SUCCEEDED), &oom);
                json_push(arr, one, &oom);
        }
        sandboxd_result_list_free(list);
        json_put(o, "session_id", json_object_new_string(session), &oom);
        json_put(o, "commands", arr, &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- terminals: an interactive command by rounds ------------------------------------------- */

/* Bounds of the terminal tools. A call holds its worker at most TERM_WAIT_MS_MAX (plus
 * sandboxd's answers), and buffers at most max_bytes of output plus one event of it. */
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
        ReadTimer timer;
        McpCall *call;
        uint64_t deadline;   /* CLOCK_MONOTONIC µs: wait_ms after the call began */
        uint64_t quiet_usec;
        uint64_t output_bytes;
        bool strip;
        TermText text;
        Buf chunk;           /* one event's output as text */
        TailBuf tail;
        uint64_t cursor;
        int error;
} TermRead;

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
        t->output_bytes += ev->size;
        mcp_call_progress(t->call, t->output_bytes);
        /* output came: end once it has been quiet for quiet_ms, or at the deadline */
        if (r >= 0)
                r = read_timer_arm(&t->timer, MIN(t->deadline, now_usec(CLOCK_MONOTONIC) + t->quiet_usec));
        if (r < 0)
                t->error = r;
        return r;
}

/* Reads the command's output from the events byte offset cursor (sandboxd_command_attach)
 * until the command ends, the output was quiet for quiet_ms after some came, or wait_ms
 * passed; returns {request_id, output, cursor, running, exit, dropped_bytes}. */
static int term_read(McpCall *c, const char *session, const char *rid, uint64_t cursor, const TermReadArgs *a,
                     json_object **ret, ToolError *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        TermRead t = {
                .timer.fd = -EBADF,
                .call = c,
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
        t.deadline = now_usec(CLOCK_MONOTONIC) + a->wait_ms * USEC_PER_MSEC;
        r = read_timer_start(c, &t.timer, t.deadline, e);
        if (r >= 0)
                r = sandboxd_command_attach(c->client, session, rid, cursor, on_term_event, &t, &res);
        read_timer_stop(c, &t.timer);
        if (r < 0 && e->code)
                goto finish;
        if (t.error < 0) {
                r = tool_fail(e, "internal", "Reading the command's output failed: %s", strerror(-t.error));
                goto finish;
        }
        if (r < 0 && (r != -ETIME || mcp_call_cancelled(c))) { /* -ETIME: the time was up, the command still runs */
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
        r = start_spec(c, session, &spec, false, &rid, e);
        if (r >= 0)
                r = term_read(c, session, rid, 0, &ra, ret, e);
        if (r >= 0 && mcp_call_cancelled(c))
                r = -ECANCELED;
        if (rid && r < 0 && mcp_call_cancelled(c))
                /* the answer would not reach the client: nobody would know the command */
                (void) mcp_call_stop_command(c, session, rid);
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

        r = arg_text(args, "input", &input, &n, e);
        if (r < 0)
                return r;
        if (input && buf_append(b, input, n) < 0)
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

/* --- the schemas ---------------------------------------------------------------------------- */

#define S_ARGV "\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"description\":\"the command, no shell; or give command\"}"
#define S_COMMAND "\"command\":{\"type\":\"string\",\"description\":\"a shell command line, run by /bin/sh -c; or give argv\"}"
#define S_CWD "\"cwd\":{\"type\":\"string\",\"description\":\"relative to the workspace\"}"
#define S_ENV "\"env\":{\"type\":\"object\",\"maxProperties\":256,\"propertyNames\":{\"pattern\":\"^[A-Za-z_][A-Za-z0-9_]{0,254}$\"},\"additionalProperties\":{\"type\":\"string\"},\"description\":\"variables added to the command's environment (not HOME, TMPDIR and the like: sandboxd sets those)\"}"
#define S_STDIN "\"stdin\":{\"type\":\"string\",\"description\":\"all of the command's input (UTF-8 text)\"}"
#define S_TIMEOUT(what) "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"" what "\"}"
#define S_MAX_OUTPUT "\"max_output_bytes\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":16777216,\"description\":\"output returned per stream at most (the first bytes; default 65536); truncation says what was left out\"}"
#define S_CURSOR "\"cursor\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"where to read on: an earlier answer's cursor (0: from the start)\"}"
#define S_MAX_BYTES "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576,\"description\":\"output returned at most, stdout and stderr together, in whole chunks (one larger chunk comes whole); the rest comes from the next cursor; default 65536\"}"
#define S_NULLABLE(type) "{\"type\":[\"" type "\",\"null\"]}"
#define S_EXIT                                                                                                  \
        "{\"type\":\"object\",\"properties\":{\"status\":{\"type\":\"string\"},\"exit_code\":" S_NULLABLE("integer") \
        ",\"signal\":" S_NULLABLE("string") ",\"reason\":" S_NULLABLE("string") "},"                             \
        "\"required\":[\"status\",\"exit_code\",\"signal\",\"reason\"]}"
#define S_STREAM_TRUNC                                                                                          \
        "{\"type\":\"object\",\"properties\":{\"truncated\":{\"type\":\"boolean\"},\"total_bytes\":{\"type\":\"integer\"},"     \
        "\"returned_bytes\":{\"type\":\"integer\"},\"kept_bytes\":{\"type\":\"integer\"},\"sandboxd_truncated\":{\"type\":\"boolean\"}}}"
#define S_OUTPUT_PROPS                                                                                          \
        "\"stdout\":{\"type\":\"string\"},\"stdout_b64\":{\"type\":\"string\",\"description\":\"stdout when it is not UTF-8\"},"  \
        "\"stderr\":{\"type\":\"string\"},\"stderr_b64\":{\"type\":\"string\"}"
/* a command's result (sandbox_exec, _run, _wait, _exec_close) */
#define S_RESULT_PROPS                                                                                          \
        "\"session_id\":{\"type\":\"string\"},\"request_id\":{\"type\":\"string\"},"                             \
        "\"status\":{\"type\":\"string\",\"description\":\"succeeded, failed, timed_out, signaled, lost (running: sandbox_wait's time was up)\"}," \
        "\"exit_code\":" S_NULLABLE("integer") ",\"signal\":" S_NULLABLE("string") ",\"reason\":" S_NULLABLE("string") "," \
        "\"duration_ms\":{\"type\":\"integer\"},\"usage\":{\"type\":\"object\",\"properties\":{\"cpu_usec\":{\"type\":\"integer\"},\"memory_bytes\":{\"type\":\"integer\"},\"tasks\":{\"type\":\"integer\"}}}," \
        S_OUTPUT_PROPS ",\"truncation\":{\"type\":\"object\",\"properties\":{\"stdout\":" S_STREAM_TRUNC ",\"stderr\":" S_STREAM_TRUNC "}}"
#define S_RESULT "{\"type\":\"object\",\"properties\":{" S_RESULT_PROPS "},\"required\":[\"session_id\",\"request_id\",\"status\"]}"
#define S_POLL                                                                                                  \
        "{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":\"string\"},\"request_id\":{\"type\":\"string\"}," \
        S_OUTPUT_PROPS ",\"cursor\":{\"type\":\"integer\",\"description\":\"where the next read goes on\"},"     \
        "\"running\":{\"type\":\"boolean\",\"description\":\"false once the read reached the command's end\"},"  \
        "\"exit\":{\"oneOf\":[{\"type\":\"null\"}," S_EXIT "]},"                                                 \
        "\"more\":{\"type\":\"boolean\",\"description\":\"max_bytes stopped the read: more output is there already\"}," \
        "\"sandboxd_truncated\":{\"type\":\"boolean\",\"description\":\"sandboxd stopped keeping output (its OutputMax=); the rest was not kept\"}}," \
        "\"required\":[\"session_id\",\"request_id\",\"cursor\",\"running\",\"exit\",\"more\"]}"
#define S_SESSION_REQUEST "\"session_id\":" MCP_SESSION_ID ",\"request_id\":" MCP_REQUEST_ID

const McpTool mcp_exec_tools[] = {
        { "sandbox_exec",
          "\"title\":\"Run a command\""
          ",\"description\":\"Run a command in a session and wait for it (at most timeout_ms, default the server's --timeout=, 50 s). Give argv (no shell), or command (run by /bin/sh -c). Returns status, exit_code, signal, reason, stdout, stderr and truncation metadata. For longer work use sandbox_exec_start.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID "," S_ARGV "," S_COMMAND "," S_CWD "," S_ENV "," S_STDIN "," S_TIMEOUT("the command's whole run; default: the server's (50 s)") "," S_MAX_OUTPUT "},\"required\":[\"session_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT(S_RESULT)
          ",\"annotations\":{\"destructiveHint\":true,\"openWorldHint\":true}",
          tool_exec },
        { "sandbox_run",
          "\"title\":\"Run a command once\""
          ",\"description\":\"Run one command without a session id: creates the session of the user and workspace (defaults: the server's), runs the command as sandbox_exec does and closes the session again if this call created it (files stay in the workspace; a session that was open already stays open). The limits and exec_mode apply to a session it creates. Data: sandbox_exec's, and session_created, session_removed.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"user\":" MCP_USER ",\"workspace\":" MCP_WORKSPACE ",\"memory_max\":{\"type\":\"string\",\"description\":\"e.g. 512M\"},\"cpu_quota\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"percent of one CPU\"},\"tasks_max\":{\"type\":\"integer\",\"minimum\":1},\"exec_mode\":{\"type\":\"string\",\"enum\":[\"unit\",\"session\"]}," S_ARGV "," S_COMMAND "," S_CWD "," S_ENV "," S_STDIN "," S_TIMEOUT("the command's whole run; default: the server's (50 s)") "," S_MAX_OUTPUT "},\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{" S_RESULT_PROPS ",\"session_created\":{\"type\":\"boolean\"},\"session_removed\":{\"type\":\"boolean\"}},\"required\":[\"session_id\",\"request_id\",\"status\",\"session_created\",\"session_removed\"]}")
          ",\"annotations\":{\"destructiveHint\":true,\"openWorldHint\":true}",
          tool_run },
        { "sandbox_wait",
          "\"title\":\"Wait for a command\""
          ",\"description\":\"Wait at most timeout_ms for a command (of sandbox_exec_start, say) to end: its result as sandbox_exec gives it, with running false; or {running: true, status: running} when the time is up (not an error: wait again).\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{" S_SESSION_REQUEST ",\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":30000,\"description\":\"default 10000\"}," S_MAX_OUTPUT "},\"required\":[\"session_id\",\"request_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{" S_RESULT_PROPS ",\"running\":{\"type\":\"boolean\"}},\"required\":[\"session_id\",\"request_id\",\"status\",\"running\"]}")
          ",\"annotations\":{\"readOnlyHint\":true}",
          tool_wait },
        { "sandbox_exec_start",
          "\"title\":\"Start a command\""
          ",\"description\":\"Start a command in a session and return at once with its request_id and cursor 0; read its output with sandbox_exec_poll, feed it with sandbox_exec_write (stdin_stream), signal it with sandbox_exec_signal, end it with sandbox_exec_close or wait with sandbox_wait. Without timeout_ms sandboxd's default timeout applies.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID "," S_ARGV "," S_COMMAND "," S_CWD "," S_ENV "," S_STDIN ",\"stdin_stream\":{\"type\":\"boolean\",\"description\":\"keep stdin open for sandbox_exec_write (stdin is then its first input); default false: stdin is stdin or empty\"}," S_TIMEOUT("the command's whole run; default: sandboxd's") "},\"required\":[\"session_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":\"string\"},\"request_id\":{\"type\":\"string\"},\"cursor\":{\"type\":\"integer\"},\"stdin_stream\":{\"type\":\"boolean\"}},\"required\":[\"session_id\",\"request_id\",\"cursor\"]}")
          ",\"annotations\":{\"destructiveHint\":true,\"openWorldHint\":true}",
          tool_exec_start },
        { "sandbox_exec_poll",
          "\"title\":\"Read a started command's output\""
          ",\"description\":\"Read a command's output from cursor on: waits at most wait_ms for new output or the command's end, and returns once output came and was quiet a moment. Returns stdout and stderr (or _b64 when not UTF-8), the cursor to go on from (each byte comes once across polls that go on from the returned cursor), running, exit (null while running) and more (max_bytes was reached: poll again at once).\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{" S_SESSION_REQUEST "," S_CURSOR ",\"wait_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"how long to wait for new output or the end; default 5000\"}," S_MAX_BYTES "},\"required\":[\"session_id\",\"request_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT(S_POLL)
          ",\"annotations\":{\"readOnlyHint\":true}",
          tool_exec_poll },
        { "sandbox_exec_write",
          "\"title\":\"Write to a command's stdin\""
          ",\"description\":\"Write input to the stdin of a command started with stdin_stream (or on a terminal), then close it if eof. A command without a streamed stdin refuses (stdin_not_streamed), as does one whose stdin was closed (stdin_closed).\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{" S_SESSION_REQUEST ",\"input\":{\"type\":\"string\",\"maxLength\":65536,\"description\":\"UTF-8 text, as it is: end lines with \\\"\\\\n\\\"\"},\"eof\":{\"type\":\"boolean\",\"description\":\"close stdin after the input\"}},\"required\":[\"session_id\",\"request_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"request_id\":{\"type\":\"string\"},\"written_bytes\":{\"type\":\"integer\"},\"eof\":{\"type\":\"boolean\"}},\"required\":[\"request_id\",\"written_bytes\",\"eof\"]}")
          ",\"annotations\":{\"destructiveHint\":true}",
          tool_exec_write },
        { "sandbox_exec_signal",
          "\"title\":\"Signal a command\""
          ",\"description\":\"Send a signal to every process of a running command.\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{" S_SESSION_REQUEST ",\"signal\":{\"type\":\"string\",\"enum\":[\"SIGTERM\",\"SIGKILL\",\"SIGINT\",\"SIGHUP\",\"SIGUSR1\",\"SIGUSR2\"]}},\"required\":[\"session_id\",\"request_id\",\"signal\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"request_id\":{\"type\":\"string\"},\"signal\":{\"type\":\"string\"}},\"required\":[\"request_id\",\"signal\"]}")
          ",\"annotations\":{\"destructiveHint\":true}",
          tool_exec_signal },
        { "sandbox_exec_close",
          "\"title\":\"End a command\""
          ",\"description\":\"End a command: if it runs, SIGTERM, then SIGKILL after the server's grace (--kill-grace=), and wait for its end. Returns its result as sandbox_exec does, and stopped (whether this call ended it).\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{" S_SESSION_REQUEST "," S_MAX_OUTPUT "},\"required\":[\"session_id\",\"request_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{" S_RESULT_PROPS ",\"stopped\":{\"type\":\"boolean\"}},\"required\":[\"session_id\",\"request_id\",\"status\",\"stopped\"]}")
          ",\"annotations\":{\"destructiveHint\":true,\"idempotentHint\":true}",
          tool_exec_close },
        { "sandbox_list_commands",
          "\"title\":\"List a session's commands\""
          ",\"description\":\"The commands of a session, oldest first: request_id, argv, status, exit_code, signal, reason, created_at_usec, duration_ms, running, stdin, tty and the output's byte counts (events_bytes: the cursor at the end of its log, for sandbox_read_output).\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID "},\"required\":[\"session_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"session_id\":{\"type\":\"string\"},\"commands\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"request_id\":{\"type\":\"string\"},\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"status\":{\"type\":\"string\"},\"running\":{\"type\":\"boolean\"},\"exit_code\":" S_NULLABLE("integer") ",\"signal\":" S_NULLABLE("string") ",\"reason\":" S_NULLABLE("string") ",\"duration_ms\":" S_NULLABLE("integer") ",\"created_at_usec\":{\"type\":\"integer\"},\"stdout_bytes\":{\"type\":\"integer\"},\"stderr_bytes\":{\"type\":\"integer\"},\"events_bytes\":{\"type\":\"integer\"}},\"required\":[\"request_id\",\"status\",\"running\"]}}},\"required\":[\"session_id\",\"commands\"]}")
          ",\"annotations\":{\"readOnlyHint\":true}",
          tool_list_commands },
        { "sandbox_read_output",
          "\"title\":\"Read a command's output\""
          ",\"description\":\"Read the kept output of any command of a session (running or ended) from cursor on, as sandbox_exec_poll does; follow_ms: how long to wait for more of a running command's output (default 0: what is there).\""
          ",\"inputSchema\":{\"type\":\"object\",\"properties\":{" S_SESSION_REQUEST "," S_CURSOR ",\"follow_ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":30000,\"description\":\"default 0\"}," S_MAX_BYTES "},\"required\":[\"session_id\",\"request_id\"],\"additionalProperties\":false}"
          "," MCP_OUTPUT(S_POLL)
          ",\"annotations\":{\"readOnlyHint\":true}",
          tool_read_output },
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
