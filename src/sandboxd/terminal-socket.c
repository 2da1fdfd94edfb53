/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A command's terminal on a socketpair, for a client of the D-Bus API (terminal-socket.h). */

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "terminal-socket.h"

/* What one turn of the loop moves at most each way, so that one client does not hold up the
 * others. */
#define TERMINAL_SOCKET_TURN (1024U * 1024)

TerminalSocket *terminal_socket_free(TerminalSocket *t) {
        if (!t)
                return NULL;
        t->terminal = terminal_free(t->terminal);
        sd_event_source_disable_unref(t->io);
        if (t->fd >= 0)
                close(t->fd);
        LIST_REMOVE(sockets, t->manager->terminal_sockets, t);
        free(t);
        return NULL;
}

void terminal_sockets_free_all(Manager *m) {
        while (m->terminal_sockets)
                terminal_socket_free(m->terminal_sockets);
}

/* The client's input, as far as the terminal takes it now: 0, or < 0 to close. */
static int pump_input(TerminalSocket *t) {
        char in[TERMINAL_SOCKET_BUF];
        size_t turn = 0;
        ssize_t n;
        int r;

        while (!t->input_eof && turn < TERMINAL_SOCKET_TURN && !terminal_input_blocked(t->terminal)) {
                n = recv(t->fd, in, sizeof(in), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n < 0)
                        return -errno;
                if (n == 0) {
                        /* the client shut down its writing: output goes on */
                        t->input_eof = true;
                        return 0;
                }
                if (t->terminal->readonly)
                        return -EROFS;
                r = terminal_write(t->terminal, in, (size_t) n);
                if (r < 0)
                        log_debug_errno(r, "Terminal socket: input dropped: %m");
                turn += (size_t) n;
        }
        return 0;
}

/* Output to the client until its socket is full, nothing new is there, or the end. 1: more
 * to write (wait for EPOLLOUT), 0: nothing now, < 0: the end. */
static int pump_output(TerminalSocket *t) {
        size_t turn = 0;
        ssize_t n;

        while (turn < TERMINAL_SOCKET_TURN) {
                if (t->pos < t->len) {
                        n = send(t->fd, t->buf + t->pos, t->len - t->pos, MSG_NOSIGNAL);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN)
                                return 1;
                        if (n < 0)
                                return -errno;
                        t->pos += (size_t) n;
                        turn += (size_t) n;
                        continue;
                }
                t->pos = t->len = 0;
                n = terminal_read(t->terminal, t->buf, sizeof(t->buf));
                if (n == 0)
                        return 0;
                if (n < 0)
                        return (int) n;
                t->len = (size_t) n;
        }
        return 1;
}

static void pump(TerminalSocket *t) {
        uint32_t events = 0;
        int r;

        r = pump_input(t);
        if (r >= 0)
                r = pump_output(t);
        if (r < 0) {
                terminal_socket_free(t); /* the client reads EOF */
                return;
        }
        if (r > 0)
                events |= EPOLLOUT;
        if (!t->input_eof && !terminal_input_blocked(t->terminal))
                events |= EPOLLIN;
        (void) sd_event_source_set_io_events(t->io, events);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        TerminalSocket *t = userdata;

        if (revents & EPOLLERR) {
                terminal_socket_free(t);
                return 0;
        }
        pump(t);
        return 0;
}

/* More output, the end, input may go on: the next turn of the loop moves it. */
static void on_terminal(Terminal *term, void *userdata) {
        TerminalSocket *t = userdata;

        (void) sd_event_source_set_io_events(t->io, EPOLLIN | EPOLLOUT);
}

int terminal_socket_new(Manager *m, Command *c, uint64_t offset, bool readonly, int *ret_fd) {
        TerminalSocket *t;
        int fds[2], r;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
                return -errno;
        if (fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0) {
                r = -errno;
                goto fail;
        }
        t = calloc(1, sizeof(TerminalSocket));
        if (!t) {
                r = -ENOMEM;
                goto fail;
        }
        t->manager = m;
        t->fd = -EBADF;
        r = terminal_new(c, offset, readonly, on_terminal, t, &t->terminal);
        if (r < 0) {
                free(t);
                goto fail;
        }
        r = sd_event_add_io(m->event, &t->io, fds[1], EPOLLIN | EPOLLOUT, on_io, t);
        if (r < 0) {
                terminal_free(t->terminal);
                free(t);
                goto fail;
        }
        (void) sd_event_source_set_description(t->io, "terminal-socket");
        t->fd = fds[1];
        LIST_PREPEND(sockets, m->terminal_sockets, t);
        *ret_fd = fds[0];
        return 0;
fail:
        close(fds[0]);
        close(fds[1]);
        return r;
}
