/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

#include "list.h"
#include "manager.h"
#include "output.h"

/* A command's event log, from a byte offset, into a pipe whose read end a local client
 * holds: the same NDJSON the HTTP events route streams, through an OutputReader, following
 * new events until the command ends, then the pipe is closed. Back-pressure as over HTTP:
 * at most OUTPUT_PIPE_BUF bytes are held here, and nothing more is read from the spool
 * until the pipe takes them (EPOLLOUT); a client that closes its end ends it. At most
 * OUTPUT_PIPES_MAX at once. */

#define OUTPUT_PIPE_BUF (64U * 1024)
#define OUTPUT_PIPES_MAX 256U

typedef struct OutputPipe OutputPipe;
struct OutputPipe {
        Manager *manager;
        OutputReader reader;
        int fd; /* the write end, O_NONBLOCK */
        sd_event_source *io;
        size_t len, pos;
        char buf[OUTPUT_PIPE_BUF];
        LIST_FIELDS(OutputPipe, pipes);
};

/* The read end in *ret_fd (blocking, O_CLOEXEC), or -EAGAIN past OUTPUT_PIPES_MAX. */
int output_pipe_new(Manager *m, Output *o, uint64_t offset, int *ret_fd);
OutputPipe *output_pipe_free(OutputPipe *p);
void output_pipes_free_all(Manager *m);
