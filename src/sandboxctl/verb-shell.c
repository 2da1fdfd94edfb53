/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl shell, exec -t, attach -t: the local terminal given to a command that runs on
 * a terminal. Over HTTP the command gets a pty sandboxd made and we talk to it through the
 * WebSocket .../tty; over D-Bus we make the pty here and pass its slave, as machinectl
 * shell does, and copy between our terminal and its master. */

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "buf.h"
#include "io-util.h"
#include "log.h"
#include "sandboxctl.h"
#include "term-escape.h"

/* Input we hold for the command before we stop reading ours: the WebSocket's queue, or
 * what the pty master did not take yet. */
#define INPUT_QUEUED_MAX (256 * 1024)

static int shell_signal_w = -EBADF;

static void on_shell_signal(int sig) {
        unsigned char c = (unsigned char) sig;
        int saved = errno;

        (void) !write(shell_signal_w, &c, 1);
        errno = saved;
}

typedef struct Shell {
        int in, out;
        bool raw;
        struct termios saved;
        EscapeState esc;
        int sig[2];
        bool detach_allowed;     /* ~. leaves the command running (not with our own pty) */

        /* over HTTP */
        sandboxd_terminal *ws;
        /* over D-Bus */
        int master;
        Buf to_master;
        int done[2];             /* the runner thread writes a byte once the command ended */
        pthread_t runner;
        bool runner_started;
        sandboxd_client *client;
        const char *session;
        ExecSpec *spec;
        sandboxd_result *result;
        int run_error;
        /* Input waits until Exec answered: sandboxd answers once the command's process set
         * the terminal up (systemd resets it, and may drop what was typed before). */
        bool hold_input;
} Shell;

/* What the runner thread writes to done[1] */
#define RUNNER_STARTED 'S'
#define RUNNER_ENDED 'E'

static void local_size(const Shell *s, unsigned *ret_rows, unsigned *ret_cols) {
        struct winsize w = {};

        if ((ioctl(s->out, TIOCGWINSZ, &w) < 0 && ioctl(s->in, TIOCGWINSZ, &w) < 0) || w.ws_row == 0 || w.ws_col == 0)
                w = (struct winsize) { .ws_row = 24, .ws_col = 80 };
        *ret_rows = MIN(w.ws_row, 1000u);
        *ret_cols = MIN(w.ws_col, 1000u);
}

static int local_make_raw(Shell *s) {
        struct termios t;

        if (!isatty(s->in))
                return 0;
        if (tcgetattr(s->in, &s->saved) < 0)
                return log_error_errno(-errno, "Failed to read the terminal's settings: %m");
        t = s->saved;
        cfmakeraw(&t);
        if (tcsetattr(s->in, TCSANOW, &t) < 0)
                return log_error_errno(-errno, "Failed to put the terminal in raw mode: %m");
        s->raw = true;
        return 0;
}

static void local_restore(Shell *s) {
        if (s->raw)
                (void) tcsetattr(s->in, TCSANOW, &s->saved);
        s->raw = false;
}

static int setup_shell_signals(Shell *s) {
        struct sigaction sa = { .sa_handler = on_shell_signal, .sa_flags = SA_RESTART };

        if (pipe2(s->sig, O_CLOEXEC | O_NONBLOCK) < 0)
                return log_error_errno(-errno, "Failed to create a pipe: %m");
        shell_signal_w = s->sig[1];
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGWINCH, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGHUP, &sa, NULL);
        (void) sigaction(SIGINT, &sa, NULL); /* not from our raw terminal: from kill(1) */
        (void) signal(SIGPIPE, SIG_IGN);
        return 0;
}

static void restore_shell_signals(Shell *s) {
        (void) signal(SIGWINCH, SIG_DFL);
        (void) signal(SIGTERM, SIG_DFL);
        (void) signal(SIGHUP, SIG_DFL);
        (void) signal(SIGINT, SIG_DFL);
        shell_signal_w = -EBADF;
        safe_close(s->sig[0]);
        safe_close(s->sig[1]);
}

static void shell_note(const Shell *s, const char *msg) {
        if (arg_quiet)
                return;
        /* in raw mode a newline does not return the carriage */
        fprintf(stderr, "%s%s%s", s->raw ? "\r\n" : "\n", msg, s->raw ? "\r\n" : "\n");
}

static int send_resize(Shell *s) {
        unsigned rows, cols;

        local_size(s, &rows, &cols);
        if (s->ws)
                return sandboxd_terminal_resize(s->ws, rows, cols);
        struct winsize w = { .ws_row = rows, .ws_col = cols };
        return ioctl(s->master, TIOCSWINSZ, &w) < 0 ? -errno : 0;
}

static int to_remote(Shell *s, const uint8_t *p, size_t n) {
        if (n == 0)
                return 0;
        if (s->ws)
                return sandboxd_terminal_write(s->ws, p, n);
        return buf_append(&s->to_master, p, n);
}

static size_t remote_queued(const Shell *s) {
        return s->ws ? sandboxd_terminal_queued(s->ws) : s->to_master.len;
}

static int on_output(sandboxd_terminal *t, const void *p, size_t n, void *userdata) {
        Shell *s = userdata;
        int r;

        r = loop_write(s->out, p, n);
        return r == -EPIPE ? 0 : r;
}

static int on_runner_event(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        Shell *s = userdata;
        unsigned char b = RUNNER_STARTED;

        if (ev->type == SANDBOXD_EVENT_ACCEPTED)
                (void) !write(s->done[1], &b, 1);
        return 0;
}

static void *runner(void *userdata) {
        Shell *s = userdata;
        unsigned char b = RUNNER_ENDED;

        s->run_error = exec_spec_run(s->client, s->session, s->spec, on_runner_event, s, &s->result);
        (void) !write(s->done[1], &b, 1);
        return NULL;
}

/* Returns 1 when the escape asked to leave, 0 otherwise. */
static int on_input(Shell *s, bool *ret_eof) {
        uint8_t buf[4096], out[sizeof(buf) + 1];
        ssize_t n;
        int r;

        n = read(s->in, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0) {
                *ret_eof = true;
                return 0;
        }
        for (size_t off = 0; off < (size_t) n;) {
                EscapeAction a;
                size_t o;

                off += escape_filter(&s->esc, buf + off, (size_t) n - off, out, &o, &a);
                r = to_remote(s, out, o);
                if (r < 0)
                        return r;
                if (a == ESCAPE_DETACH)
                        return 1;
                if (a == ESCAPE_HELP)
                        shell_note(s, s->detach_allowed
                                              ? "sandboxctl: ~. detach (the command goes on), ~~ send ~, ~? this help"
                                              : "sandboxctl: ~. close the terminal (the command gets SIGHUP), ~~ send ~, ~? this help");
        }
        return 0;
}

/* The pty's master: output to us, input from us. Returns -EIO when the command's side is gone. */
static int master_io(Shell *s, short revents) {
        if (revents & (POLLIN | POLLHUP | POLLERR)) {
                uint8_t buf[16384];
                ssize_t n = read(s->master, buf, sizeof(buf));

                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return errno == EIO ? -EIO : -errno;
                if (n > 0) {
                        int r = loop_write(s->out, buf, (size_t) n);
                        if (r < 0 && r != -EPIPE)
                                return r;
                }
        }
        if ((revents & POLLOUT) && s->to_master.len > 0) {
                ssize_t n = write(s->master, s->to_master.data, s->to_master.len);

                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (n > 0) {
                        memmove(s->to_master.data, s->to_master.data + n, s->to_master.len - (size_t) n);
                        s->to_master.len -= (size_t) n;
                }
        }
        return 0;
}

/* The loop: until the command ends, or we leave. Returns 1 when we left it running. */
static int shell_loop(Shell *s) {
        bool in_eof = false, left = false, master_gone = false, ended = false;
        int r;

        /* output that came with the WebSocket's answer is not on the socket any more */
        if (s->ws) {
                r = sandboxd_terminal_process(s->ws, on_output, s);
                if (r < 0)
                        return log_error_errno(r, "The connection to the terminal failed: %s", strerror(-r));
                if (r > 0)
                        return 0;
        }

        for (;;) {
                struct pollfd p[4] = {
                        { .fd = !in_eof && !left && remote_queued(s) < INPUT_QUEUED_MAX ? s->in : -1, .events = POLLIN },
                        { .fd = s->sig[0], .events = POLLIN },
                };
                size_t n = 2;

                if (s->ws) {
                        p[n++] = (struct pollfd) { .fd = sandboxd_terminal_fd(s->ws), .events = sandboxd_terminal_poll_events(s->ws) };
                } else {
                        if (!master_gone)
                                p[n++] = (struct pollfd) { .fd = s->master,
                                                           .events = POLLIN | (s->to_master.len > 0 && !s->hold_input ? POLLOUT : 0) };
                        else
                                p[n++] = (struct pollfd) { .fd = -1 };
                        p[n++] = (struct pollfd) { .fd = s->done[0], .events = POLLIN };
                }

                if (poll(p, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(-errno, "Failed to wait for the terminal: %m");
                }

                if (p[1].revents & POLLIN) {
                        unsigned char sigs[16];
                        ssize_t k = read(s->sig[0], sigs, sizeof(sigs));
                        for (ssize_t i = 0; i < k; i++) {
                                if (sigs[i] == SIGWINCH)
                                        (void) send_resize(s);
                                else {
                                        shell_note(s, "sandboxctl: interrupted, leaving the terminal.");
                                        left = true;
                                }
                        }
                }
                if (p[0].revents & (POLLIN | POLLHUP)) {
                        r = on_input(s, &in_eof);
                        if (r < 0)
                                return r;
                        if (r > 0)
                                left = true;
                }

                if (s->ws) {
                        if (left && sandboxd_terminal_detach(s->ws) < 0)
                                return 1;
                        r = sandboxd_terminal_process(s->ws, on_output, s);
                        if (r < 0)
                                return log_error_errno(r, "The connection to the terminal failed: %s",
                                                       strerror(-r));
                        if (r > 0)
                                return left ? 1 : 0;
                        continue;
                }

                /* over D-Bus */
                if (left)
                        return 1;
                if (!master_gone && p[2].revents) {
                        r = master_io(s, p[2].revents);
                        if (r == -EIO)
                                master_gone = true;
                        else if (r < 0)
                                return log_error_errno(r, "Failed to copy to or from the terminal: %m");
                }
                if (p[3].revents & POLLIN) {
                        unsigned char b[8];
                        ssize_t k = read(s->done[0], b, sizeof(b));
                        for (ssize_t i = 0; i < k; i++) {
                                if (b[i] == RUNNER_STARTED)
                                        s->hold_input = false;
                                else
                                        ended = true;
                        }
                }
                if (ended) {
                        /* what the command wrote last is in the master already: drain it */
                        while (!master_gone && master_io(s, POLLIN) == 0) {
                                int avail = 0;
                                if (ioctl(s->master, FIONREAD, &avail) < 0 || avail <= 0)
                                        break;
                        }
                        return 0;
                }
        }
}

static int open_local_pty(Shell *s, int *ret_slave) {
        unsigned rows, cols;
        int slave;

        s->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (s->master < 0)
                return log_error_errno(-errno, "Failed to allocate a pseudo-terminal: %m");
        if (grantpt(s->master) < 0 || unlockpt(s->master) < 0)
                return log_error_errno(-errno, "Failed to unlock the pseudo-terminal: %m");
        slave = ioctl(s->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return log_error_errno(-errno, "Failed to open the pseudo-terminal's slave: %m");
        local_size(s, &rows, &cols);
        struct winsize w = { .ws_row = rows, .ws_col = cols };
        (void) ioctl(s->master, TIOCSWINSZ, &w);
        if (fcntl(s->master, F_SETFL, O_NONBLOCK) < 0) {
                safe_close(slave);
                return log_error_errno(-errno, "Failed to make the terminal non-blocking: %m");
        }
        *ret_slave = slave;
        return 0;
}

static int shell_finish(Shell *s, sandboxd_client *b, const char *session, const char *request_id, int loop) {
        sandboxd_result *res = NULL;
        int status, r;

        if (loop < 0)
                return EXIT_SANDBOXCTL_FAILED;
        if (loop > 0) {
                char msg[256];
                if (s->detach_allowed)
                        snprintf(msg, sizeof(msg), "sandboxctl: detached; the command goes on. Attach again with: "
                                                   "sandboxctl attach -t %s %s", session, request_id);
                else
                        snprintf(msg, sizeof(msg), "sandboxctl: closed the terminal; the command got SIGHUP.");
                shell_note(s, msg);
                return 0;
        }
        if (s->ws) {
                r = sandboxd_terminal_take_result(s->ws, &res);
                if (r < 0) {
                        /* the connection ended without the exit frame (sandboxd stopping) */
                        shell_note(s, "sandboxctl: the connection to the terminal closed before the command ended; "
                                      "attach again with sandboxctl attach -t.");
                        return EXIT_SANDBOXCTL_FAILED;
                }
        } else {
                if (s->run_error < 0)
                        return log_client_error(b, s->run_error, "Failed to run the command");
                res = TAKE_PTR(s->result);
        }
        status = sandboxd_result_exit_status(res);
        if (res->reason && startswith(res->reason, "setup-") && !arg_quiet)
                log_notice("sandboxctl: the command could not be started (%s).", res->reason);
        sandboxd_result_free(res);
        return status < 0 ? EXIT_SANDBOXCTL_FAILED : status;
}

/* Runs spec (NULL: attaches to request_id) on a terminal with ours. */
int shell_run(sandboxd_client *b, const char *session, ExecSpec *spec, const char *request_id) {
        Shell s = {
                .in = STDIN_FILENO,
                .out = STDOUT_FILENO,
                .sig = { -EBADF, -EBADF },
                .master = -EBADF,
                .done = { -EBADF, -EBADF },
                .client = b,
                .session = session,
                .spec = spec,
        };
        _cleanup_free_ char *rid = NULL;
        int r, loop = -1, slave = -EBADF;

        escape_init(&s.esc, isatty(s.in) ? '~' : 0);
        r = setup_shell_signals(&s);
        if (r < 0)
                return r;

        if (sandboxd_client_is_bus(b)) {
                if (!spec) {
                        restore_shell_signals(&s);
                        return log_error_errno(-EOPNOTSUPP, "attach -t goes over HTTP (--transport=http): over D-Bus, "
                                                            "a terminal is the caller's own, for the command it starts.");
                }
                r = open_local_pty(&s, &slave);
                if (r < 0)
                        goto finish;
                local_size(&s, &spec->tty_rows, &spec->tty_cols);
                spec->terminal_fd = slave;
                if (pipe2(s.done, O_CLOEXEC) < 0) {
                        r = log_error_errno(-errno, "Failed to create a pipe: %m");
                        goto finish;
                }
                s.hold_input = true;
                r = -pthread_create(&s.runner, NULL, runner, &s);
                if (r < 0) {
                        log_error_errno(r, "Failed to start a thread: %m");
                        goto finish;
                }
                s.runner_started = true;
        } else {
                s.detach_allowed = true;
                if (spec) {
                        local_size(&s, &spec->tty_rows, &spec->tty_cols);
                        r = exec_spec_start(b, session, spec, &rid);
                        if (r < 0) {
                                r = log_client_error(b, r, "Failed to start the command");
                                goto finish;
                        }
                        request_id = rid;
                }
                r = sandboxd_terminal_open(b, session, request_id, arg_offset, false, &s.ws);
                if (r < 0) {
                        r = log_client_error(b, r, "Failed to open the terminal of command %s", request_id);
                        goto finish;
                }
                if (!spec)
                        (void) send_resize(&s); /* ours, whatever size it had */
        }

        r = local_make_raw(&s);
        if (r >= 0)
                loop = shell_loop(&s);
        local_restore(&s);
        if (!s.ws && s.runner_started) {
                /* closing the master hangs the terminal up: a command we leave gets SIGHUP */
                s.master = safe_close(s.master);
                (void) pthread_join(s.runner, NULL);
                s.runner_started = false;
        }
        r = shell_finish(&s, b, session, spec ? spec->request_id : request_id, loop);

finish:
        local_restore(&s);
        if (s.runner_started) {
                s.master = safe_close(s.master);
                (void) pthread_join(s.runner, NULL);
        }
        restore_shell_signals(&s);
        sandboxd_terminal_free(s.ws);
        safe_close(slave);
        safe_close(s.master);
        safe_close(s.done[0]);
        safe_close(s.done[1]);
        buf_done(&s.to_master);
        sandboxd_result_free(s.result);
        return r;
}
