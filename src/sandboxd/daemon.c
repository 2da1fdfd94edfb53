/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's wiring: the bus and its objects, the HTTP servers on the sockets systemd
 * passed, the proxy, the writer and the file API's threads, recovery, signals, the idle
 * exit and the stop. The manager (manager.c) is the registry they all share. */

#include <inttypes.h>
#include <signal.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "auth.h"
#include "command.h"
#include "daemon.h"
#include "error-table.h"
#include "http.h"
#include "image-import.h"
#include "images.h"
#include "http-relay.h"
#include "log.h"
#include "manager-dbus.h"
#include "polkit.h"
#include "pool.h"
#include "port.h"
#include "proxy.h"
#include "scope.h"
#include "session.h"
#include "store.h"
#include "systemd.h"
#include "time-util.h"
#include "validate.h"

Manager *daemon_free(Manager *m) {
        Session *s;

        if (!m)
                return NULL;
        /* Nothing is lost at exit: coalesced writes still due go now, and the writer
         * writes all that is queued before it stops. */
        LIST_FOREACH(sessions, s, m->sessions)
                session_save_pending(s);
        while ((s = m->sessions))
                session_free(s);
        /* the next sandboxd finds what is left of them (daemon_recover()) */
        while (m->releases)
                unit_release_free(m->releases);
        m->file_ops = file_ops_free(m->file_ops);
        auth_cache_flush(m);
        m->writer = store_writer_free(m->writer);
        m->proxy = proxy_free(m->proxy);
        manager_bus_free(m);
        pool_free(m);
        http_relay_close_tunnels(m);
        for (size_t i = 0; i < m->n_http; i++)
                http_server_free(m->http[i]);
        m->n_http = 0;
        m->relay_engine = http_relay_engine_free(m->relay_engine);
        /* imports their callers left above, and any other: stopped, their trees removed */
        image_import_stop_all(m);
        return manager_free(m);
}

/* A session slice no record owns, about to go into the pool: what is still in it, if anything
 * (a unit of a session whose record was lost: a command, a proxy relay that runs), so that no
 * new scope ever gets it. NULL if it is empty. all: sandboxd's units (names, active states). */
/* What still uses the slice of no session, in *ret (NULL: nothing). -ENOMEM rather than NULL when
 * the answer cannot be allocated: NULL would pool a slice with someone's processes in it. */
static int slice_first_user(Manager *m, const char *slice, char **all, char **all_states, char **ret) {
        _cleanup_free_ char *proxy_socket = NULL, *proxy_service = NULL;
        const char *id = startswith(slice, "sandboxd-");
        char sid[SESSION_ID_SIZE], prefix[SESSION_ID_SIZE + 16];
        size_t l;
        unsigned n = 0;
        int r;

        *ret = NULL;
        /* pool_adopt() takes only sandboxd-<session id>.slice */
        l = id ? session_id_prefix(id, sid) : 0;
        if (l == 0 || !streq(id + l, ".slice"))
                return 0;
        snprintf(prefix, sizeof(prefix), "sandboxd-%s-", sid);
        if (systemd_proxy_unit_names(sid, &proxy_socket, &proxy_service) < 0)
                return -ENOMEM;
        for (size_t i = 0; all && all[i]; i++) {
                if (!startswith(all[i], prefix))
                        continue;
                /* a prepared slice's own proxy socket (in sandboxd.slice), and its relay while it does not run */
                if (streq(all[i], proxy_socket))
                        continue;
                if (streq(all[i], proxy_service) && !streq_ptr(all_states[i], "active") &&
                    !streq_ptr(all_states[i], "activating") && !streq_ptr(all_states[i], "deactivating"))
                        continue;
                *ret = strdup(all[i]);
                return *ret ? 0 : -ENOMEM;
        }
        /* anything else placed in it, whatever its name */
        r = systemd_count_unit_processes(m->bus, slice, &n);
        if (r < 0)
                log_debug_errno(r, "Failed to list the processes of %s, ignoring: %m", slice);
        else if (n > 0 && asprintf(ret, "%u process(es)", n) < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* After a restart: sessions and commands from their records, the units and pipes that
 * still exist, slices nobody owns. */
static int daemon_recover(Manager *m) {
        _cleanup_strv_free_ char **slices = NULL, **sockets = NULL, **all = NULL, **all_states = NULL;
        Session *ps;
        char dir[PATH_MAX];
        struct dirent *de;
        DIR *d;
        int r;

        /* Before any record is read: the scopes' directories in today's layout. */
        r = scope_migrate(m->state_dir, SCOPE_PUBLIC_ROOT, SCOPE_PRIVATE_ROOT);
        if (r < 0)
                return r;

        /* imports and removals a stop cut short: removed in the background */
        images_clean_leftovers(&m->config);

        snprintf(dir, sizeof(dir), "%s/sessions", m->state_dir);
        r = store_mkdir_p(dir, 0700);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", dir);
        d = opendir(dir);
        if (!d)
                return log_error_errno(-errno, "Failed to open %s: %m", dir);
        while ((de = readdir(d))) {
                char sub[PATH_MAX + 256];
                Session *s;

                if (!session_id_is_valid(de->d_name))
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
                r = session_recover(m, sub, &s);
                if (r < 0 && r != -EBADMSG) /* set aside, and logged */
                        log_warning_errno(r, "Failed to recover session %s, ignoring: %m", de->d_name);
        }
        closedir(d);

        /* Pipes of commands and proxy sockets of sessions we have no record of: let systemd drop them. */
        for (size_t i = 0; i < m->n_stored_fds; i++)
                if (m->stored_fds[i].fd >= 0) {
                        char msg[128];

                        log_info("Dropping stored fd %s: no command or session owns it.", m->stored_fds[i].name);
                        m->stored_fds[i].fd = safe_close(m->stored_fds[i].fd);
                        snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", m->stored_fds[i].name);
                        (void) sd_notify(false, msg);
                }

        /* Environment files of commands that no record says are running: nobody reads them again. */
        snprintf(dir, sizeof(dir), "%s/exec", m->runtime_dir);
        d = opendir(dir);
        while (d && (de = readdir(d))) {
                char sid[SESSION_ID_SIZE];
                size_t l;
                unsigned n;
                Session *s;
                Command *c = NULL;

                if (de->d_name[0] == '.')
                        continue;
                l = session_id_prefix(de->d_name, sid);
                if (l > 0 && sscanf(de->d_name + l, "-%u.env", &n) == 1 && (s = session_find(m, sid)))
                        LIST_FOREACH(commands, c, s->commands)
                                if (c->n == n)
                                        break;
                if (!c || !command_status_is_running(c))
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        }
        if (d)
                closedir(d);

        /* Slices: a session's whose slice is gone is closed; a slice without session is pooled or stopped. */
        r = systemd_list_units(m->bus, "sandboxd-*.slice", &slices, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to list sandboxd's slices: %m");
        for (Session *s = m->sessions, *next; s; s = next) {
                bool found = false;

                next = s->sessions_next;
                for (char **sl = slices; *sl; sl++)
                        if (streq(*sl, s->slice))
                                found = true;
                if (!found && (s->state == SESSION_ACTIVE || s->state == SESSION_CLOSING)) {
                        /* Its commands, if any, went with it and are reported lost. */
                        char *reason = strdup("slice-gone");

                        if (!reason)
                                return log_oom();
                        log_info("The slice of session %s is gone (reboot?): closing it.", s->id);
                        free(s->close_reason);
                        s->close_reason = reason;
                        session_set_state(s, SESSION_CLOSED);
                        s->closed_realtime_usec = now_usec(CLOCK_REALTIME);
                        (void) session_save(s);
                        session_arm_expiry(s);
                }
        }
        r = systemd_list_units(m->bus, "sandboxd-*", &all, &all_states);
        if (r < 0)
                return log_error_errno(r, "Failed to list sandboxd's units: %m");
        /* Units of finished commands that are still there: the sandboxd before went away while
         * their leftovers were being stopped (or before it asked), and they may end failed.
         * Also a failed one of a command forgotten since: its result was read. */
        for (size_t i = 0; all[i]; i++) {
                _cleanup_free_ char *path = NULL;
                char sid[SESSION_ID_SIZE];
                const char *p = startswith(all[i], "sandboxd-");
                size_t l = p ? session_id_prefix(p, sid) : 0;
                unsigned n;
                int end = 0;
                Session *s;
                Command *c = NULL;

                if (l == 0 || sscanf(p + l, "-%u.service%n", &n, &end) != 1 || p[l + end] != 0 ||
                    !(s = session_find(m, sid)) || streq(all_states[i], "inactive"))
                        continue;
                LIST_FOREACH(commands, c, s->commands)
                        if (c->n == n)
                                break;
                if (c ? !command_status_is_terminal(c->result.status) : n > s->n_commands || !streq(all_states[i], "failed"))
                        continue;
                if (systemd_unit_path(all[i], &path) < 0)
                        return log_oom();
                log_info("Releasing %s (%s), the unit of a finished command.", all[i], all_states[i]);
                (void) unit_release(m, all[i], path, NULL);
        }

        for (char **sl = slices; *sl; sl++) {
                Session *s, *owner = NULL;

                LIST_FOREACH(sessions, s, m->sessions)
                        if (streq(*sl, s->slice))
                                owner = s;
                if (!owner) {
                        _cleanup_free_ char *user = NULL;

                        if (slice_first_user(m, *sl, all, all_states, &user) < 0)
                                return log_oom();
                        pool_adopt(m, *sl, user);
                }
                else if (owner->state == SESSION_CLOSED)
                        (void) systemd_stop_unit_async(m->pid1, *sl, NULL, NULL); /* closing did not finish */
        }

        /* Sessions in mode proxy whose proxy socket went away (it failed, or was stopped). */
        r = systemd_list_units(m->bus, "sandboxd-*-proxy.socket", &sockets, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to list sandboxd's proxy sockets: %m");
        LIST_FOREACH(sessions, ps, m->sessions) {
                _cleanup_free_ char *name = NULL;
                bool found = false;

                if (ps->state != SESSION_ACTIVE || ps->network != NETWORK_PROXY)
                        continue;
                if (systemd_proxy_unit_names(ps->id, &name, NULL) < 0)
                        return log_oom();
                for (char **u = sockets; *u; u++)
                        found = found || streq(*u, name);
                if (!found)
                        (void) session_start_proxy_units(ps);
        }

        /* Exposed ports, after the proxy sockets whose namespace their relays join: their units
         * again where PID 1 has them no more. */
        LIST_FOREACH(sessions, ps, m->sessions)
                port_recover(ps);
        return 0;
}

/* at a stop, how long the answers to waiting requests may take to go out */
#define STOP_FLUSH_MSEC 2000

static void daemon_stop(Manager *m);

/* systemd learns first that this sandboxd is going (the unit is deactivating from then on), so
 * that bus activation queues a start of the next one behind this one's stop. With the name
 * gone first, a call to the name in between asked systemd to start a unit still active, which
 * started nothing, and the caller waited for the name until the activation timed out. */
static void idle_exit_notify(Manager *m) {
        if (m->draining) {
                log_info("Drained: exiting.");
                (void) sd_notify(false, "STOPPING=1\nSTATUS=Drained, exiting.");
                return;
        }
        log_info("Idle for %" PRIu64 " s: exiting; the socket or the bus brings sandboxd back on the next request.",
                 m->config.idle_exit_usec / USEC_PER_SEC);
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Idle, exiting.");
}

static int on_name_released(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;

        m->bus_name_releasing = false;
        /* Calls that came in before the name went have been dispatched by now. */
        if (manager_is_idle(m))
                return sd_event_exit(m->event, 0);
        /* One of them waits for something. systemd was told we stop, and a unit that is
         * deactivating does not become active again: stop as at SIGTERM, answering it
         * (Stopping); the next sandboxd, started by the next request, carries on. */
        log_info("A request came in while giving up the bus name: stopping all the same.");
        daemon_stop(m);
        return 0;
}

static int on_idle_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int r;

        idle_exit_notify(m);
        if (!m->bus)
                return sd_event_exit(m->event, 0);
        /* Then the name goes: a call sent after that starts a new sandboxd (bus activation)
         * instead of being lost with this one. */
        r = sd_bus_release_name_async(m->bus, NULL, BUS_NAME, on_name_released, m);
        if (r < 0) {
                log_warning_errno(r, "Failed to release bus name %s, ignoring: %m", BUS_NAME);
                return sd_event_exit(m->event, 0);
        }
        m->bus_name_releasing = true;
        return 0;
}

static int on_stop(sd_event_source *s, void *userdata) {
        return sd_event_exit(((Manager *) userdata)->event, 0);
}

static int on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        log_warning("Stopping: answers not sent within %d ms, exiting all the same.", STOP_FLUSH_MSEC);
        return sd_event_exit(((Manager *) userdata)->event, 0);
}

/* Every request that waits (on PID 1, a freeze, stdin, a stream) is answered while the
 * loop still runs, so that libmicrohttpd and sd-bus send the answers; the loop ends once
 * nothing but idle work is left (or after STOP_FLUSH_MSEC). libmicrohttpd would abort on
 * a connection still suspended at its stop. */
static void daemon_stop(Manager *m) {
        Session *s;
        int r;

        if (m->stopping)
                return;
        m->stopping = true;
        LIST_FOREACH(sessions, s, m->sessions)
                session_cancel_ops(s, OP_STOPPING);
        file_ops_abandon(m->file_ops);
        manager_bus_stop(m);
        r = sd_event_add_defer(m->event, &m->stop_defer, on_stop, m);
        if (r >= 0) {
                (void) sd_event_source_set_description(m->stop_defer, "daemon-stop");
                r = sd_event_source_set_priority(m->stop_defer, SD_EVENT_PRIORITY_IDLE);
        }
        if (r >= 0)
                r = sd_event_add_time_relative(m->event, &m->stop_timer, CLOCK_MONOTONIC,
                                               STOP_FLUSH_MSEC * USEC_PER_MSEC, 0, on_stop_timer, m);
        if (r >= 0)
                (void) sd_event_source_set_description(m->stop_timer, "daemon-stop-deadline");
        if (r < 0)
                (void) sd_event_exit(m->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        log_info("Received %s, exiting; running commands go on under systemd.",
                 si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        daemon_stop(m);
        return 0;
}

static int setup_bus(Manager *m) {
        int r;

        /* the errno of each error name sandboxd sends (error-table.c) */
        r = sd_bus_error_add_map(api_error_bus_map());
        if (r < 0)
                return log_error_errno(r, "Failed to register the D-Bus error names: %m");
        r = sd_bus_open_system(&m->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the system bus: %m");
        r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach the bus to the event loop: %m");
        r = pid1_gate_new(m->bus, PID1_CALLS_MAX, &m->pid1);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the calls to systemd: %m");

        r = systemd_subscribe(m->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to subscribe to systemd's signals: %m");
        r = systemd_get_manager_cgroup(m->bus, &m->cgroup_root);
        if (r < 0)
                return log_error_errno(r, "Failed to read systemd's control group: %m");

        /* The objects first: calls that activated us are dispatched as soon as the name is ours. */
        r = manager_bus_register(m);
        if (r < 0)
                return r;
        /* Failing to get the name is not fatal (say, in a foreground run next to the
         * installed daemon): HTTP still works. */
        r = sd_bus_request_name_async(m->bus, NULL, BUS_NAME, 0, NULL, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to request bus name %s, ignoring: %m", BUS_NAME);
        return 0;
}

static int setup_sockets(Manager *m, const char *listen_path) {
        char **names = NULL;
        int n, r;

        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return log_error_errno(n, "Failed to read the sockets passed by systemd: %m");

        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                FdStoreName id;
                bool is_unix;

                r = names && names[i] ? fdstore_name_parse(names[i], &id) : 0;
                if (r < 0) {
                        char msg[64 + 256]; /* systemd's names have at most 255 characters */

                        /* Ours by its prefix, but no name we give: let systemd drop it. */
                        log_warning("Dropping stored fd %.64s: not a valid name.", names[i]);
                        safe_close(fd);
                        snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", names[i]);
                        (void) sd_notify(false, msg);
                        continue;
                }
                if (r > 0) {
                        /* A pipe end of a running command or a session's proxy socket, kept by
                         * systemd across our restart. */
                        /* named, or manager_take_stored_fd() never finds it again */
                        char *name = strdup(names[i]);
                        StoredFd *a = name ? realloc(m->stored_fds, (m->n_stored_fds + 1) * sizeof(StoredFd)) : NULL;
                        if (!a) {
                                free(name);
                                r = log_oom();
                                goto finish;
                        }
                        m->stored_fds = a;
                        a[m->n_stored_fds] = (StoredFd) { .fd = fd, .id = id, .name = name };
                        m->n_stored_fds++;
                        continue;
                }
                if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0)
                        is_unix = true;
                else if (sd_is_socket_inet(fd, AF_UNSPEC, SOCK_STREAM, 1, 0) > 0)
                        is_unix = false;
                else {
                        log_warning("Passed fd %d (%s) is not a listening stream socket, ignoring.", fd,
                                    names && names[i] ? names[i] : "?");
                        continue;
                }
                if (m->n_http >= HTTP_SERVERS_MAX) {
                        log_warning("Too many sockets passed, ignoring fd %d.", fd);
                        continue;
                }
                r = http_server_new(m, fd, is_unix, &m->http[m->n_http]);
                if (r < 0)
                        goto finish;
                m->n_http++;
                log_debug("Serving HTTP on fd %d (%s, %s).", fd, names && names[i] ? names[i] : "?",
                          is_unix ? "unix" : "tcp");
        }

        if (m->n_http == 0 && listen_path) {
                /* Debugging without socket activation: listen ourselves. */
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                int fd;

                if (strlen(listen_path) >= sizeof(sa.sun_path))
                        return log_error_errno(-EINVAL, "Socket path too long: %s", listen_path);
                strcpy(sa.sun_path, listen_path);
                (void) unlink(listen_path);
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        return log_error_errno(-errno, "Failed to create socket: %m");
                if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0) {
                        r = log_error_errno(-errno, "Failed to listen on %s: %m", listen_path);
                        safe_close(fd);
                        return r;
                }
                r = http_server_new(m, fd, true, &m->http[m->n_http]);
                if (r < 0)
                        return r;
                m->n_http++;
                log_info("Listening on %s.", listen_path);
        }

        r = m->n_http > 0 ? 0 : log_error_errno(-EBADF, "No socket to serve: start sandboxd.socket, or pass --listen=PATH.");
finish:
        strv_free(names);
        return r;
}

int daemon_startup(Manager *m, const char *listen_path) {
        sigset_t ss;
        int r;

        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
                return log_error_errno(-errno, "Failed to block signals: %m");
        /* the loop owns them (floating), named first */
        r = 0;
        for (size_t i = 0; i < 2 && r >= 0; i++) {
                static const int sigs[] = { SIGTERM, SIGINT };
                sd_event_source *es;

                r = sd_event_add_signal(m->event, &es, sigs[i], on_signal, m);
                if (r < 0)
                        break;
                (void) sd_event_source_set_description(es, sigs[i] == SIGTERM ? "signal-term" : "signal-int");
                r = sd_event_source_set_floating(es, true);
                sd_event_source_unref(es);
        }
        if (r < 0)
                return log_error_errno(r, "Failed to watch signals: %m");
        (void) signal(SIGPIPE, SIG_IGN);

        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog, ignoring: %m");

        r = setup_bus(m);
        if (r < 0)
                return r;
        r = setup_sockets(m, listen_path);
        if (r < 0)
                return r;
        r = store_mkdir_p(m->runtime_dir, 0755);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", m->runtime_dir);
        r = proxy_new(m, &m->proxy);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the egress proxy: %m");
        r = store_writer_new(&m->writer);
        if (r < 0)
                log_warning_errno(r, "Failed to start the thread that writes records, writing them on the loop: %m");
        r = file_ops_new(m->event, &m->file_ops);
        if (r < 0)
                return log_error_errno(r, "Failed to start the threads of the file API: %m");
        r = daemon_recover(m);
        if (r < 0)
                return r;
        manager_resume_draining(m);
        pool_fill(m);

        r = sd_event_add_time(m->event, &m->idle_timer, CLOCK_MONOTONIC, USEC_INFINITY, USEC_PER_SEC,
                                       on_idle_timeout, m);
        if (r < 0)
                return log_error_errno(r, "Failed to create the idle timer: %m");
        (void) sd_event_source_set_description(m->idle_timer, "daemon-idle");
        (void) sd_event_source_set_enabled(m->idle_timer, SD_EVENT_OFF);
        manager_check_idle(m);
        return 0;
}

int daemon_run(Manager *m) {
        int r;

        log_info("Node %s: new sessions get ids %s_<16 hex digits>.", m->config.node_name, m->config.node_name);
        (void) sd_notifyf(false, "READY=1\nSTATUS=Node %s, serving HTTP on %zu socket(s).", m->config.node_name, m->n_http);
        r = sd_event_loop(m->event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}
