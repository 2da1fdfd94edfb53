/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The safe unpacker: a tar stream (or a directory tree) into a new directory, DEST, that the
 * input cannot reach out of. sandboxd runs it (sandboxd-unpack, main.c) off its event loop to
 * import an image; it knows nothing of sessions, HTTP or D-Bus. Every input is hostile.
 *
 * libarchive parses (tar, pax, GNU tar and v7 only; gzip, bzip2, xz, lzma, zstd and lz4
 * around them) and writes (archive_write_disk); there is no tar parser here. Every entry
 * passes these rules before libarchive writes it:
 *
 * - Names: a leading "/" is refused (unsafe_path), not stripped: an image's tar has relative
 *   names ("./usr/bin/..."), so an absolute one is a sign of a hostile or wrong archive.
 *   "" and "." components are dropped, a ".." component is refused (unsafe_path). At most
 *   4095 bytes, 255 a component, 128 components deep (invalid_archive). The entry is
 *   written under its cleaned name; the top directory itself ("./") only as a directory.
 * - Two guards against writing through a symlink, both on every entry: the entry's parent
 *   is opened from a DEST fd one component at a time with openat2(RESOLVE_BENEATH |
 *   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) (plain openat() with
 *   O_NOFOLLOW where the kernel has no openat2), missing parents created 0755 on the way; a
 *   symlink or a non-directory on the way is unsafe_path. Then libarchive writes with
 *   ARCHIVE_EXTRACT_SECURE_SYMLINKS | SECURE_NODOTDOT | SECURE_NOABSOLUTEPATHS |
 *   NO_AUTODIR, with DEST as the working directory.
 * - Whatever exists under the entry's name is removed first unless both are directories;
 *   an entry that would replace a directory with a non-directory is unsafe_path.
 * - Symlinks are kept as they are, whatever their target (an image's "/bin -> usr/bin"
 *   points where it should once the image is the root); nothing is ever written through
 *   one.
 * - A hard link must name an entry extracted before, inside DEST, that is a regular file
 *   (not a symlink, not itself): else unsafe_path.
 * - Character and block devices are refused (device_node). FIFOs and sockets are skipped
 *   (counted as entries, not created): nothing in an image needs them and a session's /dev
 *   and /run are its own anyway.
 * - Owner: everything belongs to the unpacker (root when sandboxd runs it): the archive's
 *   uids, gids and names are ignored (images are read-only root file systems owned by root).
 *   Permissions: mode & 01777, the set-uid and set-gid bits dropped. Extended attributes
 *   (so also security.capability), ACLs and file flags are not restored. Modification
 *   times are (Python checks its .pyc files against them).
 * - Limits: max_entries counts every entry read (skipped ones too); max_bytes counts the
 *   bytes of regular files (hard links with data too): a file costs the larger of its
 *   declared size and the end of the last block libarchive handed over (so a sparse file
 *   costs its apparent size and a lying header cannot slip past), checked before its first
 *   byte is written and after every block.
 * - Any refusal or error removes DEST and everything in it (by fds, never following a
 *   symlink), so nothing is left behind; a signal (unpack_interrupted) stops the unpack the
 *   same way. Only a SIGKILL can leave a partial DEST, which its caller removes.
 *
 * --from-dir is the same path: a child process reads the source with archive_read_disk and
 * writes it as a pax stream into a pipe that is unpacked as above (the disk reader changes
 * the working directory as it walks, the writer works relative to it: they cannot share a
 * process). Symlinks are read as symlinks (never followed), mount points are not crossed,
 * hard links are found by archive_entry_linkify(), sockets are left out. The source is
 * trusted to stay still while it is read (it is read by path); whatever it holds, the rules
 * above keep it inside DEST. A source that cannot be read is io_error.
 */

#include <archive.h>
#include <assert.h>
#include <inttypes.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "macro.h"
#include "unpack.h"

#define IN_SET(x, ...)                                                  \
        ({                                                              \
                const int _in_x_ = (x), _in_l_[] = { __VA_ARGS__ };     \
                bool _in_f_ = false;                                    \
                for (size_t _i_ = 0; _i_ < ELEMENTSOF(_in_l_); _i_++)   \
                        if (_in_l_[_i_] == _in_x_)                      \
                                _in_f_ = true;                          \
                _in_f_;                                                 \
        })

#define UNPACK_MAX_DEPTH 128
#define UNPACK_READ_BUFFER (128 * 1024)

volatile int unpack_interrupted = 0;

static const char * const code_names[_UNPACK_CODE_MAX] = {
        [UNPACK_OK] = "ok",
        [UNPACK_UNSAFE_PATH] = "unsafe_path",
        [UNPACK_DEVICE_NODE] = "device_node",
        [UNPACK_TOO_LARGE] = "too_large",
        [UNPACK_TOO_MANY_ENTRIES] = "too_many_entries",
        [UNPACK_INVALID_ARCHIVE] = "invalid_archive",
        [UNPACK_IO_ERROR] = "io_error",
        [UNPACK_EXISTS] = "exists",
};

const char *unpack_code_to_string(UnpackCode code) {
        if (code < 0 || code >= _UNPACK_CODE_MAX)
                return "io_error";
        return code_names[code];
}

int unpack_code_to_exit_status(UnpackCode code) {
        switch (code) {
        case UNPACK_OK:
                return 0;
        case UNPACK_UNSAFE_PATH:
        case UNPACK_DEVICE_NODE:
        case UNPACK_TOO_LARGE:
        case UNPACK_TOO_MANY_ENTRIES:
        case UNPACK_INVALID_ARCHIVE:
                return 65; /* EX_DATAERR */
        default:
                return 74; /* EX_IOERR: also "exists", which is not the archive's fault */
        }
}

typedef struct Unpack {
        const UnpackLimits *limits;
        UnpackResult *result;
        int parent_fd;          /* DEST's parent */
        char *dest_name;        /* DEST's last component */
        int dest_fd;            /* DEST, once created */
        dev_t dest_dev;
        ino_t dest_ino;
        bool openat2_missing;
} Unpack;

/* A name from the archive in a message: printable ASCII, the rest as \xNN, shortened. */
static void escape_name(const char *s, char *buf, size_t size) {
        size_t n = 0;

        assert(size >= 8);
        if (!s)
                s = "(none)";
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;

                if (n + 8 >= size) {
                        memcpy(buf + n, "...", 4);
                        return;
                }
                if (c >= 0x20 && c < 0x7f && c != '\\')
                        buf[n++] = (char) c;
                else
                        n += (size_t) snprintf(buf + n, size - n, "\\x%02x", c);
        }
        buf[n] = 0;
}

_printf_(3, 4)
static int fail(Unpack *u, UnpackCode code, const char *format, ...) {
        va_list ap;

        /* the first failure is the one told */
        if (u->result->code != UNPACK_OK)
                return -EBADMSG;
        u->result->code = code;
        va_start(ap, format);
        vsnprintf(u->result->message, sizeof(u->result->message), format, ap);
        va_end(ap);
        /* one line, whatever libarchive's strings hold */
        for (char *p = u->result->message; *p; p++)
                if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
                        *p = '?';
        return code == UNPACK_IO_ERROR || code == UNPACK_EXISTS ? -EIO : -EBADMSG;
}

static bool errno_is_io(int e) {
        return IN_SET(e, EIO, ENOSPC, EDQUOT, EROFS, ENOMEM, EMFILE, ENFILE, EFBIG, EPERM, EACCES,
                      EINTR, ENODEV, ENXIO, EBADF);
}

/* A failure libarchive reported. The writer's refusals (SECURE_*) are unsafe_path, though
 * the checks here come first and should leave none to it. */
static int fail_archive(Unpack *u, struct archive *a, bool writer, const char *what, const char *name) {
        const char *s = archive_error_string(a) ?: "unknown error";
        int e = archive_errno(a);
        char n[256];
        UnpackCode code;

        escape_name(name, n, sizeof(n));
        if (e > 0 && errno_is_io(e))
                code = UNPACK_IO_ERROR;
        else if (writer && (strstr(s, "symlink") || strstr(s, "'..'") || strstr(s, "bsolute")))
                code = UNPACK_UNSAFE_PATH;
        else
                code = UNPACK_INVALID_ARCHIVE;
        if (name)
                return fail(u, code, "%s '%s': %s", what, n, s);
        return fail(u, code, "%s: %s", what, s);
}

/* Cleans an archive's name into "a/b/c" ("" for the top), or refuses it. */
static int clean_name(Unpack *u, const char *name, const char *what, char **ret) {
        _cleanup_free_ char *out = NULL;
        char n[256];
        size_t len, o = 0, depth = 0;
        const char *p;

        if (!name)
                return fail(u, UNPACK_INVALID_ARCHIVE, "an entry without a readable %s", what);
        escape_name(name, n, sizeof(n));
        if (name[0] == '/')
                return fail(u, UNPACK_UNSAFE_PATH, "%s '%s' is absolute", what, n);
        len = strlen(name);
        if (len >= PATH_MAX)
                return fail(u, UNPACK_INVALID_ARCHIVE, "%s '%s' is too long", what, n);
        out = malloc(len + 1);
        if (!out)
                return fail(u, UNPACK_IO_ERROR, "out of memory");
        for (p = name; *p;) {
                size_t l = strcspn(p, "/");

                if (l == 2 && p[0] == '.' && p[1] == '.')
                        return fail(u, UNPACK_UNSAFE_PATH, "%s '%s' has a '..' component", what, n);
                if (l > NAME_MAX)
                        return fail(u, UNPACK_INVALID_ARCHIVE, "%s '%s' has a component too long", what, n);
                if (l > 0 && !(l == 1 && p[0] == '.')) {
                        if (++depth > UNPACK_MAX_DEPTH)
                                return fail(u, UNPACK_INVALID_ARCHIVE, "%s '%s' is too deep", what, n);
                        if (o > 0)
                                out[o++] = '/';
                        memcpy(out + o, p, l);
                        o += l;
                }
                p += l;
                while (*p == '/')
                        p++;
        }
        out[o] = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

static int open_beneath(Unpack *u, int dir_fd, const char *name) {
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd;

        if (!u->openat2_missing) {
                fd = (int) syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));
                if (fd >= 0 || !IN_SET(errno, ENOSYS, EPERM))
                        return fd;
                /* no openat2 (old kernel, or a seccomp filter's EPERM/ENOSYS) */
                u->openat2_missing = true;
        }
        /* one component, never "..", O_NOFOLLOW: the same guarantee */
        return openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Opens the directory that holds name ("a/b/c": a/b) from DEST, one component at a time,
 * never through a symlink; creates missing ones if create. *ret_base points into name. */
static int open_parent(Unpack *u, const char *name, bool create, int *ret_fd, const char **ret_base) {
        _cleanup_close_ int fd = -EBADF;
        char n[256], component[NAME_MAX + 1];
        const char *p = name, *slash;

        fd = fcntl(u->dest_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return fail(u, UNPACK_IO_ERROR, "dup: %s", strerror(errno));
        while ((slash = strchr(p, '/'))) {
                size_t l = (size_t) (slash - p);
                int next;

                assert(l > 0 && l <= NAME_MAX);
                memcpy(component, p, l);
                component[l] = 0;
                next = open_beneath(u, fd, component);
                if (next < 0 && errno == ENOENT && create) {
                        if (mkdirat(fd, component, 0755) < 0 && errno != EEXIST)
                                return fail(u, errno_is_io(errno) ? UNPACK_IO_ERROR : UNPACK_INVALID_ARCHIVE,
                                            "creating the directories of '%s': %s",
                                            (escape_name(name, n, sizeof(n)), n), strerror(errno));
                        next = open_beneath(u, fd, component);
                }
                if (next < 0) {
                        int e = errno;

                        escape_name(name, n, sizeof(n));
                        if (IN_SET(e, ELOOP, ENOTDIR, EXDEV, EAGAIN))
                                return fail(u, UNPACK_UNSAFE_PATH,
                                            "'%s' goes through a symlink or a non-directory", n);
                        if (e == ENOENT)
                                return fail(u, UNPACK_UNSAFE_PATH, "'%s' is not inside what was extracted", n);
                        return fail(u, errno_is_io(e) ? UNPACK_IO_ERROR : UNPACK_INVALID_ARCHIVE,
                                    "opening the directories of '%s': %s", n, strerror(e));
                }
                safe_close(fd);
                fd = next;
                p = slash + 1;
        }
        *ret_fd = TAKE_FD(fd);
        *ret_base = p;
        return 0;
}

/* A hard link's target: extracted before, inside DEST, a regular file. */
static int check_hardlink(Unpack *u, const char *target, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        const char *base;
        struct stat st;
        char n[256];
        int r;

        escape_name(target, n, sizeof(n));
        if (target[0] == 0 || streq(target, name))
                return fail(u, UNPACK_UNSAFE_PATH, "a hard link to '%s', which is itself or the top", n);
        r = open_parent(u, target, false, &fd, &base);
        if (r < 0)
                return r;
        if (fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return fail(u, UNPACK_UNSAFE_PATH, "a hard link to '%s', which was not extracted", n);
                return fail(u, UNPACK_IO_ERROR, "stat of '%s': %s", n, strerror(errno));
        }
        if (!S_ISREG(st.st_mode))
                return fail(u, UNPACK_UNSAFE_PATH, "a hard link to '%s', which is not a regular file", n);
        return 0;
}

/* What is at the entry's name already: removed unless both are directories. */
static int clear_name(Unpack *u, int dir_fd, const char *base, const char *name, bool is_dir) {
        struct stat st;
        char n[256];

        if (fstatat(dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return 0;
                return fail(u, UNPACK_IO_ERROR, "stat of '%s': %s", (escape_name(name, n, sizeof(n)), n),
                            strerror(errno));
        }
        if (S_ISDIR(st.st_mode)) {
                if (is_dir)
                        return 0;
                return fail(u, UNPACK_UNSAFE_PATH, "'%s' would replace a directory",
                            (escape_name(name, n, sizeof(n)), n));
        }
        if (unlinkat(dir_fd, base, 0) < 0)
                return fail(u, UNPACK_IO_ERROR, "removing '%s' to replace it: %s",
                            (escape_name(name, n, sizeof(n)), n), strerror(errno));
        return 0;
}

/* The one place an entry is sanitized; from here on libarchive sees only what passed. */
static void sanitize_entry(struct archive_entry *e) {
        archive_entry_set_perm(e, archive_entry_perm(e) & 01777);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_uname(e, NULL);
        archive_entry_set_gname(e, NULL);
        archive_entry_xattr_clear(e);
        archive_entry_acl_clear(e);
        archive_entry_set_fflags(e, 0, 0);
        archive_entry_copy_mac_metadata(e, NULL, 0);
}

static int copy_data(Unpack *u, struct archive *r, struct archive *w, const char *name, uint64_t declared,
                     uint64_t *ret_cost) {
        uint64_t extent = 0, cost = declared;
        char n[256];

        for (;;) {
                const void *buf;
                size_t size;
                la_int64_t offset;
                int k;

                if (unpack_interrupted)
                        return fail(u, UNPACK_IO_ERROR, "interrupted by a signal");
                k = archive_read_data_block(r, &buf, &size, &offset);
                if (k == ARCHIVE_EOF)
                        break;
                if (k < ARCHIVE_WARN)
                        return fail_archive(u, r, false, "reading", name);
                if (offset < 0 || (uint64_t) offset > UINT64_MAX - size)
                        return fail(u, UNPACK_INVALID_ARCHIVE, "'%s': a block at an impossible offset",
                                    (escape_name(name, n, sizeof(n)), n));
                extent = MAX(extent, (uint64_t) offset + size);
                cost = MAX(cost, extent);
                if (cost > u->limits->max_bytes - u->result->bytes)
                        return fail(u, UNPACK_TOO_LARGE, "more than %" PRIu64 " bytes of files (at '%s')",
                                    u->limits->max_bytes, (escape_name(name, n, sizeof(n)), n));
                if (size > 0 && archive_write_data_block(w, buf, size, offset) < ARCHIVE_OK)
                        return fail_archive(u, w, true, "writing", name);
        }
        *ret_cost = cost;
        return 0;
}

/* One entry: checked, cleaned, written. */
static int unpack_entry(Unpack *u, struct archive *r, struct archive *w, struct archive_entry *e) {
        _cleanup_free_ char *name = NULL, *link_target = NULL;
        _cleanup_close_ int dir_fd = -EBADF;
        const char *hardlink, *base;
        mode_t type = archive_entry_filetype(e);
        uint64_t declared = 0, cost = 0;
        bool has_data = false;
        char n[256];
        int k, r2;

        r2 = clean_name(u, archive_entry_pathname(e), "name", &name);
        if (r2 < 0)
                return r2;
        escape_name(name, n, sizeof(n));

        hardlink = archive_entry_hardlink(e);
        if (hardlink) {
                r2 = clean_name(u, hardlink, "hard link target", &link_target);
                if (r2 < 0)
                        return r2;
                if (name[0] == 0)
                        return fail(u, UNPACK_UNSAFE_PATH, "the top directory as a hard link");
                r2 = check_hardlink(u, link_target, name);
                if (r2 < 0)
                        return r2;
                archive_entry_copy_hardlink(e, link_target);
                has_data = true; /* a pax hard link may carry data */
        } else
                switch (type) {
                case AE_IFREG:
                        has_data = true;
                        break;
                case AE_IFDIR:
                        break;
                case AE_IFLNK: {
                        const char *t = archive_entry_symlink(e);

                        if (!t || t[0] == 0 || strlen(t) >= PATH_MAX)
                                return fail(u, UNPACK_INVALID_ARCHIVE, "symlink '%s' without a usable target", n);
                        break;
                }
                case AE_IFCHR:
                case AE_IFBLK:
                        return fail(u, UNPACK_DEVICE_NODE, "'%s' is a device node", n);
                case AE_IFIFO:
                case AE_IFSOCK:
                        return 0; /* skipped */
                default:
                        return fail(u, UNPACK_INVALID_ARCHIVE, "'%s' has an unknown type (0%o)", n,
                                    (unsigned) type);
                }

        if (name[0] == 0) {
                /* "./" itself: DEST, created 0755 */
                if (type != AE_IFDIR)
                        return fail(u, UNPACK_UNSAFE_PATH, "the top directory as a non-directory");
                return 0;
        }

        if (has_data && archive_entry_size_is_set(e)) {
                la_int64_t s = archive_entry_size(e);

                if (s < 0)
                        return fail(u, UNPACK_INVALID_ARCHIVE, "'%s' has a negative size", n);
                declared = (uint64_t) s;
                if (declared > u->limits->max_bytes - u->result->bytes)
                        return fail(u, UNPACK_TOO_LARGE, "more than %" PRIu64 " bytes of files (at '%s')",
                                    u->limits->max_bytes, n);
        }

        r2 = open_parent(u, name, true, &dir_fd, &base);
        if (r2 < 0)
                return r2;
        r2 = clear_name(u, dir_fd, base, name, type == AE_IFDIR && !hardlink);
        if (r2 < 0)
                return r2;

        sanitize_entry(e);
        archive_entry_copy_pathname(e, name);

        k = archive_write_header(w, e);
        if (k < ARCHIVE_WARN)
                return fail_archive(u, w, true, "creating", name);
        if (has_data) {
                r2 = copy_data(u, r, w, name, declared, &cost);
                if (r2 < 0)
                        return r2;
        }
        k = archive_write_finish_entry(w);
        if (k < ARCHIVE_WARN)
                return fail_archive(u, w, true, "finishing", name);
        u->result->bytes += cost;
        return 0;
}

static struct archive *new_writer(void) {
        struct archive *w = archive_write_disk_new();

        if (!w)
                return NULL;
        /* no OWNER (the unpacker owns all), no XATTR/ACL/FFLAGS; PERM with the mode cleaned */
        if (archive_write_disk_set_options(w, ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                                              ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                              ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                                              ARCHIVE_EXTRACT_NO_AUTODIR) != ARCHIVE_OK) {
                archive_write_free(w);
                return NULL;
        }
        return w;
}

/* Empties the directory dir_fd, never following a symlink; depth is bounded by
 * UNPACK_MAX_DEPTH (what clean_name() lets through). */
static int rm_children(int dir_fd, unsigned depth) {
        int ret = 0;
        bool again = true;

        if (depth > UNPACK_MAX_DEPTH + 2)
                return -ELOOP;
        (void) fchmod(dir_fd, 0700); /* entries of a 0555 directory, without CAP_DAC_OVERRIDE */
        while (again) {
                _cleanup_close_ int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
                struct dirent *de;
                DIR *d;

                again = false;
                if (fd < 0)
                        return -errno;
                d = fdopendir(fd);
                if (!d)
                        return -errno;
                TAKE_FD(fd);
                rewinddir(d);
                while ((de = readdir(d))) {
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        if (unlinkat(dir_fd, de->d_name, 0) == 0) {
                                again = true;
                                continue;
                        }
                        if (errno == EISDIR || errno == EPERM) {
                                _cleanup_close_ int child = openat(dir_fd, de->d_name,
                                                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                struct stat st;
                                int k;

                                /* a directory the archive made 0000 (libarchive's close set the
                                 * modes), without CAP_DAC_OVERRIDE: a directory, as nobody else
                                 * writes in DEST, made ours to enter */
                                if (child < 0 && errno == EACCES &&
                                    fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                    S_ISDIR(st.st_mode) && fchmodat(dir_fd, de->d_name, 0700, 0) == 0)
                                        child = openat(dir_fd, de->d_name,
                                                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                if (child < 0) {
                                        ret = -errno;
                                        continue;
                                }
                                k = rm_children(child, depth + 1);
                                if (k < 0)
                                        ret = k;
                                if (unlinkat(dir_fd, de->d_name, AT_REMOVEDIR) == 0)
                                        again = true;
                                else
                                        ret = -errno;
                        } else if (errno != ENOENT)
                                ret = -errno;
                }
                closedir(d);
                if (ret < 0)
                        break;
        }
        return ret;
}

static void remove_dest(Unpack *u) {
        struct stat st;

        if (u->dest_fd < 0)
                return;
        (void) rm_children(u->dest_fd, 0);
        /* only the directory this unpack made */
        if (fstatat(u->parent_fd, u->dest_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
            st.st_dev == u->dest_dev && st.st_ino == u->dest_ino)
                (void) unlinkat(u->parent_fd, u->dest_name, AT_REMOVEDIR);
        u->dest_fd = safe_close(u->dest_fd);
}

static int create_dest(Unpack *u, const char *dest) {
        _cleanup_free_ char *copy = NULL;
        struct stat st;
        char *slash, n[256];
        const char *parent, *base;

        escape_name(dest, n, sizeof(n));
        if (!dest || dest[0] == 0 || strlen(dest) >= PATH_MAX)
                return fail(u, UNPACK_IO_ERROR, "the destination '%s' is empty or too long", n);
        copy = strdup(dest);
        if (!copy)
                return fail(u, UNPACK_IO_ERROR, "out of memory");
        /* "a/b/" is "a/b" */
        for (size_t l = strlen(copy); l > 1 && copy[l - 1] == '/'; l--)
                copy[l - 1] = 0;
        slash = strrchr(copy, '/');
        if (!slash) {
                parent = ".";
                base = copy;
        } else if (slash == copy) {
                parent = "/";
                base = slash + 1;
        } else {
                *slash = 0;
                parent = copy;
                base = slash + 1;
        }
        if (base[0] == 0 || streq(base, ".") || streq(base, ".."))
                return fail(u, UNPACK_IO_ERROR, "the destination '%s' does not name a new directory", n);

        u->parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (u->parent_fd < 0)
                return fail(u, UNPACK_IO_ERROR, "the parent of '%s': %s", n, strerror(errno));
        u->dest_name = strdup(base);
        if (!u->dest_name)
                return fail(u, UNPACK_IO_ERROR, "out of memory");
        if (mkdirat(u->parent_fd, base, 0755) < 0) {
                if (errno == EEXIST)
                        return fail(u, UNPACK_EXISTS, "'%s' exists already", n);
                return fail(u, UNPACK_IO_ERROR, "creating '%s': %s", n, strerror(errno));
        }
        u->dest_fd = openat(u->parent_fd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (u->dest_fd < 0 || fstat(u->dest_fd, &st) < 0) {
                int e = errno;

                (void) unlinkat(u->parent_fd, base, AT_REMOVEDIR);
                u->dest_fd = safe_close(u->dest_fd);
                return fail(u, UNPACK_IO_ERROR, "opening '%s': %s", n, strerror(e));
        }
        u->dest_dev = st.st_dev;
        u->dest_ino = st.st_ino;
        if (fchmod(u->dest_fd, 0755) < 0)
                return fail(u, UNPACK_IO_ERROR, "chmod of '%s': %s", n, strerror(errno));
        return 0;
}

/* Said before an unpack counts as done (--from-dir: the packer's verdict); < 0 fails it. */
typedef int (*UnpackCheck)(Unpack *u, void *userdata);

/* The common part: dest made, the tar's entries written into it, dest removed on failure. */
static int unpack_run(struct archive *reader, const char *dest, const UnpackLimits *limits, UnpackResult *ret,
                      UnpackCheck check, void *userdata) {
        UnpackLimits defaults = {
                .max_bytes = UNPACK_MAX_BYTES_DEFAULT,
                .max_entries = UNPACK_MAX_ENTRIES_DEFAULT,
        };
        Unpack u = {
                .limits = limits ?: &defaults,
                .result = ret,
                .parent_fd = -EBADF,
                .dest_fd = -EBADF,
        };
        struct archive *w = NULL;
        int cwd_fd = -EBADF, r = 0;
        mode_t saved_umask;

        saved_umask = umask(022);
        r = create_dest(&u, dest);
        if (r < 0)
                goto finish;

        w = new_writer();
        if (!w) {
                r = fail(&u, UNPACK_IO_ERROR, "setting up libarchive's writer failed");
                goto finish;
        }

        /* libarchive writes relative to the working directory: DEST, for as long as the
         * writer lives (its close sets the directories' modes and times by name). Nothing
         * else here changes it (--from-dir reads the source in another process: libarchive's
         * disk reader changes directories as it walks). */
        cwd_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cwd_fd < 0 || fchdir(u.dest_fd) < 0) {
                r = fail(&u, UNPACK_IO_ERROR, "entering '%s': %s", u.dest_name, strerror(errno));
                goto finish;
        }

        for (;;) {
                struct archive_entry *entry;
                int k;

                if (unpack_interrupted) {
                        r = fail(&u, UNPACK_IO_ERROR, "interrupted by a signal");
                        break;
                }
                k = archive_read_next_header(reader, &entry);
                if (k == ARCHIVE_EOF)
                        break;
                if (k < ARCHIVE_WARN) {
                        r = fail_archive(&u, reader, false, "reading the archive", NULL);
                        break;
                }
                if (++ret->entries > u.limits->max_entries) {
                        r = fail(&u, UNPACK_TOO_MANY_ENTRIES, "more than %" PRIu64 " entries",
                                 u.limits->max_entries);
                        break;
                }
                r = unpack_entry(&u, reader, w, entry);
                if (r < 0)
                        break;
        }
        if (r >= 0 && archive_write_close(w) < ARCHIVE_WARN)
                r = fail_archive(&u, w, true, "finishing the directories", NULL);
        if (r >= 0 && check)
                r = check(&u, userdata);

finish:
        if (w)
                archive_write_free(w); /* still in DEST: its close works by name */
        if (cwd_fd >= 0) {
                (void) fchdir(cwd_fd);
                safe_close(cwd_fd);
        }
        if (r < 0)
                remove_dest(&u);
        else
                u.dest_fd = safe_close(u.dest_fd);
        safe_close(u.parent_fd);
        free(u.dest_name);
        umask(saved_umask);
        return r;
}

static struct archive *new_tar_reader(void) {
        struct archive *r = archive_read_new();

        if (!r)
                return NULL;
        /* tar, pax, GNU tar, v7: nothing else; the filters libarchive has built in (plain
         * too). Only the formats a root file system comes in: no cpio, zip, iso9660 ... */
        if (archive_read_support_format_tar(r) != ARCHIVE_OK) {
                archive_read_free(r);
                return NULL;
        }
        (void) archive_read_support_filter_gzip(r);
        (void) archive_read_support_filter_bzip2(r);
        (void) archive_read_support_filter_xz(r);
        (void) archive_read_support_filter_lzma(r);
        (void) archive_read_support_filter_zstd(r);
        (void) archive_read_support_filter_lz4(r);
        return r;
}

static void reset_result(UnpackResult *ret) {
        *ret = (UnpackResult) { .code = UNPACK_OK };
}

typedef struct FdSource {
        int fd;
        int error;              /* why reading failed, if it did: libarchive may tell another story */
        uint8_t buf[UNPACK_READ_BUFFER];
} FdSource;

static void set_read_error(UnpackResult *ret, int error) {
        ret->code = UNPACK_IO_ERROR;
        if (error == EINTR)
                snprintf(ret->message, sizeof(ret->message), "interrupted by a signal");
        else
                snprintf(ret->message, sizeof(ret->message), "reading the archive: %s", strerror(error));
}

static la_ssize_t fd_source_read(struct archive *a, void *userdata, const void **buf) {
        FdSource *s = userdata;

        for (;;) {
                ssize_t n;

                if (unpack_interrupted) {
                        s->error = EINTR;
                        archive_set_error(a, EINTR, "interrupted by a signal");
                        return -1;
                }
                n = read(s->fd, s->buf, sizeof(s->buf));
                /* a signal that came with the end of the input: not a truncated archive */
                if (n == 0 && unpack_interrupted)
                        continue;
                if (n >= 0) {
                        *buf = s->buf;
                        return n;
                }
                if (errno == EAGAIN) {
                        /* a non-blocking input: wait for it (a signal ends the wait, EINTR) */
                        struct pollfd pfd = { .fd = s->fd, .events = POLLIN };

                        (void) poll(&pfd, 1, -1);
                        continue;
                }
                if (errno != EINTR) {
                        s->error = errno;
                        archive_set_error(a, errno, "reading the archive: %s", strerror(errno));
                        return -1;
                }
        }
}

/* Told before the input is read (create_dest() makes sure, this is to fail fast: nothing of a
 * stream is read when its destination is taken). */
static bool dest_exists(const char *dest, UnpackResult *ret) {
        struct stat st;
        char n[256];

        if (!dest || fstatat(AT_FDCWD, dest, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        escape_name(dest, n, sizeof(n));
        ret->code = UNPACK_EXISTS;
        snprintf(ret->message, sizeof(ret->message), "'%s' exists already", n);
        return true;
}

static int unpack_tar_fd_full(int fd, const char *dest, const UnpackLimits *limits, UnpackResult *ret,
                              UnpackCheck check, void *userdata) {
        _cleanup_free_ FdSource *s = NULL;
        struct archive *reader;
        int r;

        reset_result(ret);
        if (dest_exists(dest, ret))
                return -EEXIST;
        s = malloc(sizeof(FdSource));
        reader = new_tar_reader();
        if (!s || !reader) {
                if (reader)
                        archive_read_free(reader);
                ret->code = UNPACK_IO_ERROR;
                snprintf(ret->message, sizeof(ret->message), "setting up libarchive's reader failed");
                return -ENOMEM;
        }
        *s = (FdSource) { .fd = fd };
        /* opening reads the first block: an empty or unreadable input fails here, before
         * dest is made */
        if (archive_read_open(reader, s, NULL, fd_source_read, NULL) != ARCHIVE_OK) {
                const char *m = archive_error_string(reader) ?: "unknown error";
                int e = archive_errno(reader);

                ret->code = e > 0 && errno_is_io(e) ? UNPACK_IO_ERROR : UNPACK_INVALID_ARCHIVE;
                snprintf(ret->message, sizeof(ret->message), "reading the archive: %s", m);
                for (char *p = ret->message; *p; p++)
                        if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
                                *p = '?';
                if (s->error != 0)
                        set_read_error(ret, s->error);
                archive_read_free(reader);
                return ret->code == UNPACK_IO_ERROR ? -EIO : -EBADMSG;
        }
        r = unpack_run(reader, dest, limits, ret, check, userdata);
        archive_read_free(reader);
        if (r < 0 && unpack_interrupted)
                set_read_error(ret, EINTR);
        else if (r < 0 && s->error != 0)
                /* the tar reader calls a failed read "Truncated tar archive": the input's
                 * failure is the one to tell */
                set_read_error(ret, s->error);
        return r;
}

int unpack_tar_fd(int fd, const char *dest, const UnpackLimits *limits, UnpackResult *ret) {
        return unpack_tar_fd_full(fd, dest, limits, ret, NULL, NULL);
}

int unpack_tar_memory(const void *data, size_t size, const char *dest, const UnpackLimits *limits,
                      UnpackResult *ret) {
        struct archive *reader;
        int r;

        reset_result(ret);
        reader = new_tar_reader();
        if (!reader) {
                ret->code = UNPACK_IO_ERROR;
                snprintf(ret->message, sizeof(ret->message), "setting up libarchive's reader failed");
                return -ENOMEM;
        }
        if (archive_read_open_memory(reader, data, size) != ARCHIVE_OK) {
                ret->code = UNPACK_INVALID_ARCHIVE;
                snprintf(ret->message, sizeof(ret->message), "reading the archive failed");
                archive_read_free(reader);
                return -EBADMSG;
        }
        r = unpack_run(reader, dest, limits, ret, NULL, NULL);
        archive_read_free(reader);
        return r;
}


/* --from-dir: a child process walks the source with libarchive's disk reader and writes it
 * as a pax stream into a pipe, which the parent unpacks like any tar. Two processes because
 * the disk reader changes the working directory as it walks while the writer works relative
 * to it; one reading path for both inputs as a bonus. The child's exit: 0 done, 1 it could
 * not read the source (one line on err_fd), 2 the parent stopped reading (a refusal). */
#define PACKER_EXIT_FAILED 1
#define PACKER_EXIT_PIPE 2

_printf_(3, 4)
static _noreturn_ void packer_fail(int err_fd, int status, const char *format, ...) {
        char line[400];
        va_list ap;

        va_start(ap, format);
        vsnprintf(line, sizeof(line), format, ap);
        va_end(ap);
        (void) !write(err_fd, line, strlen(line));
        _exit(status);
}

static _noreturn_ void packer_archive_fail(int err_fd, struct archive *a, const char *what) {
        if (archive_errno(a) == EPIPE)
                _exit(PACKER_EXIT_PIPE);
        packer_fail(err_fd, PACKER_EXIT_FAILED, "%s: %s", what, archive_error_string(a) ?: "unknown error");
}

static _noreturn_ void packer_run(const char *src, int out_fd, int err_fd) {
        static const uint8_t zeros[16384];
        struct archive_entry_linkresolver *links;
        struct archive_entry *e;
        struct archive *disk, *w;
        size_t prefix = streq(src, "/") ? 0 : strlen(src);

        /* a parent killed outright takes this one along */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        (void) signal(SIGPIPE, SIG_IGN);
        (void) signal(SIGTERM, SIG_DFL);
        (void) signal(SIGINT, SIG_DFL);
        (void) signal(SIGHUP, SIG_DFL);

        disk = archive_read_disk_new();
        w = archive_write_new();
        links = archive_entry_linkresolver_new();
        e = archive_entry_new();
        if (!disk || !w || !links || !e)
                packer_fail(err_fd, PACKER_EXIT_FAILED, "out of memory");
        /* symlinks as symlinks, one file system, no xattrs/ACLs/flags (not restored anyway),
         * holes read as zeros (the bytes count at the apparent size either way) */
        if (archive_read_disk_set_symlink_physical(disk) != ARCHIVE_OK ||
            archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_XATTR |
                                                 ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS |
                                                 ARCHIVE_READDISK_NO_SPARSE) != ARCHIVE_OK ||
            archive_read_disk_open(disk, src) != ARCHIVE_OK)
                packer_archive_fail(err_fd, disk, "reading the source");
        archive_entry_linkresolver_set_strategy(links, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        if (archive_write_set_format_pax_restricted(w) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
            archive_write_open_fd(w, out_fd) != ARCHIVE_OK)
                packer_archive_fail(err_fd, w, "writing the stream");

        for (;;) {
                struct archive_entry *entry = e, *spare = NULL;
                const char *p, *rest;
                int k = archive_read_next_header2(disk, e);

                if (k == ARCHIVE_EOF)
                        break;
                if (k == ARCHIVE_RETRY)
                        continue;
                if (k < ARCHIVE_WARN)
                        packer_archive_fail(err_fd, disk, "reading the source");
                (void) archive_read_disk_descend(disk);
                p = archive_entry_pathname(e);
                if (!p || strncmp(p, src, prefix) != 0 || (p[prefix] != 0 && p[prefix] != '/'))
                        packer_fail(err_fd, PACKER_EXIT_FAILED, "the source gave a name outside of it");
                for (rest = p + prefix; *rest == '/'; rest++)
                        ;
                archive_entry_copy_pathname(e, rest[0] ? rest : ".");
                archive_entry_copy_sourcepath(e, NULL);
                if (archive_entry_filetype(e) == AE_IFSOCK)
                        continue; /* pax has no sockets; the unpacker would skip them */
                /* a file with more links: the first one as it is, the others hard links to it */
                archive_entry_linkify(links, &entry, &spare);
                if (!entry)
                        continue;
                k = archive_write_header(w, entry);
                if (k < ARCHIVE_WARN)
                        packer_archive_fail(err_fd, w, "writing the stream");
                if (archive_entry_filetype(entry) == AE_IFREG && !archive_entry_hardlink(entry) &&
                    archive_entry_size(entry) > 0) {
                        la_int64_t done = 0, size = archive_entry_size(entry);

                        for (;;) {
                                const void *buf;
                                size_t n;
                                la_int64_t offset;

                                k = archive_read_data_block(disk, &buf, &n, &offset);
                                if (k == ARCHIVE_EOF)
                                        break;
                                if (k < ARCHIVE_WARN)
                                        packer_archive_fail(err_fd, disk, "reading the source");
                                while (done < offset && done < size) {
                                        size_t z = (size_t) MIN((la_int64_t) sizeof(zeros), offset - done);

                                        if (archive_write_data(w, zeros, z) < 0)
                                                packer_archive_fail(err_fd, w, "writing the stream");
                                        done += (la_int64_t) z;
                                }
                                if (n > 0 && archive_write_data(w, buf, n) < 0)
                                        packer_archive_fail(err_fd, w, "writing the stream");
                                done += (la_int64_t) n;
                        }
                }
        }
        if (archive_write_close(w) != ARCHIVE_OK)
                packer_archive_fail(err_fd, w, "writing the stream");
        _exit(0);
}

typedef struct Packer {
        pid_t pid;
        int data_fd;            /* the stream's read end */
        int err_fd;             /* the child's one line */
        int status;             /* its exit status, once waited for; -1 killed */
        char message[400];
} Packer;

static void packer_wait(Packer *p, bool kill_it) {
        int st;

        if (p->pid <= 0)
                return;
        /* a child still writing gets EPIPE */
        p->data_fd = safe_close(p->data_fd);
        if (kill_it)
                (void) kill(p->pid, SIGKILL);
        while (waitpid(p->pid, &st, 0) < 0)
                if (errno != EINTR) {
                        st = -1;
                        break;
                }
        p->pid = 0;
        p->status = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (p->err_fd >= 0) {
                ssize_t n = read(p->err_fd, p->message, sizeof(p->message) - 1);

                p->message[MAX(n, 0)] = 0;
                p->err_fd = safe_close(p->err_fd);
        }
}

/* Before success counts: the stream ended, so the child must end too; its verdict is final
 * (a stream cut short at an entry's end reads like a whole one). */
static int packer_check(Unpack *u, void *userdata) {
        Packer *p = userdata;
        char buf[4096];
        ssize_t n;

        /* whatever the reader left unread (nothing, or the last block's zeros) */
        while ((n = read(p->data_fd, buf, sizeof(buf))) != 0)
                if (n < 0 && errno != EINTR)
                        break;
        packer_wait(p, false);
        if (p->status != 0)
                return fail(u, UNPACK_IO_ERROR, "%s", p->message[0] ? p->message : "reading the source failed");
        return 0;
}

/* Whether dest's parent is src or below it (by their real paths). */
static bool dest_inside(const char *src, const char *dest) {
        _cleanup_free_ char *copy = strdup(dest), *parent = NULL;
        const char *rest;
        char *slash;

        if (!copy)
                return false;
        for (size_t l = strlen(copy); l > 1 && copy[l - 1] == '/'; l--)
                copy[l - 1] = 0;
        slash = strrchr(copy, '/');
        if (!slash)
                parent = realpath(".", NULL);
        else {
                slash[slash == copy ? 1 : 0] = 0;
                parent = realpath(copy, NULL);
        }
        if (!parent)
                return false; /* create_dest() tells */
        if (streq(src, "/"))
                return true;
        rest = startswith(parent, src);
        return rest && (rest[0] == 0 || rest[0] == '/');
}

int unpack_from_dir(const char *src, const char *dest, const UnpackLimits *limits, UnpackResult *ret) {
        _cleanup_free_ char *real = NULL;
        Packer p = { .data_fd = -EBADF, .err_fd = -EBADF };
        int data[2], err[2], r;
        struct stat st;

        reset_result(ret);
        if (dest_exists(dest, ret))
                return -EEXIST;
        real = src ? realpath(src, NULL) : NULL;
        if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
                char n[256];

                escape_name(src, n, sizeof(n));
                ret->code = UNPACK_IO_ERROR;
                snprintf(ret->message, sizeof(ret->message), "the source '%s' is not a directory: %s", n,
                         strerror(real ? ENOTDIR : errno));
                return -EIO;
        }
        /* DEST inside the source: the copy would copy itself */
        if (dest_inside(real, dest)) {
                ret->code = UNPACK_IO_ERROR;
                snprintf(ret->message, sizeof(ret->message), "the destination lies inside the source");
                return -EIO;
        }
        if (pipe2(data, O_CLOEXEC) < 0)
                goto fail_errno;
        if (pipe2(err, O_CLOEXEC) < 0) {
                safe_close(data[0]);
                safe_close(data[1]);
                goto fail_errno;
        }
        p.pid = fork();
        if (p.pid < 0) {
                safe_close(data[0]);
                safe_close(data[1]);
                safe_close(err[0]);
                safe_close(err[1]);
                goto fail_errno;
        }
        if (p.pid == 0) {
                safe_close(data[0]);
                safe_close(err[0]);
                packer_run(real, data[1], err[1]);
        }
        safe_close(data[1]);
        safe_close(err[1]);
        p.data_fd = data[0];
        p.err_fd = err[0];

        r = unpack_tar_fd_full(p.data_fd, dest, limits, ret, packer_check, &p);
        if (r < 0) {
                packer_wait(&p, unpack_interrupted);
                /* the child's failure first: the stream it cut short is only its symptom */
                if (p.status == PACKER_EXIT_FAILED) {
                        ret->code = UNPACK_IO_ERROR;
                        snprintf(ret->message, sizeof(ret->message), "%s",
                                 p.message[0] ? p.message : "reading the source failed");
                        for (char *c = ret->message; *c; c++)
                                if ((unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f)
                                        *c = '?';
                        r = -EIO;
                }
        }
        packer_wait(&p, true);
        return r;

fail_errno:
        ret->code = UNPACK_IO_ERROR;
        snprintf(ret->message, sizeof(ret->message), "starting to read the source: %s", strerror(errno));
        return -EIO;
}
