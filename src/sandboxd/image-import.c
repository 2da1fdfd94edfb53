/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image-import.h"
#include "images.h"
#include "list.h"
#include "log.h"
#include "macro.h"
#include "store.h"
#include "time-util.h"
#include "validate.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define UNPACK_OUTPUT_MAX 600 /* of its stdout and stderr, read at the end */



struct ImageImport {
        Manager *manager;
        LIST_FIELDS(ImageImport, imports);
        char name[65];
        char *staging;          /* <dir>/.import-NAME-<usec>: the unpacker's DEST */
        char *final;            /* <dir>/NAME */
        pid_t pid;
        int pidfd;
        int input_fd;           /* the pipe's write end (-1: none, or closed) */
        int out_fd, err_fd;     /* memfds: the unpacker's stdout and stderr */
        sd_event_source *exit_source, *write_source;
        ImageImportDone done;
        ImageImportWritable writable;
        void *userdata;
        bool input_broken;      /* the unpacker stopped reading: the rest is dropped */
        bool abandoned;
        uint64_t started_usec;
};

static void import_free(ImageImport *imp) {
        if (!imp)
                return;
        LIST_REMOVE(imports, imp->manager->image_imports, imp);
        sd_event_source_disable_unref(imp->exit_source);
        sd_event_source_disable_unref(imp->write_source);
        safe_close(imp->pidfd);
        safe_close(imp->input_fd);
        safe_close(imp->out_fd);
        safe_close(imp->err_fd);
        free(imp->staging);
        free(imp->final);
        manager_check_idle(imp->manager);
        free(imp);
}

static bool import_running(Manager *m, const char *name) {
        ImageImport *i;

        /* an abandoned one only removes its own staging directory (each has its own name) and
         * never renames: a new import of the name need not wait for it */
        LIST_FOREACH(imports, i, m->image_imports)
                if (streq(i->name, name) && !i->abandoned)
                        return true;
        return false;
}

static size_t read_memfd(int fd, char *buf, size_t n) {
        ssize_t k;

        if (fd < 0 || n == 0)
                return 0;
        k = pread(fd, buf, n - 1, 0);
        if (k < 0)
                k = 0;
        buf[k] = 0;
        /* one line of printable ASCII, as sandboxd-unpack promises: anything else is cut */
        for (ssize_t i = 0; i < k; i++)
                if (buf[i] == '\n' || (unsigned char) buf[i] < 0x20 || (unsigned char) buf[i] >= 0x7f) {
                        buf[i] = 0;
                        break;
                }
        return strlen(buf);
}

static const char *code_for_unpacker(const char *line, int status) {
        /* "sandboxd-unpack: CODE: message" */
        static const struct {
                const char *unpack;
                const char *api;
        } table[] = {
                { "unsafe_path", "invalid_image" },         { "device_node", "invalid_image" },
                { "invalid_archive", "invalid_image" },     { "too_many_entries", "invalid_image" },
                { "too_large", "payload_too_large" },       { "exists", "exists" },
                { "io_error", "internal" },
        };
        const char *p = startswith(line, "sandboxd-unpack: ");

        for (size_t i = 0; p && i < ELEMENTSOF(table); i++) {
                size_t n = strlen(table[i].unpack);

                if (strncmp(p, table[i].unpack, n) == 0 && p[n] == ':')
                        return table[i].api;
        }
        return status == 65 ? "invalid_image" : "internal";
}

static void finish(ImageImport *imp, ImageImportResult *res) {
        Manager *m = imp->manager;
        const char *reason = NULL;
        int r;

        if (res->error >= 0) {
                r = image_check(imp->staging, &reason);
                if (r == -ENOEXEC) {
                        res->error = -EINVAL;
                        res->code = "invalid_image";
                        snprintf(res->message, sizeof(res->message), "Not an image sandboxd can run commands in: %s.",
                                 reason);
                } else if (r < 0) {
                        res->error = r;
                        res->code = "internal";
                        snprintf(res->message, sizeof(res->message), "Failed to look at the unpacked image: %s.",
                                 strerror(-r));
                }
        }
        /* the root of the tree is the dynamic user's "/": whatever the tar said of "./" (or
         * the umask, if it said nothing), everyone must be able to walk it */
        if (res->error >= 0 && chmod(imp->staging, 0755) < 0) {
                res->error = -errno;
                res->code = "internal";
                snprintf(res->message, sizeof(res->message), "Failed to make the image's root searchable: %s.",
                         strerror(errno));
        }
        if (res->error >= 0) {
                /* renameat2(RENAME_NOREPLACE): an image of the name put there meanwhile stays */
                if (renameat2(AT_FDCWD, imp->staging, AT_FDCWD, imp->final, RENAME_NOREPLACE) < 0) {
                        res->error = -errno;
                        res->code = errno == EEXIST ? "exists" : "internal";
                        snprintf(res->message, sizeof(res->message), errno == EEXIST ? "An image '%s' exists."
                                                                                     : "Failed to move image '%s' into place: %s.",
                                 imp->name, strerror(errno));
                }
        }
        if (res->error >= 0) {
                r = image_write_metadata(&m->config, imp->name, res->bytes, now_usec(CLOCK_REALTIME));
                if (r < 0)
                        log_warning_errno(r, "Failed to write the metadata of image %s, its size stays unknown: %m",
                                          imp->name);
                log_info("Image %s imported: %" PRIu64 " bytes, %" PRIu64 " entries, in %" PRIu64 " ms.", imp->name,
                         res->bytes, res->entries, (now_usec(CLOCK_MONOTONIC) - imp->started_usec) / 1000);
        } else {
                (void) store_rm_rf(imp->staging); /* the unpacker removed its own on a failure */
                log_info("Import of image %s failed: %s", imp->name, res->message);
        }
}

static int on_unpacker_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ImageImport *imp = userdata;
        ImageImportResult res = {};
        siginfo_t si = {};
        char out[UNPACK_OUTPUT_MAX], err[UNPACK_OUTPUT_MAX];

        if (waitid((idtype_t) P_PIDFD, (id_t) imp->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return 0; /* not yet */
        imp->exit_source = sd_event_source_disable_unref(imp->exit_source);
        imp->write_source = sd_event_source_disable_unref(imp->write_source);
        imp->input_fd = safe_close(imp->input_fd);

        if (imp->abandoned) {
                (void) store_rm_rf(imp->staging);
                import_free(imp);
                return 0;
        }

        (void) read_memfd(imp->out_fd, out, sizeof(out));
        (void) read_memfd(imp->err_fd, err, sizeof(err));
        if (si.si_code == CLD_EXITED && si.si_status == 0) {
                if (sscanf(out, "{\"bytes\":%" SCNu64 ",\"entries\":%" SCNu64 "}", &res.bytes, &res.entries) != 2)
                        res.bytes = UINT64_MAX;
        } else {
                int status = si.si_code == CLD_EXITED ? si.si_status : -1;

                res.error = status == 65 ? -EINVAL : -EIO;
                res.code = code_for_unpacker(err, status);
                if (err[0])
                        snprintf(res.message, sizeof(res.message), "%.250s", err);
                else
                        snprintf(res.message, sizeof(res.message), "sandboxd-unpack %s %d.",
                                 si.si_code == CLD_EXITED ? "exited with" : "was killed by signal", si.si_status);
                if (streq(res.code, "payload_too_large"))
                        res.error = -EFBIG;
        }
        finish(imp, &res);
        if (imp->done)
                imp->done(imp, &res, imp->userdata);
        import_free(imp);
        return 0;
}

static int on_writable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ImageImport *imp = userdata;
        ImageImportWritable w = imp->writable;

        imp->write_source = sd_event_source_disable_unref(imp->write_source);
        imp->writable = NULL;
        if (w)
                w(imp, imp->userdata);
        return 0;
}

static int spawn_unpacker(ImageImport *imp, int stdin_fd, const char *from_dir) {
        posix_spawn_file_actions_t fa;
        char max_bytes[64], from[PATH_MAX + 16];
        char *argv[6];
        size_t k = 0;
        int r;

        snprintf(max_bytes, sizeof(max_bytes), "--max-bytes=%" PRIu64, imp->manager->config.image_max_bytes);
        argv[k++] = (char *) "sandboxd-unpack";
        argv[k++] = max_bytes;
        if (from_dir) {
                if (snprintf(from, sizeof(from), "--from-dir=%s", from_dir) >= (int) sizeof(from))
                        return -ENAMETOOLONG;
                argv[k++] = from;
        }
        argv[k++] = imp->staging;
        argv[k] = NULL;

        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        /* dup2() clears O_CLOEXEC of the copies; everything else of ours stays behind */
        if ((r = posix_spawn_file_actions_adddup2(&fa, stdin_fd, STDIN_FILENO)) != 0 ||
            (r = posix_spawn_file_actions_adddup2(&fa, imp->out_fd, STDOUT_FILENO)) != 0 ||
            (r = posix_spawn_file_actions_adddup2(&fa, imp->err_fd, STDERR_FILENO)) != 0) {
                posix_spawn_file_actions_destroy(&fa);
                return -r;
        }
        /* sd-event blocks the signals it handles: the unpacker gets them all unblocked and at
         * their defaults, so that SIGTERM stops it (it removes its tree then) */
        {
                posix_spawnattr_t attr;
                sigset_t none, defaults;

                r = posix_spawnattr_init(&attr);
                if (r != 0) {
                        posix_spawn_file_actions_destroy(&fa);
                        return -r;
                }
                (void) sigemptyset(&none);
                (void) sigfillset(&defaults);
                (void) posix_spawnattr_setsigmask(&attr, &none);
                (void) posix_spawnattr_setsigdefault(&attr, &defaults);
                (void) posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
                r = posix_spawn(&imp->pid, SANDBOXD_UNPACK_PATH, &fa, &attr, argv, environ);
                posix_spawnattr_destroy(&attr);
        }
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return -r;
        imp->pidfd = (int) syscall(SYS_pidfd_open, imp->pid, 0);
        if (imp->pidfd < 0) {
                r = -errno;
                (void) kill(imp->pid, SIGKILL);
                (void) waitpid(imp->pid, NULL, 0);
                return r;
        }
        return 0;
}

static int result_error(ImageImportResult *res, int error, const char *code, const char *fmt, ...) _printf_(4, 5);
static int result_error(ImageImportResult *res, int error, const char *code, const char *fmt, ...) {
        va_list ap;

        res->error = error;
        res->code = code;
        va_start(ap, fmt);
        vsnprintf(res->message, sizeof(res->message), fmt, ap);
        va_end(ap);
        return error;
}

int image_import_start(Manager *m, const char *name, int input_fd, const char *from_dir, ImageImportDone done,
                       void *userdata, ImageImport **ret, ImageImportResult *res) {
        _cleanup_close_ int in = input_fd, pipe_read = -EBADF;
        ImageImport *imp;
        const char *dir = images_directory(&m->config);
        int r;

        *res = (ImageImportResult) {};
        if (!image_name_is_valid(name))
                return result_error(res, -EINVAL, "invalid_name",
                                    "An image name is 1 to 64 of a-z, 0-9, '_' and '-', starting with a letter or digit.");
        if (image_root_path(&m->config, name, NULL) >= 0)
                return result_error(res, -EEXIST, "exists", "An image '%s' exists: remove it first.", name);
        if (import_running(m, name))
                return result_error(res, -EBUSY, "busy", "Image '%s' is being imported.", name);
        r = store_mkdir_p(dir, 0755);
        if (r < 0)
                return result_error(res, r, "internal", "Failed to create %s: %s.", dir, strerror(-r));

        imp = calloc(1, sizeof(ImageImport));
        if (!imp)
                return -ENOMEM;
        *imp = (ImageImport) {
                .manager = m,
                .pidfd = -EBADF,
                .input_fd = -EBADF,
                .out_fd = -EBADF,
                .err_fd = -EBADF,
                .done = done,
                .userdata = userdata,
                .started_usec = now_usec(CLOCK_MONOTONIC),
        };
        LIST_PREPEND(imports, m->image_imports, imp);
        snprintf(imp->name, sizeof(imp->name), "%s", name);
        if (asprintf(&imp->staging, "%s/.import-%s-%" PRIu64, dir, name, now_usec(CLOCK_REALTIME)) < 0) {
                imp->staging = NULL;
                goto oom;
        }
        if (asprintf(&imp->final, "%s/%s", dir, name) < 0) {
                imp->final = NULL;
                goto oom;
        }
        imp->out_fd = memfd_create("sandboxd-unpack-out", MFD_CLOEXEC);
        imp->err_fd = memfd_create("sandboxd-unpack-err", MFD_CLOEXEC);
        if (imp->out_fd < 0 || imp->err_fd < 0) {
                r = -errno;
                goto fail;
        }
        if (from_dir) {
                in = safe_close(in);
                in = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (in < 0) {
                        r = -errno;
                        goto fail;
                }
        } else if (in < 0) {
                int p[2];

                if (pipe2(p, O_CLOEXEC) < 0) {
                        r = -errno;
                        goto fail;
                }
                pipe_read = p[0];
                imp->input_fd = p[1];
                (void) fcntl(imp->input_fd, F_SETFL, O_NONBLOCK);
                (void) fcntl(imp->input_fd, F_SETPIPE_SZ, 1024 * 1024);
        }

        r = spawn_unpacker(imp, in >= 0 ? in : pipe_read, from_dir);
        if (r < 0) {
                log_error_errno(r, "Failed to start %s: %m", SANDBOXD_UNPACK_PATH);
                goto fail;
        }
        r = sd_event_add_io(m->event, &imp->exit_source, imp->pidfd, EPOLLIN, on_unpacker_exit, imp);
        if (r < 0) {
                (void) kill(imp->pid, SIGKILL);
                (void) waitid((idtype_t) P_PIDFD, (id_t) imp->pidfd, &(siginfo_t) {}, WEXITED);
                goto fail;
        }
        (void) sd_event_source_set_description(imp->exit_source, "image-import");
        manager_check_idle(m);
        log_info("Importing image %s%s%s.", name, from_dir ? " from " : "", from_dir ?: "");
        *ret = imp;
        return 0;

oom:
        r = -ENOMEM;
fail:
        import_free(imp);
        return result_error(res, r, "internal", "Failed to start the import: %s.", strerror(-r));
}

int image_import_write(ImageImport *imp, const void *data, size_t *n, ImageImportWritable writable) {
        size_t want = *n;
        ssize_t k;
        int r;

        if (imp->input_fd < 0 || imp->input_broken)
                return 0; /* dropped: *n stays, all taken */
        k = write(imp->input_fd, data, want);
        if (k < 0) {
                if (errno == EPIPE) {
                        /* the unpacker stopped (a refusal): it says why when it exits */
                        imp->input_broken = true;
                        imp->input_fd = safe_close(imp->input_fd);
                        return 0;
                }
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
                k = 0;
        }
        *n = (size_t) k;
        if ((size_t) k < want && writable) {
                imp->writable = writable;
                if (!imp->write_source) {
                        r = sd_event_add_io(imp->manager->event, &imp->write_source, imp->input_fd, EPOLLOUT,
                                            on_writable, imp);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

void image_import_end_input(ImageImport *imp) {
        imp->write_source = sd_event_source_disable_unref(imp->write_source);
        imp->input_fd = safe_close(imp->input_fd);
}

void image_import_abandon(ImageImport *imp) {
        if (!imp)
                return;
        imp->abandoned = true;
        imp->done = NULL;
        imp->writable = NULL;
        imp->write_source = sd_event_source_disable_unref(imp->write_source);
        imp->input_fd = safe_close(imp->input_fd);
        (void) syscall(SYS_pidfd_send_signal, imp->pidfd, SIGTERM, NULL, 0);
}

void image_import_stop_all(Manager *m) {
        while (m->image_imports) {
                ImageImport *imp = m->image_imports;

                (void) syscall(SYS_pidfd_send_signal, imp->pidfd, SIGTERM, NULL, 0);
                (void) waitid((idtype_t) P_PIDFD, (id_t) imp->pidfd, &(siginfo_t) {}, WEXITED);
                (void) store_rm_rf(imp->staging);
                import_free(imp);
        }
}
