/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <sys/mman.h>
#include <sys/stat.h>

#include "internal.h"
#include "io-util.h"

#define FILE_READ_MAX_DEFAULT ((size_t) 64 * 1024 * 1024)

typedef struct Download {
        int fd;
        size_t max;   /* to memory: the most we take */
        Buf *mem;
} Download;

static bool is_json(const HttpCall *call) {
        return startswith(call->content_type_out, "application/json") != NULL;
}

static int download_sink(HttpCall *call, const char *p, size_t n) {
        Download *d = call->userdata;

        /* a directory answers with its listing */
        if (is_json(call))
                return -EISDIR;
        if (d->mem) {
                if (d->mem->len + n > d->max)
                        return -EFBIG;
                return buf_append(d->mem, p, n);
        }
        return loop_write(d->fd, p, n);
}

static int file_error(sandboxd_client *c, int r, const char *path) {
        if (r == -EISDIR)
                return error_set(&c->error, SANDBOXD_ERROR_LOCAL, r, "%s is a directory.", path);
        if (r == -ENOTDIR)
                return error_set(&c->error, SANDBOXD_ERROR_LOCAL, r, "%s is not a directory.", path);
        if (r == -EFBIG && c->error.kind != SANDBOXD_ERROR_TOO_LARGE)
                return error_set(&c->error, SANDBOXD_ERROR_LOCAL, r, "%s is larger than the limit.", path);
        return client_fail(c, r);
}

static int download(sandboxd_client *c, const char *session, const char *path, Download *d,
                    sandboxd_progress_fn fn, void *userdata) {
        HttpCall call = HTTP_CALL_INIT;
        Buf url = {};
        int r;

        r = url_file(&url, c, session, path);
        if (r < 0) {
                buf_done(&url);
                return client_fail(c, r);
        }
        call.method = "GET";
        call.url = url.data;
        call.stream = true;
        call.sink = download_sink;
        call.userdata = d;
        call.progress = fn;
        call.progress_userdata = userdata;
        r = http_call_perform(c, &call);
        /* an empty directory listing never reaches the sink */
        if (r >= 0 && is_json(&call))
                r = -EISDIR;
        if (r == -EISDIR || r == -EFBIG) {
                error_clear(&c->error);
                r = file_error(c, r, path);
        } else if (r == -ECANCELED && call.abort_error < 0 && call.abort_error != -ECANCELED) {
                /* the local side failed (a write to fd) */
                error_clear(&c->error);
                r = error_set(&c->error, SANDBOXD_ERROR_LOCAL, call.abort_error, "Writing %s: %s", path,
                              strerror(-call.abort_error));
        }
        http_call_done(&call);
        buf_done(&url);
        return r;
}

/* Over D-Bus: Read()'s file descriptor copied where the HTTP body would go. */
static int bus_download(sandboxd_client *c, const char *session, const char *path, Download *d,
                        sandboxd_progress_fn fn, void *userdata) {
        uint64_t size, done = 0;
        char buf[65536];
        int fd, r;

        r = bus_file_open(c, session, path, &fd, &size);
        if (r < 0 && streq(c->error.code, "is_a_directory")) {
                /* what the HTTP transport says of a listing where it wanted a file */
                error_clear(&c->error);
                return file_error(c, -EISDIR, path);
        }
        if (r < 0)
                return r;
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = error_set(&c->error, SANDBOXD_ERROR_TRANSPORT, -errno, "Reading %s: %m", path);
                        break;
                }
                if (n == 0)
                        break;
                if (d->mem) {
                        r = d->mem->len + (size_t) n > d->max ? file_error(c, -EFBIG, path)
                                                               : buf_append(d->mem, buf, (size_t) n);
                } else if ((r = loop_write(d->fd, buf, (size_t) n)) < 0)
                        r = error_set(&c->error, SANDBOXD_ERROR_LOCAL, r, "Writing %s: %s", path, strerror(-r));
                if (r < 0)
                        break;
                done += (uint64_t) n;
                if (fn && (r = fn(done, size, userdata)) < 0) {
                        r = error_set(&c->error, SANDBOXD_ERROR_CANCELLED, -ECANCELED, "Stopped by the progress callback.");
                        break;
                }
        }
        safe_close(fd);
        return r < 0 ? r : 0;
}

/* Over D-Bus: Write() reads an fd, a pipe as it fills or a regular file. Other fds (a
 * terminal, a socket) are copied into a memfd first. */
static int bus_upload(sandboxd_client *c, const char *session, const char *path, int fd, uint64_t size,
                      sandboxd_progress_fn fn, void *userdata) {
        _cleanup_close_ int mem = -EBADF;
        uint64_t written = 0;
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return error_set(&c->error, SANDBOXD_ERROR_LOCAL, -errno, "Reading the data for %s: %m", path);
        if (!S_ISFIFO(st.st_mode) && !S_ISREG(st.st_mode)) {
                char buf[65536];

                mem = memfd_create("sandboxd-upload", MFD_CLOEXEC);
                if (mem < 0)
                        return error_set(&c->error, SANDBOXD_ERROR_LOCAL, -errno, "memfd_create: %m");
                for (;;) {
                        ssize_t n = read(fd, buf, sizeof(buf));

                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return error_set(&c->error, SANDBOXD_ERROR_LOCAL, -errno, "Reading the data for %s: %m", path);
                        if (n == 0)
                                break;
                        r = loop_write(mem, buf, (size_t) n);
                        if (r < 0)
                                return error_set(&c->error, SANDBOXD_ERROR_LOCAL, r, "Writing to a memfd: %s", strerror(-r));
                }
                if (lseek(mem, 0, SEEK_SET) < 0)
                        return error_set(&c->error, SANDBOXD_ERROR_LOCAL, -errno, "lseek: %m");
                fd = mem;
        }
        /* A pipe's announced size tells sandboxd a writer that stopped short from one that
         * was done; a file is read from its offset, so its size says nothing. */
        r = bus_file_write_fd(c, session, path, fd, S_ISFIFO(st.st_mode) && size > 0 ? size : UINT64_MAX, &written);
        if (r >= 0 && fn && fn(written, size ?: written, userdata) < 0)
                r = error_set(&c->error, SANDBOXD_ERROR_CANCELLED, -ECANCELED, "Stopped by the progress callback.");
        return r;
}

_public_ int sandboxd_file_download(sandboxd_client *c, const char *session, const char *path, int fd,
                                    sandboxd_progress_fn fn, void *userdata) {
        Download d = { .fd = fd };

        if (!c || !session || !path || fd < 0)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_download(c, session, path, &d, fn, userdata));
        return client_done(c, download(c, session, path, &d, fn, userdata));
}

_public_ int sandboxd_file_read(sandboxd_client *c, const char *session, const char *path, size_t max_size,
                                char **ret, size_t *ret_size) {
        Buf mem = {};
        Download d = { .fd = -EBADF, .mem = &mem, .max = max_size ?: FILE_READ_MAX_DEFAULT };
        int r;

        if (!c || !session || !path || !ret)
                return -EINVAL;
        client_begin(c);
        if (c->bus)
                r = bus_download(c, session, path, &d, NULL, NULL);
        else
                r = download(c, session, path, &d, NULL, NULL);
        if (r >= 0 && !mem.data)
                r = buf_reserve(&mem, 0);
        if (r < 0) {
                buf_done(&mem);
                return client_done(c, r);
        }
        if (ret_size)
                *ret_size = mem.len;
        *ret = buf_steal(&mem);
        return client_done(c, 0);
}

static int upload(sandboxd_client *c, const char *session, const char *path, int fd, uint64_t size,
                  const void *data, size_t data_size, sandboxd_progress_fn fn, void *userdata) {
        HttpCall call = HTTP_CALL_INIT;
        Buf url = {};
        int r;

        r = url_file(&url, c, session, path);
        if (r < 0) {
                buf_done(&url);
                return client_fail(c, r);
        }
        call.method = "PUT";
        call.url = url.data;
        call.content_type = "application/octet-stream";
        call.stream = true;
        if (fd >= 0) {
                call.upload_fd = fd;
                call.upload_size = size;
                call.progress = fn;
                call.progress_userdata = userdata;
        } else {
                call.body = data ?: "";
                call.body_size = data_size;
        }
        r = http_call_perform(c, &call);
        if (r == -ECANCELED && call.abort_error < 0 && call.abort_error != -ECANCELED) {
                error_clear(&c->error);
                r = error_set(&c->error, SANDBOXD_ERROR_LOCAL, call.abort_error, "Reading the data for %s: %s", path,
                              strerror(-call.abort_error));
        }
        http_call_done(&call);
        buf_done(&url);
        return r;
}

_public_ int sandboxd_file_upload(sandboxd_client *c, const char *session, const char *path, int fd, uint64_t size,
                                  sandboxd_progress_fn fn, void *userdata) {
        if (!c || !session || !path || fd < 0)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_upload(c, session, path, fd, size, fn, userdata));
        return client_done(c, upload(c, session, path, fd, size, NULL, 0, fn, userdata));
}

_public_ int sandboxd_file_write(sandboxd_client *c, const char *session, const char *path, const void *data,
                                 size_t size) {
        if (!c || !session || !path || (!data && size > 0))
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_file_write(c, session, path, data, size));
        return client_done(c, upload(c, session, path, -EBADF, 0, data, size, NULL, NULL));
}

static const char *last_component(const char *path) {
        const char *end = path + strlen(path), *p;

        while (end > path && end[-1] == '/')
                end--;
        for (p = end; p > path && p[-1] != '/'; p--)
                ;
        return p;
}

_public_ int sandboxd_file_stat(sandboxd_client *c, const char *session, const char *path, sandboxd_file_info **ret) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *name = NULL;
        Buf url = {};
        int r;

        if (!c || !session || !path || !ret)
                return -EINVAL;
        client_begin(c);
        if (c->bus)
                r = bus_file_json(c, session, path, false, &answer);
        else {
                r = url_file(&url, c, session, path);
                if (r >= 0)
                        r = url_append_query(&url, "stat", NULL);
                if (r >= 0)
                        r = http_json(c, "GET", url.data, NULL, NULL, &answer);
                buf_done(&url);
        }
        if (r < 0)
                return client_done(c, r);
        name = strndup(last_component(path), strcspn(last_component(path), "/"));
        if (!name)
                return client_fail(c, -ENOMEM);
        r = file_info_from_json(answer, name, ret);
        if (r == -EBADMSG)
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, r, "The answer is not a file's status.");
        return client_done(c, r);
}

_public_ int sandboxd_file_list(sandboxd_client *c, const char *session, const char *path, sandboxd_file_info ***ret,
                                size_t *ret_n, bool *ret_truncated) {
        HttpCall call = HTTP_CALL_INIT;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        sandboxd_file_info **list;
        json_object *arr;
        Buf url = {};
        size_t n;
        int r;

        if (!c || !session || !path || !ret)
                return -EINVAL;
        client_begin(c);
        if (c->bus) {
                r = bus_file_json(c, session, path, true, &answer);
                if (r < 0 && streq(c->error.code, "not_a_directory")) {
                        /* as the HTTP transport says of a file where it wanted a listing */
                        error_clear(&c->error);
                        r = file_error(c, -ENOTDIR, path);
                }
        } else {
                r = url_file(&url, c, session, path);
                if (r < 0) {
                        buf_done(&url);
                        return client_done(c, r);
                }
                call.method = "GET";
                call.url = url.data;
                r = http_call_perform(c, &call);
                if (r >= 0 && !is_json(&call))
                        r = file_error(c, -ENOTDIR, path);
                else if (r >= 0 && json_parse_text(call.response.data ?: "", call.response.len, &answer) < 0)
                        r = error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "The directory listing is not JSON.");
                http_call_done(&call);
                buf_done(&url);
        }
        if (r < 0)
                return client_done(c, r);
        if (!json_object_object_get_ex(answer, "entries", &arr) || !json_object_is_type(arr, json_type_array))
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "The listing has no entries.");
        n = json_object_array_length(arr);
        list = calloc(n + 1, sizeof(*list));
        if (!list)
                return client_fail(c, -ENOMEM);
        for (size_t i = 0; i < n; i++) {
                r = file_info_from_json(json_object_array_get_idx(arr, i), NULL, &list[i]);
                if (r < 0) {
                        sandboxd_file_info_list_free(list);
                        return r == -EBADMSG ? error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, r,
                                                         "The listing's entries are not files.")
                                             : client_fail(c, r);
                }
        }
        *ret = list;
        if (ret_n)
                *ret_n = n;
        if (ret_truncated)
                *ret_truncated = json_get_bool(answer, "truncated");
        return client_done(c, 0);
}

/* The method of ?mkdir and ?move_to= is the file API's choice: try ours, and on 405 the
 * one the Allow header names. */
static int file_action(sandboxd_client *c, const char *method, const char *url) {
        HttpCall call = HTTP_CALL_INIT;
        char allow[128] = "";
        int r;

        call.method = method;
        call.url = url;
        r = http_call_perform(c, &call);
        if (r < 0 && call.status == 405)
                snprintf(allow, sizeof(allow), "%s", call.allow);
        http_call_done(&call);
        if (r >= 0 || !*allow)
                return r;

        for (const char *m = allow; *m;) {
                size_t k = strcspn(m, ", ");
                const char *alt = k == 4 && strncmp(m, "POST", 4) == 0  ? "POST"
                                  : k == 3 && strncmp(m, "PUT", 3) == 0 ? "PUT"
                                                                        : NULL;
                if (alt && !streq(alt, method)) {
                        HttpCall again = HTTP_CALL_INIT;
                        again.method = alt;
                        again.url = url;
                        error_clear(&c->error);
                        r = http_call_perform(c, &again);
                        http_call_done(&again);
                        return r;
                }
                m += k;
                m += strspn(m, ", ");
        }
        return r;
}

_public_ int sandboxd_file_mkdir(sandboxd_client *c, const char *session, const char *path) {
        Buf url = {};
        int r;

        if (!c || !session || !path)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_file_mkdir(c, session, path));
        r = url_file(&url, c, session, path);
        if (r >= 0)
                r = url_append_query(&url, "mkdir", NULL);
        if (r >= 0)
                r = file_action(c, "PUT", url.data);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_file_remove(sandboxd_client *c, const char *session, const char *path, bool recursive) {
        Buf url = {};
        int r;

        if (!c || !session || !path)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_file_remove(c, session, path, recursive));
        r = url_file(&url, c, session, path);
        if (r >= 0 && recursive)
                r = url_append_query(&url, "recursive", "true");
        if (r >= 0)
                r = http_json(c, "DELETE", url.data, NULL, NULL, NULL);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_file_move(sandboxd_client *c, const char *session, const char *path, const char *to) {
        Buf url = {};
        int r;

        if (!c || !session || !path || !to)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_file_move(c, session, path, to));
        r = url_file(&url, c, session, path);
        if (r >= 0)
                r = url_append_query(&url, "move_to", to);
        if (r >= 0)
                r = file_action(c, "POST", url.data);
        buf_done(&url);
        return client_done(c, r);
}
