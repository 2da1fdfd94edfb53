/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file API over D-Bus: what the .../files routes of http-routes.c do, with the same
 * checks, operations and errors. Everything but Write() runs on the file API's threads
 * (file-ops.h) and is answered when its operation is done. */

#include <fcntl.h>

#include "bus-api.h"
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
                bus_pending_fail(p, 0, &SD_BUS_ERROR_MAKE_CONST(BUS_ERROR_STOPPING, "sandboxd is stopping; ask again once it is back."));
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
        if (s && (op->kind == FILE_OP_MKDIR || op->kind == FILE_OP_REMOVE))
                s->disk_checked_usec = 0;

        switch (op->kind) {
        case FILE_OP_STAT:
                reply_entry(p, op->path, &op->st, -1);
                break;
        case FILE_OP_READ:
                if (op->fd >= 0) {
                        (void) fcntl(op->fd, F_SETFL, fcntl(op->fd, F_GETFL) & ~O_NONBLOCK);
                        r = sd_bus_reply_method_return(p->call, "ht", op->fd, (uint64_t) op->st.st_size);
                } else
                        r = sd_bus_reply_method_return(p->call, "s", op->listing.data ?: "");
                if (r < 0)
                        log_debug_errno(r, "Failed to answer %s, ignoring: %m", member);
                break;
        case FILE_OP_MKDIR:
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

/* Hands the operation to the file API's threads; the call is answered when it is done. */
static int submit(sd_bus_message *call, Session *s, FileOpKind kind, const char *path, const char *to, bool flag,
                  sd_bus_error *error) {
        Manager *m = s->manager;
        FileOp *op = NULL;
        BusPending *p;
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
        r = bus_pending_new(m, call, s, &p);
        if (r < 0) {
                file_op_free(op);
                return r;
        }
        p->file_op = op;
        r = file_ops_submit(m->file_ops, op, false, on_file_op_done, p);
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

/* The options of Write(): "mode" (u, permission bits, at most 0777). */
static int read_write_options(sd_bus_message *call, mode_t *ret_mode, sd_bus_error *error) {
        const char *key;
        int r;

        r = sd_bus_message_enter_container(call, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(call, 'e', "sv")) > 0) {
                uint32_t mode;

                r = sd_bus_message_read(call, "s", &key);
                if (r < 0)
                        return r;
                if (!streq(key, "mode"))
                        return sd_bus_error_setf(error, BUS_ERROR_UNKNOWN_OPTION, "Unknown option '%.64s': Write() knows mode.", key);
                if (sd_bus_message_read(call, "v", "u", &mode) < 0)
                        return sd_bus_error_set(error, BUS_ERROR_INVALID_TYPE, "Option 'mode' must be of type u.");
                if (mode > 0777)
                        return sd_bus_error_set(error, BUS_ERROR_INVALID_VALUE, "Option 'mode' must be permission bits, at most 0777.");
                *ret_mode = (mode_t) mode;
                r = sd_bus_message_exit_container(call);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(call);
}

/* PUT .../files/PATH: on the loop, as HTTP's uploads (the writes are the page cache's). */
static int method_write(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        _cleanup_(workspace_close) Workspace ws = WORKSPACE_NULL;
        Session *s = userdata;
        Manager *m = s->manager;
        FileUpload *u = NULL;
        mode_t mode = MODE_INVALID;
        const char *path;
        const void *data = NULL;
        size_t n = 0;
        struct stat st;
        bool created;
        Buf b = {};
        int r;

        POLKIT_SCOPE(m, call);

        r = sd_bus_message_read(call, "s", &path);
        if (r >= 0)
                r = sd_bus_message_read_array(call, 'y', &data, &n);
        if (r < 0)
                return r;
        r = read_write_options(call, &mode, error);
        if (r < 0)
                return r;
        r = files_check(call, s, path, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        if (n > m->config.max_file_bytes)
                return set_files_error(error, m, -EFBIG);

        r = workspace_open(s->workspace_host_dir, true, &ws);
        if (r < 0) {
                log_error_errno(r, "Failed to open the workspace %s of session %s: %m", s->workspace_host_dir, s->id);
                return sd_bus_error_set_errnof(error, EIO, "The workspace cannot be opened.");
        }
        r = files_upload_begin(&ws, path, mode, m->config.max_file_bytes, &u);
        if (r >= 0)
                r = files_upload_write(u, data ?: "", n);
        if (r >= 0)
                r = files_upload_commit(u, &created, &st);
        files_upload_free(u);
        if (r < 0)
                return set_files_error(error, m, r);
        s->disk_checked_usec = 0;

        r = files_append_entry_json(&b, path, &st);
        if (r >= 0)
                r = sd_bus_reply_method_return(call, "sb", b.data, (int) created);
        buf_done(&b);
        return r;
}

const sd_bus_vtable files_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("Stat", SD_BUS_ARGS("s", path), SD_BUS_RESULT("s", entry), method_stat,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("List", SD_BUS_ARGS("s", path), SD_BUS_RESULT("s", listing), method_read,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Read", SD_BUS_ARGS("s", path), SD_BUS_RESULT("h", fd, "t", size), method_read,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Write", SD_BUS_ARGS("s", path, "ay", data, "a{sv}", options),
                                SD_BUS_RESULT("s", entry, "b", created), method_write, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Mkdir", SD_BUS_ARGS("s", path), SD_BUS_RESULT("s", entry, "b", created), method_mkdir,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Move", SD_BUS_ARGS("s", path, "s", to, "b", overwrite), SD_BUS_RESULT("s", entry),
                                method_move, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Remove", SD_BUS_ARGS("s", path, "b", recursive), SD_BUS_NO_RESULT, method_remove,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END
};
