/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "buf.h"
#include "request.h"

/* The file API's operations on one workspace. Paths are relative to the workspace and
 * resolved by the kernel beneath it (openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS):
 * "..", absolute symlinks and symlinks that climb out are refused, never followed out.
 * Every operation runs with the file-system credentials of the workspace's owner
 * (setfsuid/setfsgid), so it can do exactly what the scope's dynamic user could do there:
 * files it creates belong to that user, and whatever a command plants in its workspace
 * cannot make sandboxd act with more rights than the command has itself.
 *
 * Errors, besides the kernel's own (-ENOENT, -ENOTDIR, -EISDIR, -EEXIST, -ENOTEMPTY,
 * -EACCES, -ENOSPC, ...):
 *   -EINVAL       the path is absolute, or names no entry where one is needed ("", "a/..")
 *   -EXDEV        the path resolves outside the workspace
 *   -ELOOP        a symlink loop, or too many symlinks
 *   -EMEDIUMTYPE  not a regular file or directory (FIFO, socket, device, or a symlink
 *                 where one cannot be followed): such files are never opened
 *   -EFBIG        more data than the upload's limit */

/* Where the workspace of (user, workspace) lives on the host: systemd keeps the state
 * directories of dynamic users below /var/lib/private. */
#define WORKSPACE_HOST_ROOT "/var/lib/private/sandboxd/ws"

typedef struct Workspace {
        int fd;    /* O_PATH of the workspace directory */
        uid_t uid; /* its owner: the operations run as this user */
        gid_t gid;
        const atomic_bool *cancel; /* set: a recursive removal stops early with -ECANCELED */
} Workspace;

#define WORKSPACE_NULL ((Workspace) { .fd = -EBADF })

/* Opens the workspace directory `dir` (a host path), creating it (0700, parents 0755) when
 * missing and `create` is set. */
int workspace_open(const char *dir, bool create, Workspace *ret);
/* 0 if rel (relative) names a directory beneath dir, resolved by the kernel as dir's owner
 * (openat2 RESOLVE_BENEATH): -EXDEV or -ELOOP when it leads out, else -errno. */
int workspace_check_dir_beneath(const char *dir, const char *rel);
void workspace_close(Workspace *ws);

/* The entry `path` resolves to (symlinks followed, beneath the workspace). */
int files_stat(Workspace *ws, const char *path, struct stat *ret);

/* Opens a regular file or a directory for reading; anything else is -EMEDIUMTYPE and is
 * not opened at all. */
int files_open(Workspace *ws, const char *path, int *ret_fd, struct stat *ret_st);

/* Appends {"entries":[...],"truncated":bool} for the directory dir_fd (from files_open()),
 * the workspace's dir_path, sorted by name, at most max_entries entries, each with its
 * "path" in the workspace. Symlinks are listed as such, not followed. */
int files_append_listing(Workspace *ws, int dir_fd, const char *dir_path, size_t max_entries, Buf *b);

/* Appends the fields of one entry, without braces:
 * "name":..,"type":"file|dir|symlink|other","size":..,"mode":"0644","mtime":"RFC 3339","mtime_usec":..
 * (name_b64 for a name that is not UTF-8; "target" for a symlink). */
int files_append_entry_fields(Buf *b, const char *name, const struct stat *st, const char *link_target);

/* Appends "key":"value", or "key_b64":"..." when value is not valid UTF-8. */
int files_append_name(Buf *b, const char *key, const char *value);

/* Appends {"name":..,"path":..,"type":..,...}: the entry `path` (trailing slashes dropped)
 * with its stat, as both APIs answer a stat, a mkdir, a move or an upload. */
int files_append_entry_json(Buf *b, const char *path, const struct stat *st);

/* The error of a failed file operation (the errors listed above; max_file_bytes for the
 * message of -EFBIG) as the APIs answer it: -EINVAL with *e filled, the code of the error
 * table's row ("internal" for an errno no row has). */
int files_request_error(int err, uint64_t max_file_bytes, RequestError *e);

/* mkdir -p; *ret_created tells whether the last component was created. */
int files_mkdir_p(Workspace *ws, const char *path, mode_t mode, bool *ret_created, struct stat *ret_st);

/* Removes a file, symlink (not what it points to) or directory; a directory that is not
 * empty only with `recursive` (which never follows symlinks). */
int files_remove(Workspace *ws, const char *path, bool recursive);

/* Renames within the workspace; an existing destination is replaced only with `replace`. */
int files_move(Workspace *ws, const char *from, const char *to, bool replace, struct stat *ret_st);

/* An upload goes to an anonymous file (O_TMPFILE; a hidden temporary name where the file
 * system cannot) next to its destination, and takes the destination's name only when
 * committed: an aborted or failed upload leaves nothing behind. mode (MODE_INVALID: keep
 * the replaced file's, else 0600) is set on the new file. */
typedef struct FileUpload FileUpload;

#define MODE_INVALID ((mode_t) -1)

int files_upload_begin(Workspace *ws, const char *path, mode_t mode, uint64_t max_size, FileUpload **ret);
int files_upload_write(FileUpload *u, const void *p, size_t n);
int files_upload_commit(FileUpload *u, bool *ret_created, struct stat *ret_st);
/* Aborts the upload unless it was committed. */
FileUpload *files_upload_free(FileUpload *u);

/* Bytes allocated below dir (st_blocks * 512, symlinks not followed); 0 if it is missing. */
/* Counted as the workspace's owner (its file-system uid). */
int files_disk_usage(const char *dir, uint64_t *ret);
/* The same, stopping early with -ECANCELED once *cancel is set. */
int files_disk_usage_cancellable(const char *dir, const atomic_bool *cancel, uint64_t *ret);
