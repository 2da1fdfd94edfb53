/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A command's events into a pipe, for a client of the D-Bus API (output-pipe.h). */

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"
#include "output-pipe.h"

/* What one turn of the loop writes at most, so that a fast reader of a long spool does not
 * hold up the other clients. */
#define OUTPUT_PIPE_TURN (1024U * 1024)

OutputPipe *output_pipe_free(OutputPipe *p) {
        if (!p)
                return NULL;
        output_detach(&p->reader);
        sd_event_source_disable_unref(p->io);
        if (p->fd >= 0)
                close(p->fd);
        LIST_REMOVE(pipes, p->manager->output_pipes, p);
        p->manager->n_output_pipes--;
        free(p);
        return NULL;
}

void output_pipes_free_all(Manager *m) {
        while (m->output_pipes)
                output_pipe_free(m->output_pipes);
}

/* Writes what is held, reads more from the spool, until the pipe is full (wait for EPOLLOUT),
 * nothing new is there (wait for the reader's notify) or the end (close). */
static void pump(OutputPipe *p) {
        size_t turn = 0;
        ssize_t n;

        while (turn < OUTPUT_PIPE_TURN) {
                if (p->pos < p->len) {
                        n = write(p->fd, p->buf + p->pos, p->len - p->pos);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN) {
                                (void) sd_event_source_set_io_events(p->io, EPOLLOUT);
                                return;
                        }
                        if (n < 0) {
                                /* EPIPE: the client closed its end */
                                output_pipe_free(p);
                                return;
                        }
                        p->pos += (size_t) n;
                        turn += (size_t) n;
                        continue;
                }
                p->pos = p->len = 0;
                n = output_read(&p->reader, p->buf, sizeof(p->buf));
                if (n == 0) {
                        /* caught up: the reader's notify says when there is more; EPOLLERR
                         * still says when the client goes */
                        (void) sd_event_source_set_io_events(p->io, 0);
                        return;
                }
                if (n < 0) {
                        output_pipe_free(p); /* the end: the client reads EOF */
                        return;
                }
                p->len = (size_t) n;
        }
        (void) sd_event_source_set_io_events(p->io, EPOLLOUT); /* more next turn */
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        OutputPipe *p = userdata;

        if (revents & (EPOLLERR | EPOLLHUP)) {
                output_pipe_free(p);
                return 0;
        }
        pump(p);
        return 0;
}

/* More events, the end, or the output going away: the next turn of the loop writes. */
static void on_notify(OutputReader *r) {
        OutputPipe *p = r->userdata;

        (void) sd_event_source_set_io_events(p->io, EPOLLOUT);
}

int output_pipe_new(Manager *m, Output *o, uint64_t offset, int *ret_fd) {
        OutputPipe *p;
        int fds[2], r;

        if (m->n_output_pipes >= OUTPUT_PIPES_MAX)
                return -EAGAIN;
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        if (fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0) {
                r = -errno;
                goto fail;
        }
        p = calloc(1, sizeof(OutputPipe));
        if (!p) {
                r = -ENOMEM;
                goto fail;
        }
        p->manager = m;
        p->fd = fds[1];
        r = sd_event_add_io(m->event, &p->io, p->fd, EPOLLOUT, on_io, p);
        if (r < 0) {
                free(p);
                goto fail;
        }
        LIST_PREPEND(pipes, m->output_pipes, p);
        m->n_output_pipes++;
        p->reader.notify = on_notify;
        p->reader.userdata = p;
        output_attach(o, &p->reader, offset);
        *ret_fd = fds[0];
        return 0;
fail:
        close(fds[0]);
        close(fds[1]);
        return r;
}
