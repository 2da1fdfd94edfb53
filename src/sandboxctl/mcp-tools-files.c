/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: the tools of the files of a session's workspace, and the copies between
 * it and the host directories --host-path= allows. */

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "encoding.h"
#include "json-util.h"
#include "mcp.h"
#include "validate.h"

#define PATH_ARG_MAX 4096u
#define READ_LENGTH_DEFAULT (256u * 1024u)
#define READ_LENGTH_MAX (1024u * 1024u)
#define WRITE_MAX (8u * 1024u * 1024u)          /* decoded content of one write */
#define COPY_MAX ((uint64_t) 1024 * 1024 * 1024) /* a file copied (workspace or host) */

/* --- paths of the workspace ------------------------------------------------------------------ */

/* A path of the workspace, refused as sandboxd's file API refuses it (400 invalid_path, its
 * message) where libsandboxd would otherwise change it before sandboxd sees it: libsandboxd
 * drops a leading "/", the API refuses an absolute path (but "/" alone: the top, as the API
 * trims trailing slashes before it looks). Everything else, ".." included, goes
 * to sandboxd, which resolves it beneath the workspace (invalid_path for a ".." that climbs
 * out, not_found for "a/../b" without a). */
static int ws_path(json_object *args, const char *key, bool required, const char **ret, ToolError *e) {
        json_object *v;
        const char *p;
        int r;

        r = arg_string(args, key, required, &p, e);
        if (r < 0 || !p) {
                *ret = p;
                return r;
        }
        (void) json_object_object_get_ex(args, key, &v);
        if ((size_t) json_object_get_string_len(v) != strlen(p))
                return tool_fail(e, "invalid_path", "%s: the path contains a NUL byte.", key);
        if (strlen(p) > PATH_ARG_MAX)
                return tool_fail(e, "invalid_path", "%s: the path or a name in it is too long.", key);
        /* as the API, which trims trailing slashes first: "/" alone is the top, like "" */
        if (p[0] == '/' && p[strspn(p, "/")])
                return tool_fail(e, "invalid_path", "%s: the path must be relative to the workspace, not absolute.", key);
        *ret = p;
        return 0;
}

/* libsandboxd's own refusals carry no code of sandboxd's: name them as sandboxd would. */
static int fail_file(McpCall *c, ToolError *e, int r, const char *what, const char *path) {
        const sandboxd_error *api = sandboxd_client_last_error(c->client);

        if (api && api->kind == SANDBOXD_ERROR_LOCAL) {
                if (r == -EISDIR)
                        return tool_fail(e, "is_a_directory", "%s: %s is a directory.", what, path);
                if (r == -ENOTDIR)
                        return tool_fail(e, "not_a_directory", "%s: %s is not a directory.", what, path);
        }
        return tool_fail_client(c, e, r, what);
}

static const char *file_type_name(sandboxd_file_type t) {
        return t == SANDBOXD_FILE_REGULAR     ? "file"
               : t == SANDBOXD_FILE_DIRECTORY ? "dir"
               : t == SANDBOXD_FILE_SYMLINK   ? "symlink"
                                              : "other";
}

/* sandboxd's own entry (the HTTP API's JSON), or one made of the fields */
static json_object *entry_json(const sandboxd_file_info *i, bool *oom) {
        json_object *f = i->json ? json_tokener_parse(i->json) : NULL;
        char mode[8];

        if (f && json_object_is_type(f, json_type_object))
                return f;
        json_object_put(f);
        f = json_object_new_object();
        snprintf(mode, sizeof(mode), "%04o", i->mode);
        add_bytes(f, "name", i->name ?: "", strlen(i->name ?: ""), oom);
        json_put(f, "type", json_object_new_string(file_type_name(i->type)), oom);
        json_put(f, "size", json_object_new_int64((int64_t) i->size), oom);
        json_put(f, "mode", json_object_new_string(mode), oom);
        json_put(f, "mtime_usec", json_object_new_int64((int64_t) i->mtime_usec), oom);
        return f;
}

/* 1 when path names an entry, 0 when not (not_found), else the failure in e */
static int exists(McpCall *c, const char *session, const char *path, sandboxd_file_info **ret, ToolError *e) {
        sandboxd_file_info *i = NULL;
        const sandboxd_error *api;
        int r;

        r = sandboxd_file_stat(c->client, session, path, &i);
        if (r >= 0) {
                if (ret)
                        *ret = i;
                else
                        sandboxd_file_info_free(i);
                return 1;
        }
        api = sandboxd_client_last_error(c->client);
        if (api && streq(api->code, "not_found"))
                return 0;
        return fail_file(c, e, r, "Looking at the path failed", path);
}

/* --- temporary files: a copy's bytes on their way ----------------------------------------- */

/* An unnamed file on disk (O_TMPFILE in $TMPDIR or /var/tmp), else a memfd. */
static int tmpfile_fd(void) {
        const char *dirs[] = { getenv("TMPDIR"), "/var/tmp", "/tmp" };
        int fd;

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                if (!dirs[i] || dirs[i][0] != '/')
                        continue;
                fd = open(dirs[i], O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
                if (fd >= 0)
                        return fd;
        }
        fd = memfd_create("sandboxctl-mcp", MFD_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

typedef struct Transfer {
        McpCall *call;
        int fd;          /* range reads: the memfd, whose bytes before skip are dropped */
        uint64_t skip;   /* range reads: bytes before the range */
        uint64_t stop;   /* stop (a range read) or fail (a copy) once this many came; 0: none */
        bool stopped;    /* the transfer was ended here, not by sandboxd */
        bool too_large;
        uint64_t done;
} Transfer;

static int transfer_progress(uint64_t done, uint64_t total, void *userdata) {
        Transfer *t = userdata;

        (void) total;
        t->done = done;
        mcp_call_progress(t->call, done);
        /* the bytes before the range are not kept: punch them out of the memfd */
        if (t->fd >= 0 && t->skip > 0)
                (void) fallocate(t->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                                 (off_t) (MIN(done, t->skip) & ~(uint64_t) 4095));
        if (t->stop > 0 && done >= t->stop) {
                t->stopped = true;
                return -ECANCELED;
        }
        return 0;
}

/* sandbox_copy stages a file on this host (at most COPY_MAX): so many may be staged at once */
#define COPIES_STAGED_MAX 2
static atomic_int copies_staged;

static void copy_unstage(bool *staged) {
        if (*staged)
                atomic_fetch_sub(&copies_staged, 1);
}

/* --- sandbox_read_file ---------------------------------------------------------------------- */

static int tool_read_file(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "offset", "length", "encoding", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *data = NULL;
        sandboxd_file_info *info = NULL;
        const char *session, *path, *encoding;
        uint64_t offset = 0, length = READ_LENGTH_DEFAULT, size;
        Transfer t = { .call = c };
        bool oom = false, valid = true, eof;
        ssize_t n;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = ws_path(args, "path", true, &path, e);
        if (r >= 0)
                r = arg_range(args, "offset", 0, INT64_MAX, 0, &offset, e);
        if (r >= 0)
                r = arg_range(args, "length", 0, READ_LENGTH_MAX, READ_LENGTH_DEFAULT, &length, e);
        if (r >= 0)
                r = arg_string(args, "encoding", false, &encoding, e);
        if (r < 0)
                return r;
        encoding = encoding ?: "auto";
        if (!streq(encoding, "auto") && !streq(encoding, "text") && !streq(encoding, "base64"))
                return tool_fail(e, "invalid_value", "encoding must be auto, text or base64.");

        /* what it is, and how large: a directory or a FIFO is refused before any byte moves */
        r = sandboxd_file_stat(c->client, session, path, &info);
        if (r < 0)
                return fail_file(c, e, r, "Reading the file failed", path);
        size = info->size;
        r = info->type == SANDBOXD_FILE_DIRECTORY ? tool_fail(e, "is_a_directory", "%s is a directory: list it with sandbox_list_files.", path)
            : info->type != SANDBOXD_FILE_REGULAR ? tool_fail(e, "not_a_regular_file", "%s is not a regular file.", path)
                                                  : 0;
        sandboxd_file_info_free(info);
        if (r < 0)
                return r;
        if (offset > size)
                return tool_fail(e, "invalid_offset", "offset %llu is past the end of %s (%llu bytes).",
                                 (unsigned long long) offset, path, (unsigned long long) size);

        /* sandboxd sends a file from its start: take it into a memfd up to the end of the
         * range, punching out what comes before, and stop the transfer there */
        fd = memfd_create("sandboxctl-read", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        t.fd = fd;
        t.skip = offset;
        /* always: the file may grow (or be truncated up) after the stat, while it is sent */
        t.stop = offset + length;
        if (length > 0 && offset < size) {
                r = sandboxd_file_download(c->client, session, path, fd, transfer_progress, &t);
                if (r < 0 && !t.stopped)
                        return fail_file(c, e, r, "Reading the file failed", path);
                if (!t.stopped)
                        size = t.done; /* what it held when it was sent */
        }
        data = malloc(length + 1);
        if (!data)
                return -ENOMEM;
        n = offset < size && length > 0 ? pread(fd, data, length, (off_t) offset) : 0;
        if (n < 0)
                return -errno;
        eof = offset + (uint64_t) n >= size;

        o = json_object_new_object();
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "size", json_object_new_int64((int64_t) size), &oom);
        json_put(o, "offset", json_object_new_int64((int64_t) offset), &oom);
        json_put(o, "returned_bytes", json_object_new_int64((int64_t) n), &oom);
        json_put(o, "eof", json_object_new_boolean(eof), &oom);
        if (utf8_valid_prefix(data, (size_t) n, &valid) != (size_t) n)
                valid = false;
        if (streq(encoding, "base64") || (streq(encoding, "auto") && !valid)) {
                Buf b = {};
                if (base64_encode(&b, data, (size_t) n) < 0)
                        return -ENOMEM;
                json_put(o, "content_b64", json_object_new_string_len(b.data ?: "", (int) b.len), &oom);
                buf_done(&b);
        } else if (!valid)
                return tool_fail(e, "invalid_value", "Bytes %llu to %llu of %s are not UTF-8 text: read them with encoding base64.",
                                 (unsigned long long) offset, (unsigned long long) (offset + (uint64_t) n), path);
        else
                json_put(o, "content", json_object_new_string_len(data, (int) n), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- sandbox_write_file --------------------------------------------------------------------- */

/* The parent of path ("" for the top), NULL when out of memory. */
static char *parent_of(const char *path) {
        size_t n = strlen(path);

        while (n > 0 && path[n - 1] == '/')
                n--;
        while (n > 0 && path[n - 1] != '/')
                n--;
        while (n > 0 && path[n - 1] == '/')
                n--;
        return strndup(path, n);
}

static int make_parents(McpCall *c, const char *session, const char *path, ToolError *e) {
        _cleanup_free_ char *parent = parent_of(path);
        int r;

        if (!parent)
                return -ENOMEM;
        if (!parent[0])
                return 0;
        r = sandboxd_file_mkdir(c->client, session, parent);
        return r < 0 ? fail_file(c, e, r, "Creating the parent directories failed", parent) : 0;
}

static int tool_write_file(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "content", "encoding", "make_parents", "overwrite", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *path, *content, *encoding;
        bool parents, overwrite, oom = false;
        json_object *v;
        size_t len;
        Buf b = {};
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = ws_path(args, "path", true, &path, e);
        if (r >= 0)
                r = arg_string(args, "content", true, &content, e);
        if (r >= 0)
                r = arg_string(args, "encoding", false, &encoding, e);
        if (r >= 0)
                r = arg_bool(args, "make_parents", false, &parents, e);
        if (r >= 0)
                r = arg_bool(args, "overwrite", true, &overwrite, e);
        if (r < 0)
                return r;
        (void) json_object_object_get_ex(args, "content", &v);
        len = (size_t) json_object_get_string_len(v);
        encoding = encoding ?: "utf8";
        if (streq(encoding, "base64")) {
                if (len > WRITE_MAX / 3 * 4 + 4)
                        return tool_fail(e, "payload_too_large", "content is larger than %u bytes.", WRITE_MAX);
                if (base64_decode(content, len, &b) < 0)
                        return tool_fail(e, "invalid_value", "content is not valid base64.");
                if (b.len > WRITE_MAX) {
                        buf_done(&b);
                        return tool_fail(e, "payload_too_large", "content is larger than %u bytes.", WRITE_MAX);
                }
        } else if (streq(encoding, "utf8")) {
                if (len > WRITE_MAX)
                        return tool_fail(e, "payload_too_large", "content is larger than %u bytes.", WRITE_MAX);
                if (buf_append(&b, content, len) < 0)
                        return -ENOMEM;
        } else
                return tool_fail(e, "invalid_value", "encoding must be utf8 or base64.");

        if (!overwrite) {
                /* sandboxd's upload always replaces: look first (not atomic) */
                r = exists(c, session, path, NULL, e);
                if (r > 0)
                        r = tool_fail(e, "exists", "%s exists (overwrite is false).", path);
        }
        if (r >= 0 && parents)
                r = make_parents(c, session, path, e);
        if (r >= 0) {
                r = sandboxd_file_write(c->client, session, path, b.data ?: "", b.len);
                if (r < 0)
                        r = fail_file(c, e, r, "Writing the file failed", path);
        }
        if (r < 0) {
                buf_done(&b);
                return r;
        }
        o = json_object_new_object();
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "bytes", json_object_new_int64((int64_t) b.len), &oom);
        buf_done(&b);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- listing, stat, mkdir, remove, move ------------------------------------------------------ */

static int tool_list_files(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_file_info **list = NULL;
        const char *session, *path;
        bool truncated = false, oom = false;
        json_object *arr;
        size_t n = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = ws_path(args, "path", false, &path, e);
        if (r < 0)
                return r;
        path = path ?: "";
        r = sandboxd_file_list(c->client, session, path, &list, &n, &truncated);
        if (r < 0)
                return fail_file(c, e, r, "Listing the directory failed", path);
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = 0; i < n && !oom; i++)
                json_push(arr, entry_json(list[i], &oom), &oom);
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "entries", arr, &oom);
        json_put(o, "truncated", json_object_new_boolean(truncated), &oom);
        sandboxd_file_info_list_free(list);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_stat(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", NULL };
        sandboxd_file_info *info = NULL;
        const char *session, *path;
        bool oom = false;
        json_object *o;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = ws_path(args, "path", true, &path, e);
        if (r < 0)
                return r;
        r = sandboxd_file_stat(c->client, session, path, &info);
        if (r < 0)
                return fail_file(c, e, r, "Stat failed", path);
        o = entry_json(info, &oom);
        sandboxd_file_info_free(info);
        if (oom || !o) {
                json_object_put(o);
                return -ENOMEM;
        }
        *ret = o;
        return 0;
}

static int tool_mkdir(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "parents", NULL };
        _cleanup_free_ char *parent = NULL;
        const char *session, *path;
        sandboxd_file_info *info = NULL;
        bool parents, oom = false;
        json_object *o;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = ws_path(args, "path", true, &path, e);
        if (r >= 0)
                r = arg_bool(args, "parents", false, &parents, e);
        if (r < 0)
                return r;
        parent = parent_of(path);
        if (!parent)
                return -ENOMEM;
        if (!parents && parent[0]) {
                /* sandboxd's ?mkdir makes the parents: without parents, they must be there */
                r = exists(c, session, parent, &info, e);
                if (r == 0)
                        return tool_fail(e, "not_found", "%s does not exist (parents is false).", parent);
                if (r < 0)
                        return r;
                r = info->type == SANDBOXD_FILE_DIRECTORY ? 0 : tool_fail(e, "not_a_directory", "%s is not a directory.", parent);
                info = sandboxd_file_info_free(info);
                if (r < 0)
                        return r;
        }
        r = sandboxd_file_mkdir(c->client, session, path);
        if (r < 0)
                return fail_file(c, e, r, "Creating the directory failed", path);
        r = sandboxd_file_stat(c->client, session, path, &info);
        if (r < 0)
                return fail_file(c, e, r, "Stat failed", path);
        o = entry_json(info, &oom);
        sandboxd_file_info_free(info);
        if (oom || !o) {
                json_object_put(o);
                return -ENOMEM;
        }
        *ret = o;
        return 0;
}

static int tool_remove(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "recursive", "confirm", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *path;
        bool recursive, confirm, oom = false;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = ws_path(args, "path", true, &path, e);
        if (r >= 0)
                r = arg_bool(args, "recursive", false, &recursive, e);
        if (r >= 0)
                r = arg_bool(args, "confirm", false, &confirm, e);
        if (r < 0)
                return r;
        if (recursive && !confirm)
                return tool_fail(e, "invalid_value", "recursive removes %s with everything in it: say confirm:true too. "
                                                     "Nothing was removed.", path);
        r = sandboxd_file_remove(c->client, session, path, recursive);
        if (r < 0)
                return fail_file(c, e, r, "Removing failed", path);
        o = json_object_new_object();
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "removed", json_object_new_boolean(true), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_move(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "from", "to", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *from, *to;
        bool oom = false;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = ws_path(args, "from", true, &from, e);
        if (r >= 0)
                r = ws_path(args, "to", true, &to, e);
        if (r < 0)
                return r;
        r = sandboxd_file_move(c->client, session, from, to);
        if (r < 0)
                return fail_file(c, e, r, "Moving failed", from);
        o = json_object_new_object();
        json_put(o, "from", json_object_new_string(from), &oom);
        json_put(o, "to", json_object_new_string(to), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- sandbox_copy ----------------------------------------------------------------------------- */

static int tool_copy(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "from", "to", "overwrite", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(copy_unstage) bool staged = false; /* released after fd is closed */
        _cleanup_close_ int fd = -EBADF;
        sandboxd_file_info *info = NULL;
        const char *session, *from, *to;
        Transfer t = { .call = c, .fd = -EBADF, .stop = COPY_MAX + 1 };
        bool overwrite, oom = false;
        struct stat st;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = ws_path(args, "from", true, &from, e);
        if (r >= 0)
                r = ws_path(args, "to", true, &to, e);
        if (r >= 0)
                r = arg_bool(args, "overwrite", false, &overwrite, e);
        if (r < 0)
                return r;
        r = sandboxd_file_stat(c->client, session, from, &info);
        if (r < 0)
                return fail_file(c, e, r, "Copying failed", from);
        r = info->type == SANDBOXD_FILE_DIRECTORY
                    ? tool_fail(e, "is_a_directory", "%s is a directory: sandbox_copy copies files; copy a tree with "
                                                     "sandbox_exec (cp -a).", from)
            : info->type != SANDBOXD_FILE_REGULAR ? tool_fail(e, "not_a_regular_file", "%s is not a regular file.", from)
            : info->size > COPY_MAX ? tool_fail(e, "payload_too_large", "%s is larger than %llu bytes: copy it with sandbox_exec (cp).",
                                                from, (unsigned long long) COPY_MAX)
                                    : 0;
        sandboxd_file_info_free(info);
        if (r < 0)
                return r;
        if (!overwrite) {
                r = exists(c, session, to, NULL, e);
                if (r > 0)
                        return tool_fail(e, "exists", "%s exists (overwrite is false).", to);
                if (r < 0)
                        return r;
        }
        /* each copy stages up to COPY_MAX on this host, until it returns: only so many at once */
        staged = atomic_fetch_add(&copies_staged, 1) < COPIES_STAGED_MAX;
        if (!staged) {
                atomic_fetch_sub(&copies_staged, 1);
                return tool_fail(e, "too_many_file_operations",
                                 "%d copies are under way already; copy again once one is done.", COPIES_STAGED_MAX);
        }
        fd = tmpfile_fd();
        if (fd < 0)
                return fd;
        r = sandboxd_file_download(c->client, session, from, fd, transfer_progress, &t);
        if (r < 0 && t.stopped)
                return tool_fail(e, "payload_too_large", "%s grew past %llu bytes.", from, (unsigned long long) COPY_MAX);
        if (r < 0)
                return fail_file(c, e, r, "Copying failed", from);
        if (fstat(fd, &st) < 0 || lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        t = (Transfer) { .call = c, .fd = -EBADF };
        r = sandboxd_file_upload(c->client, session, to, fd, (uint64_t) st.st_size, transfer_progress, &t);
        if (r < 0)
                return fail_file(c, e, r, "Copying failed", to);
        o = json_object_new_object();
        json_put(o, "from", json_object_new_string(from), &oom);
        json_put(o, "to", json_object_new_string(to), &oom);
        json_put(o, "bytes", json_object_new_int64((int64_t) st.st_size), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* --- copies between the workspace and the host ---------------------------------------------- */

static int host_openat2(int dir_fd, const char *path, uint64_t flags, uint64_t resolve) {
        struct open_how how = { .flags = flags | O_CLOEXEC, .resolve = resolve };
        int fd = (int) syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));

        return fd < 0 ? -errno : fd;
}

static int host_refused(ToolError *e, const char *host_path, const char *why) {
        return tool_fail(e, "forbidden", "%s: %s", host_path, why);
}

/* The allowed directory host_path is in (the deepest), its parent directory opened (O_PATH)
 * beneath it, and the last component's name. The parent is resolved by realpath() and then
 * opened again from the allowed directory's fd with RESOLVE_BENEATH and no symlinks at all,
 * so that nothing swapped in between leads out of it; the caller opens the name with
 * O_NOFOLLOW. */
static int host_resolve(McpCall *c, const char *host_path, bool write, int *ret_parent_fd, char **ret_name,
                        ToolError *e) {
        _cleanup_free_ char *copy = NULL, *real = NULL, *name = NULL;
        _cleanup_close_ int top = -EBADF;
        const McpHostPath *best = NULL;
        const char *rel;
        char *slash;
        size_t n;
        int fd;

        if (c->config->n_host_paths == 0)
                return host_refused(e, host_path, "no host directory is allowed: start sandboxctl mcp with "
                                                  "--host-path=DIR (read-only) or --host-path=DIR:rw to allow one.");
        if (host_path[0] != '/')
                return host_refused(e, host_path, "host_path must be absolute.");
        n = strlen(host_path);
        if (n > PATH_ARG_MAX)
                return host_refused(e, "host_path", "the path is too long.");
        copy = strdup(host_path);
        if (!copy)
                return -ENOMEM;
        while (n > 1 && copy[n - 1] == '/')
                copy[--n] = 0;
        slash = strrchr(copy, '/');
        name = strdup(slash + 1);
        if (!name)
                return -ENOMEM;
        if (!name[0] || streq(name, ".") || streq(name, ".."))
                return host_refused(e, host_path, "host_path must name a file.");
        if (slash == copy)
                slash[1] = 0;
        else
                *slash = 0;

        real = realpath(copy, NULL);
        if (!real) {
                if (errno == ENOMEM)
                        return -ENOMEM;
                return host_refused(e, host_path, "its directory cannot be resolved (it does not exist, or may not be "
                                                  "looked at), so it is not known to be in an allowed directory.");
        }
        for (size_t i = 0; i < c->config->n_host_paths; i++) {
                const McpHostPath *h = &c->config->host_paths[i];
                const char *rest = startswith(real, h->dir);

                if (streq(h->dir, "/"))
                        rest = real;
                if (!rest || (*rest && *rest != '/' && !streq(h->dir, "/")))
                        continue;
                if (!best || strlen(h->dir) > strlen(best->dir))
                        best = h;
        }
        if (!best)
                return host_refused(e, host_path, "it is not in a directory allowed by --host-path= (after resolving symlinks).");
        if (write && !best->writable)
                return host_refused(e, host_path, "its directory is allowed read-only: allow writing with --host-path=DIR:rw.");

        rel = streq(best->dir, "/") ? real : real + strlen(best->dir);
        while (*rel == '/')
                rel++;
        top = open(best->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (top < 0)
                return host_refused(e, host_path, "the allowed directory cannot be opened.");
        fd = host_openat2(top, *rel ? rel : ".", O_PATH | O_DIRECTORY,
                          RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (fd == -ENOSYS)
                /* without openat2() a directory swapped for a symlink between the checks
                 * could not be told from the real one */
                return host_refused(e, host_path, "this kernel has no openat2(), which host copies need.");
        if (fd < 0)
                return host_refused(e, host_path, "its directory changed while it was resolved.");
        *ret_parent_fd = fd;
        *ret_name = TAKE_PTR(name);
        return 0;
}

static int host_args(json_object *args, const char *const *allowed, const char **session, const char **path,
                     const char **host_path, bool *overwrite, ToolError *e) {
        json_object *v;
        int r;

        r = session_args(args, allowed, session, e);
        if (r >= 0)
                r = ws_path(args, "path", true, path, e);
        if (r >= 0)
                r = arg_string(args, "host_path", true, host_path, e);
        if (r >= 0 && overwrite)
                r = arg_bool(args, "overwrite", false, overwrite, e);
        if (r < 0)
                return r;
        (void) json_object_object_get_ex(args, "host_path", &v);
        if ((size_t) json_object_get_string_len(v) != strlen(*host_path))
                return tool_fail(e, "forbidden", "host_path contains a NUL byte.");
        return 0;
}

static json_object *copied(const char *path, const char *host_path, uint64_t bytes) {
        json_object *o = json_object_new_object();
        bool oom = false;

        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "host_path", json_object_new_string(host_path), &oom);
        json_put(o, "bytes", json_object_new_int64((int64_t) bytes), &oom);
        if (oom) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

static int tool_copy_from_host(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "host_path", "path", NULL };
        _cleanup_close_ int dir = -EBADF, pfd = -EBADF, fd = -EBADF;
        _cleanup_free_ char *name = NULL;
        const char *session, *path, *host_path;
        Transfer t = { .call = c, .fd = -EBADF, .stop = COPY_MAX + 1 };
        struct stat st, st2;
        int r;

        r = host_args(args, allowed, &session, &path, &host_path, NULL, e);
        if (r >= 0)
                r = host_resolve(c, host_path, false, &dir, &name, e);
        if (r < 0)
                return r;
        /* look without opening (a FIFO or a device is never opened), then open what was seen */
        pfd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (pfd < 0 && errno == ENOENT)
                return tool_fail(e, "not_found", "%s does not exist.", host_path);
        if (pfd < 0 || fstat(pfd, &st) < 0)
                return host_refused(e, host_path, "it cannot be looked at.");
        if (S_ISLNK(st.st_mode))
                return host_refused(e, host_path, "it is a symlink, which is not followed.");
        if (S_ISDIR(st.st_mode))
                return tool_fail(e, "is_a_directory", "%s is a directory: the host copies take files.", host_path);
        if (!S_ISREG(st.st_mode))
                return tool_fail(e, "not_a_regular_file", "%s is not a regular file.", host_path);
        if (st.st_nlink > 1)
                /* another name of the same file may be outside every allowed directory */
                return host_refused(e, host_path, "it has other hard links, which may be outside the allowed directories.");
        if ((uint64_t) st.st_size > COPY_MAX)
                return tool_fail(e, "payload_too_large", "%s is larger than %llu bytes.", host_path,
                                 (unsigned long long) COPY_MAX);
        {
                /* the inode looked at, opened for reading through its O_PATH fd: nothing else
                 * (a device swapped in meanwhile) can be opened by this */
                char proc[64];

                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
                fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        }
        if (fd < 0 && (errno == EACCES || errno == EPERM))
                return tool_fail(e, "forbidden", "%s may not be read: %m.", host_path);
        if (fd < 0 || fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino)
                return host_refused(e, host_path, "it changed while it was opened.");
        r = sandboxd_file_upload(c->client, session, path, fd, (uint64_t) st.st_size, transfer_progress, &t);
        if (r < 0 && t.stopped)
                return tool_fail(e, "payload_too_large", "%s grew past %llu bytes.", host_path, (unsigned long long) COPY_MAX);
        if (r < 0)
                return fail_file(c, e, r, "Copying to the workspace failed", path);
        *ret = copied(path, host_path, t.done ?: (uint64_t) st.st_size);
        return *ret ? 0 : -ENOMEM;
}

static int tool_copy_to_host(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "host_path", "overwrite", NULL };
        _cleanup_close_ int dir = -EBADF, fd = -EBADF;
        _cleanup_free_ char *name = NULL;
        const char *session, *path, *host_path;
        Transfer t = { .call = c, .fd = -EBADF, .stop = COPY_MAX + 1 };
        sandboxd_file_info *info = NULL;
        char tmp[64];
        bool overwrite;
        struct stat st;
        int r;

        r = host_args(args, allowed, &session, &path, &host_path, &overwrite, e);
        if (r >= 0)
                r = host_resolve(c, host_path, true, &dir, &name, e);
        if (r < 0)
                return r;
        if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                if (S_ISLNK(st.st_mode))
                        return host_refused(e, host_path, "it is a symlink, which is neither followed nor replaced.");
                if (S_ISDIR(st.st_mode))
                        return tool_fail(e, "is_a_directory", "%s is a directory.", host_path);
                if (!overwrite)
                        return tool_fail(e, "exists", "%s exists (overwrite is false).", host_path);
                if (!S_ISREG(st.st_mode))
                        return tool_fail(e, "not_a_regular_file", "%s exists and is not a regular file.", host_path);
        }

        r = sandboxd_file_stat(c->client, session, path, &info);
        if (r < 0)
                return fail_file(c, e, r, "Copying from the workspace failed", path);
        r = info->type == SANDBOXD_FILE_DIRECTORY ? tool_fail(e, "is_a_directory", "%s is a directory: the host copies take files.", path)
            : info->type != SANDBOXD_FILE_REGULAR ? tool_fail(e, "not_a_regular_file", "%s is not a regular file.", path)
            : info->size > COPY_MAX ? tool_fail(e, "payload_too_large", "%s is larger than %llu bytes.", path, (unsigned long long) COPY_MAX)
                                    : 0;
        sandboxd_file_info_free(info);
        if (r < 0)
                return r;

        /* into a new file of a random name next to it, which takes the name once complete */
        {
                char *id = NULL;
                r = mcp_request_id(&id);
                if (r < 0)
                        return r;
                snprintf(tmp, sizeof(tmp), ".sandboxctl-%s", id + 4);
                free(id);
        }
        fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return tool_fail(e, errno == EACCES || errno == EPERM || errno == EROFS ? "forbidden" : "internal",
                                 "%s cannot be written: %m.", host_path);
        r = sandboxd_file_download(c->client, session, path, fd, transfer_progress, &t);
        if (r < 0) {
                (void) unlinkat(dir, tmp, 0);
                if (t.stopped)
                        return tool_fail(e, "payload_too_large", "%s grew past %llu bytes.", path, (unsigned long long) COPY_MAX);
                return fail_file(c, e, r, "Copying from the workspace failed", path);
        }
        if (fsync(fd) < 0) {
                r = -errno;
                (void) unlinkat(dir, tmp, 0);
                return tool_fail(e, r == -ENOSPC ? "insufficient_storage" : "internal", "Writing %s: %s.", host_path, strerror(-r));
        }
        if (overwrite)
                r = renameat(dir, tmp, dir, name) < 0 ? -errno : 0;
        else {
                r = renameat2(dir, tmp, dir, name, RENAME_NOREPLACE) < 0 ? -errno : 0;
                if (r == -EINVAL) { /* a file system without it: a link fails as well on an existing name */
                        r = linkat(dir, tmp, dir, name, 0) < 0 ? -errno : 0;
                        (void) unlinkat(dir, tmp, 0);
                }
        }
        if (r < 0) {
                (void) unlinkat(dir, tmp, 0);
                if (r == -EEXIST)
                        return tool_fail(e, "exists", "%s exists (overwrite is false).", host_path);
                if (r == -EISDIR)
                        return tool_fail(e, "is_a_directory", "%s is a directory.", host_path);
                return tool_fail(e, "internal", "Writing %s: %s.", host_path, strerror(-r));
        }
        *ret = copied(path, host_path, t.done);
        return *ret ? 0 : -ENOMEM;
}

/* --- the table ---------------------------------------------------------------------------------- */

#define PATH_SCHEMA(what)                                                                                     \
        "{\"type\":\"string\",\"maxLength\":4096,\"description\":\"" what                                   \
        ", relative to the workspace (an absolute path or a '..' above its top is refused: invalid_path)\"}"
#define HOST_PATH_SCHEMA                                                                                      \
        "{\"type\":\"string\",\"maxLength\":4096,\"description\":\"an absolute path on the host, in a directory " \
        "allowed by sandboxctl mcp --host-path=\"}"
#define ENTRY_SCHEMA                                                                                          \
        "{\"type\":\"object\",\"description\":\"sandboxd's entry (sandboxd-api(7) FILES)\",\"properties\":{"   \
        "\"name\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},"                                      \
        "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"dir\",\"symlink\",\"other\"]},"                   \
        "\"size\":{\"type\":\"integer\"},\"mode\":{\"type\":\"string\"},\"mtime\":{\"type\":\"string\"},"    \
        "\"mtime_usec\":{\"type\":\"integer\"},\"target\":{\"type\":\"string\"}}}"
#define INPUT(props, required)                                                                                \
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID props          \
        "},\"required\":[\"session_id\"" required "],\"additionalProperties\":false}"
#define ANNOTATIONS(ro, destructive, idempotent)                                                              \
        ",\"annotations\":{\"readOnlyHint\":" ro ",\"destructiveHint\":" destructive                         \
        ",\"idempotentHint\":" idempotent ",\"openWorldHint\":false}"
#define COPIED_SCHEMA                                                                                         \
        "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"host_path\":{\"type\":\"string\"}," \
        "\"bytes\":{\"type\":\"integer\"}},\"required\":[\"path\",\"host_path\",\"bytes\"]}"

const McpTool mcp_file_tools[] = {
        { "sandbox_read_file",
          "\"title\":\"Read a file\""
          ",\"description\":\"Read a file of a session's workspace, or the range [offset, offset+length) of it "
          "(length at most 1 MiB, default 256 KiB): read a large file in parts. The data says the file's size, "
          "the offset, returned_bytes and eof. encoding auto (the default) gives content when the bytes are "
          "UTF-8 text, else content_b64; text refuses other bytes; base64 always gives content_b64.\""
          INPUT(",\"path\":" PATH_SCHEMA("the file")
                ",\"offset\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9223372036854775807,\"default\":0}"
                ",\"length\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":1048576,\"default\":262144}"
                ",\"encoding\":{\"type\":\"string\",\"enum\":[\"auto\",\"text\",\"base64\"],\"default\":\"auto\"}",
                ",\"path\"")
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
                         "\"offset\":{\"type\":\"integer\"},\"returned_bytes\":{\"type\":\"integer\"},\"eof\":{\"type\":\"boolean\"},"
                         "\"content\":{\"type\":\"string\"},\"content_b64\":{\"type\":\"string\"}},"
                         "\"required\":[\"path\",\"size\",\"offset\",\"returned_bytes\",\"eof\"]}")
          ANNOTATIONS("true", "false", "true"),
          tool_read_file },
        { "sandbox_write_file",
          "\"title\":\"Write a file\""
          ",\"description\":\"Write (create or replace) a file in a session's workspace, at most 8 MiB. Its "
          "directory must exist (not_found otherwise) unless make_parents is true. overwrite false refuses an "
          "existing file (exists; looked at before writing, not atomically).\""
          INPUT(",\"path\":" PATH_SCHEMA("the file")
                ",\"content\":{\"type\":\"string\",\"maxLength\":11184816}"
                ",\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],\"default\":\"utf8\"}"
                ",\"make_parents\":{\"type\":\"boolean\",\"default\":false}"
                ",\"overwrite\":{\"type\":\"boolean\",\"default\":true}",
                ",\"path\",\"content\"")
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"bytes\":{\"type\":\"integer\"}},"
                         "\"required\":[\"path\",\"bytes\"]}")
          ANNOTATIONS("false", "true", "true"),
          tool_write_file },
        { "sandbox_list_files",
          "\"title\":\"List a directory\""
          ",\"description\":\"List a directory of a session's workspace (default: its top), sorted by name, "
          "as sandboxd lists it (at most 100000 entries, then truncated).\""
          INPUT(",\"path\":" PATH_SCHEMA("the directory, \\\"\\\" for the top"), "")
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                         "\"entries\":{\"type\":\"array\",\"items\":" ENTRY_SCHEMA "},\"truncated\":{\"type\":\"boolean\"}},"
                         "\"required\":[\"path\",\"entries\",\"truncated\"]}")
          ANNOTATIONS("true", "false", "true"),
          tool_list_files },
        { "sandbox_stat",
          "\"title\":\"Look at a file\""
          ",\"description\":\"The entry a path of a session's workspace resolves to: type, size, mode, mtime.\""
          INPUT(",\"path\":" PATH_SCHEMA("the entry"), ",\"path\"")
          "," MCP_OUTPUT(ENTRY_SCHEMA)
          ANNOTATIONS("true", "false", "true"),
          tool_stat },
        { "sandbox_mkdir",
          "\"title\":\"Make a directory\""
          ",\"description\":\"Make a directory in a session's workspace (an existing one is fine); with parents, "
          "its missing parents too (without: not_found).\""
          INPUT(",\"path\":" PATH_SCHEMA("the directory") ",\"parents\":{\"type\":\"boolean\",\"default\":false}", ",\"path\"")
          "," MCP_OUTPUT(ENTRY_SCHEMA)
          ANNOTATIONS("false", "false", "true"),
          tool_mkdir },
        { "sandbox_remove",
          "\"title\":\"Remove a file or directory\""
          ",\"description\":\"Remove a file, a symlink (not what it points to) or an empty directory of a "
          "session's workspace; a directory with its content only with recursive and confirm both true "
          "(recursive alone is refused with invalid_value, and nothing is removed).\""
          INPUT(",\"path\":" PATH_SCHEMA("the entry") ",\"recursive\":{\"type\":\"boolean\",\"default\":false}"
                ",\"confirm\":{\"type\":\"boolean\",\"default\":false}", ",\"path\"")
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"removed\":{\"type\":\"boolean\"}},"
                         "\"required\":[\"path\",\"removed\"]}")
          ANNOTATIONS("false", "true", "false"),
          tool_remove },
        { "sandbox_move",
          "\"title\":\"Move or rename\""
          ",\"description\":\"Rename a file or directory within a session's workspace; an existing destination is "
          "refused (exists).\""
          INPUT(",\"from\":" PATH_SCHEMA("the entry") ",\"to\":" PATH_SCHEMA("its new path"), ",\"from\",\"to\"")
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"from\":{\"type\":\"string\"},\"to\":{\"type\":\"string\"}},"
                         "\"required\":[\"from\",\"to\"]}")
          ANNOTATIONS("false", "false", "false"),
          tool_move },
        { "sandbox_copy",
          "\"title\":\"Copy a file\""
          ",\"description\":\"Copy a regular file (at most 1 GiB) within a session's workspace; directories are "
          "refused (is_a_directory: use sandbox_exec with cp -a). An existing destination is refused (exists) "
          "unless overwrite is true.\""
          INPUT(",\"from\":" PATH_SCHEMA("the file") ",\"to\":" PATH_SCHEMA("the copy")
                ",\"overwrite\":{\"type\":\"boolean\",\"default\":false}", ",\"from\",\"to\"")
          "," MCP_OUTPUT("{\"type\":\"object\",\"properties\":{\"from\":{\"type\":\"string\"},\"to\":{\"type\":\"string\"},"
                         "\"bytes\":{\"type\":\"integer\"}},\"required\":[\"from\",\"to\",\"bytes\"]}")
          ANNOTATIONS("false", "true", "true"),
          tool_copy },
        { "sandbox_copy_from_host",
          "\"title\":\"Copy a host file into the workspace\""
          ",\"description\":\"Copy a regular file of the host (at most 1 GiB) to path in a session's workspace "
          "(replacing a file there). Only files in a directory the server was started with --host-path=DIR "
          "are allowed, symlinks never followed out of it; anything else is forbidden.\""
          INPUT(",\"host_path\":" HOST_PATH_SCHEMA ",\"path\":" PATH_SCHEMA("the file to write"),
                ",\"host_path\",\"path\"")
          "," MCP_OUTPUT(COPIED_SCHEMA)
          ANNOTATIONS("false", "true", "true"),
          tool_copy_from_host },
        { "sandbox_copy_to_host",
          "\"title\":\"Copy a workspace file to the host\""
          ",\"description\":\"Copy a regular file of a session's workspace (at most 1 GiB) to host_path, in a "
          "directory the server was started with --host-path=DIR:rw. An existing host file is refused (exists) "
          "unless overwrite is true; anything outside the writable directories is forbidden.\""
          INPUT(",\"path\":" PATH_SCHEMA("the file") ",\"host_path\":" HOST_PATH_SCHEMA
                ",\"overwrite\":{\"type\":\"boolean\",\"default\":false}", ",\"path\",\"host_path\"")
          "," MCP_OUTPUT(COPIED_SCHEMA)
          ANNOTATIONS("false", "true", "true"),
          tool_copy_to_host },
        {},
};
