/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "list.h"
#include "manager.h"
#include "terminal.h"

/* A command's terminal for a local client of the D-Bus API (Command.OpenTerminal()): one end
 * of a socketpair carries raw bytes both ways, what the client writes to the terminal's
 * input, its output to the client. The end of the output (the command ended, went away, or
 * sandboxd stops) closes sandboxd's end: the client reads EOF. A read-only client that writes
 * is closed the same way. Bounds: those of the Terminal (terminal.h); at most
 * TERMINAL_SOCKET_BUF of output held here and nothing read ahead beyond it; input read in
 * TERMINAL_SOCKET_BUF pieces, each appended whole, not at all while the command's input has
 * TERMINAL_INPUT_PENDING_MAX pending. */

#define TERMINAL_SOCKET_BUF (64U * 1024)

typedef struct TerminalSocket TerminalSocket;
struct TerminalSocket {
        Manager *manager;
        Terminal *terminal;
        int fd; /* our end, O_NONBLOCK */
        sd_event_source *io;
        size_t len, pos;
        bool input_eof;
        char buf[TERMINAL_SOCKET_BUF];
        LIST_FIELDS(TerminalSocket, sockets);
};

/* The client's end in *ret_fd (blocking, O_CLOEXEC). Errors of terminal_new(). */
int terminal_socket_new(Manager *m, Command *c, uint64_t offset, bool readonly, int *ret_fd);
TerminalSocket *terminal_socket_free(TerminalSocket *t);
void terminal_sockets_free_all(Manager *m);
