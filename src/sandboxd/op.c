/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The handles of the core's asynchronous operations: see op.h for the contract. */

#include <stdlib.h>

#include "op.h"

Op *op_new(OpKind kind, Session *s, Command *c, OpFn fn, void *userdata) {
        Op *op = calloc(1, sizeof(Op));

        if (!op)
                return NULL;
        *op = (Op) { .kind = kind, .fn = fn, .userdata = userdata, .session = s, .command = c };
        return op;
}

void op_queue(Op **list, Op *op) {
        Op *last;

        /* appended, so that op_complete_all() goes in the order they came */
        op->list = list;
        op->ops_next = NULL;
        for (last = *list; last && last->ops_next; last = last->ops_next)
                ;
        op->ops_prev = last;
        if (last)
                last->ops_next = op;
        else
                *list = op;
}

void op_unqueue(Op *op) {
        if (!op || !op->list)
                return;
        LIST_REMOVE(ops, *op->list, op);
        op->list = NULL;
}

void op_complete(Op *op, int r, const char *message) {
        OpFn fn;

        if (!op)
                return;
        op_unqueue(op);
        fn = op->fn;
        op->fn = NULL;
        if (fn)
                fn(op, r, message, op->userdata); /* may free op */
}

void op_complete_all(Op **list, int r, const char *message) {
        while (*list)
                op_complete(*list, r, message);
}

Op *op_free(Op *op) {
        if (!op)
                return NULL;
        op_unqueue(op);
        free(op);
        return NULL;
}
