/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <sys/stat.h>

#include "io-util.h"
#include "ndjson.h"
#include "output.h"

static const char *const stream_names[_OUTPUT_STREAM_MAX] = { "stdout", "stderr" };
static const char *const suffixes[] = { ".ndjson", ".stdout", ".stderr" };
static const char *const limit_names[_OUTPUT_LIMIT_MAX] = {
        [OUTPUT_LIMIT_OUTPUT_MAX] = "output_max",
        [OUTPUT_LIMIT_SESSION_SPOOL] = "session_spool",
        [OUTPUT_LIMIT_SPOOL] = "spool",
};

/* What one byte of output may cost in the spool at worst: \u00XX in the event, itself raw. */
#define SPOOL_BYTES_PER_BYTE 7
/* ...and room for the frame of that event and for the events that end the command. */
#define SPOOL_EVENT_FRAME 1024

static void charge(Output *o, int64_t n) {
        for (SpoolAccount *a = o->account; a; a = a->parent) {
                a->used = n < 0 && a->used < (uint64_t) -n ? 0 : a->used + (uint64_t) n;
                if (n < 0)
                        a->full = false;
        }
        o->charged += (uint64_t) n;
}

void output_set_account(Output *o, SpoolAccount *a) {
        charge(o, -(int64_t) o->charged);
        o->account = a;
        charge(o, (int64_t) (o->log_size + o->kept[OUTPUT_STDOUT] + o->kept[OUTPUT_STDERR]));
}

/* The smallest room left in the accounts, and which one it is. */
static uint64_t spool_room(Output *o, SpoolAccount **ret_account) {
        uint64_t room = UINT64_MAX;

        for (SpoolAccount *a = o->account; a; a = a->parent) {
                uint64_t left = a->used >= a->max ? 0 : a->max - a->used;

                if (left <= room) {
                        room = left;
                        *ret_account = a;
                }
        }
        return room;
}

static int open_spool(const char *dir, const char *name, const char *suffix, bool create, uint64_t *ret_size) {
        char path[512];
        struct stat st;
        int fd;

        snprintf(path, sizeof(path), "%s/%s%s", dir, name, suffix);
        fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_TRUNC : 0), 0600);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                safe_close(fd);
                return -errno;
        }
        *ret_size = (uint64_t) st.st_size;
        return fd;
}

static void close_spools(Output *o) {
        o->log_fd = safe_close(o->log_fd);
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++)
                o->raw_fd[st] = safe_close(o->raw_fd[st]);
}

/* The spool files of a finished output are closed while nobody reads them (a session keeps
 * its finished commands, each would hold three fds) and opened again when needed. */
static int reopen_spools(Output *o) {
        uint64_t size;
        int r;

        if (o->log_fd >= 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                r = open_spool(o->dir, o->name, suffixes[i], false, &size);
                if (r < 0) {
                        close_spools(o);
                        return r;
                }
                if (i == 0)
                        o->log_fd = r;
                else
                        o->raw_fd[i - 1] = r;
        }
        return 0;
}

static void release_spools(Output *o) {
        if (o->finished && !o->readers)
                close_spools(o);
}

int output_open(const char *dir, const char *name, uint64_t cap, bool create, Output **ret) {
        Output *o;
        int r;

        o = calloc(1, sizeof(Output));
        if (!o)
                return -ENOMEM;
        o->cap = cap;
        o->log_fd = o->raw_fd[0] = o->raw_fd[1] = -EBADF;
        o->dir = strdup(dir);
        o->name = strdup(name);
        if (!o->dir || !o->name) {
                r = -ENOMEM;
                goto fail;
        }

        r = open_spool(dir, name, suffixes[0], create, &o->log_size);
        if (r < 0)
                goto fail;
        o->log_fd = r;
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++) {
                r = open_spool(dir, name, suffixes[1 + st], create, &o->kept[st]);
                if (r < 0)
                        goto fail;
                o->raw_fd[st] = r;
                o->total[st] = o->kept[st];
        }

        *ret = o;
        return 0;
fail:
        output_free(o);
        return r;
}

void output_detach_readers(Output *o) {
        OutputReader *r;

        if (!o)
                return;
        while ((r = o->readers)) {
                output_detach(r);
                r->notify(r); /* tells the reader its output is gone */
        }
}

Output *output_free(Output *o) {
        if (!o)
                return NULL;
        output_detach_readers(o);
        output_set_account(o, NULL);
        close_spools(o);
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++)
                buf_done(&o->partial[st]);
        buf_done(&o->live);
        free(o->dir);
        free(o->name);
        free(o);
        return NULL;
}

int output_remove(const char *dir, const char *name) {
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                char path[512];

                snprintf(path, sizeof(path), "%s/%s%s", dir, name, suffixes[i]);
                if (unlink(path) < 0 && errno != ENOENT)
                        r = -errno;
        }
        return r;
}

static void notify_readers(Output *o) {
        OutputReader *r, *n;

        LIST_FOREACH_SAFE(readers, r, n, o->readers)
                r->notify(r);
}

/* Drops what every live reader has read. */
static void resume_producer(Output *o) {
        if (!o->paused)
                return;
        o->paused = false;
        if (o->on_unpause)
                o->on_unpause(o->userdata);
}

void output_pause(Output *o) {
        o->paused = true;
}

static size_t live_pending(const Output *o) {
        return o->live.len - o->live_head;
}

static void live_reset(Output *o) {
        o->live.len = o->live_head = 0;
        o->live_base = 0;
}

static void live_trim(Output *o) {
        uint64_t min = o->live_base + live_pending(o);
        OutputReader *r;
        size_t drop;

        LIST_FOREACH(readers, r, o->readers)
                if (r->live && r->live_pos < min)
                        min = r->live_pos;
        drop = (size_t) (min - o->live_base);
        if (drop == 0)
                return;
        o->live_head += drop;
        o->live_base += drop;
        if (o->live_head == o->live.len) {
                o->live.len = o->live_head = 0;
        } else if (o->live_head >= 1024 * 1024 && o->live_head >= live_pending(o)) {
                /* Compact now and then, not at every read: moving the tail costs as much as it holds. */
                memmove(o->live.data, o->live.data + o->live_head, live_pending(o));
                o->live.len -= o->live_head;
                o->live_head = 0;
        }

        if (live_pending(o) <= OUTPUT_LIVE_RESUME)
                resume_producer(o);
}

bool output_should_pause(Output *o) {
        return o->n_live > 0 && live_pending(o) >= OUTPUT_LIVE_PAUSE;
}

static int live_append(Output *o, const char *line, size_t n) {
        if (o->n_live == 0)
                return 0;
        return buf_append(&o->live, line, n);
}

int output_append_event(Output *o, const char *line, size_t n) {
        int r;

        r = reopen_spools(o);
        if (r < 0)
                return r;
        r = loop_write(o->log_fd, line, n);
        if (r < 0)
                return r;
        o->log_size += n;
        charge(o, (int64_t) n);
        r = live_append(o, line, n);
        notify_readers(o);
        return r;
}

static int mark_truncated(Output *o, OutputStream st, OutputLimit limit) {
        char line[160];
        int n;

        o->truncated[st] = true;
        n = snprintf(line, sizeof(line),
                     "{\"type\":\"truncated\",\"stream\":\"%s\",\"kept_bytes\":%llu,\"reason\":\"%s\"}\n",
                     stream_names[st], (unsigned long long) o->kept[st], limit_names[limit]);
        return output_append_event(o, line, (size_t) n);
}

/* Output past the cap: only to the readers attached now, in lines that say so. */
static int emit_live_only(Output *o, OutputStream st, const char *data, size_t n, bool final, size_t *ret_consumed) {
        Buf line = {};
        int r;

        if (o->n_live == 0) {
                *ret_consumed = n; /* nobody to show it to: dropped, and counted */
                return 0;
        }
        r = ndjson_append_output(&line, stream_names[st], data, n, final, ret_consumed);
        if (r >= 0 && line.len > 0) {
                /* "...}\n" becomes "...,"live":true}\n" */
                line.len -= 2;
                r = buf_puts(&line, ",\"live\":true}\n");
                if (r >= 0)
                        r = live_append(o, line.data, line.len);
        }
        buf_done(&line);
        if (r >= 0)
                notify_readers(o);
        return r;
}

static int emit_kept(Output *o, OutputStream st, const char *data, size_t n, bool final, size_t *ret_consumed) {
        Buf line = {};
        int r;

        r = ndjson_append_output(&line, stream_names[st], data, n, final, ret_consumed);
        if (r >= 0 && *ret_consumed > 0)
                r = loop_write(o->raw_fd[st], data, *ret_consumed);
        if (r >= 0 && line.len > 0)
                r = output_append_event(o, line.data, line.len);
        if (r >= 0) {
                o->kept[st] += *ret_consumed;
                charge(o, (int64_t) *ret_consumed);
        }
        buf_done(&line);
        return r;
}

int output_add_data(Output *o, OutputStream st, const char *data, size_t n, bool final) {
        Buf *p = &o->partial[st];
        size_t consumed = 0;
        int r;

        r = reopen_spools(o);
        if (r < 0)
                return r;
        o->total[st] += n;
        if (p->len > 0 || !final) {
                r = buf_append(p, data, n);
                if (r < 0)
                        return r;
                data = p->data;
                n = p->len;
        }
        if (n == 0)
                return 0;

        if (!o->truncated[st]) {
                OutputLimit limit = OUTPUT_LIMIT_OUTPUT_MAX;
                SpoolAccount *a = NULL;
                uint64_t spool = spool_room(o, &a), room = o->cap - MIN(o->kept[st], o->cap);

                /* What surely fits the spool's room, escaped at worst: near its end a little
                 * less is kept than might have fit, never more. */
                spool = spool <= SPOOL_EVENT_FRAME ? 0 : (spool - SPOOL_EVENT_FRAME) / SPOOL_BYTES_PER_BYTE;
                if (a && spool < n && spool < room) {
                        room = spool;
                        limit = a->parent ? OUTPUT_LIMIT_SESSION_SPOOL : OUTPUT_LIMIT_SPOOL;
                        a->full = true; /* no new command until bytes are given back */
                }

                if (n > room) {
                        /* Keep what fits, then say so in the kept log. */
                        if (room > 0) {
                                r = emit_kept(o, st, data, (size_t) room, true, &consumed);
                                if (r < 0)
                                        return r;
                        }
                        r = mark_truncated(o, st, limit);
                        if (r < 0)
                                return r;
                        data += consumed;
                        n -= consumed;
                        final = true;
                        consumed = 0;
                        if (p->len > 0) {
                                memmove(p->data, p->data + (p->len - n), n);
                                p->len = n;
                                data = p->data;
                        }
                }
        }

        if (o->truncated[st])
                r = emit_live_only(o, st, data, n, final, &consumed);
        else
                r = emit_kept(o, st, data, n, final, &consumed);
        if (r < 0)
                return r;

        if (p->len > 0) {
                memmove(p->data, p->data + consumed, p->len - consumed);
                p->len -= consumed;
        }
        return 0;
}

void output_finish(Output *o) {
        o->finished = true;
        notify_readers(o);
        release_spools(o);
}

void output_attach(Output *o, OutputReader *r, uint64_t offset) {
        r->output = o;
        r->log_pos = MIN(offset, o->log_size);
        r->live = false;
        LIST_PREPEND(readers, o->readers, r);
}

void output_detach(OutputReader *r) {
        Output *o = r->output;

        if (!o)
                return;
        LIST_REMOVE(readers, o->readers, r);
        if (r->live && o->n_live > 0)
                o->n_live--;
        r->output = NULL;
        if (o->n_live == 0) {
                live_reset(o);
                resume_producer(o);
        } else
                live_trim(o);
        release_spools(o);
}

ssize_t output_read(OutputReader *r, char *buf, size_t max) {
        Output *o = r->output;

        if (!o)
                return -EPIPE;

        if (!r->live) {
                if (r->log_pos < o->log_size) {
                        ssize_t n;
                        int k = reopen_spools(o);

                        if (k < 0)
                                return k;
                        n = pread(o->log_fd, buf, MIN(max, o->log_size - r->log_pos), (off_t) r->log_pos);
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return -EIO;
                        r->log_pos += (uint64_t) n;
                        return n;
                }
                if (o->finished)
                        return -EPIPE;
                /* Caught up: from now on follow every new event in memory. */
                r->live = true;
                r->live_pos = o->live_base + live_pending(o);
                o->n_live++;
        }

        if (r->live_pos < o->live_base + live_pending(o)) {
                size_t at = o->live_head + (size_t) (r->live_pos - o->live_base), n = MIN(max, o->live.len - at);

                memcpy(buf, o->live.data + at, n);
                r->live_pos += n;
                live_trim(o);
                return (ssize_t) n;
        }
        return o->finished ? -EPIPE : 0;
}

int output_read_raw(Output *o, OutputStream st, Buf *ret) {
        size_t n = (size_t) o->kept[st];
        ssize_t k;
        int r;

        r = buf_reserve(ret, n);
        if (r < 0)
                return r;
        r = reopen_spools(o);
        if (r < 0)
                return r;
        k = pread(o->raw_fd[st], ret->data + ret->len, n, 0);
        r = k < 0 ? -errno : 0;
        release_spools(o);
        if (r < 0)
                return r;
        ret->len += (size_t) k;
        ret->data[ret->len] = 0;
        return 0;
}
