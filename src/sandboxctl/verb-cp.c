/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <sys/stat.h>

#include "log.h"
#include "sandboxctl.h"
#include "validate.h"
#include "time-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

#define PROGRESS_DELAY_USEC (500 * USEC_PER_MSEC)    /* short copies show nothing */
#define PROGRESS_INTERVAL_USEC (100 * USEC_PER_MSEC)

typedef struct Location {
        char *session; /* NULL: local */
        char *path;
} Location;

typedef struct Progress {
        const char *name;
        uint64_t start;
        uint64_t last;
        bool drawn;
} Progress;

static bool progress_enabled(void) {
        if (arg_progress >= 0)
                return arg_progress;
        return !arg_quiet && isatty(STDERR_FILENO);
}

static int on_progress(uint64_t done, uint64_t total, void *userdata) {
        Progress *p = userdata;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        char a[32], b[32], rate[32];
        double secs;

        if (now - p->start < PROGRESS_DELAY_USEC || now - p->last < PROGRESS_INTERVAL_USEC)
                return 0;
        p->last = now;
        secs = (double) (now - p->start) / USEC_PER_SEC;
        format_bytes((uint64_t) ((double) done / secs), rate);
        if (total > 0)
                fprintf(stderr, "\r%-40.40s %3u%%  %9s / %-9s %9s/s ", p->name, (unsigned) (done * 100 / total),
                        format_bytes(done, a), format_bytes(total, b), rate);
        else
                fprintf(stderr, "\r%-40.40s        %9s %9s/s ", p->name, format_bytes(done, a), rate);
        p->drawn = true;
        return 0;
}

static void progress_done(Progress *p) {
        if (p->drawn)
                fprintf(stderr, "\r%*s\r", 80, "");
}

static int parse_location(const char *arg, Location *ret) {
        const char *colon = strchr(arg, ':');

        *ret = (Location) {};
        if (colon && colon - arg >= SESSION_ID_HEX && colon - arg <= SESSION_ID_MAX) {
                ret->session = strndup(arg, (size_t) (colon - arg));
                if (!ret->session)
                        return log_oom();
                if (session_id_looks_valid(ret->session)) {
                        ret->path = strdup(colon + 1);
                        return ret->path ? 0 : log_oom();
                }
                free(ret->session);
                ret->session = NULL;
        }
        ret->path = strdup(arg);
        return ret->path ? 0 : log_oom();
}

static void location_done(Location *l) {
        free(l->session);
        free(l->path);
}

static char *path_join(const char *a, const char *b) {
        char *p;
        size_t n = strlen(a);

        if (asprintf(&p, "%s%s%s", a, n == 0 || a[n - 1] == '/' ? "" : "/", b) < 0)
                return NULL;
        return p;
}

static char *base_name(const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        char *b;

        if (!copy)
                return NULL;
        /* "dir/" names dir */
        for (size_t n = strlen(copy); n > 1 && copy[n - 1] == '/'; n--)
                copy[n - 1] = 0;
        b = basename(copy);
        return strdup(b);
}

/* --- upload ------------------------------------------------------------------------------- */

static int upload_file(sandboxd_client *b, const char *session, const char *local, const char *remote) {
        Progress p = { .name = local, .start = now_usec(CLOCK_MONOTONIC) };
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (streq(local, "-"))
                fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        else
                fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return log_error_errno(-errno, "Failed to open %s: %m", local);
        if (fstat(fd, &st) < 0)
                return log_error_errno(-errno, "Failed to stat %s: %m", local);
        r = sandboxd_file_upload(b, session, remote, fd, S_ISREG(st.st_mode) ? (uint64_t) st.st_size : 0,
                                progress_enabled() ? on_progress : NULL, &p);
        progress_done(&p);
        if (r < 0)
                return log_client_error(b, r, "Failed to copy %s to %s:%s", local, session, remote);
        return 0;
}

static int upload(sandboxd_client *b, const char *session, const char *local, const char *remote) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        struct stat st;
        int r, ret = 0;

        if (streq(local, "-"))
                return upload_file(b, session, local, remote);
        if (stat(local, &st) < 0)
                return log_error_errno(-errno, "Cannot copy %s: %m", local);
        if (S_ISREG(st.st_mode))
                return upload_file(b, session, local, remote);
        if (!S_ISDIR(st.st_mode))
                return log_error_errno(-EMEDIUMTYPE, "Cannot copy %s: not a regular file or directory.", local);
        if (!arg_recursive)
                return log_error_errno(-EISDIR, "%s is a directory (use -r).", local);

        r = sandboxd_file_mkdir(b, session, remote);
        if (r < 0)
                return log_client_error(b, r, "Failed to create %s:%s", session, remote);
        d = opendir(local);
        if (!d)
                return log_error_errno(-errno, "Failed to open %s: %m", local);
        while ((de = readdir(d))) {
                _cleanup_free_ char *l = NULL, *rp = NULL;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                l = path_join(local, de->d_name);
                rp = path_join(remote, de->d_name);
                if (!l || !rp)
                        return log_oom();
                r = upload(b, session, l, rp);
                if (r < 0)
                        ret = r;
        }
        return ret;
}

/* --- download ----------------------------------------------------------------------------- */

static int download_file(sandboxd_client *b, const char *session, const char *remote, const char *local) {
        Progress p = { .name = remote, .start = now_usec(CLOCK_MONOTONIC) };
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        bool to_stdout = streq(local, "-");
        int r;

        if (to_stdout)
                fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        else {
                /* into a temporary name next to it: a failed copy leaves the old file alone */
                if (asprintf(&tmp, "%s.sandboxctl-XXXXXX", local) < 0)
                        return log_oom();
                fd = mkostemp(tmp, O_CLOEXEC);
        }
        if (fd < 0)
                return log_error_errno(-errno, "Failed to create %s: %m", to_stdout ? "a copy of stdout" : local);
        r = sandboxd_file_download(b, session, remote, fd, progress_enabled() && !to_stdout ? on_progress : NULL, &p);
        progress_done(&p);
        if (r < 0) {
                if (tmp)
                        (void) unlink(tmp);
                return r == -EISDIR ? r : log_client_error(b, r, "Failed to copy %s:%s", session, remote);
        }
        if (tmp) {
                /* umask decides the mode, as for cp without -p */
                mode_t um = umask(0);
                umask(um);
                (void) fchmod(fd, 0666 & ~um);
                if (rename(tmp, local) < 0) {
                        r = -errno;
                        (void) unlink(tmp);
                        return log_error_errno(r, "Failed to move the copy into place as %s: %m", local);
                }
        }
        return 0;
}

static int download(sandboxd_client *b, const char *session, const char *remote, const char *local) {
        sandboxd_file_info **entries = NULL;
        bool truncated = false;
        size_t n = 0;
        int r, ret = 0;

        r = download_file(b, session, remote, local);
        if (r != -EISDIR)
                return r;
        if (!arg_recursive)
                return log_error_errno(r, "%s:%s is a directory (use -r).", session, remote);
        if (streq(local, "-"))
                return log_error_errno(r, "Cannot copy the directory %s:%s to standard output.", session, remote);

        if (mkdir(local, 0777) < 0 && errno != EEXIST)
                return log_error_errno(-errno, "Failed to create %s: %m", local);
        r = sandboxd_file_list(b, session, remote, &entries, &n, &truncated);
        if (r < 0)
                return log_client_error(b, r, "Failed to list %s:%s", session, remote);
        if (truncated)
                log_warning("sandboxd listed only part of %s:%s; the copy is incomplete.", session, remote);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *rp = NULL, *l = NULL;
                const char *name = entries[i]->name;

                if (!name || !*name || strchr(name, '/') || streq(name, ".") || streq(name, "..")) {
                        ret = log_error_errno(-EBADMSG, "sandboxd listed a bad name in %s:%s, skipping it.", session,
                                              remote);
                        continue;
                }
                if (entries[i]->type != SANDBOXD_FILE_REGULAR && entries[i]->type != SANDBOXD_FILE_DIRECTORY) {
                        if (!arg_quiet)
                                log_notice("Skipping %s/%s: not a regular file or directory.", remote, name);
                        continue;
                }
                rp = path_join(remote, name);
                l = path_join(local, name);
                if (!rp || !l) {
                        ret = log_oom();
                        break;
                }
                r = download(b, session, rp, l);
                if (r < 0)
                        ret = r;
        }
        sandboxd_file_info_list_free(entries);
        if (truncated && ret >= 0)
                ret = -E2BIG;
        return ret;
}

/* --- the verb ----------------------------------------------------------------------------- */

static bool remote_is_dir(sandboxd_client *b, const char *session, const char *path) {
        sandboxd_file_info *i = NULL;
        bool dir;

        if (path[0] == 0 || path[strlen(path) - 1] == '/')
                return true;
        if (sandboxd_file_stat(b, session, path, &i) < 0)
                return false;
        dir = i->type == SANDBOXD_FILE_DIRECTORY;
        sandboxd_file_info_free(i);
        return dir;
}

int verb_cp(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        Location dst, *srcs;
        int n = argc - 2, r, ret = 0;
        bool upload_dir = false;
        struct stat st;

        srcs = calloc((size_t) n, sizeof(Location));
        if (!srcs)
                return log_oom();
        r = parse_location(argv[argc - 1], &dst);
        for (int i = 0; r >= 0 && i < n; i++)
                r = parse_location(argv[i + 1], &srcs[i]);
        if (r < 0)
                goto finish;

        for (int i = 0; i < n; i++)
                if (!srcs[i].session == !dst.session) {
                        r = log_error_errno(-EINVAL, "One side of a copy must be in a session (SESSION:PATH), "
                                                     "the other local: '%s' and '%s'.",
                                            argv[i + 1], argv[argc - 1]);
                        goto finish;
                }
        r = connect_client(&b);
        if (r < 0)
                goto finish;

        if (dst.session) {
                upload_dir = n > 1 || remote_is_dir(b, dst.session, dst.path);
                for (int i = 0; i < n; i++) {
                        _cleanup_free_ char *name = NULL, *target = NULL;

                        if (upload_dir) {
                                if (streq(srcs[i].path, "-")) {
                                        ret = log_error_errno(-EINVAL, "Copying stdin needs a file name as destination.");
                                        continue;
                                }
                                name = base_name(srcs[i].path);
                                target = name ? path_join(dst.path, name) : NULL;
                        } else
                                target = strdup(dst.path);
                        if (!target) {
                                r = log_oom();
                                goto finish;
                        }
                        r = upload(b, dst.session, srcs[i].path, target);
                        if (r < 0)
                                ret = r;
                }
        } else {
                bool into_dir = streq(dst.path, "-") ? false : n > 1 || (stat(dst.path, &st) >= 0 && S_ISDIR(st.st_mode));

                if (n > 1 && !into_dir) {
                        r = log_error_errno(-ENOTDIR, "Copying several files needs a directory as destination.");
                        goto finish;
                }
                for (int i = 0; i < n; i++) {
                        _cleanup_free_ char *name = NULL, *target = NULL;

                        if (into_dir) {
                                name = base_name(*srcs[i].path ? srcs[i].path : srcs[i].session);
                                target = name ? path_join(dst.path, name) : NULL;
                        } else
                                target = strdup(dst.path);
                        if (!target) {
                                r = log_oom();
                                goto finish;
                        }
                        r = download(b, srcs[i].session, srcs[i].path, target);
                        if (r < 0)
                                ret = r;
                }
        }
        r = ret;
finish:
        for (int i = 0; i < n; i++)
                location_done(&srcs[i]);
        free(srcs);
        location_done(&dst);
        return r;
}
