/* SPDX-License-Identifier: LGPL-2.1-or-later */

#define _GNU_SOURCE 1
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "cgroup.h"
#include "command.h"
#include "log.h"
#include "ndjson.h"
#include "session.h"
#include "validate.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define READ_CHUNK (64 * 1024)
#define PIPE_SIZE (1024 * 1024)
#define SAMPLE_INTERVAL_USEC (200 * USEC_PER_MSEC)

static const char *const stream_names[_STREAM_MAX] = { "stdout", "stderr" };

static uint64_t now_monotonic(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

static void notify_followers(Command *c) {
        CommandFollower *f, *n;

        LIST_FOREACH_SAFE(followers, f, n, c->followers)
                f->notify(f);
}

void command_follow(Command *c, CommandFollower *f) {
        f->command = c;
        LIST_PREPEND(followers, c->followers, f);
}

void command_unfollow(CommandFollower *f) {
        if (!f->command)
                return;
        LIST_REMOVE(followers, f->command->followers, f);
        f->command = NULL;
}

int find_executable(const char *name, const char *path, char **ret) {
        const char *p = path ?: DEFAULT_PATH;

        if (strchr(name, '/')) {
                if (name[0] != '/')
                        return -EINVAL; /* relative paths would depend on the cwd inside the sandbox */
                *ret = strdup(name);
                return *ret ? 0 : -ENOMEM;
        }

        while (*p) {
                const char *e = strchrnul(p, ':');
                _cleanup_free_ char *candidate = NULL;
                struct stat st;

                if (asprintf(&candidate, "%.*s/%s", (int) (e - p), p, name) < 0)
                        return -ENOMEM;
                if (stat(candidate, &st) >= 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) {
                        *ret = TAKE_PTR(candidate);
                        return 0;
                }
                p = *e ? e + 1 : e;
        }
        return -ENOENT;
}

/* The cwd must name a directory that resolves beneath the workspace on the host, symlinks
 * included: openat2(RESOLVE_BENEATH) decides, not string checks alone. */
static int check_cwd_beneath(const char *workspace_host, const char *rel) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int top = -EBADF, fd = -EBADF;

        top = open(workspace_host, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (top < 0)
                return -errno;
        fd = (int) syscall(SYS_openat2, top, rel, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        return 0;
}

static int resolve_cwd(Session *s, const char *cwd, char **ret, RequestError *e) {
        _cleanup_free_ char *rel = NULL, *host = NULL;
        int r;

        if (!cwd) {
                *ret = strdup(s->workspace_dir);
                return *ret ? 0 : -ENOMEM;
        }

        r = cwd_relative_to(s->workspace_dir, cwd, &rel);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                e->code = "invalid_path";
                snprintf(e->message, sizeof(e->message), "cwd must stay inside the workspace %s.", s->workspace_dir);
                return -EINVAL;
        }

        if (rel[0] != 0) {
                /* On the host the workspace of a dynamic user lives below /var/lib/private. */
                if (asprintf(&host, "/var/lib/private/sandboxd/ws/%s/%s", s->user, s->workspace) < 0)
                        return -ENOMEM;
                r = check_cwd_beneath(host, rel);
                if (r == -EXDEV || r == -ELOOP) {
                        e->code = "invalid_path";
                        snprintf(e->message, sizeof(e->message), "cwd resolves outside the workspace.");
                        return -EINVAL;
                }
                if (r < 0) {
                        e->code = "invalid_path";
                        snprintf(e->message, sizeof(e->message), "cwd '%.128s' is not a directory in the workspace: %s.",
                                 rel, strerror(-r));
                        return -EINVAL;
                }
        }

        if (asprintf(ret, "%s%s%s", s->workspace_dir, rel[0] ? "/" : "", rel) < 0)
                return -ENOMEM;
        return 0;
}

static int build_env(Session *s, char * const *user_env, char ***ret) {
        const Config *c = &s->manager->config;
        size_t n = strv_length(user_env), k = 0;
        char **env;

        env = calloc(n + 12, sizeof(char *));
        if (!env)
                return -ENOMEM;

#define ADD(...)                                                \
        do {                                                    \
                if (asprintf(&env[k], __VA_ARGS__) < 0) {       \
                        env[k] = NULL;                          \
                        strv_free(env);                         \
                        return -ENOMEM;                         \
                }                                               \
                k++;                                            \
        } while (0)

        ADD("PATH=%s", c->path ?: DEFAULT_PATH);
        ADD("LANG=C.UTF-8");
        for (size_t i = 0; i < n; i++) {
                /* The caller's PATH and LANG replace ours. */
                if (startswith(user_env[i], "PATH=")) {
                        free(env[0]);
                        env[0] = strdup(user_env[i]);
                } else if (startswith(user_env[i], "LANG=")) {
                        free(env[1]);
                        env[1] = strdup(user_env[i]);
                } else
                        ADD("%s", user_env[i]);
                if (!env[0] || !env[1]) {
                        strv_free(env);
                        return -ENOMEM;
                }
        }
        /* The scope's own directories, after the caller's so they cannot be overridden. */
        ADD("HOME=%s", s->home_dir);
        ADD("TMPDIR=%s", s->tmp_dir);
        ADD("XDG_CONFIG_HOME=%s/.config", s->home_dir);
        ADD("XDG_CACHE_HOME=%s/.cache", s->home_dir);
        ADD("XDG_DATA_HOME=%s/.local/share", s->home_dir);
        ADD("XDG_STATE_HOME=%s/.local/state", s->home_dir);
#undef ADD

        *ret = env;
        return 0;
}

static void append_output(Command *c, CommandStream st, const char *data, size_t n, bool final) {
        uint64_t cap = c->session->manager->config.output_max_bytes;
        Buf *p = &c->partial[st];
        size_t consumed = 0;
        int r;

        c->output_total[st] += n;

        if (p->len > 0 || !final) {
                r = buf_append(p, data, n);
                if (r < 0)
                        goto oom;
                data = p->data;
                n = p->len;
        }
        if (n == 0)
                return;

        if (c->output_kept[st] >= cap) {
                c->truncated[st] = true;
                p->len = 0;
                return;
        }
        if (c->output_kept[st] + n > cap) {
                n = (size_t) (cap - c->output_kept[st]);
                c->truncated[st] = true;
                final = true;
        }

        r = ndjson_append_output(&c->log, stream_names[st], data, n, final, &consumed);
        if (r < 0)
                goto oom;
        c->output_kept[st] += consumed;

        if (p->len > 0) {
                memmove(p->data, p->data + consumed, p->len - consumed);
                p->len -= consumed;
                if (c->truncated[st])
                        p->len = 0;
        }
        if (consumed > 0)
                notify_followers(c);
        return;
oom:
        log_oom();
        c->truncated[st] = true;
}

/* Reads what is there; returns > 0 at EOF, 0 when drained for now. */
static int drain_stream(Command *c, CommandStream st) {
        char buf[READ_CHUNK];

        for (;;) {
                ssize_t n = read(c->fd[st], buf, sizeof(buf));

                if (n > 0) {
                        append_output(c, st, buf, (size_t) n, false);
                        continue;
                }
                if (n == 0)
                        return 1;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN)
                        return 0;
                log_warning_errno(-errno, "Failed to read %s of %s, ignoring: %m", stream_names[st], c->unit);
                return 1;
        }
}

static void close_stream(Command *c, CommandStream st) {
        c->io[st] = sd_event_source_disable_unref(c->io[st]);
        c->fd[st] = safe_close(c->fd[st]);
}

static int on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Command *c = userdata;
        CommandStream st = fd == c->fd[STREAM_STDOUT] ? STREAM_STDOUT : STREAM_STDERR;

        /* EOF only comes once PID 1 closes its copies (when the unit is collected); the
         * end of the command is told by the unit's state, not here. */
        if (drain_stream(c, st) > 0)
                close_stream(c, st);
        return 0;
}

static bool session_saw_oom(Session *s, const char *command_cgroup);

static void command_finish(Command *c) {
        Manager *m = c->session->manager;
        CommandResult res;
        bool oom = session_saw_oom(c->session, c->cgroup);

        for (CommandStream st = 0; st < _STREAM_MAX; st++) {
                if (c->fd[st] >= 0)
                        (void) drain_stream(c, st);
                append_output(c, st, "", 0, true); /* flush a held-back partial character */
                close_stream(c, st);
        }

        (void) command_result_from_unit(c->state.result, c->state.exec_main_code, c->state.exec_main_status, oom, &res);
        if (c->state.exec_main_start_usec > 0 && c->state.exec_main_exit_usec >= c->state.exec_main_start_usec)
                res.duration_ms = (c->state.exec_main_exit_usec - c->state.exec_main_start_usec) / USEC_PER_MSEC;
        else
                res.duration_ms = (now_monotonic() - c->accepted_monotonic_usec) / USEC_PER_MSEC;
        if (c->state.cpu_usage_nsec != UINT64_MAX)
                res.usage.cpu_usec = c->state.cpu_usage_nsec / NSEC_PER_USEC;
        else
                res.usage.cpu_usec = c->cpu_sampled_usec;
        res.usage.memory_bytes = c->memory_peak;
        res.usage.tasks = c->tasks_peak;
        c->result = res;

        if (ndjson_append_exit(&c->log, &c->result) < 0)
                log_oom();

        log_info("Command %s (%s) in session %s: %s, exit code %d, reason %s, %" PRIu64 " ms.", c->request_id, c->unit,
                 c->session->id, command_status_to_string(res.status), res.exit_code, res.reason, res.duration_ms);

        /* The result is recorded: let PID 1 collect the unit (CollectMode=inactive-or-failed). */
        (void) systemd_unit_call_async(m->bus, c->unit_path, "Unref", NULL, NULL);
        c->match_slot = sd_bus_slot_unref(c->match_slot);
        c->sample_timer = sd_event_source_disable_unref(c->sample_timer);

        if (m->n_running > 0)
                m->n_running--;
        notify_followers(c);
        manager_check_idle(m);
}

static void refresh_state(Command *c);

static void observe_usage(Command *c) {
        CgroupUsage u;

        if (c->state.memory_current != UINT64_MAX && c->state.memory_current > c->memory_peak)
                c->memory_peak = c->state.memory_current;
        if (c->state.tasks_current != UINT64_MAX && c->state.tasks_current > c->tasks_peak)
                c->tasks_peak = c->state.tasks_current;

        if (!c->cgroup && c->state.control_group[0] == '/')
                c->cgroup = strdup(c->state.control_group);

        /* systemd 252 has no MemoryPeak, and no CPU time where cpuacct is unusable. */
        if (!c->cgroup || cgroup_read_usage(c->cgroup, &u) < 0)
                return;
        if (u.memory_peak != UINT64_MAX && u.memory_peak > c->memory_peak)
                c->memory_peak = u.memory_peak;
        if (u.tasks != UINT64_MAX && u.tasks > c->tasks_peak)
                c->tasks_peak = u.tasks;
        if (u.cpu_usec != UINT64_MAX && u.cpu_usec > c->cpu_sampled_usec)
                c->cpu_sampled_usec = u.cpu_usec;
}

static int on_sample(sd_event_source *s, uint64_t usec, void *userdata) {
        Command *c = userdata;

        observe_usage(c);
        return sd_event_source_set_time_relative(s, SAMPLE_INTERVAL_USEC);
}

/* On cgroup v1 systemd reports an OOM kill as a plain SIGKILL: the memory limit being hit
 * in the session's slice while the command ran is our evidence. */
static bool session_saw_oom(Session *s, const char *command_cgroup) {
        uint64_t n;

        if (!s->cgroup && command_cgroup) {
                /* The slice's cgroup is the parent of its commands'. */
                const char *slash = strrchr(command_cgroup, '/');
                s->cgroup = strndup(command_cgroup, (size_t) (slash - command_cgroup));
        }
        if (!s->cgroup || cgroup_read_oom_counter(s->cgroup, &n) < 0 || n <= s->oom_seen)
                return false;
        s->oom_seen = n;
        return true;
}

static int on_service_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Command *c = userdata;
        int r;

        c->state_slot = sd_bus_slot_unref(c->state_slot);

        if (sd_bus_message_is_method_error(reply, NULL))
                log_warning("Failed to read state of %s, ignoring: %s", c->unit, systemd_error_message(reply));
        else {
                r = systemd_read_unit_state(reply, &c->state);
                if (r < 0)
                        log_warning_errno(r, "Failed to parse state of %s, ignoring: %m", c->unit);
                observe_usage(c);
        }

        if (!command_status_is_terminal(c->result.status) && unit_state_is_done(&c->state)) {
                command_finish(c);
                return 0;
        }
        if (c->refresh_again)
                refresh_state(c);
        return 0;
}

static int on_unit_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Command *c = userdata;
        int r;

        c->state_slot = sd_bus_slot_unref(c->state_slot);

        if (sd_bus_message_is_method_error(reply, NULL)) {
                log_warning("Failed to read state of %s, ignoring: %s", c->unit, systemd_error_message(reply));
                return 0;
        }
        c->state.job_id = 0;
        r = systemd_read_unit_state(reply, &c->state);
        if (r < 0) {
                log_warning_errno(r, "Failed to parse state of %s, ignoring: %m", c->unit);
                return 0;
        }

        r = systemd_get_unit_state_async(c->session->manager->bus, &c->state_slot, c->unit_path,
                                         "org.freedesktop.systemd1.Service", on_service_state, c);
        if (r < 0)
                log_warning_errno(r, "Failed to query %s, ignoring: %m", c->unit);
        return 0;
}

static void refresh_state(Command *c) {
        int r;

        if (command_status_is_terminal(c->result.status))
                return;
        if (c->state_slot) {
                /* A query is in flight; its answer may predate this change. */
                c->refresh_again = true;
                return;
        }
        c->refresh_again = false;
        r = systemd_get_unit_state_async(c->session->manager->bus, &c->state_slot, c->unit_path,
                                         "org.freedesktop.systemd1.Unit", on_unit_state, c);
        if (r < 0)
                log_warning_errno(r, "Failed to query %s, ignoring: %m", c->unit);
}

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        refresh_state(userdata);
        return 0;
}

static int on_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Command *c = userdata;
        Manager *m = c->session->manager;
        CommandStartedFn fn = TAKE_PTR(c->started_fn);

        c->start_slot = sd_bus_slot_unref(c->start_slot);

        if (sd_bus_message_is_method_error(reply, NULL)) {
                const char *msg = systemd_error_message(reply);

                log_error("Failed to start %s: %s", c->unit, msg);
                if (fn)
                        fn(c, -EIO, msg, c->started_userdata);
                return 0;
        }

        c->result.status = COMMAND_RUNNING;
        m->n_running++;
        if (ndjson_append_accepted(&c->log, c->request_id, c->unit, c->session->id) < 0)
                log_oom();

        /* Read the state once now: the unit may have finished before our match was in place. */
        refresh_state(c);

        if (sd_event_add_time_relative(m->event, &c->sample_timer, CLOCK_MONOTONIC, SAMPLE_INTERVAL_USEC,
                                       10 * USEC_PER_MSEC, on_sample, c) >= 0)
                (void) sd_event_source_set_enabled(c->sample_timer, SD_EVENT_ON);

        if (fn)
                fn(c, 0, NULL, c->started_userdata);
        return 0;
}

static int make_pipe(int *ret_read, int *ret_write) {
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        /* Only our end is non-blocking: the command writes to a normal blocking pipe. */
        if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
                safe_close(p[0]);
                safe_close(p[1]);
                return -errno;
        }
        (void) fcntl(p[0], F_SETPIPE_SZ, PIPE_SIZE);
        *ret_read = p[0];
        *ret_write = p[1];
        return 0;
}

int command_start(Session *s, const CommandRequest *req, CommandStartedFn fn, void *userdata, Command **ret,
                  RequestError *e) {
        Manager *m = s->manager;
        _cleanup_free_ char *cwd = NULL, *exe = NULL, *description = NULL;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_close_ int out_w = -EBADF, err_w = -EBADF, null_fd = -EBADF;
        char statedir_ws[256], statedir_home[256], statedir_tmp[256];
        Command *c;
        int r;

        if (req->request_id && session_find_command(s, req->request_id)) {
                e->code = "conflict";
                snprintf(e->message, sizeof(e->message), "A command with request_id '%s' already exists in this session.",
                         req->request_id);
                return -EEXIST;
        }

        if (req->has_timeout && req->timeout_ms * USEC_PER_MSEC > m->config.max_timeout_usec) {
                e->code = "limit_exceeded";
                snprintf(e->message, sizeof(e->message), "timeout_ms is above the maximum of %" PRIu64 ".",
                         m->config.max_timeout_usec / USEC_PER_MSEC);
                return -EINVAL;
        }

        r = resolve_cwd(s, req->cwd, &cwd, e);
        if (r < 0)
                return r;

        r = find_executable(req->argv[0], m->config.path, &exe);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                e->code = "not_found";
                snprintf(e->message, sizeof(e->message), "Executable '%.128s' not found%s.", req->argv[0],
                         r == -EINVAL ? ": give a name to look up in PATH or an absolute path" : " in PATH");
                return -EINVAL;
        }

        r = build_env(s, req->env, &env);
        if (r < 0)
                return r;

        c = calloc(1, sizeof(Command));
        if (!c)
                return -ENOMEM;
        c->session = s;
        c->fd[0] = c->fd[1] = -EBADF;
        c->result.status = COMMAND_PENDING;
        c->result.exit_code = -1;
        c->n = ++s->n_commands;
        c->accepted_monotonic_usec = now_monotonic();
        c->started_fn = fn;
        c->started_userdata = userdata;
        LIST_PREPEND(commands, s->commands, c);

        if (req->request_id)
                c->request_id = strdup(req->request_id);
        else
                (void) asprintf(&c->request_id, "%u", c->n);
        if (!c->request_id || asprintf(&c->unit, "sandboxd-%s-%u.service", s->id, c->n) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        r = systemd_unit_path(c->unit, &c->unit_path);
        if (r < 0)
                goto fail;

        r = make_pipe(&c->fd[STREAM_STDOUT], &out_w);
        if (r >= 0)
                r = make_pipe(&c->fd[STREAM_STDERR], &err_w);
        if (r < 0) {
                log_error_errno(r, "Failed to create pipes for %s: %m", c->unit);
                goto fail;
        }
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0) {
                r = log_error_errno(-errno, "Failed to open /dev/null: %m");
                goto fail;
        }
        for (CommandStream st = 0; st < _STREAM_MAX; st++) {
                r = sd_event_add_io(m->event, &c->io[st], c->fd[st], EPOLLIN, on_output, c);
                if (r < 0)
                        goto fail;
        }

        snprintf(statedir_ws, sizeof(statedir_ws), "sandboxd/ws/%s/%s", s->user, s->workspace);
        snprintf(statedir_home, sizeof(statedir_home), "sandboxd/home/%s/%s", s->user, s->workspace);
        snprintf(statedir_tmp, sizeof(statedir_tmp), "sandboxd/tmp/%s/%s", s->user, s->workspace);
        if (asprintf(&description, "sandboxd command %s of session %s", c->request_id, s->id) < 0) {
                r = -ENOMEM;
                goto fail;
        }

        CommandUnitSpec spec = {
                .unit = c->unit,
                .slice = s->slice,
                .description = description,
                .user = s->dynamic_user,
                .executable = exe,
                .argv = req->argv,
                .env = env,
                .working_directory = cwd,
                .state_directories = { statedir_ws, statedir_home, statedir_tmp },
                .runtime_max_usec = req->has_timeout ? req->timeout_ms * USEC_PER_MSEC : m->config.default_timeout_usec,
                .timeout_stop_usec = m->config.kill_grace_usec,
                .stdin_fd = null_fd,
                .stdout_fd = out_w,
                .stderr_fd = err_w,
                .inaccessible_paths = { "-/run/dbus/system_bus_socket", "-/run/sandboxd", "-/var/lib/sandboxd/state",
                                        "-/etc/sandboxd" },
        };

        /* Watch before starting, so no change can slip between the two. */
        r = systemd_match_unit_async(m->bus, &c->match_slot, c->unit_path, on_properties_changed, c);
        if (r < 0)
                goto fail;
        r = systemd_start_command_async(m->bus, &c->start_slot, &spec, on_started, c);
        if (r < 0) {
                log_error_errno(r, "Failed to ask systemd to start %s: %m", c->unit);
                goto fail;
        }

        log_debug("Starting %s: %s", c->unit, exe);
        *ret = c;
        return 0;

fail:
        command_free(c);
        return r;
}

Command *command_free(Command *c) {
        CommandFollower *f;

        if (!c)
                return NULL;

        if (c->result.status == COMMAND_RUNNING && c->session->manager->n_running > 0)
                c->session->manager->n_running--;

        while ((f = c->followers)) {
                command_unfollow(f);
                f->notify(f); /* tells the follower its command is gone */
        }

        LIST_REMOVE(commands, c->session->commands, c);
        for (CommandStream st = 0; st < _STREAM_MAX; st++) {
                close_stream(c, st);
                buf_done(&c->partial[st]);
        }
        sd_bus_slot_unref(c->start_slot);
        sd_bus_slot_unref(c->match_slot);
        sd_bus_slot_unref(c->state_slot);
        sd_event_source_disable_unref(c->sample_timer);
        buf_done(&c->log);
        free(c->request_id);
        free(c->unit);
        free(c->unit_path);
        free(c->cgroup);
        free(c);
        return NULL;
}
