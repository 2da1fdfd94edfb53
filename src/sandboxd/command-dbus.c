/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <unistd.h>

#include "bus-request.h"
#include "bus-util.h"
#include "command-dbus.h"
#include "http-json.h"
#include "log.h"
#include "output-pipe.h"
#include "bus-api.h"
#include "parse-util.h"
#include "polkit.h"
#include "session-dbus.h"
#include "session.h"
#include "terminal-socket.h"

Command *command_from_path(Manager *m, const char *path) {
        const char *rest, *num;
        uint64_t n;
        Session *s;
        Command *c;

        s = session_from_path(m, path, &rest);
        if (!s)
                return NULL;
        num = startswith(rest, "/command/");
        if (!num || num[0] == '0' || parse_uint64(num, &n) < 0 || n > UINT_MAX)
                return NULL;
        LIST_FOREACH(commands, c, s->commands)
                if (c->n == n)
                        return c;
        return NULL;
}

int command_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                        sd_bus_error *error) {
        Command *c;
        int r;

        c = command_from_path(userdata, path);
        if (!c)
                return 0;
        r = session_check_read_access(bus, c->session, error);
        if (r < 0)
                return r;
        *found = c;
        return 1;
}

/* --- properties -----------------------------------------------------------------------
 *
 * Each property is the model's field that the HTTP API's object shows (command_append_json()),
 * computed as the JSON computes it; where the JSON has null (the result of a command not yet
 * terminal), the property has -1, "" or 0. tests/integration/test_parity.py holds the two to
 * each other. */

static int property_get_session_id(sd_bus *bus, const char *path, const char *interface, const char *property,
                                   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append(reply, "s", c->session->id);
}

static int property_get_stdin(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append(reply, "s", stdin_mode_to_string(c->stdin_mode));
}

/* (rows, cols) of its terminal; (0, 0) on pipes */
static int property_get_tty(sd_bus *bus, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append(reply, "(qq)", (uint16_t) (c->tty ? c->tty_rows : 0),
                                     (uint16_t) (c->tty ? c->tty_cols : 0));
}

/* exec mode "session": its own cgroup below the exec unit's, once it runs; "" otherwise */
static int property_get_cgroup(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        const char *name = c->in_executor && c->cgroup ? strrchr(c->cgroup, '/') : NULL;

        return sd_bus_message_append(reply, "s", name ? name + 1 : "");
}

static int property_get_status(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append(reply, "s", command_status_to_string(c->result.status));
}

static int property_get_terminal(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append(reply, "b", (int) command_status_is_terminal(c->result.status));
}

static int property_get_exit_code(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        bool exited = command_status_is_terminal(c->result.status) && c->result.exit_code >= 0;

        return sd_bus_message_append(reply, "i", (int32_t) (exited ? c->result.exit_code : -1));
}

/* As ndjson_append_result_fields() names it: "SIGKILL", or "SIG9" for a number without a name. */
static int property_get_signal(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        char num[16]; /* "SIG" and an int */
        const char *v = "";

        if (command_status_is_terminal(c->result.status) && c->result.signal > 0) {
                v = signal_to_string(c->result.signal);
                if (!v) {
                        snprintf(num, sizeof(num), "SIG%d", c->result.signal);
                        v = num;
                }
        }
        return sd_bus_message_append(reply, "s", v);
}

static int property_get_reason(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append(reply, "s", command_status_is_terminal(c->result.status) ? c->result.reason : "");
}

static int property_get_duration(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append(reply, "t",
                                     command_status_is_terminal(c->result.status) ? c->result.duration_ms : UINT64_C(0));
}

static int property_get_usage(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        if (command_status_is_terminal(c->result.status))
                return sd_bus_message_append(reply, "(ttt)", c->result.usage.cpu_usec, c->result.usage.memory_bytes,
                                             c->result.usage.tasks);
        /* While it runs: what was sampled so far, as the HTTP snapshot shows it. */
        return sd_bus_message_append(reply, "(ttt)", c->cpu_sampled_usec, c->memory_peak, c->tasks_peak);
}

static int property_get_output(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        Output *o = c->output;

        if (streq(property, "Truncated"))
                return sd_bus_message_append(reply, "b", (int) (o->truncated[OUTPUT_STDOUT] || o->truncated[OUTPUT_STDERR]));
        if (streq(property, "StdoutTruncated"))
                return sd_bus_message_append(reply, "b", (int) o->truncated[OUTPUT_STDOUT]);
        if (streq(property, "StderrTruncated"))
                return sd_bus_message_append(reply, "b", (int) o->truncated[OUTPUT_STDERR]);
        if (streq(property, "EventsBytes"))
                return sd_bus_message_append(reply, "t", o->log_size);
        return sd_bus_message_append(reply, "t", o->total[streq(property, "StdoutBytes") ? OUTPUT_STDOUT : OUTPUT_STDERR]);
}

/* --- methods ------------------------------------------------------------------------------ */

static int method_signal(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        Session *s = c->session;
        const char *name;
        int sig, r;

        POLKIT_SCOPE(s->manager, call);

        r = sd_bus_message_read(call, "s", &name);
        if (r < 0)
                return r;
        sig = command_signal_from_string(name);
        if (sig < 0)
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_VALUE,
                                         "Signal '%.32s' is not one of SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGUSR1, SIGUSR2.",
                                         name);

        r = bus_authorize(s->manager, call, AUTHZ_SIGNAL, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = command_signal(c, sig);
        if (r == -ESRCH)
                return sd_bus_error_set(error, BUS_ERROR_COMMAND_NOT_RUNNING, "The command has already finished.");
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, NULL);
}

/* POST .../resize {"rows", "cols"} */
static int method_resize(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        Session *s = c->session;
        uint16_t rows, cols;
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = sd_bus_message_read(call, "qq", &rows, &cols);
        if (r < 0)
                return r;
        if (rows < 1 || rows > REQUEST_TTY_SIZE_MAX || cols < 1 || cols > REQUEST_TTY_SIZE_MAX)
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_VALUE, "Rows and columns must be 1 to %u, not %u and %u.",
                                         REQUEST_TTY_SIZE_MAX, rows, cols);

        r = bus_authorize(s->manager, call, AUTHZ_SIGNAL, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = command_resize(c, rows, cols);
        if (r == -ENOTTY)
                return sd_bus_error_set(error, BUS_ERROR_NOT_A_TERMINAL,
                                        "The command is not on a terminal of sandboxd's (no 'tty' option in its start).");
        if (r == -ESRCH)
                return sd_bus_error_set(error, BUS_ERROR_COMMAND_NOT_RUNNING, "The command has already finished.");
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, NULL);
}

/* GET .../commands/RID: the HTTP API's object (without its output fields) and the kept
 * bytes of each stream. */
static int method_snapshot(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Command *c = userdata;
        Session *s = c->session;
        Buf json = {}, raw[_OUTPUT_STREAM_MAX] = {};
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = bus_authorize(s->manager, call, AUTHZ_GET, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = command_append_json(c, &json, false);
        if (r >= 0)
                r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", json.data);
        for (OutputStream st = 0; r >= 0 && st < _OUTPUT_STREAM_MAX; st++) {
                r = output_read_raw(c->output, st, &raw[st]);
                if (r >= 0)
                        r = sd_bus_message_append_array(reply, 'y', raw[st].data ?: "", MIN(raw[st].len, BUS_OUTPUT_MAX));
        }
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        buf_done(&json);
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++)
                buf_done(&raw[st]);
        return r;
}

/* GET .../events?offset=: the same NDJSON, into a pipe (output-pipe.h). */
static int method_attach(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        Session *s = c->session;
        uint64_t offset;
        int fd = -EBADF, r;

        POLKIT_SCOPE(s->manager, call);

        r = sd_bus_message_read(call, "t", &offset);
        if (r < 0)
                return r;
        r = bus_authorize(s->manager, call, AUTHZ_GET, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        if (offset > c->output->log_size)
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_OFFSET,
                                         "Offset %" PRIu64 " is past the end of the command's events (%" PRIu64 " bytes).",
                                         offset, c->output->log_size);
        r = output_is_line_start(c->output, offset);
        if (r < 0)
                return r;
        if (r == 0)
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_OFFSET,
                                         "Offset %" PRIu64 " is inside a line of the command's events.", offset);
        r = output_pipe_new(s->manager, c->output, offset, &fd);
        if (r == -EAGAIN)
                return sd_bus_error_setf(error, BUS_ERROR_OVERLOADED,
                                         "sandboxd has %u event pipes open; close one or ask again shortly.", OUTPUT_PIPES_MAX);
        if (r < 0)
                return r;
        r = sd_bus_reply_method_return(call, "h", fd);
        close(fd);
        return r;
}

/* GET .../tty: the terminal's bytes both ways on a socket (terminal-socket.h), authorized as
 * writing stdin, or as reading the events for a read-only one. */
static int method_open_terminal(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        Session *s = c->session;
        RequestError e = {};
        uint64_t offset;
        bool readonly;
        int fd = -EBADF, r;

        POLKIT_SCOPE(s->manager, call);

        r = bus_request_read_terminal_options(call, &readonly, &offset, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);
        r = bus_authorize(s->manager, call, readonly ? AUTHZ_GET : AUTHZ_STDIN, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        if (!c->tty_master)
                return sd_bus_error_set(error, BUS_ERROR_NOT_A_TERMINAL,
                                        "The command is not on a terminal of sandboxd's (no 'tty' option in its start).");
        r = terminal_socket_new(s->manager, c, offset, readonly, &fd);
        if (r == -EAGAIN)
                return sd_bus_error_setf(error, BUS_ERROR_TOO_MANY_TERMINALS,
                                         "Too many terminals are attached (%u a session, %u in all).",
                                         TERMINALS_PER_SESSION_MAX, TERMINALS_MAX);
        if (r == -ERANGE)
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_OFFSET,
                                         "Offset %" PRIu64 " is past the end of the command's output.", offset);
        if (r < 0)
                return r;
        r = sd_bus_reply_method_return(call, "h", fd);
        close(fd);
        return r;
}

static void on_stdin_written(Op *op, int r, const char *message, void *userdata) {
        BusPending *p = userdata;

        p->op = op_free(op);
        if (r == -ECANCELED) {
                bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_STOPPING,
                                                                "sandboxd is stopping; what reached the command's stdin is unknown."));
                return;
        }
        if (r < 0) {
                bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_STDIN_CLOSED,
                                                                "The command's stdin is closed (it exited or closed it)."));
                return;
        }
        r = sd_bus_reply_method_return(p->call, "t", p->bytes);
        if (r < 0)
                log_debug_errno(r, "Failed to answer WriteStdin, ignoring: %m");
        bus_pending_free(p);
}

/* POST .../stdin[?eof=1]: answered once the bytes are in the pipe. */
static int method_write_stdin(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        Session *s = c->session;
        const void *data = NULL;
        size_t n = 0;
        BusPending *p;
        int eof, r;

        POLKIT_SCOPE(s->manager, call);

        r = sd_bus_message_read_array(call, 'y', &data, &n);
        if (r >= 0)
                r = sd_bus_message_read(call, "b", &eof);
        if (r < 0)
                return r;
        r = bus_authorize(s->manager, call, AUTHZ_STDIN, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        if (c->stdin_mode != STDIN_STREAM)
                return sd_bus_error_set(error, BUS_ERROR_STDIN_NOT_STREAMED,
                                        "The command was not started with stdin \"stream\".");

        r = bus_pending_new(s->manager, call, s, &p);
        if (r < 0)
                return r;
        p->bytes = n;
        r = command_write_stdin(c, data ?: "", n, eof, on_stdin_written, p, &p->op);
        if (r < 0) {
                bus_pending_free(p);
                if (r == -EPIPE)
                        return sd_bus_error_set(error, BUS_ERROR_STDIN_CLOSED,
                                                "The command's stdin is closed (it finished, or an earlier eof closed it).");
                return r;
        }
        return 1;
}

#define CHANGES SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE
#define CONST SD_BUS_VTABLE_PROPERTY_CONST

const sd_bus_vtable command_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("RequestId", "s", NULL, offsetof(Command, request_id), CONST),
        SD_BUS_PROPERTY("SessionId", "s", property_get_session_id, 0, CONST),
        SD_BUS_PROPERTY("Unit", "s", NULL, offsetof(Command, unit), CONST),
        SD_BUS_PROPERTY("Argv", "as", NULL, offsetof(Command, argv), CONST),
        SD_BUS_PROPERTY("CreatedAt", "t", NULL, offsetof(Command, created_realtime_usec), CONST),
        SD_BUS_PROPERTY("Stdin", "s", property_get_stdin, 0, CONST),
        SD_BUS_PROPERTY("Tty", "(qq)", property_get_tty, 0, 0),
        SD_BUS_PROPERTY("Cgroup", "s", property_get_cgroup, 0, SD_BUS_VTABLE_PROPERTY_EMITS_INVALIDATION),
        SD_BUS_PROPERTY("Status", "s", property_get_status, 0, CHANGES),
        SD_BUS_PROPERTY("Terminal", "b", property_get_terminal, 0, CHANGES),
        SD_BUS_PROPERTY("ExitCode", "i", property_get_exit_code, 0, CHANGES),
        SD_BUS_PROPERTY("Signal", "s", property_get_signal, 0, CHANGES),
        SD_BUS_PROPERTY("Reason", "s", property_get_reason, 0, CHANGES),
        SD_BUS_PROPERTY("DurationMSec", "t", property_get_duration, 0, CHANGES),
        SD_BUS_PROPERTY("Usage", "(ttt)", property_get_usage, 0, CHANGES),
        SD_BUS_PROPERTY("Truncated", "b", property_get_output, 0, CHANGES),
        SD_BUS_PROPERTY("StdoutTruncated", "b", property_get_output, 0, CHANGES),
        SD_BUS_PROPERTY("StderrTruncated", "b", property_get_output, 0, CHANGES),
        SD_BUS_PROPERTY("StdoutBytes", "t", property_get_output, 0, 0),
        SD_BUS_PROPERTY("StderrBytes", "t", property_get_output, 0, 0),
        SD_BUS_PROPERTY("EventsBytes", "t", property_get_output, 0, 0),

        SD_BUS_METHOD_WITH_ARGS("Signal",
                                SD_BUS_ARGS("s", signal),
                                SD_BUS_NO_RESULT,
                                method_signal,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Resize",
                                SD_BUS_ARGS("q", rows, "q", cols),
                                SD_BUS_NO_RESULT,
                                method_resize,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Snapshot",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("s", json, "ay", stdout, "ay", stderr),
                                method_snapshot,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Attach",
                                SD_BUS_ARGS("t", offset),
                                SD_BUS_RESULT("h", events),
                                method_attach,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("OpenTerminal",
                                SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("h", terminal),
                                method_open_terminal,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WriteStdin",
                                SD_BUS_ARGS("ay", data, "b", eof),
                                SD_BUS_RESULT("t", written),
                                method_write_stdin,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END
};

/* --- signals -------------------------------------------------------------------------------- */

void command_send_changed(Command *c) {
        _cleanup_free_ char *path = NULL;
        sd_bus *bus = c->session->manager->bus;
        int r;

        if (!bus || command_bus_path(c, &path) < 0)
                return;
        r = sd_bus_emit_properties_changed(bus, path, BUS_COMMAND_INTERFACE, "Status", "Terminal", "ExitCode", "Signal",
                                           "Reason", "DurationMSec", "Usage", "Truncated", "StdoutTruncated",
                                           "StderrTruncated", NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to emit PropertiesChanged for %s, ignoring: %m", c->unit);
}

void command_send_finished(Command *c) {
        _cleanup_free_ char *path = NULL;
        sd_bus *bus = c->session->manager->bus;
        int r;

        if (!bus || command_bus_path(c, &path) < 0)
                return;
        r = sd_bus_emit_signal(bus, BUS_PATH, BUS_MANAGER_INTERFACE, "CommandFinished", "ssosi", c->session->id,
                               c->request_id, path, command_status_to_string(c->result.status), c->result.exit_code);
        if (r < 0)
                log_debug_errno(r, "Failed to emit CommandFinished for %s, ignoring: %m", c->unit);
}
