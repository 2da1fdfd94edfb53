/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"
#include "list.h"

/* The output of one command, as NDJSON events.
 *
 * Kept events (accepted, output up to the per-stream cap, truncation markers, exit) are
 * spooled under /run/sandboxd, which survives restarts of sandboxd: a reader replays the
 * event log from any byte offset. The log is not stored as NDJSON: the bytes of each
 * stream are kept raw, as they came (<name>.stdout, <name>.stderr, also read for
 * snapshots), the other events as their lines (<name>.events), and an index
 * (<name>.idx, one SpoolEntry per output event or run of other events) says where each
 * event lies in the log and where its bytes are; an output event is written again as
 * JSON when it is replayed, exactly as it was first sent. Output of control bytes no
 * longer costs up to 7 bytes of spool per byte (\u00XX), and nothing is stored twice.
 *
 * Output beyond the cap is not kept: it is streamed to the readers attached at that
 * moment, in lines marked "live":true, which do not count in offsets. A reader that has
 * caught up with the spool follows a bounded in-memory buffer of every new event; when
 * the slowest one lags too far, reading the command's pipes pauses (backpressure), so
 * memory stays bounded. */

typedef enum OutputStream {
        OUTPUT_STDOUT,
        OUTPUT_STDERR,
        _OUTPUT_STREAM_MAX,
} OutputStream;

typedef struct Output Output;
typedef struct OutputReader OutputReader;

/* Bytes of spool files charged to a session, and through `parent` to the host's total:
 * output that does not fit the smallest room left is not kept (as past the cap). */
typedef struct SpoolAccount SpoolAccount;
struct SpoolAccount {
        uint64_t used;
        uint64_t max;
        bool full; /* output was cut at max since bytes were last given back */
        SpoolAccount *parent;
};

static inline bool spool_account_full(const SpoolAccount *a) {
        return a->full || a->used >= a->max;
}

/* Why a stream stopped being kept: the "reason" of its "truncated" event. */
typedef enum OutputLimit {
        OUTPUT_LIMIT_OUTPUT_MAX,    /* "output_max": OutputMax= */
        OUTPUT_LIMIT_SESSION_SPOOL, /* "session_spool": SpoolMaxPerSession= */
        OUTPUT_LIMIT_SPOOL,         /* "spool": SpoolMax= */
        _OUTPUT_LIMIT_MAX,
        _OUTPUT_LIMIT_INVALID = -EINVAL,
} OutputLimit;

/* One record of a spool's index, in the host's byte order (the spool lives in /run). */
typedef enum SpoolSource {
        SPOOL_EVENTS, /* lines of <name>.events, verbatim */
        SPOOL_STDOUT, /* one output event, written from these bytes of <name>.stdout */
        SPOOL_STDERR,
        _SPOOL_SOURCE_MAX,
} SpoolSource;

typedef struct SpoolEntry {
        uint64_t log_offset; /* where its bytes start in the event log */
        uint64_t src_offset; /* ... and in its source file */
        uint32_t log_len;    /* its bytes in the log */
        uint32_t src_len;    /* ... and in its source */
        uint8_t source;      /* SpoolSource */
        uint8_t reserved[7];
} SpoolEntry;

struct OutputReader {
        Output *output;
        uint64_t log_pos;  /* replaying the spool */
        uint64_t entry;    /* ... in this index entry, or near it */
        uint64_t live_pos; /* following, once caught up */
        bool live;
        void (*notify)(OutputReader *r); /* more to read, the end, or the output is going away */
        void *userdata;
        LIST_FIELDS(OutputReader, readers);
};

struct Output {
        char *dir, *name;  /* the spool files: <dir>/<name>.{idx,events,stdout,stderr} */
        int idx_fd, events_fd; /* the spool files, -EBADF while finished and unread */
        uint64_t log_size;     /* of the event log the index describes */
        uint64_t n_entries, events_size;
        SpoolEntry last;       /* the last index entry, while n_entries > 0 */
        Buf scratch;           /* an output event written again for a reader */
        int raw_fd[_OUTPUT_STREAM_MAX];
        uint64_t kept[_OUTPUT_STREAM_MAX];
        uint64_t total[_OUTPUT_STREAM_MAX];
        bool truncated[_OUTPUT_STREAM_MAX];
        Buf partial[_OUTPUT_STREAM_MAX]; /* a UTF-8 character cut by a read, held back */
        uint64_t cap;
        SpoolAccount *account; /* charged with what the spool files hold; NULL: none */
        uint64_t charged;
        bool finished; /* the exit event is in: nothing more comes */

        Buf live;           /* events since the oldest live reader's position, from live_head on */
        size_t live_head;   /* bytes at the front every live reader has passed (compacted lazily) */
        uint64_t live_base; /* position of live.data[live_head] */
        unsigned n_live;

        OutputReader *readers;
        bool paused; /* the producer stopped reading its pipes until readers catch up */
        void (*on_unpause)(void *userdata);
        void *userdata;
};

/* Opens (create: creates) the spool files <dir>/<name>.{idx,events,stdout,stderr}. A
 * spool of an older sandboxd (<name>.ndjson: the log itself) is taken over as it is. */
int output_open(const char *dir, const char *name, uint64_t cap, bool create, Output **ret);
/* Ends every reader's stream where it is (each is notified once). */
void output_detach_readers(Output *o);
Output *output_free(Output *o);
/* Charges the spool files' bytes, those there now and every later one, to `a` (and its
 * parents) instead of the account before; NULL: to none. */
void output_set_account(Output *o, SpoolAccount *a);
int output_remove(const char *dir, const char *name);

/* A kept event line (ends in \n). */
int output_append_event(Output *o, const char *line, size_t n);
/* Bytes read from a stream; final: flush a held-back partial character. */
int output_add_data(Output *o, OutputStream st, const char *data, size_t n, bool final);
/* Marks the end: the exit event must be appended right before. */
void output_finish(Output *o);

/* True while readers lag so far that the producer should stop reading pipes; it then
 * calls output_pause() and gets on_unpause() once they have caught up enough. */
bool output_should_pause(Output *o);
void output_pause(Output *o);

/* Whether offset is where a line of the event log starts (0 and the end are): 1 or 0;
 * -ERANGE past the end. */
int output_is_line_start(Output *o, uint64_t offset);
void output_attach(Output *o, OutputReader *r, uint64_t offset);
void output_detach(OutputReader *r);
/* > 0 bytes copied; 0 nothing now (wait for notify); -EPIPE the end. */
ssize_t output_read(OutputReader *r, char *buf, size_t max);

/* The kept bytes of a stream, for snapshots. */
int output_read_raw(Output *o, OutputStream st, Buf *ret);

#define OUTPUT_LIVE_PAUSE (1024U * 1024)
#define OUTPUT_LIVE_RESUME (256U * 1024)
