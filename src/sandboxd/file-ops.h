/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>

#include "validate.h"
#include "buf.h"
#include "files.h"
#include "list.h"

/* The file API's work that can take long (listings of 100 000 entries, recursive removals,
 * walks for the disk usage) runs on worker threads, never on the loop; so does everything
 * else the file API does beneath a workspace but uploads, so that a slow file system holds
 * up no other client either. Each thread takes the workspace owner's file-system
 * credentials for one operation (setfsuid() is per thread), as files.c does on the loop.
 *
 * Capped like portabled's operations: at most FILE_OPS_MAX queued or running in all and
 * FILE_OPS_SESSION_MAX per session (more is refused, not queued), at most
 * FILE_OPS_SESSION_RUNNING_MAX of one session running at once, so one session's walks
 * leave workers to the others. The loop learns of finished operations through an eventfd
 * and calls each one's done function exactly once: with the result, or -ECANCELED when
 * sandboxd stops first; never after file_op_detach(). */

#define FILE_OPS_WORKERS 4U
#define FILE_OPS_MAX 128U
#define FILE_OPS_SESSION_MAX 16U
#define FILE_OPS_SESSION_RUNNING_MAX 2U

typedef enum FileOpKind {
        FILE_OP_STAT,       /* st of path */
        FILE_OP_READ,       /* a file: fd and st; a directory: its listing */
        FILE_OP_MKDIR,      /* mkdir -p: st, created */
        FILE_OP_REMOVE,     /* flag: recursive */
        FILE_OP_MOVE,       /* path to `to`; flag: replace; st of the result */
        FILE_OP_DISK_USAGE, /* bytes below dir */
        FILE_OP_WRITE,      /* path from src_fd (a regular file) to EOF, as an upload: st, created, bytes */
        _FILE_OP_KIND_MAX,
        _FILE_OP_KIND_INVALID = -EINVAL,
} FileOpKind;

typedef struct FileOps FileOps;
typedef struct FileOp FileOp;

/* r: the operation's result (files.h's errors), or -ECANCELED when sandboxd stops. */
typedef void (*FileOpDoneFn)(FileOp *op, int r, void *userdata);

typedef enum FileOpState {
        FILE_OP_QUEUED,
        FILE_OP_RUNNING,
        FILE_OP_FINISHED,
} FileOpState;

struct FileOp {
        /* what to do */
        FileOpKind kind;
        char key[SESSION_ID_SIZE];          /* the session it is counted to */
        char *dir;             /* the workspace (host path), opened by the worker */
        char *path;            /* relative to it */
        char *to;              /* FILE_OP_MOVE */
        bool flag;
        size_t max_entries;    /* FILE_OP_READ of a directory */
        int src_fd;            /* FILE_OP_WRITE: read from here (closed with the op) */
        mode_t mode;           /* FILE_OP_WRITE: as files_upload_begin() */
        uint64_t max_bytes;    /* FILE_OP_WRITE: the upload's limit */
        uint64_t expect_bytes; /* FILE_OP_WRITE: exactly this many or -EPIPE; UINT64_MAX: any */

        /* what came of it, for the done function */
        bool workspace_failed; /* r is the error of opening the workspace itself */
        struct stat st;
        bool created;
        int fd;                /* FILE_OP_READ of a file: the done function may take it */
        Buf listing;           /* FILE_OP_READ of a directory: {"path":..,"entries":[..],"truncated":..} */
        uint64_t bytes;        /* FILE_OP_DISK_USAGE; FILE_OP_WRITE: the bytes read */

        /* the queue's */
        FileOps *ops;
        FileOpState state;
        atomic_bool cancel;    /* its walk stops early */
        int result;
        FileOpDoneFn done;     /* NULL: nobody waits any more */
        void *userdata;
        LIST_FIELDS(FileOp, ops);
};

const char *file_op_kind_to_string(FileOpKind k);

int file_op_new(FileOpKind kind, const char *key, const char *dir, const char *path, FileOp **ret);
FileOp *file_op_free(FileOp *op);
DEFINE_TRIVIAL_CLEANUP_FUNC(FileOp *, file_op_free);

int file_ops_new(sd_event *e, FileOps **ret);
/* Cancels the walks, waits for the threads; whoever still waits is told -ECANCELED. */
FileOps *file_ops_free(FileOps *f);

/* Queues op (taken, also on failure). internal: sandboxd's own (the disk usage), not
 * counted against the session's share. -EBUSY: the session has FILE_OPS_SESSION_MAX queued
 * or running; -EAGAIN: FILE_OPS_MAX in all; -ECANCELED: sandboxd stops. */
int file_ops_submit(FileOps *f, FileOp *op, bool internal, FileOpDoneFn done, void *userdata);
/* The waiter goes away: done is not called; a queued op is dropped, a running one finishes
 * (a walk stops early) and is freed. */
void file_op_detach(FileOp *op);
/* sandboxd stops: every waiter is told -ECANCELED now, queued operations are dropped,
 * running walks stop early, and nothing more is taken. */
void file_ops_abandon(FileOps *f);

typedef struct FileOpsStats {
        unsigned queued, running;
        uint64_t done, refused;
} FileOpsStats;
void file_ops_stats(FileOps *f, FileOpsStats *ret);
