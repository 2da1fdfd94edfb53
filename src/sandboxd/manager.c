/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <signal.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "auth.h"
#include "command.h"
#include "http.h"
#include "log.h"
#include "manager.h"
#include "session.h"
#include "systemd.h"

#define BUS_NAME "io.sandboxd.sandbox1"

static uint64_t now_usec(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

int manager_new(Manager **ret) {
        Manager *m;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        config_init(&m->config);
        m->start_realtime_usec = now_usec(CLOCK_REALTIME);
        m->start_monotonic_usec = now_usec(CLOCK_MONOTONIC);

        r = sd_event_default(&m->event);
        if (r < 0) {
                manager_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m) {
        Session *s;

        if (!m)
                return NULL;
        while ((s = m->sessions))
                session_free(s);
        for (size_t i = 0; i < m->n_http; i++)
                http_server_free(m->http[i]);
        sd_event_source_disable_unref(m->idle_timer);
        sd_bus_flush_close_unref(m->bus);
        sd_event_unref(m->event);
        config_done(&m->config);
        free(m->keys);
        free(m);
        return NULL;
}

static void warn_config(const char *msg) {
        log_warning("%s", msg);
}

int manager_load_config(Manager *m, const char *path) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = config_load(&m->config, path, warn_config, &error);
        if (r < 0)
                return log_error_errno(r, "Invalid configuration: %s", error ?: strerror(-r));
        return 0;
}

Session *manager_find_session(Manager *m, const char *id) {
        Session *s;

        LIST_FOREACH(sessions, s, m->sessions)
                if (streq(s->id, id))
                        return s;
        return NULL;
}

Session *manager_find_session_by_scope(Manager *m, const char *user, const char *workspace) {
        Session *s;

        LIST_FOREACH(sessions, s, m->sessions)
                if (s->state != SESSION_FAILED && streq(s->user, user) && streq(s->workspace, workspace))
                        return s;
        return NULL;
}

static int on_idle_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        log_info("Idle for %" PRIu64 " s: exiting; the socket brings sandboxd back on the next request.",
                 m->config.idle_exit_usec / USEC_PER_SEC);
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Idle, exiting.");
        return sd_event_exit(m->event, 0);
}

void manager_check_idle(Manager *m) {
        bool idle = m->config.idle_exit_usec > 0 && !m->sessions && m->n_running == 0 && m->n_connections == 0;
        int r;

        if (!m->idle_timer)
                return;
        if (!idle) {
                (void) sd_event_source_set_enabled(m->idle_timer, SD_EVENT_OFF);
                return;
        }
        if (sd_event_source_get_enabled(m->idle_timer, NULL) > 0)
                return; /* already counting down */
        r = sd_event_source_set_time_relative(m->idle_timer, m->config.idle_exit_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->idle_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the idle timer, ignoring: %m");
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        log_info("Received %s, exiting; running commands go on under systemd.",
                 si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down.");
        return sd_event_exit(m->event, 0);
}

static int setup_bus(Manager *m) {
        int r;

        r = sd_bus_open_system(&m->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the system bus: %m");
        r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach the bus to the event loop: %m");

        r = systemd_subscribe(m->bus);
        if (r < 0)
                return log_error_errno(r, "Failed to subscribe to systemd's signals: %m");

        /* The name is reserved for the D-Bus API; failing to get it is not fatal (say, in a
         * foreground run next to the installed daemon). */
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
                bool is_unix;

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

int manager_startup(Manager *m, const char *listen_path) {
        sigset_t ss;
        int r;

        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
                return log_error_errno(-errno, "Failed to block signals: %m");
        r = sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m);
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

        r = sd_event_add_time(m->event, &m->idle_timer, CLOCK_MONOTONIC, USEC_INFINITY, USEC_PER_SEC,
                                       on_idle_timeout, m);
        if (r < 0)
                return log_error_errno(r, "Failed to create the idle timer: %m");
        (void) sd_event_source_set_enabled(m->idle_timer, SD_EVENT_OFF);
        manager_check_idle(m);
        return 0;
}

int manager_run(Manager *m) {
        int r;

        (void) sd_notifyf(false, "READY=1\nSTATUS=Serving HTTP on %zu socket(s).", m->n_http);
        r = sd_event_loop(m->event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}
