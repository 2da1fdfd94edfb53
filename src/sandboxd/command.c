/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A command's life, its one job although over 800 lines: the checks that depend on its
 * session, its transient unit (started through pid1-gate), its pipes into output.c and its
 * stdin, signals, the unit's end read into a result, its record and its recovery after a
 * restart, and the release of finished units. Changes go to the manager's observers. */

#include <assert.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <termios.h>
#include <systemd/sd-daemon.h>

#include "bus-util.h"
#include "cgroup.h"
#include "encoding.h"
#include "command.h"
#include "executor.h"
#include "exec-env.h"
#include "images.h"
#include "proxy.h"
#include "io-util.h"
#include "log.h"
#include "ndjson.h"
#include "scope.h"
#include "session.h"
#include "store.h"
#include "time-util.h"
#include "validate.h"

#define READ_CHUNK (64 * 1024)
#define READ_BURST 4
#define TAKE_SIGNAL(s) ({ int _s = (s); (s) = 0; _s; })
#define PIPE_SIZE (1024 * 1024)
#define SAMPLE_INTERVAL_USEC (200 * USEC_PER_MSEC)

static const char *const stream_names[_OUTPUT_STREAM_MAX] = { "stdout", "stderr" };

/* The streams sandboxd reads: not the caller's own fds, and on its terminal only the master
 * (as stdout: a terminal has one stream). */
static bool stream_kept(const Command *c, OutputStream st) {
        return !c->caller_fd[st] && !(c->tty_master && st == OUTPUT_STDERR);
}

bool command_status_is_running(const Command *c) {
        return c->result.status == COMMAND_RUNNING;
}

/* --- the fd store: our pipe ends survive a restart of sandboxd inside PID 1 ------ */

/* which: stdout, stderr (the OutputStream), or 2 for stdin */
static int fdstore_name(Command *c, unsigned which, char ret[static FDSTORE_NAME_MAX]) {
        static const FdStoreKind kinds[3] = { FDSTORE_STDOUT, FDSTORE_STDERR, FDSTORE_STDIN };
        FdStoreName n = { .kind = kinds[which], .n = c->n };

        memcpy(n.session_id, c->session->id, sizeof(n.session_id));
        return fdstore_name_format(&n, ret);
}

static void fdstore_put(Command *c, unsigned which, int fd) {
        char name[FDSTORE_NAME_MAX], msg[128 + FDSTORE_NAME_MAX];
        int r;

        r = fdstore_name(c, which, name);
        if (r >= 0) {
                snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
                r = sd_pid_notify_with_fds(0, false, msg, &fd, 1);
        }
        if (r < 0)
                log_warning_errno(r, "Failed to put %s of %s in the fd store, ignoring: %m",
                                  which < _OUTPUT_STREAM_MAX ? stream_names[which] : "stdin", c->unit);
}

static void fdstore_remove(Command *c, unsigned which) {
        char name[FDSTORE_NAME_MAX], msg[128 + FDSTORE_NAME_MAX];

        if (fdstore_name(c, which, name) < 0)
                return;
        snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
        (void) sd_notify(false, msg);
}

/* --- records ----------------------------------------------------------------- */

/* <runtime>/exec/<sid>-<n>.env: the command line and environment PID 1 hands sandboxd-exec.
 * Root's alone, and commands cannot see <runtime> at all; it goes with the command's end. */
static int exec_env_path(Command *c, char *buf, size_t n) {
        return snprintf(buf, n, "%s/exec/%s-%u.env", c->session->manager->runtime_dir, c->session->id, c->n) < (int) n
                       ? 0
                       : -ENAMETOOLONG;
}

static int exec_env_write(Command *c, const char *exe, char * const *argv, char * const *env, bool tty, char *path,
                          size_t n) {
        _cleanup_close_ int fd = -EBADF;
        char dir[PATH_MAX];
        Buf b = {};
        int r;

        snprintf(dir, sizeof(dir), "%s/exec", c->session->manager->runtime_dir);
        r = store_mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        r = exec_env_path(c, path, n);
        if (r < 0)
                return r;
        r = exec_env_format(&b, exe, argv, env);
        if (r >= 0 && tty)
                r = buf_printf(&b, EXEC_ENV_TTY "=1\n");
        if (r < 0)
                goto finish;
        (void) unlink(path); /* a leftover of a command with this number that never started */
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = -errno;
                goto finish;
        }
        r = loop_write(fd, b.data ?: "", b.len);
finish:
        buf_done(&b);
        return r;
}

static void exec_env_remove(Command *c) {
        char path[PATH_MAX];

        if (exec_env_path(c, path, sizeof(path)) >= 0)
                (void) unlink(path);
}

static int command_record_path(Command *c, char *buf, size_t n) {
        return snprintf(buf, n, "%s/sessions/%s/%u.json", c->session->manager->state_dir, c->session->id, c->n) <
                               (int) n ? 0 : -ENAMETOOLONG;
}

static json_object *usage_to_json(const CommandUsage *u) {
        json_object *o = json_object_new_object();
        bool oom = !o;

        json_put(o, "cpu_usec", json_object_new_uint64(u->cpu_usec), &oom);
        json_put(o, "memory_bytes", json_object_new_uint64(u->memory_bytes), &oom);
        json_put(o, "tasks", json_object_new_uint64(u->tasks), &oom);
        if (oom)
                return json_object_put(o), NULL;
        return o;
}

int command_save(Command *c) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *argv = json_object_new_array();
        char path[PATH_MAX];
        bool oom = !o || !argv;
        int r;

        for (char **a = c->argv; a && *a; a++)
                json_push(argv, json_object_new_string(*a), &oom);

        json_put(o, "n", json_object_new_uint64(c->n), &oom);
        json_put(o, "request_id", json_object_new_string(c->request_id), &oom);
        json_put(o, "unit", json_object_new_string(c->unit), &oom);
        json_put(o, "argv", json_object_get(argv), &oom);
        json_put(o, "created_usec", json_object_new_uint64(c->created_realtime_usec), &oom);
        json_put(o, "stdin", json_object_new_string(stdin_mode_to_string(c->stdin_mode)), &oom);
        if (c->tty) {
                json_object *t = json_object_new_object();

                oom = oom || !t;
                json_put(t, "rows", json_object_new_uint64(c->tty_rows), &oom);
                json_put(t, "cols", json_object_new_uint64(c->tty_cols), &oom);
                /* false: the caller's own pty slave, no master here */
                json_put(t, "master", json_object_new_boolean(c->tty_master), &oom);
                json_put(o, "tty", t, &oom);
        }
        if (c->in_executor) {
                json_put(o, "executor", json_object_new_boolean(true), &oom);
                if (c->exec && c->exec->deadline_usec != USEC_INFINITY)
                        json_put(o, "deadline_usec", json_object_new_uint64(c->exec->deadline_usec), &oom);
        }
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++)
                if (c->caller_fd[st]) {
                        char key[32];

                        snprintf(key, sizeof(key), "%s_fd", stream_names[st]);
                        json_put(o, key, json_object_new_boolean(true), &oom);
                }
        json_put(o, "status", json_object_new_string(command_status_to_string(c->result.status)), &oom);
        if (command_status_is_terminal(c->result.status)) {
                json_put(o, "exit_code", json_object_new_int(c->result.exit_code), &oom);
                json_put(o, "signal", json_object_new_int(c->result.signal), &oom);
                json_put(o, "reason", json_object_new_string(c->result.reason), &oom);
                json_put(o, "duration_ms", json_object_new_uint64(c->result.duration_ms), &oom);
                json_put(o, "usage", usage_to_json(&c->result.usage), &oom);
        }
        if (c->output)
                for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++) {
                        char key[32];

                        snprintf(key, sizeof(key), "%s_total", stream_names[st]);
                        json_put(o, key, json_object_new_uint64(c->output->total[st]), &oom);
                        snprintf(key, sizeof(key), "%s_truncated", stream_names[st]);
                        json_put(o, key, json_object_new_boolean(c->output->truncated[st]), &oom);
                }

        if (oom)
                return log_warning_errno(-ENOMEM, "Failed to save the record of %s, ignoring: %m", c->unit);

        r = command_record_path(c, path, sizeof(path));
        if (r >= 0) {
                const char *t = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
                char *text = t ? strdup(t) : NULL; /* never an empty record: it would read back as corrupt */

                r = text ? store_writer_put(c->session->manager->writer, &c->save_job, path, text) : -ENOMEM;
        }
        if (r < 0)
                log_warning_errno(r, "Failed to save the record of %s, ignoring: %m", c->unit);
        return r;
}

/* --- output ------------------------------------------------------------------- */

static void output_add(Command *c, OutputStream st, const char *p, size_t n, bool final) {
        int r = output_add_data(c->output, st, p, n, final);
        if (r < 0)
                log_warning_errno(r, "Failed to spool %s of %s, ignoring: %m", stream_names[st], c->unit);
}

/* Reads what is there, a bounded amount per call so that a fast producer does not keep
 * the loop from sending to clients; > 0 at EOF, 0 for now. */
static int drain_stream(Command *c, OutputStream st) {
        char buf[READ_CHUNK];

        for (unsigned i = 0; i < READ_BURST; i++) {
                ssize_t n;

                if (output_should_pause(c->output))
                        return 0;
                n = read(c->fd[st], buf, sizeof(buf));
                if (n > 0) {
                        output_add(c, st, buf, (size_t) n, false);
                        continue;
                }
                if (n == 0)
                        return 1;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN)
                        return 0;
                if (errno == EIO && c->tty_master)
                        return 1; /* a pty master: every holder of the slave closed it */
                log_warning_errno(-errno, "Failed to read %s of %s, ignoring: %m", stream_names[st], c->unit);
                return 1;
        }
        return 0; /* more may be there: the event loop calls us again after a round */
}

static void close_stream(Command *c, OutputStream st) {
        c->io[st] = sd_event_source_disable_unref(c->io[st]);
        c->fd[st] = safe_close(c->fd[st]);
}

static void set_reading(Command *c, bool on) {
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++)
                if (c->io[st])
                        (void) sd_event_source_set_enabled(c->io[st], on ? SD_EVENT_ON : SD_EVENT_OFF);
}

static int on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Command *c = userdata;
        OutputStream st = fd == c->fd[OUTPUT_STDOUT] ? OUTPUT_STDOUT : OUTPUT_STDERR;

        /* EOF only comes once PID 1 closes its copies (when the unit is collected); the
         * end of the command is told by the unit's state, not here. */
        if (drain_stream(c, st) > 0)
                close_stream(c, st);
        else if (output_should_pause(c->output)) {
                /* The slowest reader lags: let the pipe push back until it catches up. */
                output_pause(c->output);
                set_reading(c, false);
        }
        return 0;
}

static void on_unpause(void *userdata) {
        set_reading(userdata, true);
}

static int watch_stream(Command *c, OutputStream st) {
        int r;

        r = sd_event_add_io(c->session->manager->event, &c->io[st], c->fd[st], EPOLLIN, on_output, c);
        if (r < 0)
                return log_error_errno(r, "Failed to watch %s of %s: %m", stream_names[st], c->unit);
        (void) sd_event_source_set_description(c->io[st], st == OUTPUT_STDOUT ? "command-stdout" : "command-stderr");
        return 0;
}

/* --- stdin ---------------------------------------------------------------------- */

static void stdin_close(Command *c, int r, const char *message) {
        c->stdin_io = sd_event_source_disable_unref(c->stdin_io);
        if (c->stdin_fd >= 0) {
                c->stdin_fd = safe_close(c->stdin_fd);
                fdstore_remove(c, 2);
        }
        buf_done(&c->stdin_pending);
        op_complete_all(&c->stdin_ops, r, message);
}

static void stdin_progress(Command *c, size_t written) {
        Op *op, *n;

        LIST_FOREACH_SAFE(ops, op, n, c->stdin_ops)
                op->until = op->until > written ? op->until - written : 0;
        /* in the order they were queued: the first ones are done first */
        while ((op = c->stdin_ops) && op->until == 0)
                op_complete(op, 0, NULL);
}

static int on_stdin_writable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Command *c = userdata;
        size_t done = 0;

        while (done < c->stdin_pending.len) {
                ssize_t k = write(c->stdin_fd, c->stdin_pending.data + done, c->stdin_pending.len - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        /* EPIPE: the command closed its stdin; what is left cannot be delivered */
                        log_debug_errno(-errno, "Failed to write stdin of %s: %m", c->unit);
                        stdin_close(c, -EPIPE, "the command closed its stdin");
                        return 0;
                }
                done += (size_t) k;
        }
        memmove(c->stdin_pending.data, c->stdin_pending.data + done, c->stdin_pending.len - done);
        c->stdin_pending.len -= done;
        stdin_progress(c, done);

        if (c->stdin_pending.len == 0) {
                if (c->stdin_eof && !c->tty_master)
                        stdin_close(c, 0, NULL);
                else
                        (void) sd_event_source_set_enabled(c->stdin_io, SD_EVENT_OFF);
        }
        return 0;
}

/* The character a terminal reads as end of input (VEOF of its line discipline, ^D unless the
 * command changed it); ^D when it is disabled or cannot be read. */
static char tty_eof_char(Command *c) {
        struct termios t;

        if (tcgetattr(c->stdin_fd, &t) < 0 || t.c_cc[VEOF] == _POSIX_VDISABLE)
                return 0x04;
        return (char) t.c_cc[VEOF];
}

int command_write_stdin(Command *c, const void *p, size_t n, bool eof, OpFn fn, void *userdata, Op **ret) {
        _cleanup_(op_freep) Op *op = NULL;
        int r;

        if (c->stdin_mode != STDIN_STREAM)
                return -ENOTTY;
        if (c->stdin_fd < 0 || c->stdin_eof || !command_status_is_running(c))
                return -EPIPE;

        op = op_new(OP_COMMAND_STDIN, c->session, c, fn, userdata);
        if (!op)
                return -ENOMEM;
        r = buf_append(&c->stdin_pending, p, n);
        if (r >= 0 && eof && c->tty_master) {
                /* a terminal is not closed: its end of input is a character, and it stays open */
                char x = tty_eof_char(c);

                r = buf_append(&c->stdin_pending, &x, 1);
        }
        if (r < 0)
                return r;
        c->stdin_eof = eof && !c->tty_master;
        op->until = c->stdin_pending.len;
        op_queue(&c->stdin_ops, op);

        if (!c->stdin_io) {
                r = sd_event_add_io(c->session->manager->event, &c->stdin_io, c->stdin_fd, EPOLLOUT, on_stdin_writable, c);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(c->stdin_io, "command-stdin");
        }
        /* a terminal's input waits until its process has set it up (command_input_ready()) */
        r = sd_event_source_set_enabled(c->stdin_io, !c->tty_master || c->input_ready ? SD_EVENT_ON : SD_EVENT_OFF);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(op);
        return 1;
}

void command_input_ready(Command *c) {
        if (c->input_ready)
                return;
        c->input_ready = true;
        if (c->stdin_io && c->stdin_pending.len > 0)
                (void) sd_event_source_set_enabled(c->stdin_io, SD_EVENT_ON);
        /* a caller's own terminal: its start is answered now (command_accepted()) */
        op_complete_all(&c->start_ops, 0, NULL);
}

int command_resize(Command *c, unsigned rows, unsigned cols) {
        struct winsize w = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };
        int fd;

        if (!c->tty_master)
                return -ENOTTY;
        if (!command_status_is_running(c))
                return -ESRCH;
        fd = c->stdin_fd >= 0 ? c->stdin_fd : c->fd[OUTPUT_STDOUT];
        if (fd < 0)
                return -ESRCH;
        if (ioctl(fd, TIOCSWINSZ, &w) < 0)
                return -errno;
        c->tty_rows = rows;
        c->tty_cols = cols;
        (void) command_save(c);
        return 0;
}

/* --- the end ------------------------------------------------------------------- */

static void observe_usage(Command *c) {
        CgroupUsage u;

        if (c->state.memory_current != UINT64_MAX && c->state.memory_current > c->memory_peak)
                c->memory_peak = c->state.memory_current;
        if (c->state.tasks_current != UINT64_MAX && c->state.tasks_current > c->tasks_peak)
                c->tasks_peak = c->state.tasks_current;

        if (!c->cgroup && c->state.control_group[0] == '/')
                c->cgroup = strdup(c->state.control_group);

        /* systemd 252 has no MemoryPeak, and no CPU time where cpuacct is unusable. */
        if (c->in_executor ? executor_read_usage(c, &u) < 0 : !c->cgroup || cgroup_read_usage(c->cgroup, &u) < 0)
                return;
        if (u.memory_peak != UINT64_MAX && u.memory_peak > c->memory_peak)
                c->memory_peak = u.memory_peak;
        if (u.tasks != UINT64_MAX && u.tasks > c->tasks_peak)
                c->tasks_peak = u.tasks;
        if (u.cpu_usec != UINT64_MAX && u.cpu_usec > c->cpu_sampled_usec)
                c->cpu_sampled_usec = u.cpu_usec;
}

static int on_sample(sd_event_source *s, uint64_t usec, void *userdata) {
        observe_usage(userdata);
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

/* --- letting PID 1 collect the unit of a finished command ----------------------- */

/* Once the result is recorded the unit serves nothing: what still runs in it (what the
 * command left behind) is stopped, and PID 1 collects a unit nobody references once it is
 * inactive (CollectMode=inactive, the default). Not a failed one: that waits for a
 * ResetFailedUnit. And a unit can turn failed after its result: leftovers that ignore
 * SIGTERM make the stop end in a timeout (Result=timeout, after TimeoutStopSec=). So the
 * unit is followed until it is down, by a UnitRelease of the manager's, not by the command,
 * which may be forgotten (or its session go) before then. (CollectMode=inactive-or-failed
 * would collect it without us, but also the unit of a command that fails while no sandboxd
 * holds it, a restart, before its result is read.) */
struct UnitRelease {
        Manager *manager;
        char *unit;
        char *unit_path;
        UnitState state;
        sd_bus_slot *match_slot;
        Pid1Call *state_call;
        bool stop_sent;
        LIST_FIELDS(UnitRelease, releases);
};

UnitRelease *unit_release_free(UnitRelease *u) {
        if (!u)
                return NULL;
        LIST_REMOVE(releases, u->manager->releases, u);
        u->manager->n_releases--;
        sd_bus_slot_unref(u->match_slot);
        pid1_call_cancel(u->state_call);
        free(u->unit);
        free(u->unit_path);
        free(u);
        return NULL;
}

/* Does what the state asks for; true once there is nothing more to do. */
static bool release_step(Pid1Gate *pid1, const char *unit, const UnitState *st, bool *stop_sent) {
        if (streq(st->load_state, "not-found") || streq(st->active_state, "inactive"))
                return true; /* collected, or it is as soon as nobody references it */
        if (streq(st->active_state, "failed")) {
                (void) systemd_reset_failed_unit_async(pid1, unit, NULL, NULL); /* inactive: collected */
                return true;
        }
        if (!*stop_sent && (streq(st->active_state, "active") || streq(st->active_state, "activating") ||
                            streq(st->active_state, "reloading"))) {
                (void) systemd_stop_unit_async(pid1, unit, NULL, NULL);
                *stop_sent = true;
        }
        return false; /* deactivating, or about to: its end comes in a PropertiesChanged */
}

static void release_done(UnitRelease *u) {
        Manager *m = u->manager;

        log_debug("Released %s.", u->unit);
        unit_release_free(u);
        manager_check_idle(m);
}

static int on_release_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitRelease *u = userdata;

        u->state_call = pid1_call_cancel(u->state_call);
        if (sd_bus_message_is_method_error(reply, NULL)) {
                log_warning("Failed to read state of %s, leaving it to PID 1: %s", u->unit, systemd_error_message(reply));
                release_done(u);
                return 0;
        }
        if (systemd_read_unit_state(reply, &u->state) < 0)
                log_warning("Failed to parse state of %s, waiting for its changes.", u->unit);
        else if (release_step(u->manager->pid1, u->unit, &u->state, &u->stop_sent))
                release_done(u);
        return 0;
}

static int on_release_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        UnitRelease *u = userdata;
        const char *interface;

        if (sd_bus_message_read(m, "s", &interface) < 0 || systemd_read_unit_state(m, &u->state) < 0) {
                if (!u->state_call)
                        (void) systemd_get_unit_state_async(u->manager->pid1, &u->state_call, u->unit_path,
                                                            "org.freedesktop.systemd1.Unit", on_release_state, u);
                return 0;
        }
        if (release_step(u->manager->pid1, u->unit, &u->state, &u->stop_sent))
                release_done(u);
        return 0;
}

int unit_release(Manager *m, const char *unit, const char *unit_path, const UnitState *known) {
        UnitRelease *u;
        bool stop_sent = false;
        int r;

        if (known && release_step(m->pid1, unit, known, &stop_sent))
                return 0;

        u = calloc(1, sizeof(UnitRelease));
        if (!u)
                return log_oom();
        u->manager = m;
        u->stop_sent = stop_sent;
        if (known)
                u->state = *known;
        LIST_PREPEND(releases, m->releases, u);
        m->n_releases++;
        u->unit = strdup(unit);
        u->unit_path = strdup(unit_path);
        if (!u->unit || !u->unit_path) {
                r = log_oom();
                goto fail;
        }
        /* the match first: no change slips between the read and it */
        r = systemd_match_unit_async(m->bus, &u->match_slot, unit_path, on_release_changed, u);
        if (r >= 0)
                r = systemd_get_unit_state_async(m->pid1, &u->state_call, unit_path, "org.freedesktop.systemd1.Unit",
                                                 on_release_state, u);
        if (r < 0) {
                log_warning_errno(r, "Failed to follow %s to its end, it may stay failed: %m", unit);
                goto fail;
        }
        return 0;

fail:
        unit_release_free(u);
        return r;
}

/* The result is recorded: let PID 1 stop what is left and collect the unit. */
static void release_unit(Command *c) {
        Manager *m = c->session->manager;

        (void) unit_release(m, c->unit, c->unit_path, &c->state);
        /* Ours (AddRef=, or Ref at a recovery); whichever comes after it in the gate, a
         * stop or a reset, still reaches the unit. */
        (void) systemd_unit_call_async(m->pid1, c->unit_path, "Unref", NULL, NULL);
}

static void command_set_result(Command *c, const CommandResult *res) {
        Manager *m = c->session->manager;
        Buf line = {};

        c->result = *res;
        metrics_count_command(&m->metrics, res);
        if (ndjson_append_exit(&line, &c->result) < 0 || output_append_event(c->output, line.data, line.len) < 0)
                log_warning("Failed to spool the exit of %s, ignoring.", c->unit);
        buf_done(&line);
        output_finish(c->output);

        log_info("Command %s (%s) in session %s: %s, exit code %d, reason %s, %" PRIu64 " ms.", c->request_id, c->unit,
                 c->session->id, command_status_to_string(res->status), res->exit_code, res->reason, res->duration_ms);

        c->match_slot = sd_bus_slot_unref(c->match_slot);
        c->sample_timer = sd_event_source_disable_unref(c->sample_timer);
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++) {
                close_stream(c, st);
                fdstore_remove(c, st);
        }
        stdin_close(c, -EPIPE, "the command ended");
        exec_env_remove(c);
        command_exec_free(c); /* its pidfd and timers: the result is all that stays */

        (void) command_save(c);
        if (m->n_running > 0)
                m->n_running--;
        manager_notify_command_changed(c->session->manager, c);
        manager_notify_command_finished(c->session->manager, c);
        session_command_finished(c->session, c);
}

void command_end(Command *c, CommandResult *res) {
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++) {
                /* The command is over: read everything, pause or not. */
                while (c->fd[st] >= 0) {
                        char buf[READ_CHUNK];
                        ssize_t n = read(c->fd[st], buf, sizeof(buf));
                        if (n <= 0 && !(n < 0 && errno == EINTR))
                                break;
                        if (n > 0)
                                output_add(c, st, buf, (size_t) n, false);
                }
                output_add(c, st, "", 0, true); /* flush a held-back partial character */
        }
        if (res->status == COMMAND_SIGNALED && c->session->closing && !streq(res->reason, "oom-kill"))
                snprintf(res->reason, sizeof(res->reason), "stopped");
        command_set_result(c, res);
}

static void command_finish(Command *c) {
        CommandResult res;
        bool oom;

        oom = session_saw_oom(c->session, c->cgroup);
        (void) command_result_from_unit(c->state.result, c->state.exec_main_code, c->state.exec_main_status, oom, &res);
        if (c->state.exec_main_start_usec > 0 && c->state.exec_main_exit_usec >= c->state.exec_main_start_usec)
                res.duration_ms = (c->state.exec_main_exit_usec - c->state.exec_main_start_usec) / USEC_PER_MSEC;
        else if (c->accepted_monotonic_usec > 0)
                res.duration_ms = (now_usec(CLOCK_MONOTONIC) - c->accepted_monotonic_usec) / USEC_PER_MSEC;
        res.usage.cpu_usec = c->state.cpu_usage_nsec != UINT64_MAX ? c->state.cpu_usage_nsec / NSEC_PER_USEC
                                                                    : c->cpu_sampled_usec;
        res.usage.memory_bytes = c->memory_peak;
        res.usage.tasks = c->tasks_peak;

        release_unit(c);
        command_end(c, &res);
}

void command_lose(Command *c, const char *reason) {
        CommandResult res = { .status = COMMAND_LOST, .exit_code = -1 };

        snprintf(res.reason, sizeof(res.reason), "%s", reason);
        res.usage.memory_bytes = c->memory_peak;
        res.usage.tasks = c->tasks_peak;
        res.usage.cpu_usec = c->cpu_sampled_usec;
        log_warning("Command %s (%s) is lost: %s.", c->request_id, c->unit, reason);
        command_set_result(c, &res);
}

void command_never_started(Command *c) {
        CommandResult res = { .status = COMMAND_FAILED, .exit_code = -1 };

        snprintf(res.reason, sizeof(res.reason), "not-started");
        log_info("Command %s (%s) never started.", c->request_id, c->unit);
        command_set_result(c, &res);
}

/* --- watching the unit ---------------------------------------------------------- */

static void refresh_state(Command *c);

/* Its sandboxd-exec waits until the user record of the uid PID 1 gave the unit is there:
 * the uid exists once the unit's process set it up, so look at every change until then. */
static void note_user(Command *c) {
        if (c->user_recorded || !(streq(c->state.active_state, "activating") || streq(c->state.active_state, "active")))
                return;
        c->user_recorded = session_userdb_update(c->session) >= 0;
}

void command_process_started(Command *c) {
        c->unit_running = true;
        /* the executor's child touches no terminal settings: nothing to flush what we write */
        if (c->in_executor)
                command_input_ready(c);
        if (c->pending_signal > 0)
                (void) command_signal(c, TAKE_SIGNAL(c->pending_signal));
}

static void note_running(Command *c) {
        /* Type=exec: active once sandboxd-exec runs, after PID 1's setup_input() reset the
         * terminal and flushed its input */
        if (streq(c->state.active_state, "active") || streq(c->state.active_state, "deactivating") ||
            unit_state_is_done(&c->state))
                command_input_ready(c);
        if (c->unit_running || !(streq(c->state.active_state, "activating") || streq(c->state.active_state, "active") ||
                                 streq(c->state.active_state, "deactivating")))
                return;
        command_process_started(c);
}

static int on_service_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Command *c = userdata;
        int r;

        c->state_call = pid1_call_cancel(c->state_call);

        if (sd_bus_message_is_method_error(reply, NULL))
                log_warning("Failed to read state of %s, ignoring: %s", c->unit, systemd_error_message(reply));
        else {
                r = systemd_read_unit_state(reply, &c->state);
                if (r < 0)
                        log_warning_errno(r, "Failed to parse state of %s, ignoring: %m", c->unit);
                observe_usage(c);
        }
        note_user(c);

        if (command_status_is_running(c) && unit_state_is_done(&c->state)) {
                command_finish(c);
                return 0;
        }
        note_running(c);
        if (c->refresh_again)
                refresh_state(c);
        return 0;
}

static int on_unit_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Command *c = userdata;
        int r;

        c->state_call = pid1_call_cancel(c->state_call);

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
        if (streq(c->state.load_state, "not-found")) {
                if (c->start_unconfirmed) {
                        /* PID 1 never answered the start (sandboxd stopped before): with
                         * AddRef= the unit would still be there had it been made */
                        command_never_started(c);
                        return 0;
                }
                if (c->session->closing) {
                        /* Stopped by the close while no sandboxd held it (a restart in
                         * between), then collected: a command that ended by itself stays
                         * (RemainAfterExit=) until we let it go, so this one was stopped. */
                        CommandResult res = { .status = COMMAND_SIGNALED, .exit_code = -1 };

                        snprintf(res.reason, sizeof(res.reason), "stopped");
                        res.usage.cpu_usec = c->cpu_sampled_usec;
                        res.usage.memory_bytes = c->memory_peak;
                        res.usage.tasks = c->tasks_peak;
                        log_info("Command %s (%s) was stopped by the close of its session while sandboxd was away.",
                                 c->request_id, c->unit);
                        command_set_result(c, &res);
                        return 0;
                }
                /* Gone from PID 1 (collected while nobody held it, or a reboot): its end is unknown. */
                command_lose(c, "unit-gone");
                return 0;
        }

        r = systemd_get_unit_state_async(c->session->manager->pid1, &c->state_call, c->unit_path,
                                         "org.freedesktop.systemd1.Service", on_service_state, c);
        if (r < 0)
                log_warning_errno(r, "Failed to query %s, ignoring: %m", c->unit);
        return 0;
}

/* Reads everything again: Unit, then Service. Used once after the start and as a fallback. */
static void refresh_state(Command *c) {
        int r;

        if (!command_status_is_running(c))
                return;
        if (c->state_call) {
                /* A query is in flight; its answer may predate this change. */
                c->refresh_again = true;
                return;
        }
        c->refresh_again = false;
        r = systemd_get_unit_state_async(c->session->manager->pid1, &c->state_call, c->unit_path,
                                         "org.freedesktop.systemd1.Unit", on_unit_state, c);
        if (r < 0)
                log_warning_errno(r, "Failed to query %s, ignoring: %m", c->unit);
}

/* The end, as told by a signal: one last read of the Service properties (CPU time and the
 * like are not sent in signals), then the result. */
static void finish_after_final_read(Command *c) {
        int r;

        if (c->state_call) {
                c->refresh_again = true; /* the read in flight ends in command_finish() or another read */
                return;
        }
        r = systemd_get_unit_state_async(c->session->manager->pid1, &c->state_call, c->unit_path,
                                         "org.freedesktop.systemd1.Service", on_service_state, c);
        if (r < 0) {
                log_warning_errno(r, "Failed to query %s, finishing with what we know: %m", c->unit);
                command_finish(c);
        }
}

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Command *c = userdata;
        const char *interface;

        if (!command_status_is_running(c))
                return 0;

        /* PID 1 sends the new values of what changed: no need to ask for everything again. */
        if (sd_bus_message_read(m, "s", &interface) < 0 || systemd_read_unit_state(m, &c->state) < 0) {
                refresh_state(c);
                return 0;
        }
        note_running(c);
        note_user(c);
        if (unit_state_is_done(&c->state))
                finish_after_final_read(c);
        else if (c->state.job_id != 0 &&
                 (streq(c->state.active_state, "inactive") || streq(c->state.active_state, "failed") ||
                  streq(c->state.sub_state, "exited")))
                refresh_state(c); /* looks over, but the job we knew of was not reported gone: re-read */
        return 0;
}

/* Running: sample its cgroup. */
int command_sample(Command *c) {
        int r;

        if (c->sample_timer)
                return 0;
        r = sd_event_add_time_relative(c->session->manager->event, &c->sample_timer, CLOCK_MONOTONIC,
                                       SAMPLE_INTERVAL_USEC, 10 * USEC_PER_MSEC, on_sample, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->sample_timer, "command-sample");
        (void) sd_event_source_set_enabled(c->sample_timer, SD_EVENT_ON);
        return 0;
}

/* Running: watch the unit, sample its cgroup. */
static int command_watch(Command *c) {
        Manager *m = c->session->manager;
        int r;

        if (!c->match_slot) {
                r = systemd_match_unit_async(m->bus, &c->match_slot, c->unit_path, on_properties_changed, c);
                if (r < 0)
                        return r;
        }
        r = command_sample(c);
        if (r < 0)
                return r;

        /* Read the state once now: the unit may have changed before our match was in place. */
        refresh_state(c);
        return 0;
}

void command_start_failed(Command *c, const char *msg) {
        Session *s = c->session;
        Op *op = c->start_ops;

        /* its caller is told once the command is forgotten, which would cancel it */
        op_unqueue(op);
        if (op)
                op->command = NULL;
        /* Never started: nothing to keep. A close waiting for it goes on. */
        command_remove(c);
        if (s->state == SESSION_CLOSING)
                session_command_finished(s, NULL);
        op_complete(op, -EIO, msg);
}

void command_accepted(Command *c) {
        Manager *m = c->session->manager;
        Buf line = {};
        int r;

        c->result.status = COMMAND_RUNNING;
        m->n_running++;
        if (ndjson_append_accepted(&line, c->request_id, c->unit, c->session->id) < 0 ||
            output_append_event(c->output, line.data, line.len) < 0)
                log_warning("Failed to spool the start of %s, ignoring.", c->unit);
        buf_done(&line);
        (void) command_save(c);
        manager_notify_command_changed(c->session->manager, c);
        r = c->exec ? command_sample(c) : command_watch(c);
        if (r < 0)
                log_error_errno(r, "Failed to watch %s, ignoring: %m", c->unit);
        /* On the caller's own terminal the answer is its signal to type: what it writes
         * before the process set the terminal up may be flushed, and sandboxd cannot hold it
         * (the caller writes to its master itself). So that one waits for
         * command_input_ready(), which comes at the process's start or its end. */
        if (!c->tty || c->tty_master || c->input_ready)
                op_complete_all(&c->start_ops, 0, NULL);
}

static int on_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Command *c = userdata;
        Manager *m = c->session->manager;

        if (m->n_starting > 0)
                m->n_starting--;

        c->start_call = pid1_call_cancel(c->start_call);

        if (sd_bus_message_is_method_error(reply, NULL)) {
                const char *msg = systemd_error_message(reply);

                log_error("Failed to start %s: %s", c->unit, msg);
                command_start_failed(c, msg);
                return 0;
        }

        command_accepted(c);
        return 0;
}

/* --- creation --------------------------------------------------------------------- */

static int make_pipe(int *ret_read, int *ret_write, bool reader_nonblock) {
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        /* Only our end is non-blocking: the command sees an ordinary blocking pipe. */
        if (fcntl(reader_nonblock ? p[0] : p[1], F_SETFL, O_NONBLOCK) < 0) {
                safe_close(p[0]);
                safe_close(p[1]);
                return -errno;
        }
        (void) fcntl(p[0], F_SETPIPE_SZ, PIPE_SIZE);
        *ret_read = p[0];
        *ret_write = p[1];
        return 0;
}

/* sandboxd's pseudo-terminal for c: the master (non-blocking) as c's stdout and, dup'd, its
 * stdin; the slave, found from the master (no path looked up), in *ret_slave. */
static int make_pty(Command *c, int *ret_slave) {
        struct winsize w = { .ws_row = (unsigned short) c->tty_rows, .ws_col = (unsigned short) c->tty_cols };
        _cleanup_close_ int master = -EBADF, slave = -EBADF, in = -EBADF;

        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (master < 0)
                return -errno;
        /* a new pty is locked until unlockpt(); grantpt() has nothing to do on devpts */
        if (unlockpt(master) < 0 || ioctl(master, TIOCSWINSZ, &w) < 0)
                return -errno;
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return -errno;
        in = fcntl(master, F_DUPFD_CLOEXEC, 3);
        if (in < 0)
                return -errno;
        c->fd[OUTPUT_STDOUT] = TAKE_FD(master);
        c->stdin_fd = TAKE_FD(in);
        *ret_slave = TAKE_FD(slave);
        return 0;
}

static Command *command_alloc(Session *s, unsigned n) {
        Command *c = calloc(1, sizeof(Command));

        if (!c)
                return NULL;
        c->session = s;
        c->n = n;
        c->fd[0] = c->fd[1] = c->stdin_fd = -EBADF;
        c->result.status = COMMAND_PENDING;
        c->result.exit_code = -1;
        LIST_PREPEND(commands, s->commands, c);
        return c;
}

/* The session's table by request id holds the newest command of each id: the one the API
 * finds. (Two may share one: the generated id of command 5 is "5", which a client may have
 * chosen for an earlier command.) */
static void command_hash(Command *c) {
        Session *s = c->session;
        Command *old;

        assert(c->request_id && !c->hashed);
        HASH_FIND_STR(s->commands_by_id, c->request_id, old);
        if (old && old->n > c->n)
                return;
        if (old) {
                HASH_DEL(s->commands_by_id, old);
                old->hashed = false;
        }
        HASH_ADD_KEYPTR(hh, s->commands_by_id, c->request_id, strlen(c->request_id), c);
        c->hashed = true;
}

static void command_unhash(Command *c) {
        Session *s = c->session;
        Command *o, *next = NULL;

        if (!c->hashed)
                return;
        HASH_DEL(s->commands_by_id, c);
        c->hashed = false;
        /* an older command of the same id is found again */
        LIST_FOREACH(commands, o, s->commands)
                if (o != c && o->request_id && streq(o->request_id, c->request_id) && (!next || o->n > next->n))
                        next = o;
        if (next)
                command_hash(next);
}

static int command_set_names(Command *c, const char *request_id) {
        assert(!c->request_id);
        if (request_id)
                c->request_id = strdup(request_id);
        else
                (void) asprintf(&c->request_id, "%u", c->n);
        if (!c->request_id)
                return -ENOMEM;
        command_hash(c);
        /* run by the session's executor: that unit is where it runs */
        if ((c->in_executor ? asprintf(&c->unit, "sandboxd-%s-exec.service", c->session->id)
                            : asprintf(&c->unit, "sandboxd-%s-%u.service", c->session->id, c->n)) < 0)
                return -ENOMEM;
        return systemd_unit_path(c->unit, &c->unit_path);
}

static int command_open_output(Command *c, bool create) {
        char dir[PATH_MAX], name[32];
        int r;

        snprintf(dir, sizeof(dir), "%s/spool/%s", c->session->manager->runtime_dir, c->session->id);
        snprintf(name, sizeof(name), "%u", c->n);
        if (create) {
                r = store_mkdir_p(dir, 0700);
                if (r < 0)
                        return log_error_errno(r, "Failed to create %s: %m", dir);
        }
        r = output_open(dir, name, c->session->manager->config.output_max_bytes, create, &c->output);
        if (r < 0)
                return r;
        c->output->on_unpause = on_unpause;
        c->output->userdata = c;
        output_set_account(c->output, &c->session->spool);
        return 0;
}

/* A command on a terminal gets TERM=xterm-256color unless its request names one. */
#define TTY_DEFAULT_TERM "TERM=xterm-256color"
static int env_default_term(char ***env) {
        size_t n = strv_length(*env);
        char **l;

        for (size_t i = 0; i < n; i++)
                if (startswith((*env)[i], "TERM="))
                        return 0;
        l = realloc(*env, (n + 2) * sizeof(char *));
        if (!l)
                return -ENOMEM;
        *env = l;
        l[n] = strdup(TTY_DEFAULT_TERM);
        l[n + 1] = NULL;
        return l[n] ? 0 : -ENOMEM;
}

int command_start(Session *s, const CommandRequest *req, OpFn fn, void *userdata, Op **ret, RequestError *e) {
        Manager *m = s->manager;
        _cleanup_free_ char *cwd = NULL, *exe = NULL, *description = NULL;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_(session_sandbox_done) SessionSandbox sandbox = {};
        bool in_executor;
        _cleanup_close_ int out_w = -EBADF, err_w = -EBADF, in_fd = -EBADF;
        char env_file[PATH_MAX];
        Op *op = NULL;
        Command *c;
        int r;

        if (req->has_timeout && req->timeout_ms * USEC_PER_MSEC > m->config.max_timeout_usec) {
                e->code = "limit_exceeded";
                snprintf(e->message, sizeof(e->message), "timeout_ms is above the maximum of %" PRIu64 ".",
                         m->config.max_timeout_usec / USEC_PER_MSEC);
                return -EINVAL;
        }

        if (s->exec_mode == EXEC_MODE_SESSION && !s->executor && !streq_ptr(req->request_id, PURGE_REQUEST_ID))
                return log_error_errno(-EHOSTDOWN, "Session %s has no executor to run a command.", s->id);

        r = command_resolve_cwd(s, req->cwd, &cwd, e);
        if (r < 0)
                return r;

        if (s->image_root)
                r = image_find_executable(s->image_root, m->config.tools_directory, req->argv[0],
                                          m->config.path ?: DEFAULT_PATH, &exe);
        else
                r = find_executable(req->argv[0], m->config.path, &exe);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                e->code = "executable_not_found";
                snprintf(e->message, sizeof(e->message), "Executable '%.128s' not found%s.", req->argv[0],
                         r == -EINVAL ? ": give a name to look up in PATH or an absolute path" : " in PATH");
                return -EINVAL;
        }

        r = command_build_env(s, s->n_commands + 1, req->env, &env);
        if (r < 0)
                return r;
        if (req->has_tty) {
                r = env_default_term(&env);
                if (r < 0)
                        return r;
        }
        /* The session's executor runs it, unless it is the purge: that runs while the
         * session closes, whatever became of the executor. */
        in_executor = s->executor && !streq_ptr(req->request_id, PURGE_REQUEST_ID);
        if (!in_executor) {
                r = session_sandbox_spec(s, &sandbox);
                if (r < 0)
                        return r;
        }

        c = command_alloc(s, ++s->n_commands);
        if (!c)
                return -ENOMEM;
        c->created_realtime_usec = now_usec(CLOCK_REALTIME);
        c->accepted_monotonic_usec = now_usec(CLOCK_MONOTONIC);
        op = op_new(OP_COMMAND_START, s, c, fn, userdata);
        if (!op) {
                r = -ENOMEM;
                goto fail;
        }
        op_queue(&c->start_ops, op);
        c->stdin_mode = req->stdin_mode;
        c->argv = calloc(strv_length(req->argv) + 1, sizeof(char *));
        if (!c->argv) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; req->argv[i]; i++)
                if (!(c->argv[i] = strdup(req->argv[i]))) {
                        r = -ENOMEM;
                        goto fail;
                }

        c->in_executor = in_executor;
        r = command_set_names(c, req->request_id);
        if (r < 0)
                goto fail;
        r = command_open_output(c, true);
        if (r < 0)
                goto fail;
        r = c->in_executor ? 0 : exec_env_write(c, exe, req->argv, env, req->has_tty, env_file, sizeof(env_file));
        if (r < 0) {
                log_error_errno(r, "Failed to write the environment file of %s: %m", c->unit);
                goto fail;
        }

        /* A stream the caller brought its own fd for goes there directly; we keep none of it. */
        c->caller_fd[OUTPUT_STDOUT] = req->has_stdout_fd;
        c->caller_fd[OUTPUT_STDERR] = req->has_stderr_fd;
        c->tty = req->has_tty;
        c->tty_master = req->has_tty && c->stdin_mode == STDIN_STREAM; /* else the caller's slave */
        c->tty_rows = req->tty_rows;
        c->tty_cols = req->tty_cols;
        r = 0;
        if (c->tty_master)
                r = make_pty(c, &in_fd);
        if (r >= 0 && !req->has_stdout_fd && !c->tty_master)
                r = make_pipe(&c->fd[OUTPUT_STDOUT], &out_w, true);
        if (r >= 0 && !req->has_stderr_fd && !c->tty_master)
                r = make_pipe(&c->fd[OUTPUT_STDERR], &err_w, true);
        if (r < 0) {
                log_error_errno(r, "Failed to create %s for %s: %m", c->tty_master ? "a terminal" : "pipes", c->unit);
                goto fail;
        }
        if (c->tty_master) {
                /* the slave is its stdin, stdout and stderr */
                out_w = fcntl(in_fd, F_DUPFD_CLOEXEC, 3);
                err_w = out_w >= 0 ? fcntl(in_fd, F_DUPFD_CLOEXEC, 3) : -EBADF;
                if (err_w < 0) {
                        r = log_error_errno(-errno, "Failed to duplicate the terminal of %s: %m", c->unit);
                        goto fail;
                }
        } else switch (c->stdin_mode) {
        case STDIN_DATA:
                in_fd = r = sealed_memfd("sandboxd-stdin", req->stdin_data ?: "", req->stdin_size);
                break;
        case STDIN_STREAM:
                r = make_pipe(&in_fd, &c->stdin_fd, false);
                break;
        case STDIN_FD:
                r = 0; /* the caller's, passed on as it is */
                break;
        default:
                in_fd = r = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (r < 0)
                        r = -errno;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to set up stdin of %s: %m", c->unit);
                goto fail;
        }
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++) {
                if (!stream_kept(c, st))
                        continue;
                r = watch_stream(c, st);
                if (r < 0)
                        goto fail;
                fdstore_put(c, st, c->fd[st]);
        }
        /* a terminal's master is stored once (as stdout); a recovery dups it for stdin */
        if (c->stdin_fd >= 0 && !c->tty_master)
                fdstore_put(c, 2, c->stdin_fd);

        if (c->in_executor) {
                r = executor_exec(s->executor, c, exe, cwd, req->argv, env, c->stdin_mode == STDIN_FD ? req->stdin_fd : in_fd,
                                  req->has_stdout_fd ? req->stdout_fd : out_w, req->has_stderr_fd ? req->stderr_fd : err_w,
                                  req->has_timeout ? req->timeout_ms * USEC_PER_MSEC : m->config.default_timeout_usec);
                if (r < 0) {
                        log_error_errno(r, "Failed to hand %s to the executor of session %s: %m", c->request_id, s->id);
                        goto fail;
                }
                (void) command_save(c);
                *ret = op;
                return 1;
        }

        if (asprintf(&description, "sandboxd command %s of session %s", c->request_id, s->id) < 0) {
                r = -ENOMEM;
                goto fail;
        }

        CommandUnitSpec spec = {
                .sandbox = sandbox.spec,
                .unit = c->unit,
                .description = description,
                .environment_file = env_file,
                .working_directory = cwd,
                .runtime_max_usec = req->has_timeout ? req->timeout_ms * USEC_PER_MSEC : m->config.default_timeout_usec,
                .timeout_stop_usec = m->config.kill_grace_usec,
                .stdin_fd = c->stdin_mode == STDIN_FD ? req->stdin_fd : in_fd,
                .stdout_fd = req->has_stdout_fd ? req->stdout_fd : out_w,
                .stderr_fd = req->has_stderr_fd ? req->stderr_fd : err_w,
        };

        /* Watch before starting, so no change can slip between the two. */
        r = systemd_match_unit_async(m->bus, &c->match_slot, c->unit_path, on_properties_changed, c);
        if (r < 0)
                goto fail;
        r = systemd_start_command_async(m->pid1, &c->start_call, &spec, on_started, c);
        if (r < 0) {
                log_error_errno(r, "Failed to ask systemd to start %s: %m", c->unit);
                goto fail;
        }
        m->n_starting++;
        /* Recorded before PID 1 answers: if we die in between, the next start still knows it. */
        (void) command_save(c);

        log_debug("Starting %s: %s", c->unit, exe);
        *ret = op;
        return 1;

fail:
        op_free(op); /* not started: its function is never called */
        command_remove(c);
        return r;
}

/* --- recovery ----------------------------------------------------------------------- */

static int result_from_record(json_object *o, CommandResult *res) {
        json_object *usage;
        const char *reason = store_get_string(o, "reason");
        int64_t exit_code = store_get_i64(o, "exit_code", -1), sig = store_get_i64(o, "signal", 0);

        res->status = command_status_from_string(store_get_string(o, "status"));
        if (res->status < 0 || exit_code < INT_MIN || exit_code > INT_MAX || sig < 0 || sig > INT_MAX)
                return -EBADMSG;
        /* cut short, it could end in half a character, which D-Bus refuses */
        if (reason && strlen(reason) >= sizeof(res->reason))
                return -EBADMSG;
        res->exit_code = (int) exit_code;
        res->signal = (int) sig;
        snprintf(res->reason, sizeof(res->reason), "%s", reason ?: "");
        res->duration_ms = store_get_u64(o, "duration_ms", 0);
        if (json_object_object_get_ex(o, "usage", &usage)) {
                res->usage.cpu_usec = store_get_u64(usage, "cpu_usec", 0);
                res->usage.memory_bytes = store_get_u64(usage, "memory_bytes", 0);
                res->usage.tasks = store_get_u64(usage, "tasks", 0);
        }
        return 0;
}

int command_record_decode(Session *s, json_object *o, Command **ret) {
        json_object *argv, *tty;
        const char *request_id = store_get_string(o, "request_id");
        uint64_t n = store_get_u64(o, "n", 0);
        Command *c;
        int r;

        if (n == 0 || n > UINT_MAX || !request_id_is_valid(request_id))
                return -EBADMSG;
        /* Two records of one unit: the fd store would mix them up. (Two of one request id
         * can be: the generated id of command 5 is "5", which a client may have chosen.) */
        LIST_FOREACH(commands, c, s->commands)
                if (c->n == n)
                        return -EEXIST;

        c = command_alloc(s, (unsigned) n);
        if (!c)
                return -ENOMEM;
        c->created_realtime_usec = store_get_u64(o, "created_usec", 0);
        c->in_executor = store_get_bool(o, "executor", false);
        c->exec_deadline_usec = store_get_u64(o, "deadline_usec", USEC_INFINITY);
        c->stdin_mode = stdin_mode_from_string(store_get_string(o, "stdin"));
        if (c->stdin_mode < 0)
                c->stdin_mode = STDIN_NULL;
        if (json_object_object_get_ex(o, "tty", &tty) && json_object_is_type(tty, json_type_object)) {
                uint64_t rows = store_get_u64(tty, "rows", 0), cols = store_get_u64(tty, "cols", 0);

                if (rows < 1 || rows > REQUEST_TTY_SIZE_MAX || cols < 1 || cols > REQUEST_TTY_SIZE_MAX) {
                        r = -EBADMSG;
                        goto fail;
                }
                c->tty = true;
                c->tty_rows = (unsigned) rows;
                c->tty_cols = (unsigned) cols;
                c->tty_master = store_get_bool(tty, "master", false) && c->stdin_mode == STDIN_STREAM;
        }
        if (json_object_object_get_ex(o, "argv", &argv) && json_object_is_type(argv, json_type_array)) {
                size_t k = json_object_array_length(argv);

                c->argv = calloc(k + 1, sizeof(char *));
                if (!c->argv) {
                        r = -ENOMEM;
                        goto fail;
                }
                for (size_t i = 0; i < k; i++)
                        if (!(c->argv[i] = strdup(json_object_get_string(json_object_array_get_idx(argv, i)) ?: ""))) {
                                r = -ENOMEM;
                                goto fail;
                        }
        }
        r = command_set_names(c, request_id);
        if (r < 0)
                goto fail;
        r = result_from_record(o, &c->result);
        if (r < 0)
                goto fail;
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++) {
                char key[32];

                snprintf(key, sizeof(key), "%s_fd", stream_names[st]);
                c->caller_fd[st] = store_get_bool(o, key, false);
        }

        *ret = c;
        return 0;

fail:
        command_free(c);
        return r;
}

int command_recover(Session *s, json_object *o, Command **ret) {
        Manager *m = s->manager;
        int fds[3] = { -EBADF, -EBADF, -EBADF };
        bool running;
        Command *c;
        int r;

        r = command_record_decode(s, o, &c);
        if (r < 0)
                return r;
        manager_take_stored_fds(m, s->id, c->n, fds);

        running = !command_status_is_terminal(c->result.status);
        if (running) {
                /* PENDING: sandboxd went away between asking for the unit and hearing back.
                 * Counted now, since command_free() counts it down on failure. */
                c->start_unconfirmed = c->result.status == COMMAND_PENDING;
                c->result.status = COMMAND_RUNNING;
                m->n_running++;
        }
        r = command_open_output(c, false);
        if (r == -ENOENT) {
                /* The spool lives in /run: after a reboot only the record is left. */
                log_notice("The output of %s is gone (reboot?), keeping its record only.", c->unit);
                r = command_open_output(c, true);
        }
        if (r < 0)
                goto fail;
        /* what the record says of the output, as far as the spool has not more */
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++) {
                char key[32];

                snprintf(key, sizeof(key), "%s_total", stream_names[st]);
                c->output->total[st] = MAX(c->output->total[st], store_get_u64(o, key, 0));
                snprintf(key, sizeof(key), "%s_truncated", stream_names[st]);
                c->output->truncated[st] = store_get_bool(o, key, false) || c->output->kept[st] >= c->output->cap;
        }

        if (!running) {
                output_finish(c->output);
                exec_env_remove(c);
                goto done;
        }

        if ((fds[0] < 0 && stream_kept(c, OUTPUT_STDOUT)) || (fds[1] < 0 && stream_kept(c, OUTPUT_STDERR))) {
                /* systemd dropped our pipe ends (sandboxd was stopped, not restarted). */
                static const char lost[] = "{\"type\":\"notice\",\"message\":\"output written while sandboxd "
                                           "was stopped is lost\"}\n";
                (void) output_append_event(c->output, lost, sizeof(lost) - 1);
        }
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++) {
                c->fd[st] = TAKE_FD(fds[st]);
                if (c->fd[st] < 0)
                        continue;
                (void) fcntl(c->fd[st], F_SETFL, O_NONBLOCK);
                r = watch_stream(c, st);
                if (r < 0)
                        goto fail;
        }
        if (c->tty_master && c->fd[OUTPUT_STDOUT] >= 0) {
                /* the terminal's master, stored once: its write side again */
                c->stdin_fd = fcntl(c->fd[OUTPUT_STDOUT], F_DUPFD_CLOEXEC, 3);
                if (c->stdin_fd < 0)
                        log_warning_errno(-errno, "Failed to duplicate the terminal of %s, its input is closed: %m", c->unit);
        } else if (c->stdin_mode == STDIN_STREAM && fds[2] >= 0) {
                c->stdin_fd = TAKE_FD(fds[2]);
                (void) fcntl(c->stdin_fd, F_SETFL, O_NONBLOCK);
        }

        if (c->in_executor) {
                /* what became of it, the executor tells when it dials again */
                r = s->executor ? executor_recover_command(s->executor, c, c->exec_deadline_usec) : -ENXIO;
                if (r == -ENXIO) {
                        command_lose(c, EXECUTOR_LOST_DIED);
                        goto done;
                }
                if (r < 0)
                        goto fail;
                log_info("Waiting for the executor to tell of %s (%s).", c->request_id, c->unit);
                goto done;
        }

        /* The reference AddRef= gave belonged to the sandboxd that started the unit (a
         * reference of its bus connection): take one of ours, or a unit that ends while
         * nobody holds it (stopped by a close) is collected before we read its end. */
        r = systemd_unit_call_async(m->pid1, c->unit_path, "Ref", NULL, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to hold %s, ignoring: %m", c->unit);
        r = command_watch(c);
        if (r < 0)
                goto fail;
        log_info("Re-attached to %s (%s).", c->unit, c->request_id);
done:
        for (unsigned k = 0; k < 3; k++)
                safe_close(fds[k]);
        *ret = c;
        return 0;

fail:
        for (unsigned k = 0; k < 3; k++)
                safe_close(fds[k]);
        command_free(c);
        return r;
}

/* --- operations ----------------------------------------------------------------------- */

int command_signal_from_string(const char *name) {
        static const int allowed[] = { SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGUSR1, SIGUSR2 };

        for (size_t i = 0; name && i < ELEMENTSOF(allowed); i++)
                if (streq_ptr(signal_to_string(allowed[i]), name))
                        return allowed[i];
        return -EINVAL;
}

int command_signal(Command *c, int sig) {
        if (!command_status_is_running(c) && c->result.status != COMMAND_PENDING)
                return -ESRCH;
        if (!c->unit_running) {
                /* The start job has not run yet: there is no process to signal. Keep the
                 * signal (the last one wins) and send it once there is. */
                c->pending_signal = sig;
                return 0;
        }
        if (c->in_executor)
                return executor_signal(c, sig);
        return systemd_kill_unit_async(c->session->manager->pid1, c->unit, "all", sig, NULL, NULL);
}

int command_stop(Command *c) {
        /* a pending command too: the stop reaches PID 1 after the start (pid1-gate keeps the
         * order), and replaces the start job if its process has not started yet */
        if (command_status_is_terminal(c->result.status))
                return 0;
        if (c->in_executor)
                return executor_stop(c);
        return systemd_stop_unit_async(c->session->manager->pid1, c->unit, NULL, NULL);
}

/* --- teardown --------------------------------------------------------------------------- */

void command_remove(Command *c) {
        char dir[PATH_MAX], name[32], path[PATH_MAX];

        if (!c)
                return;
        for (unsigned i = 0; i < 3; i++)
                fdstore_remove(c, i);
        snprintf(dir, sizeof(dir), "%s/spool/%s", c->session->manager->runtime_dir, c->session->id);
        snprintf(name, sizeof(name), "%u", c->n);
        (void) output_remove(dir, name);
        if (command_record_path(c, path, sizeof(path)) >= 0)
                (void) store_writer_remove(c->session->manager->writer, &c->save_job, path, false);
        exec_env_remove(c);
        command_free(c);
}

void command_cancel_ops(Command *c, const char *message) {
        /* PID 1 may have the call already: the record written before it says so, and
         * the next sandboxd finds the unit if it was made */
        op_complete_all(&c->start_ops, -ECANCELED, message);
        /* the stdin pipe stays open (it is in the fd store for the next sandboxd) */
        op_complete_all(&c->stdin_ops, -ECANCELED, message);
        output_detach_readers(c->output);
}

Command *command_free(Command *c) {
        if (!c)
                return NULL;

        /* whoever still waits is told while c is whole */
        op_complete_all(&c->start_ops, -ECANCELED, OP_GONE);
        op_complete_all(&c->stdin_ops, -ECANCELED, OP_GONE);

        if (command_status_is_running(c) && c->session->manager && c->session->manager->n_running > 0)
                c->session->manager->n_running--;
        if (c->start_call && c->session->manager && c->session->manager->n_starting > 0)
                c->session->manager->n_starting--;

        output_free(c->output);
        command_unhash(c);
        LIST_REMOVE(commands, c->session->commands, c);
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++)
                close_stream(c, st);
        c->stdin_fd = safe_close(c->stdin_fd);
        stdin_close(c, -ECANCELED, OP_GONE);
        pid1_call_cancel(c->start_call);
        sd_bus_slot_unref(c->match_slot);
        pid1_call_cancel(c->state_call);
        sd_event_source_disable_unref(c->sample_timer);
        command_exec_free(c);
        if (c->session->manager)
                store_writer_release(c->session->manager->writer, &c->save_job);
        strv_free(c->argv);
        free(c->request_id);
        free(c->unit);
        free(c->unit_path);
        free(c->cgroup);
        free(c);
        return NULL;
}
