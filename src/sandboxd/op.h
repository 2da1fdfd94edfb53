/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"

/* An asynchronous operation of the core, as a handle its caller owns (after sd-bus's slots
 * and machined's Operation): a session's start waited for, its close, a freeze or thaw, a
 * command's start, bytes for a command's stdin.
 *
 * The contract:
 * - The core makes the Op (op_new()) and hands it to the caller (the `Op **ret` of
 *   session_wait_ready(), session_close(), session_freeze(), session_exec(),
 *   command_start(), command_write_stdin()). While the operation is pending the core
 *   keeps it on a list of the object it is about; the caller keeps the pointer.
 * - The core completes it (op_complete()) exactly once: it takes it off the list, clears
 *   its function and calls it with the result (r < 0 and a message saying why when it
 *   failed). The function may op_free() the Op; the session or command it names is valid
 *   for the call.
 * - When the object goes away or sandboxd stops, pending Ops complete with -ECANCELED
 *   (op_complete_all()): the message is OP_STOPPING or OP_GONE.
 * - The caller frees it with op_free(), whenever it likes: a pending Op leaves its list
 *   and its function is never called; the operation itself goes on (a unit being
 *   started is started, bytes queued for stdin are written). op_free(NULL) is a no-op.
 * - The functions that start an operation return < 0 when it did not start (nothing is
 *   made, the function is never called), 1 with *ret the pending Op, or 0 with *ret NULL
 *   when it needed no waiting (already done: the caller reads the result from the object
 *   at once, and the function is never called). Each says which of these it can return. */

typedef struct Op Op;
typedef struct Session Session;
typedef struct Command Command;

typedef void (*OpFn)(Op *op, int r, const char *message, void *userdata);

#define OP_STOPPING "sandboxd is stopping"
#define OP_GONE "the session is gone"

typedef enum OpKind {
        OP_SESSION_READY,  /* the session left SESSION_STARTING */
        OP_SESSION_CLOSE,  /* the session is closed */
        OP_SESSION_FREEZE, /* a freeze or thaw is over */
        OP_COMMAND_START,  /* PID 1 answered a command's start */
        OP_COMMAND_STDIN,  /* bytes given to a command's stdin are in the pipe */
        OP_PORT_START,     /* an exposed port's socket listens */
        _OP_KIND_MAX,
} OpKind;

struct Op {
        OpKind kind;
        OpFn fn;          /* NULL once completed */
        void *userdata;
        Op **list;        /* the list it waits on, NULL once off it */
        Session *session; /* what it is about */
        Command *command; /* OP_COMMAND_*: the command (NULL in a failed start's function: it is gone) */
        bool purge;       /* OP_SESSION_CLOSE: the purge was asked for; the result says how it went */
        size_t until;     /* OP_COMMAND_STDIN: done once this many more bytes were written */
        uint16_t port;    /* OP_PORT_START: its number */
        LIST_FIELDS(Op, ops);
};

/* A new Op, not on any list yet. NULL when out of memory. */
Op *op_new(OpKind kind, Session *s, Command *c, OpFn fn, void *userdata);
/* Queues op on *list (it must be on none). */
void op_queue(Op **list, Op *op);
/* Takes op off its list, if it is on one; the function stays, so the core completes it later. */
void op_unqueue(Op *op);
/* Off its list, then its function once (none if it was completed already). */
void op_complete(Op *op, int r, const char *message);
/* op_complete() of every Op of *list, in the order they were queued. */
void op_complete_all(Op **list, int r, const char *message);
/* The caller is done with it: off its list, never called, freed. Returns NULL. */
Op *op_free(Op *op);
static inline void op_freep(Op **op) {
        *op = op_free(*op);
}
/* Whether it is still waiting for its result. */
static inline bool op_pending(const Op *op) {
        return op && op->fn;
}
