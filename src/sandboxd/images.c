/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "encoding.h"
#include "images.h"
#include "io-util.h"
#include "log.h"
#include "macro.h"
#include "store.h"
#include "time-util.h"
#include "validate.h"

#define OS_RELEASE_MAX (64 * 1024)
#define NSSWITCH_MAX (64 * 1024)

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

const char *images_directory(const Config *c) {
        return c && c->images_directory ? c->images_directory : IMAGES_DEFAULT_DIRECTORY;
}

int image_root_path(const Config *c, const char *name, char **ret) {
        _cleanup_free_ char *p = NULL;
        struct stat st;

        if (!image_name_is_valid(name))
                return -EINVAL;
        if (asprintf(&p, "%s/%s", images_directory(c), name) < 0)
                return -ENOMEM;
        if (lstat(p, &st) < 0)
                return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOENT;
        if (ret)
                *ret = TAKE_PTR(p);
        return 0;
}

/* path (absolute, as seen inside the image) opened in the image: "/" and ".." stay inside
 * root, symlinks included, as they would for a process chrooted there. */
static int open_in_root(int root_fd, const char *path, int flags) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_CLOEXEC),
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd;

        while (*path == '/')
                path++;
        fd = (int) syscall(SYS_openat2, root_fd, *path ? path : ".", &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

/* A small regular file of the image, whole, NUL-terminated. */
static int read_in_root(int root_fd, const char *path, size_t max, char **ret, size_t *ret_n) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t n = 0;

        fd = open_in_root(root_fd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;
        buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = read(fd, buf + n, max - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n == max)
                        break;
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        if (ret_n)
                *ret_n = n;
        return 0;
}

char *image_os_release_value(const char *text, const char *key) {
        size_t kn = strlen(key);

        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                const char *end = strchrnul(l, '\n'), *v;
                char out[IMAGE_OS_FIELD_MAX];
                size_t o = 0;
                char quote = 0;

                if ((size_t) (end - l) <= kn || strncmp(l, key, kn) != 0 || l[kn] != '=')
                        continue;
                v = l + kn + 1;
                if (v < end && (*v == '"' || *v == '\'')) {
                        quote = *v;
                        v++;
                }
                for (; v < end && *v != quote; v++) {
                        char ch = *v;

                        if (quote == '"' && ch == '\\' && v + 1 < end && strchr("\"\\$`", v[1]))
                                ch = *++v;
                        if ((unsigned char) ch < 0x20 || ch == 0x7f || o + 1 >= sizeof(out))
                                return NULL;
                        out[o++] = ch;
                }
                bool valid;

                out[o] = 0;
                return utf8_valid_prefix(out, o, &valid) == o && valid ? strdup(out) : NULL;
        }
        return NULL;
}

bool image_nsswitch_uses_systemd(const char *text) {
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                const char *end = strchrnul(l, '\n');
                _cleanup_free_ char *line = strndup(l, (size_t) (end - l));

                if (!line)
                        return false;
                if (startswith(line, "passwd:")) {
                        char *save = NULL;

                        for (char *w = strtok_r(line + 7, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
                                if (streq(w, "systemd"))
                                        return true;
                }
        }
        return false;
}

static bool image_has_nss_systemd(int root_fd) {
        _cleanup_free_ char *nss = NULL;
        static const char *const dirs[] = {
                "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/i386-linux-gnu",
                "/usr/lib/arm-linux-gnueabihf", "/usr/lib/riscv64-linux-gnu", "/usr/lib64", "/usr/lib",
        };

        if (read_in_root(root_fd, "/etc/nsswitch.conf", NSSWITCH_MAX, &nss, NULL) < 0)
                return false;
        if (!image_nsswitch_uses_systemd(nss))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                char p[PATH_MAX];
                _cleanup_close_ int fd = -EBADF;

                snprintf(p, sizeof(p), "%s/libnss_systemd.so.2", dirs[i]);
                fd = open_in_root(root_fd, p, O_PATH);
                if (fd >= 0)
                        return true;
        }
        return false;
}

static int read_metadata(const Config *c, const char *name, ImageInfo *i) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char p[PATH_MAX];
        int r;

        if (snprintf(p, sizeof(p), "%s/%s.json", images_directory(c), name) >= (int) sizeof(p))
                return -ENAMETOOLONG;
        r = store_read(p, &o);
        if (r < 0)
                return r;
        i->size_bytes = store_get_u64(o, "size_bytes", UINT64_MAX);
        i->created_usec = store_get_u64(o, "created_usec", i->created_usec);
        return 0;
}

void image_info_done(ImageInfo *i) {
        if (!i)
                return;
        free(i->path);
        free(i->os_id);
        free(i->os_version_id);
        free(i->os_pretty_name);
        *i = (ImageInfo) {};
}

void image_info_free_many(ImageInfo *l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                image_info_done(&l[i]);
        free(l);
}

int image_get(const Config *c, const char *name, ImageInfo *ret) {
        _cleanup_(image_info_done) ImageInfo i = { .size_bytes = UINT64_MAX };
        _cleanup_free_ char *os = NULL;
        _cleanup_close_ int root_fd = -EBADF;
        struct stat st;
        int r;

        r = image_root_path(c, name, &i.path);
        if (r < 0)
                return r;
        snprintf(i.name, sizeof(i.name), "%s", name);
        root_fd = open(i.path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root_fd < 0)
                return errno == ENOENT ? -ENOENT : -errno;
        if (fstat(root_fd, &st) < 0)
                return -errno;
        i.created_usec = (uint64_t) st.st_mtim.tv_sec * USEC_PER_SEC + (uint64_t) st.st_mtim.tv_nsec / 1000;
        (void) read_metadata(c, name, &i);

        if (read_in_root(root_fd, "/etc/os-release", OS_RELEASE_MAX, &os, NULL) < 0)
                (void) read_in_root(root_fd, "/usr/lib/os-release", OS_RELEASE_MAX, &os, NULL);
        if (os) {
                i.os_id = image_os_release_value(os, "ID");
                i.os_version_id = image_os_release_value(os, "VERSION_ID");
                i.os_pretty_name = image_os_release_value(os, "PRETTY_NAME");
        }
        i.user_names = image_has_nss_systemd(root_fd);
        *ret = i;
        i = (ImageInfo) {};
        return 0;
}

static int cmp_info(const void *a, const void *b) {
        return strcmp(((const ImageInfo *) a)->name, ((const ImageInfo *) b)->name);
}

int images_list(const Config *c, ImageInfo **ret, size_t *ret_n) {
        _cleanup_(closedirp) DIR *d = NULL;
        ImageInfo *l = NULL;
        size_t n = 0;

        d = opendir(images_directory(c));
        if (!d) {
                if (errno != ENOENT)
                        return -errno;
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        for (struct dirent *de; (de = readdir(d)) && n < IMAGES_MAX;) {
                ImageInfo *nl;
                int r;

                if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                if (!image_name_is_valid(de->d_name))
                        continue;
                nl = reallocarray(l, n + 1, sizeof(ImageInfo));
                if (!nl) {
                        image_info_free_many(l, n);
                        return -ENOMEM;
                }
                l = nl;
                r = image_get(c, de->d_name, &l[n]);
                if (r == -ENOMEM) {
                        image_info_free_many(l, n);
                        return r;
                }
                if (r >= 0)
                        n++;
        }
        if (n > 0)
                qsort(l, n, sizeof(ImageInfo), cmp_info);
        *ret = l;
        *ret_n = n;
        return 0;
}

static bool executable_in_root(int root_fd, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = open_in_root(root_fd, path, O_PATH);
        return fd >= 0 && fstat(fd, &st) >= 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

int image_find_executable(const char *root, const char *tools_dir, const char *name, const char *path, char **ret) {
        _cleanup_close_ int root_fd = -EBADF, tools_fd = -EBADF;
        const char *p = path;

        if (!p || !name || !name[0])
                return -EINVAL;
        root_fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root_fd < 0)
                return -errno;
        if (tools_dir)
                tools_fd = open(tools_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

        if (strchr(name, '/')) {
                if (name[0] != '/')
                        return -EINVAL;
                *ret = strdup(name); /* as on the host: sandboxd-exec reports what is not there */
                return *ret ? 0 : -ENOMEM;
        }
        while (*p) {
                const char *e = strchrnul(p, ':');
                _cleanup_free_ char *candidate = NULL;
                const char *tools_rel;
                bool ok;

                if (asprintf(&candidate, "%.*s/%s", (int) (e - p), p, name) < 0)
                        return -ENOMEM;
                tools_rel = startswith(candidate, "/.tools/");
                if (tools_rel)
                        ok = tools_fd >= 0 && executable_in_root(tools_fd, tools_rel);
                else
                        ok = candidate[0] == '/' && executable_in_root(root_fd, candidate);
                if (ok) {
                        *ret = TAKE_PTR(candidate);
                        return 0;
                }
                p = *e ? e + 1 : e;
        }
        return -ENOENT;
}

int image_check(const char *root, const char **ret_reason) {
        _cleanup_close_ int root_fd = -EBADF, fd = -EBADF;

        root_fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root_fd < 0)
                return -errno;
        if (!executable_in_root(root_fd, "/bin/sh")) {
                *ret_reason = "the image has no /bin/sh";
                return -ENOEXEC;
        }
        fd = open_in_root(root_fd, "/etc/os-release", O_PATH);
        if (fd < 0)
                fd = open_in_root(root_fd, "/usr/lib/os-release", O_PATH);
        if (fd < 0) {
                *ret_reason = "the image has no /etc/os-release or /usr/lib/os-release";
                return -ENOEXEC;
        }
        return 0;
}

int image_write_metadata(const Config *c, const char *name, uint64_t size_bytes, uint64_t created_usec) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char p[PATH_MAX];
        bool oom = false;

        if (!image_name_is_valid(name))
                return -EINVAL;
        if (snprintf(p, sizeof(p), "%s/%s.json", images_directory(c), name) >= (int) sizeof(p))
                return -ENAMETOOLONG;
        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        json_put(o, "size_bytes", json_object_new_uint64(size_bytes), &oom);
        json_put(o, "created_usec", json_object_new_uint64(created_usec), &oom);
        if (oom)
                return -ENOMEM;
        return store_write_mode(p, o, 0644);
}

static int remove_aside(const Config *c, const char *name, char *aside, size_t n) {
        char p[PATH_MAX], meta[PATH_MAX];
        int r;

        r = image_root_path(c, name, NULL);
        if (r < 0)
                return r;
        snprintf(p, sizeof(p), "%s/%s", images_directory(c), name);
        snprintf(meta, sizeof(meta), "%s/%s.json", images_directory(c), name);
        if (snprintf(aside, n, "%s/.remove-%s-%" PRIu64, images_directory(c), name, now_usec(CLOCK_REALTIME)) >= (int) n)
                return -ENAMETOOLONG;
        if (rename(p, aside) < 0)
                return -errno;
        if (unlink(meta) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

static void *remove_thread(void *p) {
        char *path = p;
        int r;

        r = store_rm_rf(path);
        if (r < 0)
                log_warning_errno(r, "Failed to remove %s, left for the next start: %m", path);
        free(path);
        return NULL;
}

static int remove_in_thread(const char *path) {
        pthread_attr_t attr;
        pthread_t t;
        char *copy;
        int r;

        copy = strdup(path);
        if (!copy)
                return 0; /* gone for everyone; the tree waits for the next start */
        if (pthread_attr_init(&attr) != 0) {
                free(copy);
                return 0;
        }
        (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &attr, remove_thread, copy);
        pthread_attr_destroy(&attr);
        if (r != 0)
                free(copy);
        return 0;
}

int image_remove_async(const Config *c, const char *name) {
        char aside[PATH_MAX];
        int r;

        r = remove_aside(c, name, aside, sizeof(aside));
        if (r < 0)
                return r;
        return remove_in_thread(aside);
}

void images_clean_leftovers(const Config *c) {
        _cleanup_(closedirp) DIR *d = NULL;

        d = opendir(images_directory(c));
        if (!d)
                return;
        for (struct dirent *de; (de = readdir(d));) {
                char p[PATH_MAX];

                if (!startswith(de->d_name, ".import-") && !startswith(de->d_name, ".remove-"))
                        continue;
                snprintf(p, sizeof(p), "%s/%s", images_directory(c), de->d_name);
                (void) remove_in_thread(p);
        }
}
