/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

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

int store_write(const char *path, json_object *o) {
        return store_write_mode(path, o, 0600);
}

int store_write_mode(const char *path, json_object *o, mode_t mode) {
        char tmp[PATH_MAX];
        const char *s;
        size_t n;
        int fd, r = 0;

        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s)
                return -ENOMEM;
        n = strlen(s);
        if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int) sizeof(tmp))
                return -ENAMETOOLONG;

        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        r = fchmod(fd, mode) < 0 ? -errno : 0; /* a leftover tmp keeps its old mode */
        if (r >= 0)
                r = loop_write(fd, s, n);
        if (r >= 0)
                r = loop_write(fd, "\n", 1);
        safe_close(fd);
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                (void) unlink(tmp);
        return r;
}

int store_parse(const char *text, size_t size, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_tokener *tok;
        enum json_tokener_error jerr;
        size_t end;
        bool utf8;

        if (size > INT32_MAX || memchr(text, 0, size))
                return -EBADMSG;
        /* Strings go to D-Bus, which wants UTF-8: json-c's own check lets overlong forms
         * and surrogates through. */
        if (utf8_valid_prefix(text, size, &utf8) != size || !utf8)
                return -EBADMSG;

        tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
        if (!tok)
                return -ENOMEM;
        /* as json-c writes them */
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, text, (int) size);
        jerr = json_tokener_get_error(tok);
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (jerr != json_tokener_success || !json_object_is_type(o, json_type_object))
                return -EBADMSG;
        for (; end < size; end++)
                if (!strchr(" \t\r\n", text[end]))
                        return -EBADMSG;

        *ret = TAKE_PTR(o);
        return 0;
}

int store_read(const char *path, json_object **ret) {
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
                r = store_parse(b.data ?: "", b.len, ret);
        buf_done(&b);
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
