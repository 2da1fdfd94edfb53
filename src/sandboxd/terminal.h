/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "buf.h"
#include "command.h"
#include "op.h"
#include "output.h"

/* A client attached to a command as to a terminal: it follows the command's stdout bytes
 * (from the event log, through an OutputReader, at the client's pace: nothing is held for a
 * slow one) and appends its input to the command's stdin, as command_write_stdin() does for
 * POST .../stdin. Several may attach to one command; each one's writes go in whole, in the
 * order they come. The front end (http-ws.c) knows framing; this knows none. */

/* Attached terminals of one session: each holds a reader of the spool and up to
 * TERMINAL_LINE_MAX of buffers. */
#define TERMINALS_PER_SESSION_MAX 16U
/* ... and of the whole host. */
#define TERMINALS_MAX 256U
/* A terminal's input waits (its client is not read) while the command's stdin has this many
 * bytes not yet in the pipe: backpressure, not memory. */
#define TERMINAL_INPUT_PENDING_MAX (256U * 1024)
/* The longest event line of the log read here: an output event of 64 KiB of control bytes
 * (\u00XX each) is under 400 KiB. */
#define TERMINAL_LINE_MAX (512U * 1024)

typedef struct Terminal Terminal;

/* More output, the end, input may go on, or the command is gone: call terminal_read() and
 * terminal_input_blocked() again. Never called from within a terminal_*() call. */
typedef void (*TerminalNotify)(Terminal *t, void *userdata);

struct Terminal {
        Command *command;   /* NULL once it is gone (collected, its session freed, sandboxd stopping) */
        Session *session;   /* counted in, while command is set */
        OutputReader reader;
        bool readonly;
        uint64_t skip;      /* stdout bytes before this offset are not handed out */
        uint64_t stdout_pos; /* kept stdout bytes seen in the log */
        Buf in;             /* the event log, read but not yet a whole line */
        size_t in_pos;
        Buf out;            /* stdout bytes decoded, not yet handed out */
        size_t out_pos;
        char *exit_event;   /* the exit event's JSON (no newline), once read */
        Op *input_op;       /* the last write to stdin, until its bytes (and all before) are in */
        bool input_waiting; /* terminal_input_blocked() said so: notify once it is no more */
        TerminalNotify notify;
        void *userdata;
};

/* offset: of the command's stdout. -EAGAIN past TERMINALS_PER_SESSION_MAX or TERMINALS_MAX,
 * -ERANGE offset past the stdout kept so far. */
int terminal_new(Command *c, uint64_t offset, bool readonly, TerminalNotify notify, void *userdata, Terminal **ret);
Terminal *terminal_free(Terminal *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(Terminal *, terminal_free);

/* > 0 stdout bytes copied; 0 nothing now (wait for notify); -EPIPE the end: the exit event in
 * t->exit_event, or NULL when the command went away before it; other < 0: the log cannot be
 * read. */
ssize_t terminal_read(Terminal *t, char *buf, size_t max);

/* Appends p[0..n) to the command's stdin, all of it, after what was written before.
 * -EROFS read-only, -ENOTTY its stdin is not streamed, -EPIPE it is closed (or the command
 * ended, or is gone). */
int terminal_write(Terminal *t, const void *p, size_t n);
/* Sets the window size of the command's terminal (command_resize()). -EROFS read-only,
 * -ENOTTY not on sandboxd's terminal, -ESRCH not running (or gone). */
int terminal_resize(Terminal *t, unsigned rows, unsigned cols);
/* Whether input should wait: the command's stdin has TERMINAL_INPUT_PENDING_MAX bytes not yet
 * in the pipe. If so, notify comes once it has less. */
bool terminal_input_blocked(Terminal *t);
