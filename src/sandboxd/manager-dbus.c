/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <pwd.h>

#include "auth.h"
#include "bus-request.h"
#include "bus-util.h"
#include "command-dbus.h"
#include "files-dbus.h"
#include "image-import.h"
#include "images.h"
#include "log.h"
#include "manager-dbus.h"
#include "polkit.h"
#include "pool.h"
#include "scope.h"
#include "session-dbus.h"
#include "status.h"
#include "time-util.h"
#include "validate.h"

void manager_bus_activity(Manager *m) {
        /* A countdown that runs starts again. */
        if (m->idle_timer && sd_event_source_get_enabled(m->idle_timer, NULL) > 0)
                (void) sd_event_source_set_time_relative(m->idle_timer, m->config.idle_exit_usec);
}

/* --- Manager methods -------------------------------------------------------------------- */

static int find_session(Manager *m, const char *id, Session **ret, sd_bus_error *error) {
        Session *s;

        if (!session_id_is_valid(id))
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_NAME,
                                         "Invalid session id '%.64s': must be NODE_HEX (a node name, '_', 16 lowercase "
                                         "hexadecimal digits) or 16 lowercase hexadecimal digits.", id);
        s = session_find(m, id);
        if (!s && !session_id_is_of_node(id, m->config.node_name))
                return sd_bus_error_setf(error, BUS_ERROR_WRONG_NODE, WRONG_NODE_BUS_MESSAGE,
                                         id, (int) session_id_node_len(id), id, m->config.node_name);
        if (!s)
                return sd_bus_error_setf(error, BUS_ERROR_NO_SUCH_SESSION, "No session '%s'.", id);
        *ret = s;
        return 0;
}

static int reply_session(sd_bus_message *call, Session *s) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = session_bus_path(s, &path);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "so", s->id, path);
}

static void on_session_ready(Op *op, int r, const char *message, void *userdata) {
        BusPending *p = userdata;
        Session *s = op->session;

        p->op = op_free(op);
        if (r == -ECANCELED) {
                bus_pending_fail_stopping(p);
                return;
        }
        if (r < 0) {
                sd_bus_error e = SD_BUS_ERROR_NULL;

                (void) sd_bus_error_setf(&e, BUS_ERROR_SYSTEMD_FAILED, "systemd could not create the session's slice: %s",
                                         s->error ?: "unknown error");
                bus_pending_fail(p, 0, &e);
                sd_bus_error_free(&e);
                return;
        }
        r = reply_session(p->call, s);
        if (r < 0)
                log_debug_errno(r, "Failed to answer CreateSession, ignoring: %m");
        bus_pending_free(p);
}

static int method_create_session(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(session_request_done) SessionRequest req = {};
        _cleanup_free_ char *tenant = NULL;
        Manager *m = userdata;
        RequestError e = {};
        BusPending *p;
        Session *s;
        uid_t uid;
        int r;

        POLKIT_SCOPE(m, call);

        r = bus_request_read_session(call, &req, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);

        r = bus_caller_uid(m, call, &uid);
        if (r < 0)
                return r;
        if (asprintf(&tenant, "dbus:%u", (unsigned) uid) < 0)
                return -ENOMEM;

        /* the scope's, and its active session's if there is one (which would be returned) */
        s = session_find_by_scope(m, scope_tenant(tenant), req.user, req.workspace);
        r = bus_authorize(m, call, AUTHZ_CREATE, req.user, req.workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = session_create(m, &req, tenant, &s, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);
        if (s->state != SESSION_STARTING)
                return reply_session(call, s);

        r = bus_pending_new(m, call, s, &p);
        if (r < 0)
                return r;
        r = session_wait_ready(s, on_session_ready, p, &p->op);
        if (r <= 0) {
                bus_pending_free(p);
                return r < 0 ? r : reply_session(call, s);
        }
        return 1;
}

static int method_list_sessions(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(bus_caller_done) BusCaller caller = {};
        Manager *m = userdata;
        bool all;
        Session *s;
        int r;

        POLKIT_SCOPE(m, call);

        r = bus_caller_identity(m, call, &caller);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Failed to learn who is calling: %m");
        all = authz_decide(&caller.authz, AUTHZ_DBUS, AUTHZ_LIST, NULL, NULL) == AUTHZ_ALLOW;
        if (!all) {
                _cleanup_(sd_bus_error_free) sd_bus_error not_all = SD_BUS_ERROR_NULL;
                const char *details[] = { "user", caller.name, NULL };

                if (!caller.name)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "User %u has no name.",
                                                 (unsigned) caller.uid);

                /* Those polkit lets manage all sessions see everything; without asking anyone
                 * for a password, though: the caller may well only want its own sessions. */
                r = polkit_verify(m, call, POLKIT_ACTION_MANAGE_ALL, details, false, &not_all);
                if (r == 0)
                        return 1;
                all = r > 0;
                if (!all) {
                        r = polkit_verify(m, call, POLKIT_ACTION_MANAGE_SESSIONS, details, true, error);
                        if (r <= 0)
                                return r < 0 ? r : 1;
                }
        }

        r = sd_bus_message_new_method_return(call, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(sssso)");
        if (r < 0)
                return r;
        LIST_FOREACH(sessions, s, m->sessions) {
                _cleanup_free_ char *path = NULL;

                /* the caller's own: the sessions it created */
                if (!all && !authz_may_see(&caller.authz, AUTHZ_DBUS, s->tenant, s->user))
                        continue;
                r = session_bus_path(s, &path);
                if (r < 0)
                        return r;
                r = sd_bus_message_append(reply, "(sssso)", s->id, s->user, s->workspace,
                                          session_state_to_string(s->state), path);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_session(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *path = NULL;
        Manager *m = userdata;
        const char *id;
        Session *s;
        int r;

        POLKIT_SCOPE(m, call);

        r = sd_bus_message_read(call, "s", &id);
        if (r < 0)
                return r;
        r = find_session(m, id, &s, error);
        if (r < 0)
                return r;
        r = bus_authorize(m, call, AUTHZ_GET, s->user, s->workspace, s, error);
        if (r <= 0)
                return r < 0 ? r : 1;

        r = session_bus_path(s, &path);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "o", path);
}

static int method_close_session(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        const char *id;
        Session *s;
        int r;

        POLKIT_SCOPE(userdata, call);

        r = sd_bus_message_read(call, "s", &id);
        if (r < 0)
                return r;
        r = find_session(userdata, id, &s, error);
        if (r < 0)
                return r;
        return bus_session_close(call, s, false, error);
}

static int manager_exec(sd_bus_message *call, Manager *m, bool run, sd_bus_error *error) {
        const char *id;
        Session *s;
        int r;

        POLKIT_SCOPE(m, call);

        r = sd_bus_message_read(call, "s", &id);
        if (r < 0)
                return r;
        r = find_session(m, id, &s, error);
        if (r < 0)
                return r;
        return bus_session_exec(call, s, run, error);
}

static int method_exec(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return manager_exec(call, userdata, false, error);
}

static int method_run(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return manager_exec(call, userdata, true, error);
}

/* --- what sandboxd says of itself: GET /v1/health, /v1/pool, /metrics, /v1/drain ---------- */

static int append_pool(sd_bus_message *reply, Manager *m) {
        PoolStats st;

        pool_stats(m, &st);
        return sd_bus_message_append(reply, "a{sv}", 7, "profile", "s", pool_profile_to_string(m->config.pool_profile),
                                     "size", "u", st.size, "min_ready", "u", st.min_ready, "ready", "u", st.ready,
                                     "starting", "u", st.starting, "in_use", "u", st.in_use, "refill_due", "b",
                                     (int) st.refill_due);
}

/* Anyone on the bus, as anyone admitted to HTTP (and as the Version property). */
static int method_health(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        StatusHealth h;
        int r;

        status_health(m, &h);
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "a{sv}", 7, "status", "s", h.status, "timestamp", "t", h.timestamp_usec,
                                          "uptime", "d", (double) h.uptime_usec / USEC_PER_SEC, "version", "s",
                                          PROJECT_VERSION, "node", "s", m->config.node_name, "sessions", "u", h.sessions,
                                          "running_commands", "u", h.running_commands);
        if (r >= 0)
                r = append_pool(reply, m);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_pool(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = append_pool(reply, userdata);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_metrics(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        Buf b = {};
        int r;

        POLKIT_SCOPE(m, call);

        r = bus_authorize(m, call, AUTHZ_METRICS, NULL, NULL, NULL, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = status_format_metrics(m, &b);
        if (r >= 0)
                r = sd_bus_reply_method_return(call, "s", b.data ?: "");
        buf_done(&b);
        return r;
}

static int method_get_draining(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r;

        POLKIT_SCOPE(m, call);

        r = bus_authorize(m, call, AUTHZ_DRAIN, NULL, NULL, NULL, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        return sd_bus_reply_method_return(call, "bu", (int) m->draining, m->n_running);
}

static int method_set_draining(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int drain, r;

        POLKIT_SCOPE(m, call);

        r = sd_bus_message_read(call, "b", &drain);
        if (r < 0)
                return r;
        r = bus_authorize(m, call, AUTHZ_DRAIN, NULL, NULL, NULL, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = manager_set_draining(m, drain);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "bu", (int) m->draining, m->n_running);
}

/* --- images: listed and shown to every caller, imported and removed by administrators --- */

static int append_image(sd_bus_message *reply, Manager *m, const ImageInfo *i) {
        return sd_bus_message_append(reply, "(sttsssbu)", i->name, i->size_bytes, i->created_usec, i->os_id ?: "",
                                     i->os_version_id ?: "", i->os_pretty_name ?: "", (int) i->user_names,
                                     session_count_by_image(m, i->name));
}

static int image_error(sd_bus_error *error, int r, const char *name) {
        RequestError e = { .code = "internal" };

        if (r == -ENOENT || r == -EINVAL) {
                e.code = "image_not_found";
                snprintf(e.message, sizeof(e.message), "No image '%.64s'.", name);
        } else
                snprintf(e.message, sizeof(e.message), "%s", strerror(-r));
        /* -EINVAL: the row of the error table by its code (bus_error_set_request()) */
        return bus_error_set_request(error, -EINVAL, &e);
}

static int method_list_images(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        ImageInfo *l = NULL;
        size_t n = 0;
        int r;

        r = images_list(&m->config, &l, &n);
        if (r < 0)
                return image_error(error, r, "");
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(sttsssbu)");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = append_image(reply, m, &l[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        image_info_free_many(l, n);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_image(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(image_info_done) ImageInfo i = {};
        Manager *m = userdata;
        const char *name;
        int r;

        r = sd_bus_message_read(call, "s", &name);
        if (r < 0)
                return r;
        r = image_get(&m->config, name, &i);
        if (r < 0)
                return image_error(error, r, name);
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = append_image(reply, m, &i);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_remove_image(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        const char *name;
        unsigned n;
        int r;

        POLKIT_SCOPE(m, call);

        r = sd_bus_message_read(call, "s", &name);
        if (r < 0)
                return r;
        r = bus_authorize(m, call, AUTHZ_IMAGES, NULL, NULL, NULL, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = image_root_path(&m->config, name, NULL);
        if (r < 0)
                return image_error(error, r, name);
        n = session_count_by_image(m, name);
        if (n > 0) {
                RequestError e = { .code = "image_in_use" };

                snprintf(e.message, sizeof(e.message), "The image is in use by %u session%s.", n, n == 1 ? "" : "s");
                return bus_error_set_request(error, -EINVAL, &e);
        }
        r = image_remove_async(&m->config, name);
        if (r < 0)
                return image_error(error, r, name);
        log_info("Image %s removed.", name);
        return sd_bus_reply_method_return(call, NULL);
}

static void on_bus_import_done(ImageImport *imp, const ImageImportResult *res, void *userdata) {
        BusPending *p = userdata;

        p->image_import = NULL;
        if (res->error < 0) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                RequestError re = { .code = res->code };

                snprintf(re.message, sizeof(re.message), "%.250s", res->message);
                (void) bus_error_set_request(&e, -EINVAL, &re);
                bus_pending_fail(p, res->error, &e);
                return;
        }
        (void) sd_bus_reply_method_return(p->call, "t", res->bytes);
        bus_pending_free(p);
}

/* ImportImage(name, tar): the caller's fd (a tar file, a pipe) is the unpacker's stdin. */
static int method_import_image(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        ImageImportResult res;
        const char *name;
        BusPending *p;
        int fd, r;

        POLKIT_SCOPE(m, call);

        r = sd_bus_message_read(call, "sh", &name, &fd);
        if (r < 0)
                return r;
        r = bus_authorize(m, call, AUTHZ_IMAGES, NULL, NULL, NULL, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        r = bus_pending_new(m, call, NULL, &p);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        r = image_import_start(m, name, fd, NULL, on_bus_import_done, p, &p->image_import, &res);
        if (r < 0) {
                RequestError re = { .code = res.code ?: "internal" };

                bus_pending_free(p);
                snprintf(re.message, sizeof(re.message), "%.250s", res.message);
                return bus_error_set_request(error, -EINVAL, &re);
        }
        return 1;
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", PROJECT_VERSION);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),

        SD_BUS_METHOD_WITH_ARGS("CreateSession",
                                SD_BUS_ARGS("s", user, "s", workspace, "a{sv}", options),
                                SD_BUS_RESULT("s", id, "o", path),
                                method_create_session,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSessions",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sssso)", sessions),
                                method_list_sessions,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetSession",
                                SD_BUS_ARGS("s", id),
                                SD_BUS_RESULT("o", path),
                                method_get_session,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CloseSession",
                                SD_BUS_ARGS("s", id),
                                SD_BUS_NO_RESULT,
                                method_close_session,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Exec",
                                SD_BUS_ARGS("s", session, "as", argv, "a{sv}", options),
                                SD_BUS_RESULT("s", request_id, "o", command),
                                method_exec,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Run",
                                SD_BUS_ARGS("s", session, "as", argv, "a{sv}", options),
                                SD_BUS_RESULT("s", status, "i", exit_code, "ay", stdout, "ay", stderr),
                                method_run,
                                SD_BUS_VTABLE_UNPRIVILEGED),

        SD_BUS_METHOD_WITH_ARGS("Health",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a{sv}", health, "a{sv}", pool),
                                method_health,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetPool",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a{sv}", pool),
                                method_get_pool,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Metrics",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("s", text),
                                method_metrics,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetDraining",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("b", draining, "u", running_commands),
                                method_get_draining,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetDraining",
                                SD_BUS_ARGS("b", draining),
                                SD_BUS_RESULT("b", draining, "u", running_commands),
                                method_set_draining,
                                SD_BUS_VTABLE_UNPRIVILEGED),

        SD_BUS_METHOD_WITH_ARGS("ListImages",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sttsssbu)", images),
                                method_list_images,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetImage",
                                SD_BUS_ARGS("s", name),
                                SD_BUS_RESULT("(sttsssbu)", image),
                                method_get_image,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ImportImage",
                                SD_BUS_ARGS("s", name, "h", tar),
                                SD_BUS_RESULT("t", size_bytes),
                                method_import_image,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemoveImage",
                                SD_BUS_ARGS("s", name),
                                SD_BUS_NO_RESULT,
                                method_remove_image,
                                SD_BUS_VTABLE_UNPRIVILEGED),

        SD_BUS_SIGNAL_WITH_ARGS("SessionNew", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_SIGNAL_WITH_ARGS("SessionRemoved", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_SIGNAL_WITH_ARGS("CommandFinished",
                                SD_BUS_ARGS("s", session, "s", request_id, "o", command, "s", status, "i", exit_code),
                                0),
        SD_BUS_VTABLE_END
};

/* --- dispatch ---------------------------------------------------------------------------- */

/* The vtable for an object path of ours, by its shape (and, on a session's, the interface). */
static const sd_bus_vtable *vtable_for_path(const char *path, const char *interface, const char **ret_interface) {
        char id[SESSION_ID_SIZE];
        const char *p;
        size_t n;

        if (streq(path, BUS_PATH)) {
                *ret_interface = BUS_MANAGER_INTERFACE;
                return manager_vtable;
        }
        p = startswith(path, BUS_SESSION_PREFIX "/");
        n = p ? session_id_prefix(p, id) : 0;
        if (n == 0)
                return NULL;
        if (p[n] == 0 && streq_ptr(interface, BUS_FILES_INTERFACE)) {
                *ret_interface = BUS_FILES_INTERFACE;
                return files_vtable;
        }
        if (p[n] == 0) {
                *ret_interface = BUS_SESSION_INTERFACE;
                return session_vtable;
        }
        if (startswith(p + n, "/command/")) {
                *ret_interface = BUS_COMMAND_INTERFACE;
                return command_vtable;
        }
        return NULL;
}

/* Runs before sd-bus dispatches a message: sd-bus itself answers arguments of the wrong
 * type with org.freedesktop.DBus.Error.InvalidArgs and calls on missing objects with
 * UnknownObject; our callers get errors of our own, as documented. */
static int on_bus_message(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        const char *path, *interface, *member, *signature, *ours;
        const sd_bus_vtable *vt;
        uint8_t type;

        if (sd_bus_message_get_type(msg, &type) < 0 || type != SD_BUS_MESSAGE_METHOD_CALL)
                return 0;
        manager_bus_activity(m);

        path = sd_bus_message_get_path(msg);
        interface = sd_bus_message_get_interface(msg);
        member = sd_bus_message_get_member(msg);
        if (!path || !member || !(vt = vtable_for_path(path, interface, &ours)))
                return 0;
        if (interface && !streq(interface, ours))
                return 0;
        /* As HTTP's 503 stopping: nothing new starts while the answers to the waiting calls
         * go out (manager_bus_stop()). */
        if (m->stopping) {
                polkit_forget(m, msg);
                return sd_bus_reply_method_errorf(msg, BUS_ERROR_STOPPING, STOPPING_MESSAGE);
        }

        /* Our object paths under .../session/: the object must be there. (A call that polkit
         * was asked about comes back here too: its session may have gone meanwhile.) */
        if (vt != manager_vtable && !session_from_path(m, path, NULL)) {
                char id[SESSION_ID_SIZE];

                polkit_forget(m, msg);
                /* vtable_for_path() found a session id in it */
                (void) session_id_prefix(path + strlen(BUS_SESSION_PREFIX "/"), id);
                if (!session_id_is_of_node(id, m->config.node_name))
                        return sd_bus_reply_method_errorf(msg, BUS_ERROR_WRONG_NODE, WRONG_NODE_BUS_MESSAGE, id,
                                                          (int) session_id_node_len(id), id, m->config.node_name);
                return sd_bus_reply_method_errorf(msg, BUS_ERROR_NO_SUCH_SESSION, "No session at %s.", path);
        }
        if (vt == command_vtable && !command_from_path(m, path)) {
                polkit_forget(m, msg);
                return sd_bus_reply_method_errorf(msg, BUS_ERROR_NO_SUCH_COMMAND, "No command at %s.", path);
        }

        signature = sd_bus_message_get_signature(msg, true);
        for (; vt->type != _SD_BUS_VTABLE_END; vt++)
                if (vt->type == _SD_BUS_VTABLE_METHOD && streq(vt->x.method.member, member)) {
                        if (streq_ptr(signature, vt->x.method.signature ?: ""))
                                return 0;
                        return sd_bus_reply_method_errorf(msg, BUS_ERROR_INVALID_ARGUMENTS,
                                                          "Invalid arguments '%s' to %s.%s(): expected '%s'.",
                                                          strempty(signature), ours, member,
                                                          vt->x.method.signature ?: "");
                }
        return 0;
}

/* The signals of sessions and commands, as the core tells of their changes. */
static void bus_session_added(Session *s, void *userdata) {
        session_send_signal(s, true);
}

static void bus_session_changed(Session *s, unsigned what, void *userdata) {
        if (what & SESSION_CHANGED_STATE)
                session_send_changed(s, "State");
        if (what & SESSION_CHANGED_ACTIVITY)
                session_send_changed(s, "LastActivity");
        if (what & SESSION_CHANGED_FROZEN)
                session_send_changed(s, "Frozen");
        if (what & SESSION_CHANGED_COMMANDS)
                session_send_changed(s, "Commands");
}

static void bus_session_removed(Session *s, void *userdata) {
        session_send_signal(s, false);
}

static void bus_command_changed(Command *c, void *userdata) {
        command_send_changed(c);
}

static void bus_command_finished(Command *c, void *userdata) {
        command_send_finished(c);
}

/* Calls answered later, events flowing into pipes, and questions to polkit: sandboxd does
 * not exit while they wait. */
static bool bus_busy(void *userdata) {
        Manager *m = userdata;

        return m->bus_pending || m->output_pipes || polkit_pending(m) > 0;
}

static const Observer bus_observer = {
        .session_added = bus_session_added,
        .session_changed = bus_session_changed,
        .session_removed = bus_session_removed,
        .command_changed = bus_command_changed,
        .command_finished = bus_command_finished,
        .busy = bus_busy,
};

int manager_bus_register(Manager *m) {
        int r;

        r = manager_add_observer(m, &bus_observer, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the sessions for D-Bus: %m");

        r = sd_bus_add_filter(m->bus, NULL, on_bus_message, m);
        if (r < 0)
                return log_error_errno(r, "Failed to add the D-Bus filter: %m");
        r = sd_bus_add_object_vtable(m->bus, NULL, BUS_PATH, BUS_MANAGER_INTERFACE, manager_vtable, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register %s: %m", BUS_MANAGER_INTERFACE);
        r = sd_bus_add_fallback_vtable(m->bus, NULL, BUS_SESSION_PREFIX, BUS_SESSION_INTERFACE, session_vtable,
                                       session_object_find, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register %s: %m", BUS_SESSION_INTERFACE);
        r = sd_bus_add_fallback_vtable(m->bus, NULL, BUS_SESSION_PREFIX, BUS_FILES_INTERFACE, files_vtable,
                                       session_object_find, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register %s: %m", BUS_FILES_INTERFACE);
        r = sd_bus_add_fallback_vtable(m->bus, NULL, BUS_SESSION_PREFIX, BUS_COMMAND_INTERFACE, command_vtable,
                                       command_object_find, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register %s: %m", BUS_COMMAND_INTERFACE);
        r = sd_bus_add_node_enumerator(m->bus, NULL, BUS_SESSION_PREFIX, session_node_enumerator, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register the session enumerator: %m");
        return 0;
}
