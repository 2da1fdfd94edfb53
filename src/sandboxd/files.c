/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The workspace's files, its one job although over 800 lines: every path resolved beneath
 * the workspace (openat2 RESOLVE_BENEATH) as its owner (fsuid), reads, uploads, listings,
 * stat, mkdir, moves, removals and the disk-usage walk. Called on file-ops.c's threads,
 * uploads on the loop. */

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>

#include "encoding.h"
#include "files.h"
#include "io-util.h"
#include "ndjson.h"

/* How deep a recursive removal or the disk usage walk goes (one fd per level). */
#define WALK_DEPTH_MAX 256U

/* --- credentials ---------------------------------------------------------------- */

/* The file-system uid/gid we had before taking the workspace owner's. Changing fsuid away
 * from 0 also clears CAP_DAC_READ_SEARCH and the other file capabilities from the effective
 * set until it is changed back: in between we have the owner's rights, not more. */
typedef struct FsCreds {
        uid_t uid;
        gid_t gid;
        bool changed;
} FsCreds;

static void fscreds_restore(FsCreds *saved) {
        if (!saved->changed)
                return;
        (void) setfsuid(saved->uid);
        (void) setfsgid(saved->gid);
        saved->changed = false;
}

static int fscreds_become(uid_t uid, gid_t gid, FsCreds *saved) {
        /* setfsuid() cannot fail visibly: it returns the old value; asking with -1 (invalid)
         * tells the current one. */
        *saved = (FsCreds) {
                .uid = (uid_t) setfsuid((uid_t) -1),
                .gid = (gid_t) setfsgid((gid_t) -1),
        };
        if (saved->uid == uid && saved->gid == gid)
                return 0;
        saved->changed = true;
        (void) setfsgid(gid);
        (void) setfsuid(uid);
        if ((uid_t) setfsuid((uid_t) -1) != uid || (gid_t) setfsgid((gid_t) -1) != gid) {
                fscreds_restore(saved);
                return -EPERM; /* CAP_SETUID/CAP_SETGID missing */
        }
        return 0;
}

#define BECOME(uid, gid)                                                \
        _cleanup_(fscreds_restore) FsCreds _creds_ = {};                \
        do {                                                            \
                int _r_ = fscreds_become((uid), (gid), &_creds_);       \
                if (_r_ < 0)                                            \
                        return _r_;                                     \
        } while (0)

/* --- paths ---------------------------------------------------------------------- */

static int resolve(int dir_fd, const char *path, int flags, int *ret_fd) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        int fd;

        if (path[0] == '/')
                return -EINVAL;
        if (strlen(path) >= PATH_MAX)
                return -ENAMETOOLONG;
        fd = (int) syscall(SYS_openat2, dir_fd, path[0] ? path : ".", &how, sizeof(how));
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

int workspace_check_dir_beneath(const char *dir, const char *rel) {
        _cleanup_close_ int top = -EBADF, fd = -EBADF;
        struct stat st;

        top = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return -errno;
        if (fstat(top, &st) < 0)
                return -errno;
        BECOME(st.st_uid, st.st_gid);
        return resolve(top, rel, O_PATH | O_DIRECTORY, &fd);
}

/* A copy of a workspace-relative path without its trailing slashes, and its length. */
static int path_copy_trimmed(const char *path, char **ret, size_t *ret_len) {
        char *p;
        size_t n;

        if (path[0] == '/')
                return -EINVAL;
        n = strlen(path);
        if (n >= PATH_MAX)
                return -ENAMETOOLONG;
        p = strdup(path);
        if (!p)
                return -ENOMEM;
        while (n > 0 && p[n - 1] == '/')
                p[--n] = 0;
        *ret = p;
        *ret_len = n;
        return 0;
}

/* "a/b/c/" -> "a/b" and "c"; "c" -> "." and "c". The last component must name an entry. */
static int path_split(const char *path, char **ret_parent, char **ret_name) {
        _cleanup_free_ char *p = NULL, *name = NULL;
        char *slash;
        size_t n;
        int r;

        r = path_copy_trimmed(path, &p, &n);
        if (r < 0)
                return r;
        if (n == 0)
                return -EINVAL;

        slash = strrchr(p, '/');
        name = strdup(slash ? slash + 1 : p);
        if (!name)
                return -ENOMEM;
        if (streq(name, ".") || streq(name, ".."))
                return -EINVAL;
        if (strlen(name) > NAME_MAX)
                return -ENAMETOOLONG;

        if (slash)
                *slash = 0;
        else
                strcpy(p, ".");
        *ret_parent = TAKE_PTR(p);
        *ret_name = TAKE_PTR(name);
        return 0;
}

static int resolve_parent(const Workspace *ws, const char *path, int *ret_dir_fd, char **ret_name) {
        _cleanup_free_ char *parent = NULL, *name = NULL;
        int r;

        r = path_split(path, &parent, &name);
        if (r < 0)
                return r;
        r = resolve(ws->fd, parent, O_PATH | O_DIRECTORY, ret_dir_fd);
        if (r < 0)
                return r;
        *ret_name = TAKE_PTR(name);
        return 0;
}

static int random_name(char ret[static 32]) {
        uint8_t b[8];
        char hex[17];

        if (getrandom(b, sizeof(b), 0) != (ssize_t) sizeof(b))
                return -EIO;
        hex_encode(b, sizeof(b), hex);
        snprintf(ret, 32, ".sandboxd-%s", hex);
        return 0;
}

/* --- the workspace ---------------------------------------------------------------- */

/* mkdir -p with 0755 whatever the umask, as systemd makes the parents of state directories. */
static int mkdir_parents(const char *path) {
        char buf[PATH_MAX];
        size_t n = strlen(path);

        if (n == 0 || n >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, path, n + 1);
        for (char *p = buf + 1;; p++) {
                if (*p != '/' && *p != 0)
                        continue;
                char c = *p;
                *p = 0;
                if (mkdir(buf, 0755) >= 0) {
                        if (chmod(buf, 0755) < 0)
                                return -errno;
                } else if (errno != EEXIST)
                        return -errno;
                if (c == 0)
                        return 0;
                *p = c;
        }
}

int workspace_open(const char *dir, bool create, Workspace *ret) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && create) {
                _cleanup_free_ char *parent = strdup(dir);
                char *slash = parent ? strrchr(parent, '/') : NULL;

                if (!parent)
                        return -ENOMEM;
                if (slash && slash != parent) {
                        *slash = 0;
                        r = mkdir_parents(parent);
                        if (r < 0)
                                return r;
                }
                /* Owned by us until the next command starts: systemd then sees a foreign
                 * owner and chowns the tree to the scope's dynamic user. */
                if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                        return -errno;
                fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;

        *ret = (Workspace) { .fd = TAKE_FD(fd), .uid = st.st_uid, .gid = st.st_gid };
        return 0;
}

void workspace_close(Workspace *ws) {
        ws->fd = safe_close(ws->fd);
}

/* --- reading ---------------------------------------------------------------------- */

int files_stat(Workspace *ws, const char *path, struct stat *ret) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        BECOME(ws->uid, ws->gid);
        r = resolve(ws->fd, path, O_PATH, &fd);
        if (r < 0)
                return r;
        return fstat(fd, ret) < 0 ? -errno : 0;
}

int files_open(Workspace *ws, const char *path, int *ret_fd, struct stat *ret_st) {
        _cleanup_close_ int path_fd = -EBADF, fd = -EBADF;
        struct stat st;
        int r;

        BECOME(ws->uid, ws->gid);

        /* Look before opening: O_PATH opens nothing, so a FIFO or a device is never opened
         * (which could block, or do something). */
        r = resolve(ws->fd, path, O_PATH, &path_fd);
        if (r < 0)
                return r;
        if (fstat(path_fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                return -EMEDIUMTYPE;

        /* Swapped for a FIFO in between? O_NONBLOCK keeps even that from blocking. */
        r = resolve(ws->fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0), &fd);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                return -EMEDIUMTYPE;

        *ret_fd = TAKE_FD(fd);
        *ret_st = st;
        return 0;
}

static const char *type_to_string(mode_t m) {
        if (S_ISREG(m))
                return "file";
        if (S_ISDIR(m))
                return "dir";
        if (S_ISLNK(m))
                return "symlink";
        return "other";
}

int files_append_name(Buf *b, const char *key, const char *value) {
        size_t n = strlen(value);
        bool valid;
        int r;

        if (utf8_valid_prefix(value, n, &valid) == n && valid) {
                r = buf_printf(b, "\"%s\":", key);
                return r < 0 ? r : json_append_string(b, value, n);
        }
        r = buf_printf(b, "\"%s_b64\":\"", key);
        if (r >= 0)
                r = base64_encode(b, value, n);
        return r < 0 ? r : buf_puts(b, "\"");
}

int files_append_entry_fields(Buf *b, const char *name, const struct stat *st, const char *link_target) {
        time_t t = st->st_mtim.tv_sec;
        int64_t usec = (int64_t) st->st_mtim.tv_sec * 1000000 + st->st_mtim.tv_nsec / 1000;
        char ts[64];
        struct tm tm;
        int r;

        if (!gmtime_r(&t, &tm) || strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
                return -ERANGE;
        r = files_append_name(b, "name", name);
        if (r < 0)
                return r;
        r = buf_printf(b, ",\"type\":\"%s\",\"size\":%" PRIu64 ",\"mode\":\"%04o\",\"mtime\":\"%s.%06ldZ\",\"mtime_usec\":%" PRId64,
                       type_to_string(st->st_mode), (uint64_t) st->st_size, (unsigned) (st->st_mode & 07777), ts,
                       (long) (st->st_mtim.tv_nsec / 1000), usec);
        if (r >= 0 && link_target) {
                r = buf_puts(b, ",");
                if (r >= 0)
                        r = files_append_name(b, "target", link_target);
        }
        return r;
}

typedef struct Entry {
        char *name;
        char *target;
        struct stat st;
} Entry;

static int entry_compare(const void *a, const void *b) {
        return strcmp(((const Entry *) a)->name, ((const Entry *) b)->name);
}

static void entries_free(Entry *e, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(e[i].name);
                free(e[i].target);
        }
        free(e);
}

/* "path":.. of an entry of the directory dir_path: the workspace-relative path */
static int append_entry_path(Buf *b, const char *dir_path, const char *name) {
        _cleanup_free_ char *p = NULL;
        size_t n = strlen(dir_path);
        int r;

        while (n > 0 && dir_path[n - 1] == '/')
                n--;
        if (n == 0)
                return files_append_name(b, "path", name);
        if (asprintf(&p, "%.*s/%s", (int) n, dir_path, name) < 0)
                return -ENOMEM;
        r = files_append_name(b, "path", p);
        return r;
}

int files_append_listing(Workspace *ws, int dir_fd, const char *dir_path, size_t max_entries, Buf *b) {
        Entry *entries = NULL;
        size_t n = 0, allocated = 0;
        bool truncated = false;
        struct dirent *de;
        DIR *d;
        int fd, r = 0;

        BECOME(ws->uid, ws->gid);

        fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        while ((errno = 0, de = readdir(d))) {
                char target[PATH_MAX];
                struct stat st;
                ssize_t k;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (n >= max_entries) {
                        truncated = true;
                        break;
                }
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* gone meanwhile */
                if (n == allocated) {
                        size_t m = MAX(allocated * 2, (size_t) 64);
                        Entry *e = realloc(entries, m * sizeof(Entry));
                        if (!e) {
                                r = -ENOMEM;
                                goto finish;
                        }
                        entries = e;
                        allocated = m;
                }
                entries[n] = (Entry) { .name = strdup(de->d_name), .st = st };
                if (!entries[n].name) {
                        r = -ENOMEM;
                        goto finish;
                }
                n++;
                if (S_ISLNK(st.st_mode)) {
                        k = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
                        if (k >= 0) {
                                target[k] = 0;
                                entries[n - 1].target = strdup(target);
                                if (!entries[n - 1].target) {
                                        r = -ENOMEM;
                                        goto finish;
                                }
                        }
                }
        }
        if (errno != 0 && !truncated) {
                r = -errno;
                goto finish;
        }

        if (n > 0)
                qsort(entries, n, sizeof(Entry), entry_compare);
        r = buf_puts(b, "\"entries\":[");
        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = buf_puts(b, i > 0 ? ",{" : "{");
                if (r >= 0)
                        r = files_append_entry_fields(b, entries[i].name, &entries[i].st, entries[i].target);
                if (r >= 0)
                        r = buf_puts(b, ",");
                if (r >= 0)
                        r = append_entry_path(b, dir_path, entries[i].name);
                if (r >= 0)
                        r = buf_puts(b, "}");
        }
        if (r >= 0)
                r = buf_printf(b, "],\"truncated\":%s", truncated ? "true" : "false");
finish:
        closedir(d);
        entries_free(entries, n);
        return r;
}

/* --- changing things ----------------------------------------------------------------- */

int files_mkdir_p(Workspace *ws, const char *path, mode_t mode, bool *ret_created, struct stat *ret_st) {
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -EBADF;
        bool created = false;
        size_t n;
        int r;

        r = path_copy_trimmed(path, &p, &n);
        if (r < 0)
                return r;

        BECOME(ws->uid, ws->gid);

        /* Each prefix is resolved from the top again, so ".." and symlinks mean what the
         * kernel makes of them, beneath the workspace. */
        for (size_t i = 1, start = 0; i <= n; i++) {
                _cleanup_close_ int parent_fd = -EBADF, sub_fd = -EBADF;
                const char *comp;
                char saved;

                if (p[i] != '/' && p[i] != 0)
                        continue;
                if (p[i - 1] == '/') { /* an empty component */
                        start = i + 1;
                        continue;
                }
                saved = p[i];
                p[i] = 0;
                comp = p + start;
                if (!streq(comp, ".") && !streq(comp, "..")) {
                        if (strlen(comp) > NAME_MAX)
                                return -ENAMETOOLONG;
                        r = resolve(ws->fd, p, O_PATH | O_DIRECTORY, &sub_fd);
                        if (r == -ENOENT) {
                                if (start > 0)
                                        p[start - 1] = 0;
                                r = resolve(ws->fd, start > 0 ? p : ".", O_PATH | O_DIRECTORY, &parent_fd);
                                if (start > 0)
                                        p[start - 1] = '/';
                                if (r < 0)
                                        return r;
                                if (mkdirat(parent_fd, comp, mode) >= 0)
                                        created = i == n;
                                else if (errno != EEXIST)
                                        return -errno;
                                r = resolve(ws->fd, p, O_PATH | O_DIRECTORY, &sub_fd);
                                if (r == -ENOENT)
                                        r = -EEXIST; /* a dangling symlink is in the way */
                        }
                        if (r < 0)
                                return r;
                }
                p[i] = saved;
                start = i + 1;
        }

        r = resolve(ws->fd, p, O_PATH | O_DIRECTORY, &fd);
        if (r < 0)
                return r;
        if (fstat(fd, ret_st) < 0)
                return -errno;
        *ret_created = created;
        return 0;
}

static bool cancelled(const atomic_bool *cancel) {
        return cancel && atomic_load(cancel);
}

/* Empties the directory fd (taken over), never following symlinks. */
static int remove_children(int fd, unsigned depth, const atomic_bool *cancel) {
        struct dirent *de;
        DIR *d;
        int r = 0;

        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                safe_close(fd);
                return r;
        }
        while ((de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (cancelled(cancel)) {
                        r = -ECANCELED;
                        break;
                }
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        int sub, q;

                        if (depth >= WALK_DEPTH_MAX) {
                                r = -ENOTEMPTY;
                                continue;
                        }
                        sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0) {
                                r = r < 0 ? r : -errno;
                                continue;
                        }
                        q = remove_children(sub, depth + 1, cancel);
                        if (q < 0) {
                                r = r < 0 ? r : q;
                                continue;
                        }
                        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                                r = r < 0 ? r : -errno;
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
                        r = r < 0 ? r : -errno;
        }
        closedir(d);
        return r;
}

int files_remove(Workspace *ws, const char *path, bool recursive) {
        _cleanup_close_ int dir_fd = -EBADF;
        _cleanup_free_ char *name = NULL;
        struct stat st;
        int fd, r;

        BECOME(ws->uid, ws->gid);

        r = resolve_parent(ws, path, &dir_fd, &name);
        if (r < 0)
                return r;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;

        if (unlinkat(dir_fd, name, AT_REMOVEDIR) >= 0)
                return 0;
        if (errno != ENOTEMPTY && errno != EEXIST)
                return -errno;
        if (!recursive)
                return -ENOTEMPTY;

        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = remove_children(fd, 0, ws->cancel);
        if (r < 0)
                return r;
        return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

int files_move(Workspace *ws, const char *from, const char *to, bool replace, struct stat *ret_st) {
        _cleanup_close_ int from_fd = -EBADF, to_fd = -EBADF;
        _cleanup_free_ char *from_name = NULL, *to_name = NULL;
        int r;

        BECOME(ws->uid, ws->gid);

        r = resolve_parent(ws, from, &from_fd, &from_name);
        if (r < 0)
                return r;
        r = resolve_parent(ws, to, &to_fd, &to_name);
        if (r < 0)
                return r;
        /* Moves the entry itself: a symlink stays a symlink, nothing is followed. */
        if (renameat2(from_fd, from_name, to_fd, to_name, replace ? 0 : RENAME_NOREPLACE) < 0)
                return -errno;
        return fstatat(to_fd, to_name, ret_st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* --- uploads ---------------------------------------------------------------------- */

struct FileUpload {
        int dir_fd; /* O_PATH of the destination's directory */
        char *name;
        int fd;
        char *tmp_name; /* the hidden name while not committed, if it has one */
        uid_t uid;
        gid_t gid;
        uint64_t written;
        uint64_t max_size;
        bool committed;
};

/* What is at the destination now: 0 nothing, 1 a regular file; errors for anything else. */
static int check_destination(int dir_fd, const char *name, struct stat *ret_st) {
        if (fstatat(dir_fd, name, ret_st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(ret_st->st_mode))
                return -EISDIR;
        if (!S_ISREG(ret_st->st_mode))
                return -EMEDIUMTYPE;
        return 1;
}

int files_upload_begin(Workspace *ws, const char *path, mode_t mode, uint64_t max_size, FileUpload **ret) {
        FileUpload *u;
        struct stat st;
        int r;

        BECOME(ws->uid, ws->gid);

        u = calloc(1, sizeof(FileUpload));
        if (!u)
                return -ENOMEM;
        *u = (FileUpload) { .dir_fd = -EBADF, .fd = -EBADF, .uid = ws->uid, .gid = ws->gid, .max_size = max_size };

        r = resolve_parent(ws, path, &u->dir_fd, &u->name);
        if (r < 0)
                goto fail;

        r = check_destination(u->dir_fd, u->name, &st);
        if (r == -EMEDIUMTYPE && S_ISLNK(st.st_mode)) {
                /* Replacing a symlink is not writing to it: refuse, and say so clearly when it
                 * points out of the workspace or in a loop. */
                _cleanup_close_ int fd = -EBADF;
                int q = resolve(ws->fd, path, O_PATH, &fd);
                if (q == -EXDEV || q == -ELOOP)
                        r = q;
        }
        if (r < 0)
                goto fail;
        if (mode == MODE_INVALID)
                mode = r > 0 ? (st.st_mode & 0777) : 0600;

        u->fd = openat(u->dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
        if (u->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
                /* No O_TMPFILE on this file system: a hidden name, removed on abort. */
                char tmp[32];

                r = random_name(tmp);
                if (r < 0)
                        goto fail;
                u->fd = openat(u->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (u->fd >= 0 && !(u->tmp_name = strdup(tmp))) {
                        (void) unlinkat(u->dir_fd, tmp, 0);
                        r = -ENOMEM;
                        goto fail;
                }
        }
        if (u->fd < 0) {
                r = -errno;
                goto fail;
        }
        /* The umask took bits away. */
        if (fchmod(u->fd, mode) < 0) {
                r = -errno;
                goto fail;
        }

        *ret = u;
        return 0;
fail:
        files_upload_free(u);
        return r;
}

int files_upload_write(FileUpload *u, const void *p, size_t n) {
        int r;

        if (u->fd < 0 || u->committed)
                return -EBADF;
        if (n > u->max_size - u->written)
                return -EFBIG;
        r = loop_write(u->fd, p, n);
        if (r < 0)
                return r;
        u->written += n;
        return 0;
}

int files_upload_commit(FileUpload *u, bool *ret_created, struct stat *ret_st) {
        struct stat st;
        int r;

        if (u->fd < 0 || u->committed)
                return -EBADF;

        BECOME(u->uid, u->gid);

        /* The destination may have changed while the body came in. */
        r = check_destination(u->dir_fd, u->name, &st);
        if (r < 0)
                return r;

        if (!u->tmp_name) {
                /* linkat() cannot replace: give the anonymous file a hidden name, then rename that
                 * over the destination. Through /proc, as AT_EMPTY_PATH would need
                 * CAP_DAC_READ_SEARCH, which the owner's credentials do not have. */
                char proc[64], tmp[32];

                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", u->fd);
                for (unsigned attempt = 0;; attempt++) {
                        int q = random_name(tmp);
                        if (q < 0)
                                return q;
                        if (linkat(AT_FDCWD, proc, u->dir_fd, tmp, AT_SYMLINK_FOLLOW) >= 0)
                                break;
                        if (errno != EEXIST || attempt >= 16)
                                return -errno;
                }
                u->tmp_name = strdup(tmp);
                if (!u->tmp_name) {
                        (void) unlinkat(u->dir_fd, tmp, 0);
                        return -ENOMEM;
                }
        }

        if (renameat(u->dir_fd, u->tmp_name, u->dir_fd, u->name) < 0)
                return -errno; /* files_upload_free() removes the hidden name */
        u->committed = true;
        free(u->tmp_name);
        u->tmp_name = NULL;

        if (fstat(u->fd, ret_st) < 0)
                return -errno;
        *ret_created = r == 0;
        return 0;
}

FileUpload *files_upload_free(FileUpload *u) {
        if (!u)
                return NULL;
        if (!u->committed && u->tmp_name) {
                FsCreds creds;

                if (fscreds_become(u->uid, u->gid, &creds) >= 0) {
                        (void) unlinkat(u->dir_fd, u->tmp_name, 0);
                        fscreds_restore(&creds);
                }
        }
        /* An O_TMPFILE that never got a name disappears with its last fd. */
        safe_close(u->fd);
        safe_close(u->dir_fd);
        free(u->name);
        free(u->tmp_name);
        free(u);
        return NULL;
}

/* --- disk usage ---------------------------------------------------------------------- */

static int disk_usage_dir(int fd, unsigned depth, const atomic_bool *cancel, uint64_t *total) {
        struct dirent *de;
        DIR *d;

        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return 0;
        }
        while ((de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (cancelled(cancel)) {
                        closedir(d);
                        return -ECANCELED;
                }
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                *total += (uint64_t) st.st_blocks * 512;
                if (S_ISDIR(st.st_mode) && depth < WALK_DEPTH_MAX) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0 && disk_usage_dir(sub, depth + 1, cancel, total) < 0) {
                                closedir(d);
                                return -ECANCELED;
                        }
                }
        }
        closedir(d);
        return 0;
}

int files_disk_usage(const char *dir, uint64_t *ret) {
        return files_disk_usage_cancellable(dir, NULL, ret);
}

int files_disk_usage_cancellable(const char *dir, const atomic_bool *cancel, uint64_t *ret) {
        _cleanup_close_ int top = -EBADF;
        struct stat st;
        uint64_t total;
        int fd, r;

        top = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0) {
                if (errno != ENOENT)
                        return -errno;
                *ret = 0;
                return 0;
        }
        if (fstat(top, &st) < 0)
                return -errno;
        /* As the owner: what a command made unreadable to itself is not counted. */
        BECOME(st.st_uid, st.st_gid);
        fd = openat(top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        total = (uint64_t) st.st_blocks * 512;
        r = disk_usage_dir(fd, 0, cancel, &total);
        if (r < 0)
                return r;
        *ret = total;
        return 0;
}

int files_append_entry_json(Buf *b, const char *path, const struct stat *st) {
        _cleanup_free_ char *p = strdup(path);
        const char *name;
        size_t n;

        if (!p)
                return -ENOMEM;
        n = strlen(p);
        while (n > 0 && p[n - 1] == '/')
                p[--n] = 0;
        name = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;

        if (buf_puts(b, "{") < 0 || files_append_entry_fields(b, name, st, NULL) < 0 || buf_puts(b, ",") < 0 ||
            files_append_name(b, "path", p) < 0 || buf_puts(b, "}") < 0)
                return -ENOMEM;
        return 0;
}

int files_request_error(int err, uint64_t max_file_bytes, RequestError *e) {
        switch (err) {
        case -EINVAL:
                return request_error(e, "invalid_path", "The path must be relative to the workspace and name an entry in it "
                                     "(not the workspace itself, '.' or '..').");
        case -EXDEV:
                return request_error(e, "invalid_path", "The path resolves outside the workspace.");
        case -ELOOP:
                return request_error(e, "invalid_path", "The path runs into a symlink loop, or through too many symlinks.");
        case -ENAMETOOLONG:
                return request_error(e, "invalid_path", "The path or a name in it is too long.");
        case -ENOENT:
                return request_error(e, "not_found", "No such file or directory in the workspace.");
        case -ENOTDIR:
                return request_error(e, "not_a_directory", "A component of the path is not a directory.");
        case -EISDIR:
                return request_error(e, "is_a_directory", "The path is a directory.");
        case -EMEDIUMTYPE:
                return request_error(e, "not_a_regular_file",
                                     "The path is a FIFO, socket, device or symlink: sandboxd neither opens nor replaces those.");
        case -EEXIST:
                return request_error(e, "exists", "Something is in the way (ask for the move with overwrite to replace it).");
        case -ENOTEMPTY:
                return request_error(e, "not_empty", "The directory is not empty (remove it recursively).");
        case -EACCES:
        case -EPERM:
                return request_error(e, "forbidden", "Permission denied: the file API has the rights of the scope's own user.");
        case -EFBIG:
                return request_error(e, "payload_too_large",
                                     "The file is larger than the configured MaxFileSize= (%" PRIu64 " bytes).", max_file_bytes);
        case -ENOSPC:
        case -EDQUOT:
                return request_error(e, "insufficient_storage", "No space left for the workspace.");
        default:
                return request_error(e, "internal", "File operation failed: %s", strerror(-err));
        }
}
