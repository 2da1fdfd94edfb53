/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "io-util.h"
#include "log.h"
#include "ndjson.h"
#include "output.h"

static const char *const stream_names[_OUTPUT_STREAM_MAX] = { "stdout", "stderr" };
/* indexed by SpoolSource, the index last */
static const char *const suffixes[] = { ".events", ".stdout", ".stderr", ".idx" };
#define SUFFIX_IDX 3
#define SUFFIX_LEGACY ".ndjson" /* the whole log, as sandboxd before 0.2 kept it */
/* an entry of other events grows up to this many bytes */
#define SPOOL_ENTRY_MAX (64U * 1024 * 1024)
static const char *const limit_names[_OUTPUT_LIMIT_MAX] = {
        [OUTPUT_LIMIT_OUTPUT_MAX] = "output_max",
        [OUTPUT_LIMIT_SESSION_SPOOL] = "session_spool",
        [OUTPUT_LIMIT_SPOOL] = "spool",
};

/* Room kept for the index entry of an output event and for the events that end the
 * command; a byte of output costs one byte of spool. */
#define SPOOL_EVENT_FRAME 1024

static void charge(Output *o, int64_t n) {
        for (SpoolAccount *a = o->account; a; a = a->parent) {
                a->used = n < 0 && a->used < (uint64_t) -n ? 0 : a->used + (uint64_t) n;
                if (n < 0)
                        a->full = false;
        }
        o->charged += (uint64_t) n;
}

static uint64_t spool_bytes(const Output *o) {
        return o->n_entries * sizeof(SpoolEntry) + o->events_size + o->kept[OUTPUT_STDOUT] + o->kept[OUTPUT_STDERR];
}

void output_set_account(Output *o, SpoolAccount *a) {
        charge(o, -(int64_t) o->charged);
        o->account = a;
        charge(o, (int64_t) spool_bytes(o));
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

static int spool_path(const Output *o, const char *suffix, char *buf, size_t size) {
        if (snprintf(buf, size, "%s/%s%s", o->dir, o->name, suffix) >= (int) size)
                return -ENAMETOOLONG;
        return 0;
}

/* The index is written at offsets (an entry of other events grows in place), the rest
 * appended. */
static int open_spool(const Output *o, size_t i, bool create, uint64_t *ret_size) {
        char path[PATH_MAX];
        struct stat st;
        int fd, r;

        r = spool_path(o, suffixes[i], path, sizeof(path));
        if (r < 0)
                return r;
        fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (i == SUFFIX_IDX ? 0 : O_APPEND) |
                                (create ? O_CREAT | O_TRUNC : 0), 0600);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                safe_close(fd);
                return -errno;
        }
        if (ret_size)
                *ret_size = (uint64_t) st.st_size;
        return fd;
}

static int *spool_fd(Output *o, size_t i) {
        return i == SUFFIX_IDX ? &o->idx_fd : i == SPOOL_EVENTS ? &o->events_fd : &o->raw_fd[i - SPOOL_STDOUT];
}

static void close_spools(Output *o) {
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                *spool_fd(o, i) = safe_close(*spool_fd(o, i));
        buf_done(&o->scratch);
}

/* The spool files of a finished output are closed while nobody reads them (a session keeps
 * its finished commands, each would hold four fds) and opened again when needed. */
static int reopen_spools(Output *o) {
        int r;

        if (o->idx_fd >= 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                r = open_spool(o, i, false, NULL);
                if (r < 0) {
                        close_spools(o);
                        return r;
                }
                *spool_fd(o, i) = r;
        }
        return 0;
}

static void release_spools(Output *o) {
        if (o->finished && !o->readers)
                close_spools(o);
}

static int read_entry(Output *o, uint64_t i, SpoolEntry *ret) {
        ssize_t n;

        if (i >= o->n_entries)
                return -ERANGE;
        if (i == o->n_entries - 1) {
                *ret = o->last;
                return 0;
        }
        n = pread(o->idx_fd, ret, sizeof(*ret), (off_t) (i * sizeof(*ret)));
        if (n < 0)
                return -errno;
        return n == sizeof(*ret) ? 0 : -EIO;
}

static int write_entry(Output *o, uint64_t i, const SpoolEntry *e) {
        ssize_t n = pwrite(o->idx_fd, e, sizeof(*e), (off_t) (i * sizeof(*e)));

        if (n < 0)
                return -errno;
        return n == sizeof(*e) ? 0 : -EIO;
}

/* Whether an entry can be what this module wrote after the one before (prev_end: where that
 * one ended in the log), with sizes as the source files have them now. */
static bool entry_valid(const SpoolEntry *e, uint64_t prev_end, const uint64_t sizes[static _SPOOL_SOURCE_MAX]) {
        return e->source < _SPOOL_SOURCE_MAX && e->log_offset == prev_end && e->log_len > 0 &&
               e->src_len <= sizes[e->source] && e->src_offset <= sizes[e->source] - e->src_len &&
               (e->source != SPOOL_EVENTS || e->src_len == e->log_len);
}

/* A spool left by a sandboxd before this one: its log becomes the file of other events,
 * described by entries of at most SPOOL_ENTRY_MAX bytes; new events follow as usual. */
static int take_over_legacy(Output *o) {
        char old[PATH_MAX], new[PATH_MAX];
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        uint64_t i = 0;
        int r;

        if ((r = spool_path(o, SUFFIX_LEGACY, old, sizeof(old))) < 0 ||
            (r = spool_path(o, suffixes[SPOOL_EVENTS], new, sizeof(new))) < 0)
                return r;
        if (lstat(old, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        fd = open_spool(o, SUFFIX_IDX, true, NULL);
        if (fd < 0)
                return fd;
        for (uint64_t off = 0; off < (uint64_t) st.st_size; i++) {
                uint32_t n = (uint32_t) MIN((uint64_t) st.st_size - off, SPOOL_ENTRY_MAX);
                SpoolEntry e = { .log_offset = off, .src_offset = off, .log_len = n, .src_len = n, .source = SPOOL_EVENTS };

                if (pwrite(fd, &e, sizeof(e), (off_t) (i * sizeof(e))) != sizeof(e))
                        return errno > 0 ? -errno : -EIO;
                off += n;
        }
        if (rename(old, new) < 0)
                return -errno;
        log_info("Spool %s/%s: taken over from an older sandboxd.", o->dir, o->name);
        return 0;
}

/* Reads the index of an existing spool: where the log ends, and the last entry. Entries
 * that point past what their files hold (cut short) are dropped from the end. */
static int load_index(Output *o, uint64_t idx_size) {
        uint64_t sizes[_SPOOL_SOURCE_MAX] = { o->events_size, o->kept[OUTPUT_STDOUT], o->kept[OUTPUT_STDERR] };
        uint64_t n = idx_size / sizeof(SpoolEntry);

        while (n > 0) {
                SpoolEntry e, prev = {};
                ssize_t k = pread(o->idx_fd, &e, sizeof(e), (off_t) ((n - 1) * sizeof(e)));

                if (k != sizeof(e))
                        return k < 0 ? -errno : -EIO;
                if (n > 1 && pread(o->idx_fd, &prev, sizeof(prev), (off_t) ((n - 2) * sizeof(prev))) != sizeof(prev))
                        return -EIO;
                if (entry_valid(&e, n > 1 ? prev.log_offset + prev.log_len : 0, sizes)) {
                        o->last = e;
                        o->log_size = e.log_offset + e.log_len;
                        break;
                }
                log_warning("Spool %s/%s: index entry %" PRIu64 " is damaged, dropped with those after it.", o->dir,
                            o->name, n - 1);
                n--;
        }
        o->n_entries = n;
        if (idx_size != n * sizeof(SpoolEntry) && ftruncate(o->idx_fd, (off_t) (n * sizeof(SpoolEntry))) < 0)
                return -errno;
        return 0;
}

int output_open(const char *dir, const char *name, uint64_t cap, bool create, Output **ret) {
        uint64_t idx_size = 0;
        Output *o;
        int r;

        o = calloc(1, sizeof(Output));
        if (!o)
                return -ENOMEM;
        o->cap = cap;
        o->idx_fd = o->events_fd = o->raw_fd[0] = o->raw_fd[1] = -EBADF;
        o->dir = strdup(dir);
        o->name = strdup(name);
        if (!o->dir || !o->name) {
                r = -ENOMEM;
                goto fail;
        }

        if (!create) {
                r = open_spool(o, SUFFIX_IDX, false, &idx_size);
                if (r == -ENOENT)
                        r = take_over_legacy(o);
                else if (r >= 0) {
                        safe_close(r);
                        r = 0;
                }
                if (r < 0)
                        goto fail;
        }
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                uint64_t size;

                r = open_spool(o, i, create, &size);
                if (r < 0)
                        goto fail;
                *spool_fd(o, i) = r;
                if (i == SPOOL_EVENTS)
                        o->events_size = size;
                else if (i == SUFFIX_IDX)
                        idx_size = size;
                else
                        o->kept[i - SPOOL_STDOUT] = o->total[i - SPOOL_STDOUT] = size;
        }
        r = load_index(o, idx_size);
        if (r < 0)
                goto fail;

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

        for (size_t i = 0; i <= ELEMENTSOF(suffixes); i++) {
                char path[PATH_MAX];

                if (snprintf(path, sizeof(path), "%s/%s%s", dir, name,
                             i < ELEMENTSOF(suffixes) ? suffixes[i] : SUFFIX_LEGACY) >= (int) sizeof(path))
                        return -ENAMETOOLONG;
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

/* Describes the next log_len bytes of the log: src_len bytes of source at src_offset. */
static int index_append(Output *o, SpoolSource source, uint64_t src_offset, size_t src_len, size_t log_len) {
        SpoolEntry *l = &o->last;
        int r;

        if (log_len == 0)
                return 0;
        /* other events one after the other: one entry */
        if (source == SPOOL_EVENTS && o->n_entries > 0 && l->source == SPOOL_EVENTS &&
            l->src_offset + l->src_len == src_offset && l->log_len + log_len <= SPOOL_ENTRY_MAX) {
                SpoolEntry e = *l;

                e.src_len += (uint32_t) src_len;
                e.log_len += (uint32_t) log_len;
                r = write_entry(o, o->n_entries - 1, &e);
                if (r < 0)
                        return r;
                *l = e;
        } else {
                SpoolEntry e = {
                        .log_offset = o->log_size,
                        .src_offset = src_offset,
                        .log_len = (uint32_t) log_len,
                        .src_len = (uint32_t) src_len,
                        .source = (uint8_t) source,
                };

                r = write_entry(o, o->n_entries, &e);
                if (r < 0)
                        return r;
                *l = e;
                o->n_entries++;
                charge(o, (int64_t) sizeof(e));
        }
        o->log_size += log_len;
        return 0;
}

/* A line that is in the log now: to the readers that follow. */
static int publish(Output *o, const char *line, size_t n) {
        int r = live_append(o, line, n);

        notify_readers(o);
        return r;
}

int output_append_event(Output *o, const char *line, size_t n) {
        assert(o && line && n > 0 && line[n - 1] == '\n');
        uint64_t at = o->events_size;
        int r;

        if (n == 0 || n > SPOOL_ENTRY_MAX)
                return -EINVAL;
        r = reopen_spools(o);
        if (r < 0)
                return r;
        r = loop_write(o->events_fd, line, n);
        if (r < 0)
                return r;
        o->events_size += n;
        charge(o, (int64_t) n);
        r = index_append(o, SPOOL_EVENTS, at, n, n);
        if (r < 0)
                return r;
        return publish(o, line, n);
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
        uint64_t at = o->kept[st];
        Buf line = {};
        int r;

        r = ndjson_append_output(&line, stream_names[st], data, n, final, ret_consumed);
        if (r >= 0 && line.len > SPOOL_ENTRY_MAX)
                r = -E2BIG;
        if (r >= 0 && *ret_consumed > 0)
                r = loop_write(o->raw_fd[st], data, *ret_consumed);
        if (r >= 0) {
                o->kept[st] += *ret_consumed;
                charge(o, (int64_t) *ret_consumed);
                r = index_append(o, SPOOL_STDOUT + st, at, *ret_consumed, line.len);
        }
        if (r >= 0 && line.len > 0)
                r = publish(o, line.data, line.len);
        buf_done(&line);
        return r;
}

int output_add_data(Output *o, OutputStream st, const char *data, size_t n, bool final) {
        assert(o && st >= 0 && st < _OUTPUT_STREAM_MAX && (data || n == 0));
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

                /* What surely fits the spool's room: near its end a little less is kept
                 * than might have fit, never more. */
                spool = spool <= SPOOL_EVENT_FRAME ? 0 : spool - SPOOL_EVENT_FRAME;
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
        assert(o && r && r->notify);
        r->output = o;
        r->log_pos = MIN(offset, o->log_size);
        r->entry = 0;
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

/* The entry the log's byte at pos is in: where the reader was, the next one, or found. */
static int find_entry(Output *o, uint64_t pos, uint64_t *hint, SpoolEntry *ret) {
        uint64_t lo = 0, hi = o->n_entries;
        SpoolEntry e;
        int r;

        for (uint64_t i = *hint; i < MIN(*hint + 2, o->n_entries); i++) {
                r = read_entry(o, i, &e);
                if (r < 0)
                        return r;
                if (pos >= e.log_offset && pos - e.log_offset < e.log_len) {
                        *hint = i;
                        *ret = e;
                        return 0;
                }
        }
        while (lo < hi) {
                uint64_t mid = lo + (hi - lo) / 2;

                r = read_entry(o, mid, &e);
                if (r < 0)
                        return r;
                if (pos < e.log_offset)
                        hi = mid;
                else if (pos - e.log_offset >= e.log_len)
                        lo = mid + 1;
                else {
                        *hint = mid;
                        *ret = e;
                        return 0;
                }
        }
        return -EIO;
}

int output_is_line_start(Output *o, uint64_t offset) {
        uint64_t hint = 0;
        SpoolEntry e;
        int r;

        if (offset > o->log_size)
                return -ERANGE;
        if (offset == 0 || offset == o->log_size)
                return 1;
        r = reopen_spools(o);
        if (r < 0)
                return r;
        r = find_entry(o, offset, &hint, &e);
        if (r >= 0 && offset != e.log_offset) {
                char c;

                /* inside an output event, which is one line; or within a run of other events */
                if (e.source != SPOOL_EVENTS)
                        r = 0;
                else if (pread(o->events_fd, &c, 1, (off_t) (e.src_offset + (offset - e.log_offset) - 1)) != 1)
                        r = -EIO;
                else
                        r = c == '\n';
        } else if (r >= 0)
                r = 1;
        release_spools(o);
        return r;
}

/* An output event, written again from its raw bytes into o->scratch: it must come out as
 * long as it went out the first time (the encoding depends on nothing else). */
static int render_output(Output *o, const SpoolEntry *e) {
        OutputStream st = e->source - SPOOL_STDOUT;
        size_t consumed;
        ssize_t n;
        int r;

        o->scratch.len = 0;
        r = buf_reserve(&o->scratch, (size_t) e->src_len + e->log_len);
        if (r < 0)
                return r;
        /* the raw bytes at the end of the buffer, the event before them */
        n = pread(o->raw_fd[st], o->scratch.data + e->log_len, e->src_len, (off_t) e->src_offset);
        if (n < 0)
                return -errno;
        if ((size_t) n != e->src_len)
                return -EIO;
        {
                Buf line = {};

                r = ndjson_append_output(&line, stream_names[st], o->scratch.data + e->log_len, e->src_len, true,
                                         &consumed);
                if (r >= 0 && (consumed != e->src_len || line.len != e->log_len))
                        r = -EIO;
                if (r >= 0)
                        memcpy(o->scratch.data, line.data, line.len);
                buf_done(&line);
        }
        if (r >= 0)
                o->scratch.len = e->log_len;
        return r;
}

/* Copies the log from the reader's position: as many entries as fit. */
static ssize_t replay(OutputReader *r, char *buf, size_t max) {
        Output *o = r->output;
        size_t done = 0;
        int k;

        k = reopen_spools(o);
        if (k < 0)
                return k;
        while (done < max && r->log_pos < o->log_size) {
                uint64_t into;
                SpoolEntry e;
                size_t n;

                k = find_entry(o, r->log_pos, &r->entry, &e);
                if (k < 0)
                        break;
                into = r->log_pos - e.log_offset;
                n = (size_t) MIN(max - done, e.log_len - into);
                if (e.source == SPOOL_EVENTS) {
                        ssize_t got = pread(o->events_fd, buf + done, n, (off_t) (e.src_offset + into));

                        if (got <= 0) {
                                k = got < 0 ? -errno : -EIO;
                                break;
                        }
                        n = (size_t) got;
                } else {
                        k = render_output(o, &e);
                        if (k < 0)
                                break;
                        memcpy(buf + done, o->scratch.data + into, n);
                }
                done += n;
                r->log_pos += n;
        }
        if (o->scratch.cap > 256 * 1024)
                buf_done(&o->scratch); /* one event of 64 KiB of control bytes is 390 KiB */
        if (done > 0)
                return (ssize_t) done;
        if (k < 0)
                log_warning_errno(k, "Spool %s/%s: cannot replay the log at %" PRIu64 ": %m", o->dir, o->name,
                                  r->log_pos);
        return k < 0 ? k : -EIO;
}

ssize_t output_read(OutputReader *r, char *buf, size_t max) {
        Output *o;

        assert(r && buf && max > 0);
        o = r->output;

        if (!o)
                return -EPIPE;

        if (!r->live) {
                if (r->log_pos < o->log_size)
                        return replay(r, buf, max);
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
