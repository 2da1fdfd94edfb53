/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A session's life, its one job although over 800 lines: creation (quota, scope, slice or a
 * pooled one, proxy), the registry of sessions (session_add/find), expiry and touches,
 * freezing, closing with its purge, records and their recovery after a restart. It tells
 * the manager's observers (observer.h) of every change and knows no front end. */

#include <assert.h>
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <inttypes.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "authz.h"
#include "cgroup.h"
#include "command.h"
#include "encoding.h"
#include "files.h"
#include "images.h"
#include "log.h"
#include "ndjson.h"
#include "pool.h"
#include "proxy.h"
#include "scope.h"
#include "executor.h"
#include "session.h"
#include "store.h"
#include "systemd.h"
#include "time-util.h"
#include "validate.h"

/* How long a count of the workspace's disk usage is shown before it is counted again. */
#define DISK_USAGE_MAX_AGE_USEC (5 * USEC_PER_SEC)

static const char *const session_state_table[_SESSION_STATE_MAX] = {
        [SESSION_STARTING] = "starting",
        [SESSION_ACTIVE] = "active",
        [SESSION_CLOSING] = "closing",
        [SESSION_CLOSED] = "closed",
        [SESSION_FAILED] = "failed",
};

const char *session_state_to_string(SessionState s) {
        if (s < 0 || s >= _SESSION_STATE_MAX)
                return NULL;
        return session_state_table[s];
}

SessionState session_state_from_string(const char *s) {
        for (int i = 0; s && i < _SESSION_STATE_MAX; i++)
                if (streq(s, session_state_table[i]))
                        return (SessionState) i;
        return _SESSION_STATE_INVALID;
}

int random_session_id(const char *node, char ret[static SESSION_ID_SIZE]) {
        uint8_t b[SESSION_ID_HEX / 2];
        size_t l = strlen(node);
        ssize_t n;

        assert(node_name_is_valid(node));
        n = getrandom(b, sizeof(b), 0);
        if (n != (ssize_t) sizeof(b))
                return n < 0 ? -errno : -EIO;
        memcpy(ret, node, l);
        ret[l] = '_';
        hex_encode(b, sizeof(b), ret + l + 1);
        return 0;
}

/* What a close that asked for the purge is told. */
static int purge_result(Session *s) {
        if (s->purged)
                return 0;
        return s->purge_error ? -EIO : -ESTALE;
}

int session_close_result(Session *s, bool purge) {
        return purge ? purge_result(s) : 0;
}

/* The closes waited for are over: each is told how its purge went, if it asked for one. */
static void complete_close_ops(Session *s, int r, const char *message) {
        while (s->close_ops) {
                Op *op = s->close_ops;

                op_complete(op, r >= 0 ? session_close_result(s, op->purge) : r, message);
        }
}

/* --- records ------------------------------------------------------------------ */

static int session_dir(Session *s, char *buf, size_t n) {
        return snprintf(buf, n, "%s/sessions/%s", s->manager->state_dir, s->id) < (int) n ? 0 : -ENAMETOOLONG;
}

static json_object *strv_to_json(char * const *l) {
        json_object *a = json_object_new_array();
        bool oom = !a;

        for (size_t i = 0; a && l && l[i]; i++)
                json_push(a, json_object_new_string(l[i]), &oom);
        if (oom)
                return json_object_put(a), NULL;
        return a;
}

static json_object *network_to_json(Session *s) {
        json_object *o = json_object_new_object();
        bool oom = !o;

        json_put(o, "mode", json_object_new_string(network_mode_to_string(s->network)), &oom);
        if (s->network == NETWORK_PROXY) {
                json_put(o, "deny", strv_to_json(s->net_deny), &oom);
                if (s->net_allow)
                        json_put(o, "allow", strv_to_json(s->net_allow), &oom);
        }
        if (oom)
                return json_object_put(o), NULL;
        return o;
}

/* A list of domain patterns; -EBADMSG if it is not a list of strings. */
static int strv_from_json(json_object *a, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n;

        if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0, k = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(a, i);
                char pattern[HOST_NAME_MAX_LEN + 3];

                if (!json_object_is_type(v, json_type_string))
                        return -EBADMSG;
                /* in today's canonical form: a record may be older than it, and what is no
                 * pattern any more is dropped */
                if (domain_pattern_normalize(json_object_get_string(v), pattern) < 0)
                        continue;
                l[k] = strdup(pattern);
                if (!l[k++])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int session_save(Session *s) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *l = json_object_new_object();
        char dir[PATH_MAX], path[PATH_MAX + 32];
        bool oom = !o || !l;
        int r;

        json_put(o, "id", json_object_new_string(s->id), &oom);
        json_put(o, "user", json_object_new_string(s->user), &oom);
        json_put(o, "workspace", json_object_new_string(s->workspace), &oom);
        if (s->tenant)
                json_put(o, "tenant", json_object_new_string(s->tenant), &oom);
        json_put(o, "state", json_object_new_string(session_state_to_string(s->state)), &oom);
        if (s->close_reason)
                json_put(o, "close_reason", json_object_new_string(s->close_reason), &oom);
        json_put(l, "memory_max", json_object_new_uint64(s->limits.memory_max), &oom);
        json_put(l, "cpu_quota", json_object_new_uint64(s->limits.cpu_quota_percent), &oom);
        json_put(l, "tasks_max", json_object_new_uint64(s->limits.tasks_max), &oom);
        json_put(o, "limits", json_object_get(l), &oom);
        json_put(o, "created_usec", json_object_new_uint64(s->created_realtime_usec), &oom);
        json_put(o, "last_activity_usec", json_object_new_uint64(s->last_activity_realtime_usec), &oom);
        json_put(o, "closed_usec", json_object_new_uint64(s->closed_realtime_usec), &oom);
        json_put(o, "ttl_usec", json_object_new_uint64(s->ttl_usec), &oom);
        json_put(o, "n_commands", json_object_new_uint64(s->n_commands), &oom);
        json_put(o, "frozen", json_object_new_boolean(s->frozen), &oom);
        if (s->purged)
                json_put(o, "purged", json_object_new_boolean(true), &oom);
        json_put(o, "from_pool", json_object_new_boolean(s->from_pool), &oom);
        json_put(o, "network", network_to_json(s), &oom);
        json_put(o, "exec_mode", json_object_new_string(exec_mode_to_string(s->exec_mode)), &oom);
        if (s->image)
                json_put(o, "image", json_object_new_string(s->image), &oom);
        if (s->ports && s->state == SESSION_ACTIVE)
                json_put(o, "ports", port_list_to_json(s), &oom);

        if (oom)
                return log_warning_errno(-ENOMEM, "Failed to save the record of session %s, ignoring: %m", s->id);

        r = session_dir(s, dir, sizeof(dir));
        if (r >= 0) {
                _cleanup_free_ char *text = NULL;

                snprintf(path, sizeof(path), "%s/session.json", dir);
                const char *t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

                text = t ? strdup(t) : NULL; /* never an empty record: it would read back as corrupt */
                r = text ? store_writer_put(s->manager->writer, &s->save_job, path, TAKE_PTR(text)) : -ENOMEM;
        }
        if (r < 0)
                log_warning_errno(r, "Failed to save the record of session %s, ignoring: %m", s->id);
        /* this write has all the coalesced ones had */
        (void) sd_event_source_set_enabled(s->save_timer, SD_EVENT_OFF);
        return r;
}

static int on_save_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        (void) session_save(userdata);
        return 0;
}

void session_save_soon(Session *s) {
        int r;

        if (s->save_timer && sd_event_source_get_enabled(s->save_timer, NULL) > 0)
                return; /* due already: it will write what is current then */
        if (!s->save_timer) {
                r = sd_event_add_time_relative(s->manager->event, &s->save_timer, CLOCK_MONOTONIC,
                                               SESSION_SAVE_DELAY_USEC, 10 * USEC_PER_MSEC, on_save_timer, s);
                if (r >= 0)
                        (void) sd_event_source_set_description(s->save_timer, "session-save");
        } else {
                r = sd_event_source_set_time_relative(s->save_timer, SESSION_SAVE_DELAY_USEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(s->save_timer, SD_EVENT_ONESHOT);
        }
        if (r < 0) {
                log_debug_errno(r, "Failed to defer saving session %s, saving it now: %m", s->id);
                (void) session_save(s);
        }
}

void session_save_pending(Session *s) {
        if (s->save_timer && sd_event_source_get_enabled(s->save_timer, NULL) > 0)
                (void) session_save(s);
}

/* --- expiry ---------------------------------------------------------------------- */

uint64_t session_expiry(Session *s) {
        const Config *c = &s->manager->config;

        if (s->state == SESSION_CLOSED)
                return s->closed_realtime_usec + c->retain_closed_usec;
        return MIN(s->last_activity_realtime_usec + s->ttl_usec, s->created_realtime_usec + c->max_lifetime_usec);
}

static int on_expiry(sd_event_source *es, uint64_t usec, void *userdata) {
        Session *s = userdata;
        const Config *c = &s->manager->config;
        uint64_t now = now_usec(CLOCK_REALTIME);
        char dir[PATH_MAX];

        switch (s->state) {
        case SESSION_CLOSED:
                /* Results were kept long enough: forget the session. */
                log_info("Forgetting closed session %s.", s->id);
                if (session_dir(s, dir, sizeof(dir)) >= 0) {
                        Command *cmd;

                        /* what is queued of its records goes with them, after what is being written */
                        LIST_FOREACH(commands, cmd, s->commands)
                                store_writer_drop(s->manager->writer, &cmd->save_job);
                        (void) store_writer_remove(s->manager->writer, &s->save_job, dir, true);
                }
                snprintf(dir, sizeof(dir), "%s/spool/%s", s->manager->runtime_dir, s->id);
                (void) store_rm_rf(dir);
                manager_notify_session_removed(s->manager, s); /* its object goes now */
                session_free(s);
                return 0;
        case SESSION_ACTIVE:
                if (now >= s->created_realtime_usec + c->max_lifetime_usec) {
                        log_info("Session %s reached its maximum lifetime, closing.", s->id);
                        (void) session_close(s, "lifetime", false, NULL, NULL, NULL);
                } else if (session_count_running(s) > 0) {
                        /* Running commands keep a session alive. */
                        session_touch(s);
                } else if (now >= s->last_activity_realtime_usec + s->ttl_usec) {
                        log_info("Session %s was idle for %" PRIu64 " s, closing.", s->id, s->ttl_usec / USEC_PER_SEC);
                        (void) session_close(s, "idle", false, NULL, NULL, NULL);
                } else
                        session_arm_expiry(s);
                return 0;
        default:
                return 0;
        }
}

void session_arm_expiry(Session *s) {
        uint64_t when = session_expiry(s);
        int r;

        if (s->state != SESSION_ACTIVE && s->state != SESSION_CLOSED) {
                (void) sd_event_source_set_enabled(s->expiry_timer, SD_EVENT_OFF);
                return;
        }
        if (!s->expiry_timer) {
                r = sd_event_add_time(s->manager->event, &s->expiry_timer, CLOCK_REALTIME, when, USEC_PER_SEC, on_expiry, s);
                if (r < 0)
                        log_warning_errno(r, "Failed to arm the expiry of session %s, ignoring: %m", s->id);
                else
                        (void) sd_event_source_set_description(s->expiry_timer, "session-expiry");
                return;
        }
        (void) sd_event_source_set_time(s->expiry_timer, when);
        (void) sd_event_source_set_enabled(s->expiry_timer, SD_EVENT_ONESHOT);
}

void session_touch(Session *s) {
        s->last_activity_realtime_usec = now_usec(CLOCK_REALTIME);
        session_arm_expiry(s);
        manager_notify_session_changed(s->manager, s, SESSION_CHANGED_ACTIVITY);
        session_save_soon(s);
}

int session_check_active(Session *s, RequestError *e) {
        if (s->state == SESSION_ACTIVE)
                return 0;
        return request_error(e, "session_not_active", "%s",
                             s->state == SESSION_CLOSED ? "The session is closed." : "The session is not active.");
}

/* --- the egress proxy ------------------------------------------------------------ */

static int on_proxy_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Session *s = userdata;

        if (sd_bus_message_is_method_error(reply, "org.freedesktop.systemd1.UnitExists"))
                return 0; /* kept running by PID 1 while sandboxd restarted */
        if (sd_bus_message_is_method_error(reply, NULL))
                log_error("Failed to start the egress proxy units of session %s: %s. Its commands have no network.",
                          s->id, systemd_error_message(reply));
        return 0;
}

static bool session_proxy_accepting(void *userdata) {
        Session *s = userdata;

        return s->state == SESSION_ACTIVE;
}

/* A connection the egress proxy refused: the command that named itself, else every
 * running one of the session, gets the event. */
static void session_proxy_denied(void *userdata, unsigned command, const char *event, size_t len) {
        Session *s = userdata;
        bool any = false;
        Command *cmd;

        for (int pass = 0; pass < 2 && !any; pass++)
                LIST_FOREACH(commands, cmd, s->commands) {
                        if (!command_status_is_running(cmd) || !cmd->output || cmd->output->finished)
                                continue;
                        if (pass == 0 && (command == 0 || cmd->n != command))
                                continue;
                        if (output_append_event(cmd->output, event, len) < 0)
                                log_warning("Failed to add a network_denied event to %s, ignoring.", cmd->unit);
                        any = true;
                }
}

static int session_listen_proxy(Session *s) {
        ProxySession ps = {
                .id = s->id,
                .user = s->user,
                .workspace = s->workspace,
                .net_deny = s->net_deny,
                .net_allow = s->net_allow,
                .accepting = session_proxy_accepting,
                .denied = session_proxy_denied,
                .userdata = s,
        };

        if (s->network != NETWORK_PROXY || !s->manager->proxy || s->proxy)
                return 0;
        return proxy_listen(s->manager->proxy, &ps, &s->proxy);
}

int session_start_proxy_units(Session *s) {
        _cleanup_free_ char *dir = NULL;
        Manager *m = s->manager;
        int r;

        if (s->network != NETWORK_PROXY)
                return 0;
        r = proxy_session_dir(m, s->id, &dir);
        if (r < 0)
                return r;
        r = systemd_start_proxy_async(m->pid1, NULL, s->id, s->slice, dir, proxy_relay_max_connections(&m->config),
                                      on_proxy_started, s);
        if (r < 0)
                return log_error_errno(r, "Failed to ask systemd for the egress proxy units of session %s: %m", s->id);
        return 0;
}

static int session_stop_proxy_units(Session *s) {
        _cleanup_free_ char *socket = NULL;
        int r;

        r = systemd_proxy_unit_names(s->id, &socket, NULL);
        if (r < 0)
                return r;
        return systemd_stop_unit_async(s->manager->pid1, socket, NULL, NULL);
}

/* Mode proxy: our listener for the session, and the socket its commands join. */
static int session_setup_proxy(Session *s) {
        int r;

        r = session_listen_proxy(s);
        if (r < 0)
                return r;
        return session_start_proxy_units(s);
}

/* --- creation ------------------------------------------------------------------ */

static void session_set_active(Session *s) {
        session_set_state(s, SESSION_ACTIVE);
        log_info("Session %s for %s/%s is active in %s.", s->id, s->user, s->workspace, s->slice);
        manager_notify_session_changed(s->manager, s, SESSION_CHANGED_STATE);
        (void) session_save(s);
        session_arm_expiry(s);
        op_complete_all(&s->ready_ops, 0, NULL);
}

static int on_slice_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Session *s = userdata;

        s->start_call = pid1_call_cancel(s->start_call);

        if (sd_bus_message_is_method_error(reply, NULL)) {
                const char *msg = systemd_error_message(reply);

                log_error("Failed to start slice %s: %s", s->slice, msg);
                free(s->error);
                s->error = strdup(msg);
                session_set_state(s, SESSION_FAILED);
                op_complete_all(&s->ready_ops, -EIO, s->error);
                manager_notify_session_removed(s->manager, s);
                session_free(s); /* the waiters were told; the scope is free for a new try */
                return 0;
        }
        if (!s->executor || s->executor_ready)
                session_set_active(s); /* else once its executor runs: session_executor_ready() */
        return 0;
}

/* Exec mode "session": the session is active once its executor runs (its workspace is then
 * its dynamic user's: PID 1 chowns it as the unit starts, which must not happen under a
 * file upload or a command). */
void session_executor_ready(Session *s) {
        s->executor_ready = true;
        if (s->state == SESSION_STARTING && !s->start_call)
                session_set_active(s);
}

void session_executor_failed(Session *s, const char *why) {
        if (s->state != SESSION_STARTING)
                return;
        log_error("Session %s cannot run its executor: %s", s->id, why);
        free(s->error);
        s->error = strdup(why);
        session_set_state(s, SESSION_FAILED);
        op_complete_all(&s->ready_ops, -EIO, s->error);
        manager_notify_session_removed(s->manager, s);
        /* its slice and whatever started in it go */
        (void) systemd_stop_unit_async(s->manager->pid1, s->slice, NULL, NULL);
        session_free(s);
}

static int refuse_overloaded(Manager *m, RequestError *e) {
        e->code = "overloaded";
        snprintf(e->message, sizeof(e->message),
                 "sandboxd has %u calls to systemd waiting, its most: ask again in a moment.", pid1_gate_waiting(m->pid1));
        return -EINVAL;
}

static int refuse_draining(RequestError *e) {
        e->code = "draining";
        snprintf(e->message, sizeof(e->message),
                 "sandboxd is draining: it takes no new sessions or commands. Try another instance, or later.");
        return -EINVAL;
}

/* Sessions not closed yet count, starting and closing ones too: each has its slice. */
static bool session_counts(const Session *s) {
        return s->state == SESSION_STARTING || s->state == SESSION_ACTIVE || s->state == SESSION_CLOSING;
}

/* MaxSessionsPerTenant= for API tenants, MaxSessionsPerUser= for local uids (over the
 * socket and D-Bus together); root is the host's administrator and has no quota. A uid's
 * sessions are those it created for `user`, its login name (authz.c lets it create no
 * others): a uid given to a new user after userdel is not charged the old user's. */
static int session_check_quota(Manager *m, const char *creator, const char *user, RequestError *e) {
        unsigned n = 0, max;
        uid_t uid;
        Session *s;

        if (authz_creator_uid(creator, &uid) >= 0) {
                if (uid == 0)
                        return 0;
                max = m->config.max_sessions_per_user;
                LIST_FOREACH(sessions, s, m->sessions) {
                        uid_t u;

                        if (session_counts(s) && authz_creator_uid(s->tenant, &u) >= 0 && u == uid &&
                            streq_ptr(s->user, user))
                                n++;
                }
                if (n < max)
                        return 0;
                return request_error(e, "too_many_sessions",
                                     "User %u has %u sessions, its most (MaxSessionsPerUser=): close one first.",
                                     (unsigned) uid, n);
        }
        if (!creator || streq(scope_tenant(creator), SCOPE_TENANT_LOCAL))
                return 0;
        max = m->config.max_sessions_per_tenant;
        LIST_FOREACH(sessions, s, m->sessions)
                if (session_counts(s) && streq_ptr(s->tenant, creator))
                        n++;
        if (n < max)
                return 0;
        return request_error(e, "too_many_sessions",
                             "Tenant '%.64s' has %u sessions, its most (MaxSessionsPerTenant=): close one first.",
                             creator, n);
}

static int limit_check(RequestError *e, const char *field, bool has, uint64_t asked, uint64_t max, uint64_t dflt,
                       uint64_t *ret) {
        if (!has) {
                *ret = dflt;
                return 0;
        }
        if (asked > max) {
                e->code = "limit_exceeded";
                snprintf(e->message, sizeof(e->message), "%s=%" PRIu64 " is above the maximum of %" PRIu64 ".", field,
                         asked, max);
                return -EINVAL;
        }
        *ret = asked;
        return 0;
}

/* --- the manager's list ------------------------------------------------------------- */

/* What a registered session adds to the manager's counts and its table by scope, in its
 * present state: d = +1 to count it in, -1 to take it out. O(1), so that a change of state
 * costs the same with ten sessions as with ten thousand. */
static void session_account(Session *s, int d) {
        Manager *m = s->manager;
        bool live = s->state != SESSION_CLOSED;
        bool scoped = s->state == SESSION_STARTING || s->state == SESSION_ACTIVE;

        if (live)
                m->n_live_sessions += d;
        if (live && s->from_pool && s->state != SESSION_FAILED)
                m->n_pool_in_use += d;
        if (scoped && d > 0)
                HASH_ADD_KEYPTR(hh_scope, m->sessions_by_scope, s->workspace_host_dir, strlen(s->workspace_host_dir), s);
        else if (scoped)
                HASH_DELETE(hh_scope, m->sessions_by_scope, s);
}

void session_add(Manager *m, Session *s) {
        assert(m && s && s->manager == m && s->id[0] && s->workspace_host_dir);
        assert(!session_find(m, s->id)); /* ids are random and checked when made */

        LIST_PREPEND(sessions, m->sessions, s);
        HASH_ADD_STR(m->sessions_by_id, id, s);
        session_account(s, +1);
}

void session_remove(Manager *m, Session *s) {
        assert(m && s && session_find(m, s->id) == s);

        session_account(s, -1);
        HASH_DEL(m->sessions_by_id, s);
        LIST_REMOVE(sessions, m->sessions, s);
}

void session_set_state(Session *s, SessionState state) {
        bool registered = s->manager && session_find(s->manager, s->id) == s;

        assert(state >= 0 && state < _SESSION_STATE_MAX);
        if (registered)
                session_account(s, -1);
        s->state = state;
        if (registered)
                session_account(s, +1);
}

Session *session_find(Manager *m, const char *id) {
        Session *s;

        assert(m && id);
        HASH_FIND_STR(m->sessions_by_id, id, s);
        return s;
}

/* Where a scope's workspace is on the host: also the key of the table by scope, since
 * tenant, user and workspace are names without a slash. */
#define WORKSPACE_HOST_DIR SCOPE_PRIVATE_ROOT "/ws/%s/%s/%s"

Session *session_find_by_scope(Manager *m, const char *tenant, const char *user, const char *workspace) {
        char key[PATH_MAX];
        Session *s;
        int n;

        assert(m && tenant && user && workspace);
        n = snprintf(key, sizeof(key), WORKSPACE_HOST_DIR, tenant, user, workspace);
        if (n < 0 || (size_t) n >= sizeof(key))
                return NULL; /* no session has such a directory */
        HASH_FIND(hh_scope, m->sessions_by_scope, key, (size_t) n, s);
        return s;
}

static Session *session_alloc(Manager *m) {
        Session *s = calloc(1, sizeof(Session));

        if (!s)
                return NULL;
        s->manager = m;
        s->state = SESSION_STARTING;
        s->spool = (SpoolAccount) { .max = m->config.spool_max_per_session, .parent = &m->spool };
        return s;
}

/* Before a command starts: the parents of the scope's directories, before PID 1 makes
 * them (world-listable) with the scope's own, and the directory of its user records. */
static int session_prepare_dirs(Session *s) {
        int r;

        r = scope_prepare(SCOPE_PUBLIC_ROOT, scope_tenant(s->tenant), s->user);
        if (r < 0)
                return r;
        /* readable by the dynamic user, which gets it bound read-only */
        r = store_mkdir_p(s->userdb_dir, 0755);
        if (r >= 0 && chmod(s->userdb_dir, 0755) < 0)
                r = -errno;
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", s->userdb_dir);
        return 0;
}

/* The scope's names and directories; s->tenant (the creator) must be set. */
static int session_set_scope(Session *s, const char *user, const char *workspace) {
        const char *t = scope_tenant(s->tenant);

        s->user = strdup(user);
        s->workspace = strdup(workspace);
        if (!s->user || !s->workspace || asprintf(&s->slice, "sandboxd-%s.slice", s->id) < 0 ||
            asprintf(&s->workspace_dir, SCOPE_PUBLIC_ROOT "/ws/%s/%s/%s", t, user, workspace) < 0 ||
            asprintf(&s->workspace_host_dir, WORKSPACE_HOST_DIR, t, user, workspace) < 0 ||
            asprintf(&s->home_dir, SCOPE_PUBLIC_ROOT "/home/%s/%s/%s", t, user, workspace) < 0 ||
            asprintf(&s->tmp_dir, SCOPE_PUBLIC_ROOT "/tmp/%s/%s/%s", t, user, workspace) < 0 ||
            asprintf(&s->userdb_dir, "%s/userdb/%s", s->manager->runtime_dir, s->id) < 0)
                return -ENOMEM;
        return scope_dynamic_user(t, user, workspace, &s->dynamic_user);
}

/* Exec mode "session": its executor starts with it. Without one (it could not even be
 * asked for), the session's commands fail to start. */
static void session_start_executor(Session *s) {
        int r;

        if (s->exec_mode != EXEC_MODE_SESSION)
                return;
        r = executor_new(s, false, &s->executor);
        if (r < 0)
                log_error_errno(r, "Failed to start the executor of session %s, its commands will fail: %m", s->id);
}

int session_create(Manager *m, const SessionRequest *req, const char *tenant, Session **ret, RequestError *error) {
        const Config *c = &m->config;
        Session *s;
        Limits l;
        NetworkMode mode;
        uint64_t ttl = c->idle_timeout_usec;
        bool pooled, pooled_proxy = false;
        _cleanup_free_ char *image_root = NULL;
        const char *image;
        int r;

        /* One active session per scope: asking again returns it, as it is. */
        s = session_find_by_scope(m, scope_tenant(tenant), req->user, req->workspace);
        if (s) {
                *ret = s;
                return 0;
        }
        if (m->draining)
                return refuse_draining(error);
        if (pid1_gate_waiting(m->pid1) >= PID1_WAITING_MAX)
                return refuse_overloaded(m, error);
        r = session_check_quota(m, tenant, req->user, error);
        if (r < 0)
                return r;

        r = limit_check(error, "limits.memory_max", req->has_memory_max, req->memory_max,
                        c->session_limits_max.memory_max, c->session_limits.memory_max, &l.memory_max);
        if (r >= 0)
                r = limit_check(error, "limits.cpu_quota", req->has_cpu_quota, req->cpu_quota_percent,
                                c->session_limits_max.cpu_quota_percent, c->session_limits.cpu_quota_percent,
                                &l.cpu_quota_percent);
        if (r >= 0)
                r = limit_check(error, "limits.tasks_max", req->has_tasks_max, req->tasks_max,
                                c->session_limits_max.tasks_max, c->session_limits.tasks_max, &l.tasks_max);
        if (r >= 0 && req->has_ttl)
                r = limit_check(error, "ttl_s", true, req->ttl_s, c->max_idle_timeout_usec / USEC_PER_SEC, 0, &ttl);
        if (r < 0)
                return r;
        if (req->has_ttl)
                ttl *= USEC_PER_SEC;
        if (l.memory_max < 4 * 1024 * 1024) {
                error->code = "invalid_value";
                snprintf(error->message, sizeof(error->message), "limits.memory_max must be at least 4M.");
                return -EINVAL;
        }
        mode = req->has_network_mode ? req->network : c->default_network_mode;
        if (mode == NETWORK_HOST && !config_tenant_may_use_host_network(c, tenant))
                return request_error(error, "forbidden",
                                     "Network mode 'host' is not allowed for tenant '%.64s' (see HostModeTenants=).",
                                     tenant ?: "?");
        if (mode != NETWORK_PROXY && (req->network_deny || req->network_allow))
                return request_error(error, "invalid_value",
                                     "Fields 'network.deny' and 'network.allow' apply to network mode 'proxy' only.");

        image = req->image ?: c->default_image;
        if (image) {
                r = image_root_path(c, image, &image_root);
                if (r == -ENOENT || r == -EINVAL)
                        return request_error(error, "image_not_found", "No image '%.64s'%s.", image,
                                             req->image ? "" : " (the default, [Images] Default=)");
                if (r < 0)
                        return r;
        }

        s = session_alloc(m);
        if (!s)
                return -ENOMEM;
        if (image && !(s->image = strdup(image))) {
                r = -ENOMEM;
                goto fail;
        }
        s->image_root = TAKE_PTR(image_root);
        s->limits = l;
        s->network = mode;
        s->exec_mode = req->has_exec_mode ? req->exec_mode : c->default_exec_mode;
        if ((req->network_deny && !(s->net_deny = strv_copy(req->network_deny))) ||
            (req->network_allow && !(s->net_allow = strv_copy(req->network_allow)))) {
                r = -ENOMEM;
                goto fail;
        }
        s->ttl_usec = ttl;
        s->created_realtime_usec = s->last_activity_realtime_usec = now_usec(CLOCK_REALTIME);
        if (tenant && !(s->tenant = strdup(tenant))) {
                r = -ENOMEM;
                goto fail;
        }

        /* A slice prepared ahead, when there is one: no round trip to PID 1 now. */
        pooled = s->from_pool = pool_take(m, s->id, &pooled_proxy) >= 0;
        if (!pooled) {
                r = random_session_id(c->node_name, s->id);
                if (r < 0)
                        goto fail;
        }
        r = session_set_scope(s, req->user, req->workspace);
        if (r >= 0)
                r = session_prepare_dirs(s);
        if (r < 0)
                goto fail;

        if (pooled) {
                if (memcmp(&l, &c->session_limits, sizeof(l)) != 0) {
                        /* Queued before any command of the session, so it applies first. */
                        r = systemd_set_slice_limits_async(m->pid1, s->slice, &l, NULL, NULL);
                        if (r < 0)
                                goto fail;
                }
                if (!pooled_proxy)
                        r = session_setup_proxy(s);
                else if (mode == NETWORK_PROXY)
                        r = session_listen_proxy(s);
                else
                        r = session_stop_proxy_units(s); /* prepared for the default mode: not needed */
                if (r < 0)
                        goto fail;
                session_add(m, s);
                manager_notify_session_added(m, s);
                session_start_executor(s);
                if (!s->executor)
                        session_set_active(s); /* else once its executor runs */
        } else {
                r = systemd_start_slice_async(m->pid1, &s->start_call, s->slice, "sandboxd session", &s->limits,
                                              on_slice_started, s);
                if (r < 0) {
                        log_error_errno(r, "Failed to ask systemd to start %s: %m", s->slice);
                        goto fail;
                }
                /* Queued after the slice on the same connection: PID 1 creates them in this order. */
                r = session_setup_proxy(s);
                if (r < 0)
                        goto fail;
                session_add(m, s);
                manager_notify_session_added(m, s);
                /* queued after the slice and the proxy: PID 1 makes them in this order */
                session_start_executor(s);
        }

        if (pooled)
                pool_fill_soon(m); /* after this session's first command, ready well before the next session */
        else
                pool_fill(m);
        manager_check_idle(m);
        *ret = s;
        return 1;

fail:
        session_free(s);
        return r;
}

static void freeze_done(Session *s, int r, const char *message);

void session_cancel_ops(Session *s, const char *message) {
        Command *c;

        op_complete_all(&s->ready_ops, -ECANCELED, message);
        complete_close_ops(s, -ECANCELED, message);
        if (s->freeze_ops)
                freeze_done(s, -ECANCELED, message);
        LIST_FOREACH(commands, c, s->commands)
                command_cancel_ops(c, message);
        for (Port *p = s->ports; p; p = p->ports_next)
                op_complete_all(&p->start_ops, -ECANCELED, message);
}

Session *session_free(Session *s) {
        Command *cmd;

        if (!s)
                return NULL;

        session_cancel_ops(s, s->manager && s->manager->stopping ? OP_STOPPING : OP_GONE);
        while ((cmd = s->commands))
                command_free(cmd);

        if (s->manager && session_find(s->manager, s->id) == s) {
                session_remove(s->manager, s);
                manager_check_idle(s->manager);
        }

        /* Only sandboxd's exit frees a live session: the next sandboxd takes its proxy socket over. */
        if (s->state == SESSION_ACTIVE || s->state == SESSION_CLOSING)
                proxy_listener_free(s->proxy);
        else
                proxy_listener_close(s->proxy);
        /* the units of its ports stay with PID 1, for the next sandboxd */
        port_free_all(s);
        executor_free(s->executor);
        pid1_call_cancel(s->start_call);
        pid1_call_cancel(s->freeze_call);
        op_free(s->purge_op);
        file_op_detach(s->disk_op);
        sd_event_source_disable_unref(s->expiry_timer);
        sd_event_source_disable_unref(s->save_timer);
        if (s->manager)
                store_writer_release(s->manager->writer, &s->save_job);
        strv_free(s->net_deny);
        strv_free(s->net_allow);
        free(s->user);
        free(s->workspace);
        free(s->tenant);
        free(s->slice);
        free(s->dynamic_user);
        free(s->workspace_dir);
        free(s->workspace_host_dir);
        free(s->home_dir);
        free(s->tmp_dir);
        free(s->userdb_dir);
        free(s->image);
        free(s->image_root);
        free(s->error);
        free(s->close_reason);
        free(s->purge_error);
        free(s->cgroup);
        free(s);
        return NULL;
}

int session_wait_ready(Session *s, OpFn fn, void *userdata, Op **ret) {
        Op *op;

        if (s->state != SESSION_STARTING) {
                *ret = NULL;
                return 0;
        }
        op = op_new(OP_SESSION_READY, s, NULL, fn, userdata);
        if (!op)
                return -ENOMEM;
        op_queue(&s->ready_ops, op);
        *ret = op;
        return 1;
}

/* --- closing ----------------------------------------------------------------------- */

static void session_closing_step(Session *s);

static void purge_fail(Session *s, const char *fmt, ...) _printf_(2, 3);
static void purge_fail(Session *s, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        free(s->purge_error);
        if (vasprintf(&s->purge_error, fmt, ap) < 0)
                s->purge_error = NULL;
        va_end(ap);
        if (!s->purge_error)
                s->purge_error = strdup("?");
        log_warning("Failed to empty the workspace of session %s: %s", s->id, s->purge_error ?: "out of memory");
        s->purge_done = true;
}

static void purge_started(Op *op, int r, const char *message, void *userdata) {
        Session *s = userdata;

        s->purge_op = op_free(op);
        /* -ECANCELED: sandboxd stops; the next one finds the purge command and its result */
        if (r < 0 && r != -ECANCELED) {
                purge_fail(s, "systemd did not start it: %s", message ?: "?");
                session_closing_step(s);
        }
}

/* What a command may leave to get in the way is a directory it took its own permissions
 * away from: give them back first. The request id is sandboxd's alone ("sandboxd." ids are
 * refused to clients), so no command of a client passes for it. */
#define PURGE_SCRIPT                                                                    \
        "chmod -R u+rwX -- \"$@\" 2>/dev/null; "                                        \
        "find -H \"$@\" -mindepth 1 -delete || exit 1; "                                 \
        "test -z \"$(find -H \"$@\" -mindepth 1 -print -quit)\""

static int start_purge(Session *s) {
        /* -H: the directories are symlinks into /var/lib/private for a dynamic user */
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) PURGE_SCRIPT, (char *) "sandboxd-purge",
                         s->workspace_dir, s->home_dir, s->tmp_dir, NULL };
        CommandRequest req = { .argv = argv, .request_id = (char *) PURGE_REQUEST_ID, .wait = true };
        RequestError e = {};
        Command *old = session_find_command(s, PURGE_REQUEST_ID);

        if (old)
                command_remove(old);
        s->purge_op = op_free(s->purge_op);
        /* As the scope's own dynamic user, in its own sandbox: sandboxd needs no capability for it. */
        return command_start(s, &req, purge_started, s, &s->purge_op, &e);
}

static int on_slice_stopped(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Session *s = userdata;

        if (sd_bus_message_is_method_error(reply, NULL) &&
            !sd_bus_message_is_method_error(reply, "org.freedesktop.systemd1.NoSuchUnit"))
                log_warning("Failed to stop %s, ignoring: %s", s->slice, systemd_error_message(reply));
        return 0;
}

/* Closing goes: stop the commands, empty the workspace (purge), stop the slice, closed. */
static void session_closing_step(Session *s) {
        Command *c;
        int r;

        if (s->state != SESSION_CLOSING)
                return;
        if (session_count_running(s) > 0)
                return; /* session_command_finished() calls us again */

        if (s->purge && !s->purge_done) {
                c = session_find_command(s, PURGE_REQUEST_ID);
                if (!c) {
                        r = start_purge(s);
                        if (r >= 0)
                                return;
                        purge_fail(s, "cannot start it: %s", strerror(-r));
                } else if (!command_status_is_terminal(c->result.status))
                        return;
                else if (c->result.status == COMMAND_SUCCEEDED) {
                        s->purged = s->purge_done = true;
                        log_info("Emptied the workspace, home and TMPDIR of session %s.", s->id);
                } else
                        purge_fail(s, "%s (%s, exit code %d; see its command %s)", command_status_to_string(c->result.status),
                                   c->result.reason, c->result.exit_code, PURGE_REQUEST_ID);
        }

        /* before the slice: their sockets are outside it */
        port_remove_all(s);
        r = systemd_stop_unit_async(s->manager->pid1, s->slice, on_slice_stopped, s);
        if (r < 0)
                log_warning_errno(r, "Failed to stop %s, ignoring: %m", s->slice);
        s->proxy = proxy_listener_close(s->proxy);
        /* the slice's stop ends the executor with everything else in it; the object goes
         * with the session (we may be inside one of its callbacks) */
        executor_remove(s->executor);
        (void) store_rm_rf(s->userdb_dir);

        session_set_state(s, SESSION_CLOSED);
        s->closed_realtime_usec = now_usec(CLOCK_REALTIME);
        log_info("Session %s is closed (%s).", s->id, s->close_reason ?: "?");
        /* its object stays until it is forgotten */
        manager_notify_session_changed(s->manager, s, SESSION_CHANGED_STATE);
        pool_fill(s->manager); /* a pooled session's place is free again */
        (void) session_save(s);
        session_arm_expiry(s);
        complete_close_ops(s, 0, NULL);
        manager_check_idle(s->manager);
}

int session_close(Session *s, const char *reason, bool purge, OpFn fn, void *userdata, Op **ret) {
        Command *c;
        bool frozen;
        Op *op = NULL;

        if (ret)
                *ret = NULL;
        if (s->state == SESSION_CLOSED)
                return 0;
        if (s->state == SESSION_STARTING)
                return -EBUSY;

        /* what can fail comes before anything changes */
        _cleanup_free_ char *why = strdup(reason);
        if (!why)
                return -ENOMEM;
        if (ret) {
                op = op_new(OP_SESSION_CLOSE, s, NULL, fn, userdata);
                if (!op)
                        return -ENOMEM;
                op->purge = purge;
        }
        if (s->state == SESSION_CLOSING) {
                if (purge && !s->purge_done)
                        s->purge = true; /* not too late: the commands are still being stopped */
                goto pending;
        }

        session_set_state(s, SESSION_CLOSING);
        s->closing = true;
        s->purge = purge;
        s->purge_done = false;
        free(s->close_reason);
        s->close_reason = TAKE_PTR(why);
        manager_notify_session_changed(s->manager, s, SESSION_CHANGED_STATE);
        /* its processes must run to their end; a freeze or thaw under way ends here */
        frozen = s->frozen || (s->freeze_call && s->freeze_target);
        if (s->freeze_call)
                freeze_done(s, -ESTALE, "the session is closing");
        if (frozen) {
                (void) systemd_freeze_unit_async(s->manager->pid1, NULL, s->slice, false, NULL, NULL);
                s->frozen = false;
                manager_notify_session_changed(s->manager, s, SESSION_CHANGED_FROZEN);
        }
        (void) session_save(s);

        LIST_FOREACH(commands, c, s->commands)
                if (!command_status_is_terminal(c->result.status))
                        (void) command_stop(c);
        session_closing_step(s);
        if (s->state == SESSION_CLOSED) {
                /* closed at once (nothing ran): the caller reads the result now */
                op_free(op);
                return 0;
        }
pending:
        if (op) {
                op_queue(&s->close_ops, op);
                *ret = op;
        }
        return 1;
}

int session_userdb_update(Session *s) {
        uid_t uid;
        int r;

        r = scope_dynamic_uid(s->dynamic_user, &uid);
        if (r < 0)
                return r; /* PID 1 allocates it in the unit's process, after "activating" */
        if (uid == s->userdb_uid)
                return 0;
        r = scope_userdb_write(s->userdb_dir, s->dynamic_user, uid, s->home_dir);
        if (r < 0)
                return log_warning_errno(r, "Failed to write the user record of %s to %s, ignoring: %m",
                                         s->dynamic_user, s->userdb_dir);
        s->userdb_uid = uid;
        return 0;
}

void session_command_finished(Session *s, Command *c) {
        s->disk_checked_usec = 0; /* it may have written */
        if (s->state == SESSION_ACTIVE)
                session_touch(s);
        else
                session_closing_step(s);
        manager_check_idle(s->manager);
}

/* --- freezing -------------------------------------------------------------------- */

static void freeze_done(Session *s, int r, const char *message) {
        s->freeze_call = pid1_call_cancel(s->freeze_call);
        if (r >= 0 && s->frozen != s->freeze_target) {
                s->frozen = s->freeze_target;
                log_info("Session %s is %s.", s->id, s->frozen ? "frozen" : "thawed");
                manager_notify_session_changed(s->manager, s, SESSION_CHANGED_FROZEN);
                (void) session_save(s);
        }
        op_complete_all(&s->freeze_ops, r, message);
}

/* FreezeUnit succeeds without freezing anything when a unit in the slice cannot be frozen:
 * only the FreezerState it leaves tells. */
static int on_freezer_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Session *s = userdata;
        const char *want = s->freeze_target ? "frozen" : "running", *state = NULL;
        _cleanup_free_ char *message = NULL;

        if (sd_bus_message_is_method_error(reply, NULL)) {
                freeze_done(s, -EIO, systemd_error_message(reply));
                return 0;
        }
        if (sd_bus_message_read(reply, "v", "s", &state) < 0)
                state = NULL;
        if (state && streq(state, want)) {
                freeze_done(s, 0, NULL);
                return 0;
        }
        if (asprintf(&message, "systemd left %s %s instead of %s.", s->slice, state ?: "in an unknown state", want) < 0)
                message = NULL;
        log_warning("Failed to %s session %s: %s", s->freeze_target ? "freeze" : "thaw", s->id, message ?: want);
        freeze_done(s, -EIO, message ?: "systemd did not do it");
        return 0;
}

static int on_freeze_unit(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Session *s = userdata;
        int r;

        s->freeze_call = pid1_call_cancel(s->freeze_call);
        if (sd_bus_message_is_method_error(reply, NULL)) {
                log_warning("Failed to %s session %s: %s", s->freeze_target ? "freeze" : "thaw", s->id,
                            systemd_error_message(reply));
                freeze_done(s, -EIO, systemd_error_message(reply));
                return 0;
        }
        r = systemd_get_freezer_state_async(s->manager->pid1, &s->freeze_call, s->slice, on_freezer_state, s);
        if (r < 0)
                freeze_done(s, r, "cannot ask systemd for the freezer state");
        return 0;
}

int session_freeze(Session *s, bool freeze, OpFn fn, void *userdata, Op **ret) {
        Op *op;
        int r;

        if (cgroup_layout() != CGROUP_UNIFIED)
                return -EOPNOTSUPP;
        if (s->state != SESSION_ACTIVE)
                return -ESTALE;
        if (s->freeze_call)
                return -EBUSY;
        op = op_new(OP_SESSION_FREEZE, s, NULL, fn, userdata);
        if (!op)
                return -ENOMEM;
        r = systemd_freeze_unit_async(s->manager->pid1, &s->freeze_call, s->slice, freeze, on_freeze_unit, s);
        if (r < 0) {
                op_free(op);
                return r;
        }
        s->freeze_target = freeze;
        op_queue(&s->freeze_ops, op);
        *ret = op;
        return 1;
}

/* The finished command that goes first to make room: the oldest. */
static Command *session_oldest_finished(Session *s) {
        Command *c, *oldest = NULL;

        LIST_FOREACH(commands, c, s->commands)
                if (command_status_is_terminal(c->result.status) && (!oldest || c->n < oldest->n))
                        oldest = c;
        return oldest;
}

/* Before a new command: the session's quotas (MaxRunningCommandsPerSession=,
 * MaxCommandsPerSession=, SpoolMaxPerSession=, SpoolMax=). A refusal changes nothing;
 * otherwise the session's oldest finished commands are forgotten until the new one fits
 * (a spool that had to cut output counts as full until bytes are given back). */
static int session_make_room(Session *s, RequestError *e) {
        const Config *cfg = &s->manager->config;
        unsigned n = 0, running = 0, finished;
        Command *c;

        LIST_FOREACH(commands, c, s->commands) {
                n++;
                if (!command_status_is_terminal(c->result.status))
                        running++;
        }
        finished = n - running;
        if (running >= cfg->max_running_per_session)
                return request_error(e, "too_many_running",
                                     "The session has %u commands running, its most (MaxRunningCommandsPerSession=): "
                                     "wait for one to finish.", running);
        if (running >= cfg->max_commands_per_session)
                return request_error(e, "too_many_commands",
                                     "The session keeps %u commands, all running, its most (MaxCommandsPerSession=).", n);
        if (spool_account_full(&s->spool) && finished == 0)
                return request_error(e, "spool_full",
                                     "The session's running commands hold %" PRIu64 " bytes of output, its most "
                                     "(SpoolMaxPerSession=): wait for one to finish.", s->spool.used);
        if (spool_account_full(&s->manager->spool) && finished == 0)
                return request_error(e, "spool_full",
                                     "Commands hold %" PRIu64 " bytes of output on this host, the most (SpoolMax=): "
                                     "ask again later.", s->manager->spool.used);

        while ((n >= cfg->max_commands_per_session || spool_account_full(&s->spool) ||
                spool_account_full(&s->manager->spool)) && finished > 0 &&
               (c = session_oldest_finished(s))) {
                log_debug("Session %s: forgetting command %u (%s) to make room.", s->id, c->n, c->request_id);
                command_remove(c);
                n--, finished--;
        }
        return 0;
}

int session_exec(Session *s, const CommandRequest *req, OpFn fn, void *userdata, Command **ret_command,
                 Op **ret_op, RequestError *e) {
        Command *c;
        Op *op;
        int r;

        /* Idempotent: the same request id returns the first command, never a second one. */
        if (req->request_id && (c = session_find_command(s, req->request_id))) {
                *ret_command = c;
                *ret_op = NULL;
                return 0;
        }
        if (s->manager->draining)
                return refuse_draining(e);
        if (pid1_gate_waiting(s->manager->pid1) >= PID1_WAITING_MAX)
                return refuse_overloaded(s->manager, e);
        /* a unit being released holds a match rule too, as long as its leftovers take to stop */
        if (s->manager->n_running + s->manager->n_starting + s->manager->n_releases >= COMMANDS_RUNNING_MAX) {
                e->code = "overloaded";
                snprintf(e->message, sizeof(e->message),
                         "%u commands run on this host, its most: ask again in a moment.", COMMANDS_RUNNING_MAX);
                return -EINVAL;
        }
        r = session_check_active(s, e);
        if (r < 0)
                return r;
        r = session_make_room(s, e);
        if (r < 0)
                return r;
        r = command_start(s, req, fn, userdata, &op, e);
        if (r < 0)
                return r;
        manager_notify_session_changed(s->manager, s, SESSION_CHANGED_COMMANDS);
        session_touch(s);
        *ret_command = op->command;
        *ret_op = op;
        return 1;
}

/* --- queries ------------------------------------------------------------------------- */

Command *session_find_command(Session *s, const char *request_id) {
        Command *c;

        assert(s && request_id);
        HASH_FIND_STR(s->commands_by_id, request_id, c);
        return c;
}

unsigned session_count_by_image(Manager *m, const char *image) {
        unsigned n = 0;
        Session *s;

        /* every session that is not over: a closed one runs nothing more */
        LIST_FOREACH(sessions, s, m->sessions)
                if (streq_ptr(s->image, image) && s->state != SESSION_CLOSED && s->state != SESSION_FAILED)
                        n++;
        return n;
}

unsigned session_count_running(Session *s) {
        unsigned n = 0;
        Command *c;

        LIST_FOREACH(commands, c, s->commands)
                if (!command_status_is_terminal(c->result.status))
                        n++;
        return n;
}

static void on_disk_counted(FileOp *op, int r, void *userdata) {
        Session *s = userdata;

        s->disk_op = NULL;
        if (r == -ECANCELED)
                return;
        if (r < 0) {
                log_debug_errno(r, "Failed to count the disk usage of %s, ignoring: %m", s->workspace_host_dir);
                return;
        }
        s->disk_bytes = op->bytes;
        /* disk_checked_usec is 0 if the file API changed something while we counted: count
         * again on the next look. */
}

/* A walk of the whole workspace, on a file API thread, not more often than every few
 * seconds: the answer is the last count, never a wait for one. */
uint64_t session_disk_bytes(Session *s) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        FileOp *op = NULL;
        int r;

        if (s->disk_op || (s->disk_checked_usec != 0 && now - s->disk_checked_usec < DISK_USAGE_MAX_AGE_USEC))
                return s->disk_bytes;
        if (!s->manager->file_ops) { /* no threads (tools, tests): count here */
                uint64_t v;

                r = files_disk_usage(s->workspace_host_dir, &v);
                if (r >= 0)
                        s->disk_bytes = v;
                s->disk_checked_usec = now;
                return s->disk_bytes;
        }
        r = file_op_new(FILE_OP_DISK_USAGE, s->id, s->workspace_host_dir, NULL, &op);
        if (r >= 0)
                r = file_ops_submit(s->manager->file_ops, op, true, on_disk_counted, s);
        if (r < 0) {
                log_debug_errno(r, "Failed to queue a count of the disk usage of %s, ignoring: %m", s->workspace_host_dir);
                return s->disk_bytes;
        }
        s->disk_op = op;
        s->disk_checked_usec = now;
        return s->disk_bytes;
}

/* --- recovery --------------------------------------------------------------------------- */

static int command_record_filter(const struct dirent *de) {
        size_t l = strlen(de->d_name);
        return l > 5 && streq(de->d_name + l - 5, ".json") && de->d_name[0] >= '1' && de->d_name[0] <= '9';
}

/* A close reason as sandboxd writes them ("idle", "slice-gone"): it goes into JSON as is. */
static bool close_reason_is_valid(const char *s) {
        size_t l = strlen(s);

        return l > 0 && l <= 32 && strspn(s, "abcdefghijklmnopqrstuvwxyz-") == l;
}

int session_record_decode(Session *s, json_object *o, const Config *c) {
        const char *id, *user, *workspace, *tenant, *reason;
        json_object *limits;
        uint64_t n_commands;
        int r;

        id = store_get_string(o, "id");
        user = store_get_string(o, "user");
        workspace = store_get_string(o, "workspace");
        if (!session_id_is_valid(id) || !user_name_is_valid(user) || !workspace_name_is_valid(workspace))
                return -EBADMSG;

        snprintf(s->id, sizeof(s->id), "%s", id);
        /* before the scope: the tenant is part of it */
        tenant = store_get_string(o, "tenant");
        if (tenant && !(s->tenant = strdup(tenant)))
                return -ENOMEM;
        r = session_set_scope(s, user, workspace);
        if (r < 0)
                return r;
        reason = store_get_string(o, "close_reason");
        if (reason) {
                if (!close_reason_is_valid(reason))
                        return -EBADMSG;
                s->close_reason = strdup(reason);
                if (!s->close_reason)
                        return -ENOMEM;
        }
        s->state = session_state_from_string(store_get_string(o, "state"));
        if (s->state < 0 || s->state == SESSION_STARTING || s->state == SESSION_FAILED)
                s->state = SESSION_ACTIVE; /* it went away while the slice was being made: check it below */
        s->closing = s->state == SESSION_CLOSING;
        if (json_object_object_get_ex(o, "limits", &limits)) {
                s->limits.memory_max = store_get_u64(limits, "memory_max", c->session_limits.memory_max);
                s->limits.cpu_quota_percent = store_get_u64(limits, "cpu_quota", c->session_limits.cpu_quota_percent);
                s->limits.tasks_max = store_get_u64(limits, "tasks_max", c->session_limits.tasks_max);
        } else
                s->limits = c->session_limits;
        if (s->limits.memory_max == 0 || s->limits.cpu_quota_percent == 0 || s->limits.tasks_max == 0)
                return -EBADMSG;
        s->created_realtime_usec = store_get_u64(o, "created_usec", 0);
        s->last_activity_realtime_usec = store_get_u64(o, "last_activity_usec", s->created_realtime_usec);
        s->closed_realtime_usec = store_get_u64(o, "closed_usec", 0);
        s->ttl_usec = store_get_u64(o, "ttl_usec", c->idle_timeout_usec);
        n_commands = store_get_u64(o, "n_commands", 0);
        if (n_commands > UINT_MAX)
                return -EBADMSG;
        s->n_commands = (unsigned) n_commands;
        s->frozen = store_get_bool(o, "frozen", false);
        s->purged = s->purge_done = store_get_bool(o, "purged", false);
        s->from_pool = store_get_bool(o, "from_pool", false);
        {
                json_object *net, *v;

                /* Records from before network modes: "none" was the only one. */
                s->network = NETWORK_NONE;
                if (json_object_object_get_ex(o, "network", &net) && json_object_is_type(net, json_type_object)) {
                        NetworkMode mode = network_mode_from_string(store_get_string(net, "mode"));

                        s->network = mode >= 0 ? mode : NETWORK_NONE;
                        /* a list that cannot be read would lift the session's own limits */
                        if (json_object_object_get_ex(net, "deny", &v) && (r = strv_from_json(v, &s->net_deny)) < 0)
                                return r;
                        if (json_object_object_get_ex(net, "allow", &v) && (r = strv_from_json(v, &s->net_allow)) < 0)
                                return r;
                }
        }
        {
                json_object *v;

                /* Records from before exec modes: every command was a unit. A mode that
                 * cannot be read is no guess: how its commands run depends on it. */
                s->exec_mode = EXEC_MODE_UNIT;
                if (json_object_object_get_ex(o, "exec_mode", &v)) {
                        if (!json_object_is_type(v, json_type_string))
                                return -EBADMSG;
                        s->exec_mode = exec_mode_from_string(json_object_get_string(v));
                        if (s->exec_mode < 0)
                                return -EBADMSG;
                }
        }
        {
                json_object *v;

                /* Its image: commands started after a restart must run in it too. An image
                 * removed meanwhile cannot be (removal refuses images in use; by hand it
                 * can): its commands then fail to start, as the unit's RootDirectory= is gone. */
                if (json_object_object_get_ex(o, "image", &v)) {
                        if (!json_object_is_type(v, json_type_string) || !image_name_is_valid(json_object_get_string(v)))
                                return -EBADMSG;
                        s->image = strdup(json_object_get_string(v));
                        if (!s->image ||
                            asprintf(&s->image_root, "%s/%s", images_directory(&s->manager->config), s->image) < 0) {
                                s->image_root = NULL;
                                return -ENOMEM;
                        }
                }
        }
        {
                json_object *v;

                /* Its exposed ports; their units are PID 1's (port_recover()). */
                if (json_object_object_get_ex(o, "ports", &v) && (r = port_list_from_json(s, v)) < 0)
                        return r;
        }
        return 0;
}

/* A record that cannot be read is not fatal, and not read again at the next start either:
 * it goes aside (store_quarantine()), logged with why. */
static void record_set_aside(const char *path, const char *what, const char *reason) {
        _cleanup_free_ char *aside = NULL;
        int r;

        r = store_quarantine(path, now_usec(CLOCK_REALTIME), &aside);
        if (r < 0)
                log_error_errno(r, "The %s %s cannot be read (%s), and it cannot be set aside, skipping it: %m", what,
                                path, reason);
        else
                log_error("The %s %s cannot be read (%s): moved it to %s, skipping it.", what, path, reason, aside);
}

int session_recover(Manager *m, const char *dir, Session **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char path[PATH_MAX];
        const char *reason = NULL, *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
        struct dirent **list = NULL;
        Session *s;
        int r, n;

        snprintf(path, sizeof(path), "%s/session.json", dir);
        r = store_read_full(path, &o, &reason);
        if (r == -ENOENT)
                reason = "session.json is missing";
        else if (r == -EBADMSG)
                reason = reason ?: "not JSON";
        else if (r < 0)
                return r; /* it may be readable next time */

        s = session_alloc(m);
        if (!s)
                return -ENOMEM;
        if (!reason) {
                r = session_record_decode(s, o, &m->config);
                if (r == -EBADMSG)
                        reason = "not a valid session record";
                else if (r >= 0 && !streq(s->id, base))
                        reason = "the id in it is not its directory's";
        }
        if (reason) {
                /* its commands with it: they are nothing without their session */
                record_set_aside(dir, "session record directory", reason);
                r = -EBADMSG;
                goto fail;
        }
        if (r >= 0 && (s->state == SESSION_ACTIVE || s->state == SESSION_CLOSING))
                r = session_prepare_dirs(s);
        if (r < 0)
                goto fail;
        session_add(m, s);
        if (s->exec_mode == EXEC_MODE_SESSION && (s->state == SESSION_ACTIVE || s->state == SESSION_CLOSING)) {
                /* before its commands: they wait for what it tells of them */
                r = executor_new(s, true, &s->executor);
                if (r < 0)
                        log_warning_errno(r, "Failed to listen for the executor of session %s, its running commands are lost: %m",
                                          s->id);
        }

        n = scandir(dir, &list, command_record_filter, alphasort);
        for (int i = 0; i < n; i++) {
                _cleanup_(json_object_putp) json_object *co = NULL;
                char cpath[PATH_MAX + 256];
                unsigned file_n = 0;
                Command *c;

                snprintf(cpath, sizeof(cpath), "%s/%s", dir, list[i]->d_name);
                (void) sscanf(list[i]->d_name, "%u.json", &file_n);
                free(list[i]);
                reason = NULL;
                r = store_read_full(cpath, &co, &reason);
                if (r == -EBADMSG) {
                        record_set_aside(cpath, "command record", reason ?: "not JSON");
                        continue;
                }
                if (r < 0) {
                        log_warning_errno(r, "Failed to read the command record %s, ignoring: %m", cpath);
                        continue;
                }
                if (store_get_u64(co, "n", 0) != file_n) {
                        record_set_aside(cpath, "command record", "the number in it is not its file's");
                        continue;
                }
                r = command_recover(s, co, &c);
                if (r == -EBADMSG || r == -EEXIST) {
                        record_set_aside(cpath, "command record",
                                         r == -EEXIST ? "a second record of its command" : "not a valid command record");
                        continue;
                }
                if (r < 0) {
                        log_warning_errno(r, "Failed to recover command record %s, ignoring: %m", cpath);
                        continue;
                }
                s->n_commands = MAX(s->n_commands, c->n);
        }
        free(list);

        log_info("Recovered session %s (%s/%s, %s, %u running).", s->id, s->user, s->workspace,
                 session_state_to_string(s->state), session_count_running(s));
        if (s->state == SESSION_ACTIVE || s->state == SESSION_CLOSING) {
                /* Only the listener: daemon_recover() starts the units that are missing,
                 * once it has asked PID 1 which exist. (A closing session's too: closing
                 * removes its socket.) */
                r = session_listen_proxy(s);
                if (r < 0)
                        log_warning_errno(r, "Failed to set up the egress proxy of session %s, ignoring: %m", s->id);
        }
        session_arm_expiry(s);
        if (s->state == SESSION_CLOSING) {
                Command *c;

                /* the stops asked before the restart may never have reached PID 1: again
                 * (the purge, if it runs, is part of the closing) */
                LIST_FOREACH(commands, c, s->commands)
                        if (!command_status_is_terminal(c->result.status) && !streq(c->request_id, PURGE_REQUEST_ID))
                                (void) command_stop(c);
                session_closing_step(s);
        }
        *ret = s;
        return 0;

fail:
        session_free(s);
        return r;
}
