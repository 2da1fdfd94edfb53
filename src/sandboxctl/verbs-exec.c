/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <signal.h>
#include <strings.h>
#include <sys/random.h>

#include "buf.h"
#include "io-util.h"
#include "log.h"
#include "sandboxctl.h"

/* The write end of the self-pipe the signal handler writes to. */
static int signal_pipe_w = -EBADF;

static void on_signal(int sig) {
        unsigned char c = (unsigned char) sig;
        int saved = errno;

        (void) !write(signal_pipe_w, &c, 1);
        errno = saved;
}

#define WAKE_PENDING 'P'

typedef struct Follow {
        sandboxd_client *client;
        const char *session;
        const char *request_id;
        uint64_t offset;      /* bytes of kept events received: where to re-attach */
        bool accepted;
        unsigned interrupts;
        int pending_signal;   /* asked for before sandboxd knew the command */
        bool print;           /* write the output (not with run --json) */
        bool truncated_noted;
        int pipe[2];
} Follow;

static int on_event(sandboxd_client *b, const sandboxd_event *ev, void *userdata) {
        Follow *f = userdata;
        int r = 0;

        f->offset = ev->offset;
        if (ev->type == SANDBOXD_EVENT_ACCEPTED) {
                f->accepted = true;
                if (f->pending_signal) {
                        unsigned char c = WAKE_PENDING;
                        (void) !write(f->pipe[1], &c, 1);
                }
        }
        if (!f->print)
                return 0;
        if (arg_json) {
                fwrite(ev->line, 1, ev->line_size, stdout);
                fputc('\n', stdout);
                fflush(stdout);
                return 0;
        }
        switch (ev->type) {
        case SANDBOXD_EVENT_STDOUT:
                r = loop_write(STDOUT_FILENO, ev->data, ev->size);
                /* a closed stdout (| head) is no reason to stop the command */
                if (r == -EPIPE)
                        r = 0;
                break;
        case SANDBOXD_EVENT_STDERR:
                (void) loop_write(STDERR_FILENO, ev->data, ev->size);
                break;
        case SANDBOXD_EVENT_TRUNCATED:
                if (!arg_quiet && !f->truncated_noted)
                        log_notice("sandboxctl: the command wrote more than sandboxd keeps; the rest is shown live only "
                                   "and cannot be replayed.");
                f->truncated_noted = true;
                break;
        case SANDBOXD_EVENT_OTHER:
                if (!arg_quiet)
                        log_notice("sandboxd: %.*s", (int) ev->line_size, ev->line);
                break;
        default:
                break;
        }
        return r;
}

static const char *signal_to_name(int sig) {
        return sig == SIGINT    ? "SIGINT"
               : sig == SIGKILL ? "SIGKILL"
               : sig == SIGTERM ? "SIGTERM"
               : sig == SIGHUP  ? "SIGHUP"
               : sig == SIGUSR1 ? "SIGUSR1"
               : sig == SIGUSR2 ? "SIGUSR2"
                                : "?";
}

static void send_signal(Follow *f, int sig) {
        int r;

        if (!f->accepted) {
                f->pending_signal = sig;
                return;
        }
        r = sandboxd_command_signal(f->client, f->session, f->request_id, sig);
        if (r == -ENOENT)
                /* sandboxd has not registered it yet: once it is accepted */
                f->pending_signal = sig;
        else if (r < 0 && r != -EBUSY) /* -EBUSY: it has just ended */
                log_warning("Failed to send %s to the command: %s", signal_to_name(sig),
                            client_error_message(f->client));
        else
                f->pending_signal = 0;
}

static int on_wakeup(sandboxd_client *b, int fd, void *userdata) {
        Follow *f = userdata;
        unsigned char buf[16];
        ssize_t n;

        n = read(fd, buf, sizeof(buf));
        for (ssize_t i = 0; i < n; i++) {
                switch (buf[i]) {
                case SIGINT:
                        f->interrupts++;
                        if (f->interrupts >= 3)
                                return -ECANCELED;
                        if (isatty(STDERR_FILENO) && !arg_quiet)
                                fprintf(stderr, "\nsandboxctl: sending %s to the command%s\n",
                                        f->interrupts == 1 ? "SIGINT" : "SIGKILL",
                                        f->interrupts == 1 ? " (Ctrl-C again: SIGKILL, three times: detach)" : "");
                        send_signal(f, f->interrupts == 1 ? SIGINT : SIGKILL);
                        break;
                case SIGTERM:
                case SIGHUP:
                        send_signal(f, buf[i]);
                        break;
                case WAKE_PENDING:
                        if (f->pending_signal)
                                send_signal(f, f->pending_signal);
                        break;
                default:
                        break;
                }
        }
        return 0;
}

static int setup_signals(Follow *f) {
        struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

        if (pipe2(f->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return log_error_errno(-errno, "Failed to create a pipe: %m");
        signal_pipe_w = f->pipe[1];
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGHUP, &sa, NULL);
        /* a reader of our stdout that went away must not kill us: the command goes on */
        (void) signal(SIGPIPE, SIG_IGN);
        return sandboxd_client_set_wakeup(f->client, f->pipe[0], on_wakeup, f);
}

static void restore_signals(Follow *f) {
        (void) signal(SIGINT, SIG_DFL);
        (void) signal(SIGTERM, SIG_DFL);
        (void) signal(SIGHUP, SIG_DFL);
        (void) sandboxd_client_set_wakeup(f->client, -1, NULL, NULL);
        signal_pipe_w = -EBADF;
        safe_close(f->pipe[0]);
        safe_close(f->pipe[1]);
}

/* Runs (spec) or attaches to (offset) a command until its exit, following it again after
 * a broken connection (sandboxd restarting, say). Returns the exit status for sandboxctl. */
static int follow(sandboxd_client *b, const char *session, const ExecSpec *spec, uint64_t offset, bool print,
                  sandboxd_result **ret_result) {
        Follow f = {
                .client = b,
                .session = session,
                .request_id = spec ? spec->request_id : arg_request_id,
                .offset = offset,
                .accepted = !spec,
                .print = print,
                .pipe = { -EBADF, -EBADF },
        };
        sandboxd_result *res = NULL;
        unsigned retries = 0;
        int r, status;

        r = setup_signals(&f);
        if (r < 0)
                return r;
        if (spec)
                r = exec_spec_run(b, session, spec, on_event, &f, &res);
        else
                r = sandboxd_command_attach(b, session, f.request_id, f.offset, on_event, &f, &res);
        while ((r == -ECONNRESET || r == -ECONNREFUSED) && f.accepted && retries++ < 10 && f.interrupts < 3) {
                if (!arg_quiet)
                        log_notice("sandboxctl: lost the connection to sandboxd, attaching again...");
                (void) usleep(500 * 1000);
                r = sandboxd_command_attach(b, session, f.request_id, f.offset, on_event, &f, &res);
        }
        restore_signals(&f);

        if (r == -ECANCELED && f.interrupts >= 3) {
                log_notice("sandboxctl: detached; the command may still run. Re-attach with: sandboxctl attach %s %s",
                           session, f.request_id);
                return 130;
        }
        if (r < 0)
                return log_client_error(b, r, "Failed to %s command %s", spec ? "run" : "follow", f.request_id);

        status = sandboxd_result_exit_status(res);
        if (!arg_quiet && !arg_json && print) {
                if (res->status == SANDBOXD_STATUS_SIGNALED)
                        log_notice("sandboxctl: the command was killed by %s (%s).", res->signal_name ?: "a signal",
                                   res->reason ?: "-");
                else if (res->status == SANDBOXD_STATUS_TIMED_OUT)
                        log_notice("sandboxctl: the command timed out.");
                else if (res->status == SANDBOXD_STATUS_LOST)
                        log_notice("sandboxctl: sandboxd lost track of the command; its result is unknown.");
                else if (res->reason && startswith(res->reason, "setup-"))
                        log_notice("sandboxctl: the command could not be started (%s).", res->reason);
        }
        if (ret_result)
                *ret_result = res;
        else
                sandboxd_result_free(res);
        return status < 0 ? EXIT_SANDBOXCTL_FAILED : status;
}

static int read_stdin(char **ret, size_t *ret_size) {
        Buf b = {};
        int r;

        for (;;) {
                ssize_t l;

                r = buf_reserve(&b, 65536);
                if (r < 0)
                        break;
                l = read(STDIN_FILENO, b.data + b.len, 65536);
                if (l < 0 && errno == EINTR)
                        continue;
                if (l < 0) {
                        r = log_error_errno(-errno, "Failed to read standard input: %m");
                        break;
                }
                if (l == 0)
                        break;
                b.len += (size_t) l;
                if (b.len > 64 * 1024 * 1024) {
                        r = log_error_errno(-EFBIG, "Standard input is too large to send at once.");
                        break;
                }
        }
        if (r < 0) {
                buf_done(&b);
                return r;
        }
        *ret_size = b.len;
        *ret = buf_steal(&b);
        return 0;
}

int exec_spec_from_words(char **argv, ExecSpec *spec) {
        uint8_t rnd[8];
        int r;

        *spec = (ExecSpec) { .timeout_ms = arg_timeout_ms, .events = arg_json, .terminal_fd = -EBADF };
        spec->argv = calloc(strv_length(argv) + 1, sizeof(char *));
        if (!spec->argv)
                return log_oom();
        for (size_t i = 0; argv[i]; i++)
                if (!(spec->argv[i] = strdup(argv[i])))
                        return log_oom();
        if (arg_cwd && !(spec->cwd = strdup(arg_cwd)))
                return log_oom();
        if (arg_env) {
                spec->env = calloc(strv_length(arg_env) + 1, sizeof(char *));
                if (!spec->env)
                        return log_oom();
                for (size_t i = 0; arg_env[i]; i++)
                        if (!(spec->env[i] = strdup(arg_env[i])))
                                return log_oom();
        }
        if (arg_request_id)
                spec->request_id = strdup(arg_request_id);
        else {
                /* ours, so that a Ctrl-C can name the command before sandboxd answers */
                if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                        return log_error_errno(-errno, "Failed to get random bytes: %m");
                r = asprintf(&spec->request_id, "ctl-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
                             rnd[4], rnd[5], rnd[6], rnd[7]);
                if (r < 0)
                        spec->request_id = NULL;
        }
        if (!spec->request_id)
                return log_oom();
        if (arg_stdin) {
                r = read_stdin(&spec->stdin_data, &spec->stdin_size);
                if (r < 0)
                        return r;
                spec->has_stdin = true;
        }
        return 0;
}

int verb_exec(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        ExecSpec spec;
        int r;

        r = check_session_id(argv[1]);
        if (r < 0)
                return r;
        if (arg_tty)
                return verb_shell(argc, argv);
        r = exec_spec_from_words(argv + 2, &spec);
        if (r >= 0)
                r = connect_client(&b);
        if (r >= 0)
                r = follow(b, argv[1], &spec, 0, true, NULL);
        exec_spec_done(&spec);
        return r;
}

/* The command a shell runs when none is given: the login shell the sandbox has. */
static char *default_shell[] = {
        (char *) "/bin/sh", (char *) "-c",
        (char *) "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi", NULL
};

int verb_shell(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        ExecSpec spec;
        int r;

        r = check_session_id(argv[1]);
        if (r < 0)
                return r;
        if (arg_stdin || arg_json)
                return log_error_errno(-EINVAL, "A command on a terminal takes its input from the terminal: "
                                                "--stdin and --json do not go with shell or -t.");
        r = exec_spec_from_words(argc > 2 ? argv + 2 : default_shell, &spec);
        if (r >= 0)
                r = connect_client(&b);
        if (r >= 0)
                r = shell_run(b, argv[1], &spec, NULL);
        exec_spec_done(&spec);
        return r;
}

int verb_run(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        _cleanup_free_ char *options = NULL;
        sandboxd_session *s = NULL;
        sandboxd_result *res = NULL;
        const char *user, *workspace;
        ExecSpec spec = {};
        int r, status;

        r = default_scope(&user, &workspace);
        if (r < 0)
                return r;
        r = exec_spec_from_words(argv + 1, &spec);
        if (r >= 0)
                r = connect_client(&b);
        if (r < 0)
                goto finish;
        /* a mode a known word, an image a valid name (parse_options()): nothing in them needs escaping */
        if ((arg_exec_mode || arg_image) &&
            asprintf(&options, "{%s%s%s%s%s%s%s}", arg_exec_mode ? "\"exec_mode\":\"" : "", arg_exec_mode ?: "",
                     arg_exec_mode ? "\"" : "", arg_exec_mode && arg_image ? "," : "",
                     arg_image ? "\"image\":\"" : "", arg_image ?: "", arg_image ? "\"" : "") < 0) {
                r = log_oom();
                goto finish;
        }
        r = sandboxd_session_create(b, user, workspace, options, &s, NULL);
        if (r < 0) {
                r = log_client_error(b, r, "Failed to get the session of %s/%s", user, workspace);
                goto finish;
        }
        status = follow(b, s->id, &spec, 0, !arg_json, NULL);
        if (status >= 0 && arg_json) {
                /* one object with the whole result, like the D-Bus Run method */
                r = sandboxd_command_get(b, s->id, spec.request_id, &res);
                if (r < 0)
                        log_client_error(b, r, "Failed to get the result of %s", spec.request_id);
                else
                        print_json_text(res->json);
                sandboxd_result_free(res);
        }
        if (arg_rm && sandboxd_session_close(b, s->id, false, NULL) < 0)
                log_client_error(b, -EIO, "Failed to close session %s", s->id);
        r = status;
finish:
        sandboxd_session_free(s);
        exec_spec_done(&spec);
        return r;
}

int verb_attach(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        int r;

        r = check_session_id(argv[1]);
        if (r < 0)
                return r;
        r = connect_client(&b);
        if (r < 0)
                return r;
        arg_request_id = argv[2];
        if (arg_tty)
                return shell_run(b, argv[1], NULL, argv[2]);
        return follow(b, argv[1], NULL, arg_offset, true, NULL);
}

static int parse_signal(const char *s) {
        static const int allowed[] = { SIGINT, SIGTERM, SIGKILL, SIGHUP, SIGUSR1, SIGUSR2 };
        const char *name = s;
        char *end;
        long n;

        if (strncasecmp(name, "SIG", 3) == 0)
                name += 3;
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++)
                if (strcasecmp(name, signal_to_name(allowed[i]) + 3) == 0)
                        return allowed[i];
        n = strtol(s, &end, 10);
        if (*s && !*end)
                for (size_t i = 0; i < ELEMENTSOF(allowed); i++)
                        if (n == allowed[i])
                                return allowed[i];
        return -EINVAL;
}

int verb_signal(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        int sig = SIGTERM, r;

        r = check_session_id(argv[1]);
        if (r < 0)
                return r;
        if (argc > 3) {
                sig = parse_signal(argv[3]);
                if (sig < 0)
                        return log_error_errno(sig, "Unknown signal '%s': use INT, TERM, KILL, HUP, USR1 or USR2.",
                                               argv[3]);
        }
        r = connect_client(&b);
        if (r < 0)
                return r;
        r = sandboxd_command_signal(b, argv[1], argv[2], sig);
        if (r < 0)
                return log_client_error(b, r, "Failed to send %s to command %s", signal_to_name(sig), argv[2]);
        return 0;
}
