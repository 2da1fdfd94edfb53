/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file API over D-Bus: what the .../files routes of http-routes.c do, with the same
 * checks, operations and errors. Everything runs on the file API's threads (file-ops.h)
 * and is answered when its operation is done, but Write() from a pipe, which is read on
 * the loop as the pipe fills (an upload's writes are the page cache's, as HTTP's). */

#include <fcntl.h>
#include <inttypes.h>
#include <sys/epoll.h>

#include "bus-api.h"
#include "bus-request.h"
#include "bus-util.h"
#include "files-dbus.h"
#include "log.h"
#include "polkit.h"

/* A listing holds at most this many entries ("truncated":true beyond), as over HTTP. */
#define FILES_LIST_MAX 100000

static int set_files_error(sd_bus_error *error, Manager *m, int err) {
        RequestError e = {};

        (void) files_request_error(err, m->config.max_file_bytes, &e);
        if (streq(e.code, "internal"))
                return sd_bus_error_set_errnof(error, err, "%s", e.message);
        if (streq(e.code, "not_found")) /* the file, not the session */
                return sd_bus_error_set(error, BUS_ERROR_NO_SUCH_FILE, e.message);
        return bus_error_set_request(error, -EINVAL, &e);
}

static void reply_entry(BusPending *p, const char *path, const struct stat *st, int created) {
        Buf b = {};
        int r;

        r = files_append_entry_json(&b, path, st);
        if (r >= 0)
                r = created < 0 ? sd_bus_reply_method_return(p->call, "s", b.data)
                                : sd_bus_reply_method_return(p->call, "sb", b.data, created);
        if (r < 0)
                log_debug_errno(r, "Failed to answer a file method, ignoring: %m");
        buf_done(&b);
}

static void on_file_op_done(FileOp *op, int r, void *userdata) {
        BusPending *p = userdata;
        Manager *m = p->manager;
        const char *member = sd_bus_message_get_member(p->call);
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Session *s;

        p->file_op = NULL;
        if (r == -ECANCELED) {
                bus_pending_fail_stopping(p);
                return;
        }
        if (op->workspace_failed) {
                log_error_errno(r, "Failed to open the workspace %s of session %s: %m", op->dir, op->key);
                bus_pending_fail(p, -EIO, NULL);
                return;
        }
        /* Read() of a directory, List() of a file */
        if (r >= 0 && op->kind == FILE_OP_READ && streq(member, "Read") && op->fd < 0)
                r = -EISDIR;
        else if (r >= 0 && op->kind == FILE_OP_READ && streq(member, "List") && op->fd >= 0)
                r = -ENOTDIR;
        if (r < 0) {
                (void) set_files_error(&e, m, r);
                bus_pending_fail(p, 0, &e);
                sd_bus_error_free(&e);
                return;
        }

        /* What it changed shows in the next count of the disk usage. */
        s = session_find(m, op->key);
        if (s && (op->kind == FILE_OP_MKDIR || op->kind == FILE_OP_REMOVE || op->kind == FILE_OP_WRITE))
                s->disk_checked_usec = 0;

        switch (op->kind) {
        case FILE_OP_STAT:
                reply_entry(p, op->path, &op->st, -1);
                break;
        case FILE_OP_READ:
                if (op->fd >= 0) {
                        /* The caller gets the file's own fd, and that is safe: files_open() opened
                         * it on a file API thread as the workspace's owner (fsuid, not root),
                         * beneath the workspace (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), O_RDONLY
                         * and O_CLOEXEC, after checking it is a regular file. The fd reads, and
                         * that is all: a write, fchmod() or fchown() is checked against the
                         * fd's mode or the caller's own credentials, and so is reopening it
                         * through /proc. Symlinks are followed beneath the workspace as Stat()
                         * follows them (the HTTP GET too); never out of it. */
                        (void) fcntl(op->fd, F_SETFL, fcntl(op->fd, F_GETFL) & ~O_NONBLOCK);
                        r = sd_bus_reply_method_return(p->call, "ht", op->fd, (uint64_t) op->st.st_size);
                } else
                        r = sd_bus_reply_method_return(p->call, "s", op->listing.data ?: "");
                if (r < 0)
                        log_debug_errno(r, "Failed to answer %s, ignoring: %m", member);
                break;
        case FILE_OP_MKDIR:
        case FILE_OP_WRITE:
                reply_entry(p, op->path, &op->st, op->created);
                break;
        case FILE_OP_MOVE:
                reply_entry(p, op->to, &op->st, -1);
                break;
        default:
                r = sd_bus_reply_method_return(p->call, NULL);
                if (r < 0)
                        log_debug_errno(r, "Failed to answer %s, ignoring: %m", member);
                break;
        }
        bus_pending_free(p);
}

/* May the caller do this, and may a file request go on (files_check() of http-routes.c):
 * > 0 yes, 0 polkit was asked (return 1), < 0 no. */
static int files_check(sd_bus_message *call, Session *s, const char *path, sd_bus_error *error) {
        RequestError e = {};
        int r;

        r = bus_authorize(s->manager, call, AUTHZ_FILES, s->user, s->workspace, s, error);
        if (r <= 0)
                return r;
        r = session_check_active(s, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);
        if (path[0] == '/')
                return sd_bus_error_set(error, BUS_ERROR_INVALID_PATH, "The path must be relative to the workspace, not absolute.");
        session_touch(s);
        return 1;
}

/* Hands op (taken) to the file API's threads; the call is answered when it is done. */
static int submit_op(sd_bus_message *call, Session *s, FileOp *op, FileOpDoneFn done, sd_bus_error *error) {
        BusPending *p;
        int r;

        r = bus_pending_new(s->manager, call, s, &p);
        if (r < 0) {
                file_op_free(op);
                return r;
        }
        p->file_op = op;
        r = file_ops_submit(s->manager->file_ops, op, false, done, p);
        if (r < 0) {
                p->file_op = NULL; /* taken, and freed, by file_ops_submit() */
                bus_pending_free(p);
        }
        if (r == -EBUSY)
                return sd_bus_error_setf(error, BUS_ERROR_TOO_MANY_FILE_OPERATIONS,
                                         "This session has %u file operations queued or running; wait for one to finish.",
                                         FILE_OPS_SESSION_MAX);
        if (r == -EAGAIN || r == -ECANCELED)
                return sd_bus_error_setf(error, BUS_ERROR_OVERLOADED,
                                         "sandboxd has %u file operations queued or running; ask again shortly.", FILE_OPS_MAX);
        return r < 0 ? r : 1;
}

static int submit(sd_bus_message *call, Session *s, FileOpKind kind, const char *path, const char *to, bool flag,
                  sd_bus_error *error) {
        FileOp *op = NULL;
        int r;

        r = file_op_new(kind, s->id, s->workspace_host_dir, path, &op);
        if (r < 0)
                return r;
        op->flag = flag;
        op->max_entries = FILES_LIST_MAX;
        if (to && !(op->to = strdup(to))) {
                file_op_free(op);
                return -ENOMEM;
        }
        return submit_op(call, s, op, on_file_op_done, error);
}

static int method_path_op(sd_bus_message *call, Session *s, FileOpKind kind, sd_bus_error *error) {
        const char *path;
        int r;

        POLKIT_SCOPE(s->manager, call);

        r = sd_bus_message_read(call, "s", &path);
        if (r < 0)
                return r;
        r = files_check(call, s, path, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        return submit(call, s, kind, path, NULL, false, error);
}

static int method_stat(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return method_path_op(call, userdata, FILE_OP_STAT, error);
}

static int method_read(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return method_path_op(call, userdata, FILE_OP_READ, error);
}

static int method_mkdir(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        return method_path_op(call, userdata, FILE_OP_MKDIR, error);
}

static int method_remove(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        const char *path;
        int recursive, r;

        POLKIT_SCOPE(((Session *) userdata)->manager, call);

        r = sd_bus_message_read(call, "sb", &path, &recursive);
        if (r < 0)
                return r;
        r = files_check(call, userdata, path, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        return submit(call, userdata, FILE_OP_REMOVE, path, NULL, recursive, error);
}

static int method_move(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        const char *path, *to;
        int overwrite, r;

        POLKIT_SCOPE(((Session *) userdata)->manager, call);

        r = sd_bus_message_read(call, "ssb", &path, &to, &overwrite);
        if (r < 0)
                return r;
        r = files_check(call, userdata, path, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        if (to[0] == '/')
                return sd_bus_error_set(error, BUS_ERROR_INVALID_PATH, "The new path must be relative to the workspace, not absolute.");
        return submit(call, userdata, FILE_OP_MOVE, path, to, overwrite, error);
}

/* The options of Write(): "mode" (u, permission bits, at most 0777) and "size" (t, the
 * bytes the fd will give: fewer or more and nothing is written, so that a writer that dies
 * half-way, whose pipe ends as if it were done, leaves nothing behind). */
/* Write()'s fd must be a pipe or a regular file, open for reading: 1 a pipe, 0 a file. */
static int check_source(int fd, sd_bus_error *error) {
        struct stat st;
        int fl;

        if (fstat(fd, &st) < 0 || (fl = fcntl(fd, F_GETFL)) < 0)
                return sd_bus_error_set_errnof(error, errno, "The fd cannot be inspected: %m");
        if (!S_ISFIFO(st.st_mode) && !S_ISREG(st.st_mode))
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_VALUE,
                                         "The fd must be a pipe or a regular file, not %s.",
                                         S_ISSOCK(st.st_mode) ? "a socket" : S_ISCHR(st.st_mode) ? "a character device" :
                                         S_ISDIR(st.st_mode) ? "a directory" : S_ISBLK(st.st_mode) ? "a block device" :
                                         "a symlink");
        if ((fl & O_PATH) || (fl & O_ACCMODE) == O_WRONLY)
                return sd_bus_error_set(error, BUS_ERROR_INVALID_VALUE, "The fd must be open for reading.");
        return S_ISFIFO(st.st_mode);
}

static void write_fail(BusPending *p, int r) {
        sd_bus_error e = SD_BUS_ERROR_NULL;

        if (r == -EPIPE)
                (void) sd_bus_error_setf(&e, BUS_ERROR_INVALID_VALUE,
                                         "The fd gave %" PRIu64 " bytes, not the %" PRIu64 " of option 'size'; nothing was written.",
                                         p->bytes, p->upload_expect);
        else
                (void) set_files_error(&e, p->manager, r);
        bus_pending_fail(p, 0, &e);
        sd_bus_error_free(&e);
}

/* The regular file was copied on a file API thread. */
static void on_write_op_done(FileOp *op, int r, void *userdata) {
        BusPending *p = userdata;

        if (r != -EPIPE || op->workspace_failed) {
                on_file_op_done(op, r, p);
                return;
        }
        p->file_op = NULL;
        p->bytes = op->bytes;
        p->upload_expect = op->expect_bytes;
        write_fail(p, r);
}

/* EOF of the pipe: the file takes its name, as http_route_upload_finish() does. */
static void write_finish(BusPending *p) {
        Session *s = session_find(p->manager, p->session_id);
        struct stat st;
        bool created;
        int r;

        if (!s || s->state != SESSION_ACTIVE) {
                bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_SESSION_NOT_ACTIVE,
                                                                "The session was closed while the file came in."));
                return;
        }
        r = p->upload_expect != UINT64_MAX && p->bytes != p->upload_expect ? -EPIPE
                                                                            : files_upload_commit(p->upload, &created, &st);
        if (r < 0) {
                write_fail(p, r);
                return;
        }
        s->disk_checked_usec = 0;
        session_touch(s);
        reply_entry(p, p->upload_path, &st, created);
        bus_pending_free(p);
}

static int on_write_readable(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        static char buf[65536]; /* the loop's alone */
        BusPending *p = userdata;
        int r;

        /* A few chunks at a time, then the others' turn. */
        for (unsigned i = 0; i < 4; i++) {
                ssize_t n = read(fd, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n < 0) {
                        write_fail(p, -errno);
                        return 0;
                }
                if (n == 0) {
                        write_finish(p);
                        return 0;
                }
                p->bytes += (uint64_t) n;
                r = files_upload_write(p->upload, buf, (size_t) n);
                if (r >= 0 && p->upload_expect != UINT64_MAX && p->bytes > p->upload_expect)
                        r = -EPIPE;
                if (r < 0) {
                        write_fail(p, r);
                        return 0;
                }
        }
        r = sd_event_source_set_time_relative(p->upload_timer, (uint64_t) p->manager->config.connection_timeout_sec * USEC_PER_SEC);
        if (r < 0)
                write_fail(p, r);
        return 0;
}

static int on_write_stalled(sd_event_source *source, uint64_t usec, void *userdata) {
        BusPending *p = userdata;

        bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(SD_BUS_ERROR_TIMEOUT,
                                                        "Nothing came through the fd for ConnectionTimeoutSec=; nothing was written."));
        return 0;
}

/* The caller left the bus before the end of its pipe: the file is dropped unanswered. */
static int on_write_caller_gone(sd_bus_track *track, void *userdata) {
        bus_pending_free(userdata);
        return 0;
}

/* Reads a pipe on the loop, never blocking: each chunk goes to the upload as HTTP's body
 * does. Takes fd. */
static int write_from_pipe(BusPending *p, Workspace *ws, const char *path, mode_t mode, int fd) {
        Manager *m = p->manager;
        sd_event *e = sd_bus_get_event(sd_bus_message_get_bus(p->call));
        int r;

        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
                r = -errno;
                safe_close(fd);
                return r;
        }
        r = sd_event_add_io(e, &p->upload_io, fd, EPOLLIN, on_write_readable, p);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        r = sd_event_source_set_io_fd_own(p->upload_io, true);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        r = sd_event_add_time_relative(e, &p->upload_timer, CLOCK_MONOTONIC,
                                       (uint64_t) m->config.connection_timeout_sec * USEC_PER_SEC, 0, on_write_stalled, p);
        if (r >= 0)
                r = sd_bus_track_new(sd_bus_message_get_bus(p->call), &p->upload_track, on_write_caller_gone, p);
        if (r >= 0)
                r = sd_bus_track_add_sender(p->upload_track, p->call);
        if (r >= 0 && !(p->upload_path = strdup(path)))
                r = -ENOMEM;
        if (r < 0)
                return r;
        return files_upload_begin(ws, path, mode, m->config.max_file_bytes, &p->upload);
}

/* PUT .../files/PATH with the bytes in an fd: a pipe is read on the loop as it fills, a
 * regular file (whose reads may wait for a disk) on the file API's threads. Answered once
 * the fd reached its end and the file took its name; until then nothing is there. */
static int method_write(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(workspace_close) Workspace ws = WORKSPACE_NULL;
        Session *s = userdata;
        Manager *m = s->manager;
        mode_t mode;
        uint64_t size;
        const char *path;
        BusPending *p;
        FileOp *op = NULL;
        RequestError e = {};
        int fd, r, pipe;

        POLKIT_SCOPE(m, call);

        r = sd_bus_message_read(call, "sh", &path, &fd);
        if (r < 0)
                return r;
        r = bus_request_read_write_options(call, &mode, &size, &e);
        if (r < 0)
                return bus_error_set_request(error, r, &e);
        r = files_check(call, s, path, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        pipe = check_source(fd, error);
        if (pipe < 0)
                return pipe;
        if (size != UINT64_MAX && size > m->config.max_file_bytes)
                return set_files_error(error, m, -EFBIG);
        /* Our own copy: sd-bus closes the message's with the message. */
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;

        if (!pipe) {
                r = file_op_new(FILE_OP_WRITE, s->id, s->workspace_host_dir, path, &op);
                if (r < 0) {
                        safe_close(fd);
                        return r;
                }
                op->src_fd = fd;
                op->mode = mode;
                op->max_bytes = m->config.max_file_bytes;
                op->expect_bytes = size;
                return submit_op(call, s, op, on_write_op_done, error);
        }

        r = workspace_open(s->workspace_host_dir, true, &ws);
        if (r < 0) {
                safe_close(fd);
                log_error_errno(r, "Failed to open the workspace %s of session %s: %m", s->workspace_host_dir, s->id);
                return sd_bus_error_set_errnof(error, EIO, "The workspace cannot be opened.");
        }
        r = bus_pending_new(m, call, s, &p);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        p->upload_expect = size;
        r = write_from_pipe(p, &ws, path, mode, fd);
        if (r < 0) {
                bus_pending_free(p);
                return set_files_error(error, m, r);
        }
        return 1;
}

const sd_bus_vtable files_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("Stat", SD_BUS_ARGS("s", path), SD_BUS_RESULT("s", entry), method_stat,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("List", SD_BUS_ARGS("s", path), SD_BUS_RESULT("s", listing), method_read,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Read", SD_BUS_ARGS("s", path), SD_BUS_RESULT("h", fd, "t", size), method_read,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Write", SD_BUS_ARGS("s", path, "h", fd, "a{sv}", options),
                                SD_BUS_RESULT("s", entry, "b", created), method_write, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Mkdir", SD_BUS_ARGS("s", path), SD_BUS_RESULT("s", entry, "b", created), method_mkdir,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Move", SD_BUS_ARGS("s", path, "s", to, "b", overwrite), SD_BUS_RESULT("s", entry),
                                method_move, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Remove", SD_BUS_ARGS("s", path, "b", recursive), SD_BUS_NO_RESULT, method_remove,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END
};
