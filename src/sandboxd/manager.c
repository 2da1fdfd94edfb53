/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <fcntl.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "manager.h"
#include "time-util.h"

int manager_new(Manager **ret) {
        Manager *m;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        config_init(&m->config);
        m->spool.max = m->config.spool_max;
        m->state_dir = strdup(getenv("STATE_DIRECTORY") ?: "/var/lib/sandboxd");
        m->runtime_dir = strdup(getenv("RUNTIME_DIRECTORY") ?: "/run/sandboxd");
        if (!m->state_dir || !m->runtime_dir) {
                manager_free(m);
                return -ENOMEM;
        }
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

/* What the manager itself holds; the daemon frees the sessions and the front ends first
 * (daemon_free()). */
Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_stored_fds; i++) {
                safe_close(m->stored_fds[i].fd);
                free(m->stored_fds[i].name);
        }
        free(m->stored_fds);
        free(m->state_dir);
        free(m->runtime_dir);
        free(m->cgroup_root);
        sd_event_source_disable_unref(m->idle_timer);
        sd_event_source_disable_unref(m->stop_defer);
        sd_event_source_disable_unref(m->stop_timer);
        pid1_gate_free(m->pid1);
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
        if (m->config.node_name[0] == 0) {
                r = config_default_node_name(m->config.node_name);
                if (r < 0)
                        return log_error_errno(r, "No [Node] Name= is set and no machine id to make one of (%m): "
                                               "set one in sandboxd.conf.");
        }
        m->spool.max = m->config.spool_max;
        return 0;
}

void manager_take_stored_fds(Manager *m, const char *sid, unsigned n, int ret_fds[3]) {
        static const FdStoreKind kinds[3] = { FDSTORE_STDOUT, FDSTORE_STDERR, FDSTORE_STDIN };

        for (unsigned k = 0; k < 3; k++) {
                ret_fds[k] = -EBADF;
                for (size_t i = 0; i < m->n_stored_fds; i++) {
                        StoredFd *f = &m->stored_fds[i];

                        if (f->fd >= 0 && f->id.kind == kinds[k] && f->id.n == n && streq(f->id.session_id, sid)) {
                                ret_fds[k] = TAKE_FD(f->fd);
                                break;
                        }
                }
        }
}

int manager_take_stored_fd(Manager *m, const char *name) {
        for (size_t i = 0; i < m->n_stored_fds; i++)
                if (m->stored_fds[i].fd >= 0 && streq_ptr(m->stored_fds[i].name, name))
                        return TAKE_FD(m->stored_fds[i].fd);
        return -EBADF;
}

int manager_add_observer(Manager *m, const Observer *o, void *userdata) {
        if (m->n_observers >= OBSERVERS_MAX)
                return -ENOSPC;
        m->observers[m->n_observers].observer = o;
        m->observers[m->n_observers].userdata = userdata;
        m->n_observers++;
        return 0;
}

#define NOTIFY(m, fn, ...)                                                              \
        do {                                                                            \
                for (size_t _i = 0; _i < (m)->n_observers; _i++)                        \
                        if ((m)->observers[_i].observer->fn)                            \
                                (m)->observers[_i].observer->fn(__VA_ARGS__, (m)->observers[_i].userdata); \
        } while (0)

void manager_notify_session_added(Manager *m, Session *s) {
        NOTIFY(m, session_added, s);
}

void manager_notify_session_changed(Manager *m, Session *s, unsigned what) {
        NOTIFY(m, session_changed, s, what);
}

void manager_notify_session_removed(Manager *m, Session *s) {
        NOTIFY(m, session_removed, s);
}

void manager_notify_command_changed(Manager *m, Command *c) {
        NOTIFY(m, command_changed, c);
}

void manager_notify_command_finished(Manager *m, Command *c) {
        NOTIFY(m, command_finished, c);
}

static int drain_flag_path(Manager *m, char *buf, size_t n) {
        return snprintf(buf, n, "%s/draining", m->runtime_dir) < (int) n ? 0 : -ENAMETOOLONG;
}

void manager_resume_draining(Manager *m) {
        char path[PATH_MAX];

        if (drain_flag_path(m, path, sizeof(path)) >= 0 && access(path, F_OK) >= 0) {
                log_info("Still draining (%s exists).", path);
                m->draining = true;
        }
}

int manager_set_draining(Manager *m, bool draining) {
        char path[PATH_MAX];
        int r;

        r = drain_flag_path(m, path, sizeof(path));
        if (r < 0)
                return r;
        if (draining) {
                int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                if (fd < 0)
                        return -errno;
                safe_close(fd);
        } else if (unlink(path) < 0 && errno != ENOENT)
                return -errno;

        if (draining != m->draining)
                log_info("%s.", draining ? "Draining: no new sessions or commands, exiting once running commands end"
                                         : "Drain undone: accepting work again");
        m->draining = draining;
        (void) sd_notifyf(false, "STATUS=%s", draining ? "Draining." : "Serving.");
        manager_check_idle(m);
        return 0;
}

bool manager_is_idle(Manager *m) {
        /* a unit being released: at most TimeoutStopSec= more */
        bool quiet = m->n_running == 0 && m->n_connections == 0 && !m->releases && !m->image_imports;

        /* calls the front ends answer later (D-Bus, polkit) */
        for (size_t i = 0; quiet && i < m->n_observers; i++)
                if (m->observers[i].observer->busy)
                        quiet = !m->observers[i].observer->busy(m->observers[i].userdata);

        /* Closed sessions keep their records on disk: they do not keep us running. A drained
         * daemon goes as soon as its commands are done, open sessions or not. */
        return quiet && (m->draining || (m->config.idle_exit_usec > 0 && m->n_live_sessions == 0));
}

void manager_check_idle(Manager *m) {
        bool idle = manager_is_idle(m);
        int r, code;

        if (!m->idle_timer || m->bus_name_releasing)
                return;
        if (sd_event_get_exit_code(m->event, &code) >= 0)
                return; /* exiting already: the loop takes no new timers */
        if (!idle) {
                (void) sd_event_source_set_enabled(m->idle_timer, SD_EVENT_OFF);
                return;
        }
        if (sd_event_source_get_enabled(m->idle_timer, NULL) > 0)
                return; /* already counting down */
        r = sd_event_source_set_time_relative(m->idle_timer, m->draining ? USEC_PER_SEC : m->config.idle_exit_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->idle_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the idle timer, ignoring: %m");
}

