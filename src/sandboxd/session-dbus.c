/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>

#include "bus-request.h"
#include "bus-util.h"
#include "log.h"
#include "bus-api.h"
#include "polkit.h"
#include "port.h"
#include "session-dbus.h"
#include "time-util.h"
#include "validate.h"


int session_bus_path(Session *s, char **ret) {
        return asprintf(ret, BUS_SESSION_PREFIX "/%s", s->id) < 0 ? -ENOMEM : 0;
}

Session *session_from_path(Manager *m, const char *path, const char **ret_rest) {
        char id[SESSION_ID_SIZE];
        const char *p = startswith(path, BUS_SESSION_PREFIX "/");
        size_t n;

        if (!p)
                return NULL;
        n = session_id_prefix(p, id);
        if (n == 0 || (p[n] != 0 && p[n] != '/'))
                return NULL;
        if (ret_rest)
                *ret_rest = p + n;
        return session_find(m, id);
}

int session_check_read_access(sd_bus *bus, Session *s, sd_bus_error *error) {
        _cleanup_(bus_caller_done) BusCaller caller = {};
        sd_bus_message *call = sd_bus_get_current_message(bus);
        uint8_t type;

        if (!call || sd_bus_message_get_type(call, &type) < 0 || type != SD_BUS_MESSAGE_METHOD_CALL ||
            !streq_ptr(sd_bus_message_get_interface(call), "org.freedesktop.DBus.Properties"))
                return 0;
        if (bus_caller_identity(s->manager, call, &caller) >= 0 && authz_may_see(&caller.authz, AUTHZ_DBUS, s->tenant, s->user))
                return 0;
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                 "Only root, AdminGroup= and the caller that created session %s may read its properties.",
                                 s->id);
}

int session_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                        sd_bus_error *error) {
        const char *rest;
        Session *s;
        int r;

        s = session_from_path(userdata, path, &rest);
        if (!s || *rest)
                return 0;
        r = session_check_read_access(bus, s, error);
        if (r < 0)
                return r;
        *found = s;
        return 1;
}

int session_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_(bus_caller_done) BusCaller caller = {};
        _cleanup_strv_free_ char **l = NULL;
        size_t n = 0, k = 1;
        const char *rest = NULL;
        Session *s, *one = NULL;
        Command *c;
        int r;

        /* Only what the caller may read; root sees everything. */
        r = bus_caller_identity(m, sd_bus_get_current_message(bus), &caller);
        if (r < 0)
                return 0;

        /* The direct children of `path` only, so that every node can be introspected. */
        if (!streq(path, BUS_SESSION_PREFIX)) {
                one = session_from_path(m, path, &rest);
                if (!one || !authz_may_see(&caller.authz, AUTHZ_DBUS, one->tenant, one->user) || (*rest && !streq(rest, "/command")))
                        return 0;
        }
        if (!one)
                LIST_FOREACH(sessions, s, m->sessions)
                        k++;
        else
                LIST_FOREACH(commands, c, one->commands)
                        k++;
        l = calloc(k, sizeof(char *));
        if (!l)
                return -ENOMEM;

        if (!one) {
                LIST_FOREACH(sessions, s, m->sessions)
                        if (authz_may_see(&caller.authz, AUTHZ_DBUS, s->tenant, s->user) && session_bus_path(s, &l[n++]) < 0)
                                return -ENOMEM;
        } else if (!*rest) {
                if (one->commands && asprintf(&l[n++], "%s/command", path) < 0)
                        return -ENOMEM;
        } else
                LIST_FOREACH(commands, c, one->commands)
                        if (command_bus_path(c, &l[n++]) < 0)
                                return -ENOMEM;

        *nodes = TAKE_PTR(l);
        return 1;
}

/* --- properties ----------------------------------------------------------------------
 *
 * Each property is the model's field that the HTTP API's object shows (session_append_json()),
 * read when asked: plain fields through their offset, the rest computed as the JSON computes
 * them. tests/integration/test_parity.py holds the two to each other. */

static int property_get_id(sd_bus *bus, const char *path, const char *interface, const char *property,
                           sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;

        return sd_bus_message_append(reply, "s", s->id);
}

static int property_get_state(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;

        return sd_bus_message_append(reply, "s", session_state_to_string(s->state));
}

static int property_get_network(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;

        return sd_bus_message_append(reply, "s", network_mode_to_string(s->network));
}

static int property_get_exec_mode(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;

        return sd_bus_message_append(reply, "s", exec_mode_to_string(s->exec_mode));
}

static int property_get_image(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;

        return sd_bus_message_append(reply, "s", s->image ?: "");
}

/* network.deny: shown in mode proxy only, as in the JSON */
static int property_get_network_deny(sd_bus *bus, const char *path, const char *interface, const char *property,
                                     sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;

        return sd_bus_message_append_strv(reply, s->network == NETWORK_PROXY && s->net_deny ? s->net_deny : (char *[]) { NULL });
}

/* network.allow: (whether the session has an allow list, the list). An empty list allows
 * nothing, no list allows what is not denied: the flag tells them apart. */
static int property_get_network_allow(sd_bus *bus, const char *path, const char *interface, const char *property,
                                      sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;
        bool has = s->network == NETWORK_PROXY && s->net_allow;
        int r;

        r = sd_bus_message_open_container(reply, 'r', "bas");
        if (r >= 0)
                r = sd_bus_message_append(reply, "b", (int) has);
        if (r >= 0)
                r = sd_bus_message_append_strv(reply, has ? s->net_allow : (char *[]) { NULL });
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int property_get_expires_at(sd_bus *bus, const char *path, const char *interface, const char *property,
                                   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "t", session_expiry(userdata));
}

static int property_get_frozen(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;

        return sd_bus_message_append(reply, "b", (int) s->frozen);
}

static int property_get_running(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "u", (uint32_t) session_count_running(userdata));
}

/* The last count, as the JSON has it; a count older than 5 s is started for the next look. */
static int property_get_disk_bytes(sd_bus *bus, const char *path, const char *interface, const char *property,
                                   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "t", session_disk_bytes(userdata));
}

/* --- methods --------------------------------------------------------------------------- */

static void reply_command(BusPending *p, Command *c) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = command_bus_path(c, &path);
        if (r >= 0)
                r = sd_bus_reply_method_return(p->call, "so", c->request_id, path);
        if (r < 0)
                log_debug_errno(r, "Failed to answer Exec, ignoring: %m");
        bus_pending_free(p);
}

static void reply_run(BusPending *p, Command *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Buf raw[_OUTPUT_STREAM_MAX] = {};
        int r;

        r = sd_bus_message_new_method_return(p->call, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "si", command_status_to_string(c->result.status), c->result.exit_code);
        for (OutputStream st = 0; r >= 0 && st < _OUTPUT_STREAM_MAX; st++) {
                r = output_read_raw(c->output, st, &raw[st]);
                if (r >= 0)
                        r = sd_bus_message_append_array(reply, 'y', raw[st].data ?: "", MIN(raw[st].len, BUS_OUTPUT_MAX));
        }
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to answer Run, ignoring: %m");
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++)
                buf_done(&raw[st]);
        bus_pending_free(p);
}

/* Run: called on every event of the command's output; answers once the exit is in. */
static void on_run_output(OutputReader *reader) {
        BusPending *p = reader->userdata;
        Command *c;

        if (!reader->output) {
                /* Let go before it ended. At a stop (command_abandon_waiters()) the command
                 * goes on under systemd and the next sandboxd has its result: that is
                 * Stopping, as for every other call waiting then, not NoSuchCommand, which
                 * would tell the caller there is nothing to look up. */
                if (p->manager->stopping)
                        bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_STOPPING,
                                                                        "sandboxd is stopping; the command goes on: "
                                                                        "look it up by its request id once it is back."));
                else
                        bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_NO_SUCH_COMMAND, "The command went away."));
                return;
        }
        if (!reader->output->finished)
                return;
        c = p->command;
        output_detach(reader);
        reply_run(p, c);
}

static void run_wait(BusPending *p, Command *c) {
        if (command_status_is_terminal(c->result.status)) {
                reply_run(p, c);
                return;
        }
        p->run = true;
        p->command = c;
        p->reader.notify = on_run_output;
        p->reader.userdata = p;
        output_attach(c->output, &p->reader, c->output->log_size);
}

static void on_exec_started(Op *op, int r, const char *message, void *userdata) {
        BusPending *p = userdata;
        Command *c = op->command;

        p->op = op_free(op);
        if (r == -ECANCELED) {
                bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_STOPPING,
                                                                "sandboxd is stopping; the command may have started: "
                                                                "look it up by its request id once it is back."));
                return;
        }
        if (r < 0) {
                sd_bus_error e = SD_BUS_ERROR_NULL;

                (void) sd_bus_error_setf(&e, BUS_ERROR_SYSTEMD_FAILED, "systemd refused to start the command: %s",
                                         message ?: strerror(-r));
                bus_pending_fail(p, 0, &e);
                sd_bus_error_free(&e);
                return;
        }
        if (p->run)
                run_wait(p, c);
        else
                reply_command(p, c);
}

int bus_session_exec(sd_bus_message *call, Session *s, bool run, sd_bus_error *error) {
        _cleanup_(command_request_done) CommandRequest req = {};
        Manager *m = s->manager;
        RequestError e = {};
        BusPending *p;
        Command *c;
        int r;

        POLKIT_SCOPE(m, call);

        r = bus_request_read_command(call, &req, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);

        r = bus_authorize(m, call, AUTHZ_EXEC, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = bus_pending_new(m, call, s, &p);
        if (r < 0)
                return r;
        p->run = run;
        r = session_exec(s, &req, on_exec_started, p, &c, &p->op, &e);
        if (r < 0) {
                bus_pending_free(p);
                return bus_error_set_request(error, r, &e);
        }
        if (r == 0) {
                /* The command of this request id, started before. */
                if (run)
                        run_wait(p, c);
                else
                        reply_command(p, c);
        }
        return 1;
}

static int method_exec(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return bus_session_exec(call, userdata, false, error);
}

static int method_run(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return bus_session_exec(call, userdata, true, error);
}

/* A close is over: r its result (session.h). */
static void reply_closed(BusPending *p, Session *s, int r) {
        if (r == -EIO) {
                _cleanup_free_ char *msg = NULL;

                (void) asprintf(&msg, "The session is closed, but emptying its workspace failed: %s",
                                s->purge_error ?: "?");
                bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_PURGE_FAILED, msg ?: "?"));
                return;
        }
        if (r == -ECANCELED) {
                bus_pending_fail_stopping(p);
                return;
        }
        if (r == -ESTALE) {
                bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_NOT_PURGED,
                                                                "The session was closed without purge: its workspace stays."));
                return;
        }
        if (r < 0) {
                bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_NO_SUCH_SESSION, "The session went away."));
                return;
        }
        r = sd_bus_reply_method_return(p->call, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to answer Close, ignoring: %m");
        bus_pending_free(p);
}

static void on_closed(Op *op, int r, const char *message, void *userdata) {
        BusPending *p = userdata;
        Session *s = op->session;

        p->op = op_free(op);
        reply_closed(p, s, r);
}

int bus_session_close(sd_bus_message *call, Session *s, bool purge, sd_bus_error *error) {
        Manager *m = s->manager;
        BusPending *p;
        int r;

        POLKIT_SCOPE(m, call);

        r = bus_authorize(m, call, AUTHZ_CLOSE, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        if (s->state == SESSION_STARTING)
                return sd_bus_error_set(error, BUS_ERROR_SESSION_STARTING, "The session is still starting.");

        r = bus_pending_new(m, call, s, &p);
        if (r < 0)
                return r;
        r = session_close(s, "deleted", purge, on_closed, p, &p->op);
        if (r < 0) {
                bus_pending_free(p);
                return r;
        }
        if (r == 0)
                reply_closed(p, s, session_close_result(s, purge)); /* closed already, or at once */
        return 1;
}

static int method_close(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        int purge, r;

        r = sd_bus_message_read(call, "b", &purge);
        if (r < 0)
                return r;
        return bus_session_close(call, userdata, purge, error);
}

static void on_frozen(Op *op, int r, const char *message, void *userdata) {
        BusPending *p = userdata;
        Session *s = op->session;

        p->op = op_free(op);
        if (r < 0) {
                sd_bus_error e = SD_BUS_ERROR_NULL;

                if (r == -ESTALE)
                        (void) sd_bus_error_setf(&e, BUS_ERROR_SESSION_NOT_ACTIVE, "Session %s is closing.", s->id);
                else if (r == -ECANCELED)
                        (void) sd_bus_error_set(&e, BUS_ERROR_STOPPING, STOPPING_MESSAGE);
                else
                        (void) sd_bus_error_setf(&e, BUS_ERROR_SYSTEMD_FAILED, "systemd failed: %s", message);
                bus_pending_fail(p, 0, &e);
                sd_bus_error_free(&e);
                return;
        }
        r = sd_bus_reply_method_return(p->call, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to answer Freeze/Thaw, ignoring: %m");
        bus_pending_free(p);
}

static int session_freeze_thaw(sd_bus_message *call, Session *s, bool freeze, sd_bus_error *error) {
        Manager *m = s->manager;
        RequestError e = {};
        BusPending *p;
        int r;

        POLKIT_SCOPE(m, call);

        r = bus_authorize(m, call, AUTHZ_FREEZE, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = session_check_active(s, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);

        r = bus_pending_new(m, call, s, &p);
        if (r < 0)
                return r;
        r = session_freeze(s, freeze, on_frozen, p, &p->op);
        if (r < 0) {
                bus_pending_free(p);
                if (r == -EOPNOTSUPP)
                        return sd_bus_error_set(error, BUS_ERROR_NOT_SUPPORTED,
                                                "Freezing needs cgroup v2; on this host the cgroup hierarchy is v1 or "
                                                "hybrid, where systemd cannot freeze units.");
                if (r == -EBUSY)
                        return sd_bus_error_setf(error, BUS_ERROR_BUSY,
                                                 "A freeze or thaw of session %s is under way.", s->id);
                return r;
        }
        return 1;
}

static int method_freeze(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return session_freeze_thaw(call, userdata, true, error);
}

static int method_thaw(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return session_freeze_thaw(call, userdata, false, error);
}

static int method_touch(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Session *s = userdata;
        RequestError e = {};
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = bus_authorize(s->manager, call, AUTHZ_GET, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = session_check_active(s, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);
        session_touch(s);
        return sd_bus_reply_method_return(call, NULL);
}

/* GET .../commands: the commands kept, oldest first, as (request id, status, object). */
static int method_list_commands(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Session *s = userdata;
        Command *c;
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = bus_authorize(s->manager, call, AUTHZ_GET, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(sso)");
        /* The list is newest first. */
        for (c = s->commands; c && c->commands_next; c = c->commands_next)
                ;
        for (; r >= 0 && c; c = c->commands_prev) {
                _cleanup_free_ char *path = NULL;

                r = command_bus_path(c, &path);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "(sso)", c->request_id, command_status_to_string(c->result.status),
                                                  path);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* The command of a request id, as .../commands/RID names it. */
static int method_get_command(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *path = NULL;
        Session *s = userdata;
        const char *rid;
        Command *c;
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = sd_bus_message_read(call, "s", &rid);
        if (r < 0)
                return r;
        r = bus_authorize(s->manager, call, AUTHZ_GET, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        if (!request_id_is_valid(rid))
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_NAME,
                                         "Invalid request id '%.64s': must match [A-Za-z0-9._-]{1,64}.", rid);
        c = session_find_command(s, rid);
        if (!c)
                return sd_bus_error_setf(error, BUS_ERROR_NO_SUCH_COMMAND, "No command '%s' in session %s.", rid, s->id);
        r = command_bus_path(c, &path);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "o", path);
}

/* --- exposed ports ------------------------------------------------------------------------- */

static int reply_port(sd_bus_message *call, Port *p) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = port_socket_path(p, &path);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "qsq", p->port, path, p->host_port);
}

static void on_port_exposed(Op *op, int r, const char *message, void *userdata) {
        BusPending *p = userdata;
        Session *s = op->session;
        Port *port = port_find(s, op->port);

        p->op = op_free(op);
        if (r == -ECANCELED) {
                bus_pending_fail_stopping(p);
                return;
        }
        if (r < 0 || !port) {
                sd_bus_error e = SD_BUS_ERROR_NULL;

                if (r == -ESTALE || r >= 0)
                        (void) sd_bus_error_setf(&e, BUS_ERROR_PORT_NOT_EXPOSED,
                                                 "The port was removed, or session %s closed, before it listened.", s->id);
                else
                        (void) sd_bus_error_setf(&e, BUS_ERROR_SYSTEMD_FAILED, "systemd failed: %s", message);
                bus_pending_fail(p, 0, &e);
                sd_bus_error_free(&e);
                return;
        }
        r = reply_port(p->call, port);
        if (r < 0)
                log_debug_errno(r, "Failed to answer ExposePort, ignoring: %m");
        bus_pending_free(p);
}

static int method_expose_port(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Session *s = userdata;
        PortRequest req = {};
        RequestError e = {};
        BusPending *p;
        Port *port = NULL;
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = sd_bus_message_read(call, "q", &req.port);
        if (r < 0)
                return r;
        r = bus_request_read_port_options(call, &req, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);
        if (req.port == 0)
                return sd_bus_error_set(error, BUS_ERROR_INVALID_VALUE, "Port 0 cannot be exposed.");
        r = bus_authorize(s->manager, call, AUTHZ_EXEC, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = bus_pending_new(s->manager, call, s, &p);
        if (r < 0)
                return r;
        r = port_expose(s, &req, on_port_exposed, p, &port, &p->op, &e);
        if (r <= 0)
                bus_pending_free(p);
        if (r < 0)
                return bus_error_set_request(error, r, &e);
        if (r == 0)
                return reply_port(call, port); /* exposed already */
        return 1;
}

static int method_list_ports(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Session *s = userdata;
        Port *p;
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = bus_authorize(s->manager, call, AUTHZ_GET, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(qsq)");
        LIST_FOREACH(ports, p, s->ports) {
                _cleanup_free_ char *path = NULL;

                if (r < 0)
                        break;
                if (!p->active)
                        continue;
                r = port_socket_path(p, &path);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "(qsq)", p->port, path, p->host_port);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_unexpose_port(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Session *s = userdata;
        uint16_t port;
        Port *p;
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = sd_bus_message_read(call, "q", &port);
        if (r < 0)
                return r;
        r = bus_authorize(s->manager, call, AUTHZ_EXEC, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        p = port_find(s, port);
        if (!p || !p->active)
                return sd_bus_error_setf(error, BUS_ERROR_PORT_NOT_EXPOSED, "Port %u of session %s is not exposed.", port,
                                         s->id);
        port_remove(p);
        return sd_bus_reply_method_return(call, NULL);
}

#define CHANGES SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE
#define CONST SD_BUS_VTABLE_PROPERTY_CONST

/* The node that has the session: this one (whatever its id's node part says). */
static int property_get_node(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Session *s = userdata;

        return sd_bus_message_append(reply, "s", s->manager->config.node_name);
}

const sd_bus_vtable session_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", property_get_id, 0, CONST),
        SD_BUS_PROPERTY("Node", "s", property_get_node, 0, CONST),
        SD_BUS_PROPERTY("User", "s", NULL, offsetof(Session, user), CONST),
        SD_BUS_PROPERTY("Workspace", "s", NULL, offsetof(Session, workspace), CONST),
        SD_BUS_PROPERTY("State", "s", property_get_state, 0, CHANGES),
        SD_BUS_PROPERTY("WorkspacePath", "s", NULL, offsetof(Session, workspace_dir), CONST),
        SD_BUS_PROPERTY("Unit", "s", NULL, offsetof(Session, slice), CONST),
        SD_BUS_PROPERTY("DynamicUser", "s", NULL, offsetof(Session, dynamic_user), CONST),
        SD_BUS_PROPERTY("CreatedAt", "t", NULL, offsetof(Session, created_realtime_usec), CONST),
        SD_BUS_PROPERTY("LastActivity", "t", NULL, offsetof(Session, last_activity_realtime_usec), CHANGES),
        SD_BUS_PROPERTY("ExpiresAt", "t", property_get_expires_at, 0, CHANGES),
        SD_BUS_PROPERTY("IdleTimeoutUSec", "t", NULL, offsetof(Session, ttl_usec), CONST),
        SD_BUS_PROPERTY("MemoryMax", "t", NULL, offsetof(Session, limits.memory_max), CONST),
        SD_BUS_PROPERTY("CPUQuota", "t", NULL, offsetof(Session, limits.cpu_quota_percent), CONST),
        SD_BUS_PROPERTY("TasksMax", "t", NULL, offsetof(Session, limits.tasks_max), CONST),
        SD_BUS_PROPERTY("Network", "s", property_get_network, 0, CONST),
        SD_BUS_PROPERTY("NetworkDeny", "as", property_get_network_deny, 0, CONST),
        SD_BUS_PROPERTY("NetworkAllow", "(bas)", property_get_network_allow, 0, CONST),
        SD_BUS_PROPERTY("ExecMode", "s", property_get_exec_mode, 0, CONST),
        SD_BUS_PROPERTY("Image", "s", property_get_image, 0, CONST),
        SD_BUS_PROPERTY("Frozen", "b", property_get_frozen, 0, CHANGES),
        SD_BUS_PROPERTY("Commands", "u", NULL, offsetof(Session, n_commands), CHANGES),
        SD_BUS_PROPERTY("RunningCommands", "u", property_get_running, 0, 0),
        SD_BUS_PROPERTY("DiskBytes", "t", property_get_disk_bytes, 0, 0),
        SD_BUS_PROPERTY("CloseReason", "s", NULL, offsetof(Session, close_reason), CHANGES),

        SD_BUS_METHOD_WITH_ARGS("Exec",
                                SD_BUS_ARGS("as", argv, "a{sv}", options),
                                SD_BUS_RESULT("s", request_id, "o", command),
                                method_exec,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Run",
                                SD_BUS_ARGS("as", argv, "a{sv}", options),
                                SD_BUS_RESULT("s", status, "i", exit_code, "ay", stdout, "ay", stderr),
                                method_run,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Close",
                                SD_BUS_ARGS("b", purge),
                                SD_BUS_NO_RESULT,
                                method_close,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Freeze", NULL, NULL, method_freeze, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Thaw", NULL, NULL, method_thaw, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Touch", NULL, NULL, method_touch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListCommands",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sso)", commands),
                                method_list_commands,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetCommand",
                                SD_BUS_ARGS("s", request_id),
                                SD_BUS_RESULT("o", command),
                                method_get_command,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ExposePort",
                                SD_BUS_ARGS("q", port, "a{sv}", options),
                                SD_BUS_RESULT("q", port, "s", socket, "q", host_port),
                                method_expose_port,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListPorts",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(qsq)", ports),
                                method_list_ports,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("UnexposePort",
                                SD_BUS_ARGS("q", port),
                                SD_BUS_NO_RESULT,
                                method_unexpose_port,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END
};

/* --- signals ------------------------------------------------------------------------------- */

void session_send_changed(Session *s, const char *property) {
        _cleanup_free_ char *path = NULL;
        sd_bus *bus = s->manager->bus;
        int r;

        if (!bus || session_bus_path(s, &path) < 0)
                return;
        if (streq(property, "State"))
                r = sd_bus_emit_properties_changed(bus, path, BUS_SESSION_INTERFACE, "State", "ExpiresAt",
                                                   "CloseReason", NULL);
        else if (streq(property, "LastActivity"))
                r = sd_bus_emit_properties_changed(bus, path, BUS_SESSION_INTERFACE, "LastActivity", "ExpiresAt", NULL);
        else
                r = sd_bus_emit_properties_changed(bus, path, BUS_SESSION_INTERFACE, property, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to emit PropertiesChanged for session %s, ignoring: %m", s->id);
}

void session_send_signal(Session *s, bool new_session) {
        _cleanup_free_ char *path = NULL;
        sd_bus *bus = s->manager->bus;
        int r;

        if (!bus || session_bus_path(s, &path) < 0)
                return;
        r = sd_bus_emit_signal(bus, BUS_PATH, BUS_MANAGER_INTERFACE, new_session ? "SessionNew" : "SessionRemoved",
                               "so", s->id, path);
        if (r < 0)
                log_debug_errno(r, "Failed to emit a signal for session %s, ignoring: %m", s->id);
}
