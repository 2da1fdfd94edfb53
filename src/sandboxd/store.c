/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "time-util.h"

#include "buf.h"
#include "encoding.h"
#include "io-util.h"
#include "store.h"

int store_mkdir_p(const char *path, mode_t mode) {
        char buf[PATH_MAX];
        size_t n = strlen(path);

        if (n == 0 || n >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, path, n + 1);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* The directory of path, opened for fsync(); -errno. */
static int open_parent(const char *path) {
        char dir[PATH_MAX];
        const char *slash = strrchr(path, '/');
        size_t n;
        int fd;

        if (!slash)
                return open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        n = slash == path ? 1 : (size_t) (slash - path);
        if (n >= sizeof(dir))
                return -ENAMETOOLONG;
        memcpy(dir, path, n);
        dir[n] = 0;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int store_write_text(const char *path, const char *text, size_t n) {
        return store_write_text_mode(path, text, n, 0600);
}

int store_write_text_mode(const char *path, const char *text, size_t n, mode_t mode) {
        _cleanup_close_ int dfd = -EBADF;
        char tmp[PATH_MAX];
        int fd, r = 0;

        if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int) sizeof(tmp))
                return -ENAMETOOLONG;

        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        r = fchmod(fd, mode) < 0 ? -errno : 0; /* a leftover tmp keeps its old mode */
        if (r >= 0)
                r = loop_write(fd, text, n);
        if (r >= 0 && (n == 0 || text[n - 1] != '\n'))
                r = loop_write(fd, "\n", 1);
        /* the content is on disk before the name points at it: a crash leaves the old
         * record or the new one, never an empty file */
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        safe_close(fd);
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }
        /* and the rename itself */
        dfd = open_parent(path);
        if (dfd < 0)
                return dfd;
        if (fsync(dfd) < 0)
                return -errno;
        return 0;
}

int store_write(const char *path, json_object *o) {
        return store_write_mode(path, o, 0600);
}

int store_write_mode(const char *path, json_object *o, mode_t mode) {
        const char *s;

        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s)
                return -ENOMEM;
        return store_write_text_mode(path, s, strlen(s), mode);
}

int store_parse_full(const char *text, size_t size, json_object **ret, const char **ret_reason) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_tokener *tok;
        enum json_tokener_error jerr;
        const char *reason = NULL;
        size_t end;
        bool utf8;

        if (size == 0)
                reason = "empty";
        else if (size > INT32_MAX)
                reason = "too large";
        else if (memchr(text, 0, size))
                reason = "NUL byte";
        /* Strings go to D-Bus, which wants UTF-8: json-c's own check lets overlong forms
         * and surrogates through. */
        else if (utf8_valid_prefix(text, size, &utf8) != size || !utf8)
                reason = "not UTF-8";
        if (reason)
                goto bad;

        tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
        if (!tok)
                return -ENOMEM;
        /* as json-c writes them */
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, text, (int) size);
        jerr = json_tokener_get_error(tok);
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (jerr == json_tokener_continue) {
                reason = "truncated JSON";
                goto bad;
        }
        if (jerr != json_tokener_success) {
                reason = json_tokener_error_desc(jerr);
                goto bad;
        }
        if (!json_object_is_type(o, json_type_object)) {
                reason = "not a JSON object";
                goto bad;
        }
        for (; end < size; end++)
                if (!strchr(" \t\r\n", text[end])) {
                        reason = "text after the JSON object";
                        goto bad;
                }

        *ret = TAKE_PTR(o);
        return 0;

bad:
        if (ret_reason)
                *ret_reason = reason;
        return -EBADMSG;
}

int store_parse(const char *text, size_t size, json_object **ret) {
        return store_parse_full(text, size, ret, NULL);
}

int store_read_full(const char *path, json_object **ret, const char **ret_reason) {
        _cleanup_close_ int fd = -EBADF;
        Buf b = {};
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n;

                r = buf_reserve(&b, 4096);
                if (r < 0)
                        break;
                n = read(fd, b.data + b.len, b.cap - b.len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : 0;
                        break;
                }
                b.len += (size_t) n;
        }
        if (r >= 0)
                r = store_parse_full(b.data ?: "", b.len, ret, ret_reason);
        buf_done(&b);
        return r;
}

int store_read(const char *path, json_object **ret) {
        return store_read_full(path, ret, NULL);
}

/* Entries "<stamp>/<name>": sorted by the time stamp, whatever the record. */
static int quarantine_cmp(const void *a, const void *b) {
        return strcmp(*(char * const *) a, *(char * const *) b);
}

int store_quarantine(const char *path, uint64_t realtime_usec, char **ret_aside) {
        _cleanup_free_ char *aside = NULL;
        const char *slash = strrchr(path, '/');
        char stamp[64], dir[PATH_MAX], **list = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        time_t t = (time_t) (realtime_usec / USEC_PER_SEC);
        struct tm tm;
        DIR *d;
        int fd, r = 0;

        if (snprintf(dir, sizeof(dir), "%.*s", slash ? (int) (slash - path) : 1, slash ? path : ".") >=
            (int) sizeof(dir))
                return -ENAMETOOLONG;
        if (dir[0] == 0)
                strcpy(dir, "/");
        /* sorts as it was made: the oldest go first when there are too many */
        if (!gmtime_r(&t, &tm) || strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm) == 0)
                return -EINVAL;
        if (asprintf(&aside, "%s" STORE_QUARANTINE_INFIX "%s.%06uZ", path, stamp,
                     (unsigned) (realtime_usec % USEC_PER_SEC)) < 0)
                return -ENOMEM;
        if (rename(path, aside) < 0)
                return -errno;

        /* Bounded: of the records set aside in this directory, the newest few stay. */
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                safe_close(fd);
                return r;
        }
        while ((de = readdir(d))) {
                const char *p = strstr(de->d_name, STORE_QUARANTINE_INFIX);

                if (!p)
                        continue;
                if (n == cap) {
                        char **l = realloc(list, (cap = cap * 2 + 8) * sizeof(char *));
                        if (!l) {
                                r = -ENOMEM;
                                goto finish;
                        }
                        list = l;
                }
                if (asprintf(&list[n], "%s/%s", p + strlen(STORE_QUARANTINE_INFIX), de->d_name) < 0) {
                        r = -ENOMEM;
                        goto finish;
                }
                n++;
        }
        if (n > STORE_QUARANTINE_MAX) {
                qsort(list, n, sizeof(char *), quarantine_cmp);
                for (size_t i = 0; i + STORE_QUARANTINE_MAX < n; i++) {
                        char victim[PATH_MAX * 2];

                        snprintf(victim, sizeof(victim), "%s/%s", dir, strchr(list[i], '/') + 1);
                        (void) store_rm_rf(victim);
                }
        }
        if (fsync(dirfd(d)) < 0)
                r = -errno;
finish:
        for (size_t i = 0; i < n; i++)
                free(list[i]);
        free(list);
        closedir(d);
        if (r >= 0 && ret_aside)
                *ret_aside = TAKE_PTR(aside);
        return r;
}

int store_rm_rf(const char *path) {
        DIR *d;
        struct dirent *de;
        int r = 0;

        d = opendir(path);
        if (!d)
                return errno == ENOENT ? 0 : (errno == ENOTDIR ? (unlink(path) < 0 ? -errno : 0) : -errno);
        while ((de = readdir(d))) {
                char sub[PATH_MAX];
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
                if (lstat(sub, &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode))
                        r = store_rm_rf(sub) < 0 ? -EIO : r;
                else if (unlink(sub) < 0)
                        r = -errno;
        }
        closedir(d);
        if (rmdir(path) < 0 && errno != ENOENT)
                r = -errno;
        return r;
}

const char *store_get_string(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        /* "\u0000" would cut the string short */
        if (strlen(json_object_get_string(v)) != (size_t) json_object_get_string_len(v))
                return NULL;
        return json_object_get_string(v);
}

uint64_t store_get_u64(json_object *o, const char *key, uint64_t dflt) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return dflt;
        return json_object_get_uint64(v);
}

int64_t store_get_i64(json_object *o, const char *key, int64_t dflt) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return dflt;
        return json_object_get_int64(v);
}

bool store_get_bool(json_object *o, const char *key, bool dflt) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_boolean))
                return dflt;
        return json_object_get_boolean(v);
}
