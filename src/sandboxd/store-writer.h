/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Records are written by one thread, so that fsync() never holds up the event loop (about
 * 0.6 ms a record on an idle ext4 disk, tens of ms under load, with two per write: the file
 * and its directory). The loop formats a record and queues it; the writer writes the queue in
 * order. A record has at most one write queued: queuing it again before the writer got to it
 * replaces the text, so the queue never holds more than one entry per record (plus
 * removals), and a record written often costs one write per turn of the writer.
 *
 * An owner (a session, a command) keeps a StoreJob * for its record, NULL when nothing of it
 * is queued; only these functions touch it. */

typedef struct StoreWriter StoreWriter;
typedef struct StoreJob StoreJob;

typedef struct StoreWriterStats {
        uint64_t writes;        /* records written (renamed into place) */
        uint64_t errors;        /* writes or removals that failed */
        uint64_t coalesced;     /* queued texts replaced before the writer got to them */
        uint64_t write_usec;    /* time spent writing, fsync()s included */
        uint64_t write_max_usec;
        unsigned queued;
} StoreWriterStats;

/* Starts the thread. */
int store_writer_new(StoreWriter **ret);
/* Writes what is queued, then stops the thread. */
StoreWriter *store_writer_free(StoreWriter *w);

/* Queues text (taken, freed by the writer) for the file path, whose directory is created if
 * missing. With w NULL (tests, tools) it is written now. */
int store_writer_put(StoreWriter *w, StoreJob **owner, const char *path, char *text);
/* Drops the queued write of *owner, if any, and queues the removal of path (a file, or a
 * directory and all below it when recursive): after every write queued before. */
int store_writer_remove(StoreWriter *w, StoreJob **owner, const char *path, bool recursive);
/* Drops the queued write of *owner, if any: the record goes with a removal queued next. */
void store_writer_drop(StoreWriter *w, StoreJob **owner);
/* The owner goes away (sandboxd stops): what it queued is written all the same. */
void store_writer_release(StoreWriter *w, StoreJob **owner);
/* Waits until everything queued so far is written. */
void store_writer_flush(StoreWriter *w);
void store_writer_stats(StoreWriter *w, StoreWriterStats *ret);
