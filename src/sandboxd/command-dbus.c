/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-util.h"
#include "command-dbus.h"
#include "log.h"
#include "bus-api.h"
#include "parse-util.h"
#include "polkit.h"
#include "session-dbus.h"
#include "session.h"

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

/* --- properties ----------------------------------------------------------------------- */

static int property_get_string(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;
        bool terminal = command_status_is_terminal(c->result.status);
        const char *v = NULL;

        if (streq(property, "RequestId"))
                v = c->request_id;
        else if (streq(property, "SessionId"))
                v = c->session->id;
        else if (streq(property, "Unit"))
                v = c->unit;
        else if (streq(property, "Status"))
                v = command_status_to_string(c->result.status);
        else if (streq(property, "Reason"))
                v = terminal ? c->result.reason : NULL;
        else if (streq(property, "Signal"))
                v = terminal && c->result.signal > 0 ? signal_to_string(c->result.signal) : NULL;
        else if (streq(property, "Stdin"))
                v = stdin_mode_to_string(c->stdin_mode);
        return sd_bus_message_append(reply, "s", v ?: "");
}

static int property_get_argv(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append_strv(reply, c->argv ?: (char *[]) { NULL });
}

static int property_get_exit_code(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Command *c = userdata;

        return sd_bus_message_append(reply, "i",
                                     (int32_t) (command_status_is_terminal(c->result.status) ? c->result.exit_code : -1));
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
                return sd_bus_message_append(reply, "b", (int) (o->truncated[0] || o->truncated[1]));
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

#define CHANGES SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE
#define CONST SD_BUS_VTABLE_PROPERTY_CONST

const sd_bus_vtable command_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("RequestId", "s", property_get_string, 0, CONST),
        SD_BUS_PROPERTY("SessionId", "s", property_get_string, 0, CONST),
        SD_BUS_PROPERTY("Unit", "s", property_get_string, 0, CONST),
        SD_BUS_PROPERTY("Argv", "as", property_get_argv, 0, CONST),
        SD_BUS_PROPERTY("CreatedAt", "t", NULL, offsetof(Command, created_realtime_usec), CONST),
        SD_BUS_PROPERTY("Stdin", "s", property_get_string, 0, CONST),
        SD_BUS_PROPERTY("Status", "s", property_get_string, 0, CHANGES),
        SD_BUS_PROPERTY("ExitCode", "i", property_get_exit_code, 0, CHANGES),
        SD_BUS_PROPERTY("Signal", "s", property_get_string, 0, CHANGES),
        SD_BUS_PROPERTY("Reason", "s", property_get_string, 0, CHANGES),
        SD_BUS_PROPERTY("DurationMSec", "t", property_get_duration, 0, CHANGES),
        SD_BUS_PROPERTY("Usage", "(ttt)", property_get_usage, 0, CHANGES),
        SD_BUS_PROPERTY("Truncated", "b", property_get_output, 0, CHANGES),
        SD_BUS_PROPERTY("StdoutBytes", "t", property_get_output, 0, 0),
        SD_BUS_PROPERTY("StderrBytes", "t", property_get_output, 0, 0),

        SD_BUS_METHOD_WITH_ARGS("Signal",
                                SD_BUS_ARGS("s", signal),
                                SD_BUS_NO_RESULT,
                                method_signal,
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
        r = sd_bus_emit_properties_changed(bus, path, BUS_COMMAND_INTERFACE, "Status", "ExitCode", "Signal", "Reason",
                                           "DurationMSec", "Usage", "Truncated", NULL);
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
