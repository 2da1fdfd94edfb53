/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <poll.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "nodes.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(CURL *, curl_easy_cleanup);
DEFINE_TRIVIAL_CLEANUP_FUNC(CURLM *, curl_multi_cleanup);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct curl_slist *, curl_slist_free_all);

typedef struct Transfer {
        HttpCall *call;
        CURL *handle;
        uint64_t sent;
        uint64_t received;
        uint64_t total;   /* of the download, when announced */
        bool status_known;
} Transfer;

static bool status_ok(long status) {
        return status >= 200 && status < 300;
}

static void learn_status(Transfer *t) {
        const char *ct = NULL;

        if (t->status_known)
                return;
        (void) curl_easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &t->call->status);
        if (curl_easy_getinfo(t->handle, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
                snprintf(t->call->content_type_out, sizeof(t->call->content_type_out), "%s", ct);
        t->status_known = true;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *userdata) {
        Transfer *t = userdata;
        HttpCall *call = t->call;
        size_t n = size * nmemb;
        int r;

        learn_status(t);
        t->received += n;
        if (status_ok(call->status) && call->sink)
                r = call->sink(call, p, n);
        else if (!status_ok(call->status) && call->response.len > 64 * 1024)
                r = 0; /* an error body this long is not ours to read in full */
        else
                r = buf_append(&call->response, p, n);
        if (r < 0) {
                if (call->abort_error == 0)
                        call->abort_error = r;
                return 0;
        }
        if (call->progress && status_ok(call->status) && call->upload_fd < 0 &&
            (r = call->progress(t->received, t->total, call->progress_userdata)) < 0) {
                call->abort_error = r;
                return 0;
        }
        return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *userdata) {
        Transfer *t = userdata;
        size_t n = size * nmemb, k;
        const char *v;

        if (n > 6 && strncasecmp(p, "allow:", 6) == 0) {
                v = p + 6;
                while (*v == ' ' || *v == '\t')
                        v++;
                k = strcspn(v, "\r\n");
                snprintf(t->call->allow, sizeof(t->call->allow), "%.*s", (int) k, v);
        } else if (n > 15 && strncasecmp(p, "content-length:", 15) == 0)
                t->total = strtoull(p + 15, NULL, 10);
        return n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *userdata) {
        Transfer *t = userdata;
        HttpCall *call = t->call;
        ssize_t l;
        int r;

        for (;;) {
                l = read(call->upload_fd, p, size * nmemb);
                if (l >= 0 || errno != EINTR)
                        break;
        }
        if (l < 0) {
                call->abort_error = -errno;
                return CURL_READFUNC_ABORT;
        }
        t->sent += (uint64_t) l;
        if (call->progress && (r = call->progress(t->sent, call->upload_size, call->progress_userdata)) < 0) {
                call->abort_error = r;
                return CURL_READFUNC_ABORT;
        }
        return (size_t) l;
}

static int setup(sandboxd_client *c, Transfer *t, const char *url, const char *unix_path, struct curl_slist **headers) {
        HttpCall *call = t->call;
        CURL *h = t->handle;
        char ct[160];
        struct curl_slist *l = NULL, *n;
        bool ok = true;

        if (c->auth_header && !(l = curl_slist_append(l, c->auth_header)))
                return -ENOMEM;
        /* sandboxd answers at once; never wait for "100 Continue" */
        if (!(n = curl_slist_append(l, "Expect:")))
                goto oom;
        l = n;
        snprintf(ct, sizeof(ct), "Content-Type: %s", call->content_type ?: "application/json");
        if ((call->body || call->upload_fd >= 0) && !(n = curl_slist_append(l, ct)))
                goto oom;
        l = n;
        if (call->scope_header) {
                if (!(n = curl_slist_append(l, call->scope_header)))
                        goto oom;
                l = n;
        }
        *headers = l;

        ok = ok && curl_easy_setopt(h, CURLOPT_URL, url) == CURLE_OK;
        if (unix_path)
                ok = ok && curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, unix_path) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_HTTPHEADER, l) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_WRITEDATA, t) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_HEADERDATA, t) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK;
#if LIBCURL_VERSION_NUM >= 0x075500
        ok = ok && curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
#endif
        if (call->timeout_usec > 0)
                ok = ok && curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long) MAX(call->timeout_usec / 1000, 1u)) == CURLE_OK;
        else if (!call->stream && c->timeout_usec > 0)
                ok = ok && curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long) (c->timeout_usec / 1000)) == CURLE_OK;

        if (call->upload_fd >= 0) {
                ok = ok && curl_easy_setopt(h, CURLOPT_UPLOAD, 1L) == CURLE_OK;
                ok = ok && curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read) == CURLE_OK;
                ok = ok && curl_easy_setopt(h, CURLOPT_READDATA, t) == CURLE_OK;
                if (call->upload_size > 0)
                        ok = ok && curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t) call->upload_size) == CURLE_OK;
        } else if (call->body || streq(call->method, "POST") || streq(call->method, "PUT")) {
                /* a body, possibly empty: Content-Length is always sent */
                ok = ok && curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) call->body_size) == CURLE_OK;
                ok = ok && curl_easy_setopt(h, CURLOPT_POSTFIELDS, call->body ?: "") == CURLE_OK;
        } else if (streq(call->method, "HEAD"))
                ok = ok && curl_easy_setopt(h, CURLOPT_NOBODY, 1L) == CURLE_OK;
        ok = ok && curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, call->method) == CURLE_OK;
        return ok ? 0 : -EINVAL;

oom:
        curl_slist_free_all(l);
        return -ENOMEM;
}

static int run(sandboxd_client *c, CURLM *m, HttpCall *call, CURLcode *ret_code) {
        bool watch = c->wakeup_fd >= 0 && c->wakeup_fn && !c->in_wakeup;
        int running = 1, r;

        for (;;) {
                struct curl_waitfd extra = { .fd = c->wakeup_fd, .events = CURL_WAIT_POLLIN };
                CURLMcode mc;
                CURLMsg *msg;
                int left;

                mc = curl_multi_perform(m, &running);
                if (mc != CURLM_OK)
                        return mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
                while ((msg = curl_multi_info_read(m, &left)))
                        if (msg->msg == CURLMSG_DONE) {
                                *ret_code = msg->data.result;
                                return 0;
                        }
                if (call->abort_error < 0)
                        return call->abort_error;
                if (!running)
                        return -EIO;

                mc = curl_multi_poll(m, watch ? &extra : NULL, watch ? 1 : 0, 1000, NULL);
                if (mc != CURLM_OK)
                        return -EIO;
                if (watch && (extra.revents & (CURL_WAIT_POLLIN | POLLHUP | POLLERR))) {
                        c->in_wakeup = true;
                        r = c->wakeup_fn(c, c->wakeup_fd, c->wakeup_userdata);
                        c->in_wakeup = false;
                        if (r < 0)
                                return r;
                }
        }
}

/* One attempt at url, over unix_path (NULL: TCP). */
static int perform_once(sandboxd_client *c, HttpCall *call, const char *url, const char *unix_path) {
        _cleanup_(curl_easy_cleanupp) CURL *h = NULL;
        _cleanup_(curl_multi_cleanupp) CURLM *m = NULL;
        _cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
        Transfer t = { .call = call };
        CURLcode code = CURLE_OK;
        long os_errno = 0;
        int r;

        h = curl_easy_init();
        m = curl_multi_init();
        if (!h || !m)
                return client_fail(c, -ENOMEM);
        t.handle = h;
        r = setup(c, &t, url, unix_path, &headers);
        if (r < 0)
                return client_fail(c, r);
        if (curl_multi_add_handle(m, h) != CURLM_OK)
                return client_fail(c, -ENOMEM);

        r = run(c, m, call, &code);
        (void) curl_multi_remove_handle(m, h);
        learn_status(&t);

        if (r < 0 || call->abort_error < 0) {
                r = call->abort_error < 0 ? call->abort_error : r;
                if (c->error.kind == SANDBOXD_ERROR_NONE)
                        error_set(&c->error, SANDBOXD_ERROR_CANCELLED, r, "%s %s: stopped: %s", call->method, call->url,
                                  strerror(-r));
                return r;
        }
        if (code != CURLE_OK) {
                (void) curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
                r = errno_from_curl(code, os_errno);
                error_set(&c->error,
                          r == -EINVAL || r == -ENOMEM ? SANDBOXD_ERROR_LOCAL : SANDBOXD_ERROR_TRANSPORT, r,
                          "%s %s%s%s: %s%s%s", call->method, url, unix_path ? " on " : "",
                          unix_path ?: "", curl_easy_strerror(code), os_errno > 0 ? ": " : "",
                          os_errno > 0 ? strerror((int) os_errno) : "");
                c->error.http_status = call->status;
                return r;
        }
        if (!status_ok(call->status))
                return error_from_http(&c->error, call->status, call->response.data, call->response.len);
        return 0;
}

/* After a 421 wrong_node (in c->error): the URL SANDBOXD_NODES gives for the node named, and
 * *url_in (a URL at c->base_url) rewritten to it, in *ret_url; 0 with *ret_url NULL when the
 * error names no node or url_in is not at base_url; else the error is made to say which node
 * has the session and why it is not asked (r, the 421's value, returned). can_resend: false
 * for a body read from a file descriptor. */
int wrong_node_url(sandboxd_client *c, int r, const char *url_in, bool can_resend,
                   char node[static NODE_NAME_MAX + 1], char **ret_url) {
        _cleanup_free_ char *node_url = NULL;
        const char *why = NULL, *path;
        int k;

        *ret_url = NULL;
        snprintf(node, NODE_NAME_MAX + 1, "%s", c->error.node);
        if (!node[0])
                return 0;
        k = nodes_lookup(getenv(NODES_ENV), node, &node_url, &why);
        if (k == -ENOMEM)
                return k;
        if (k == -EINVAL)
                return error_set(&c->error, SANDBOXD_ERROR_WRONG_NODE, r,
                                 "The session is on node %s, and " NODES_ENV " cannot be read: %s.", node, why);
        if (k < 0)
                return error_set(&c->error, SANDBOXD_ERROR_WRONG_NODE, r,
                                 "The session is on node %s, and " NODES_ENV " does not name it (NAME=URL entries, "
                                 "e.g. %s=http://HOST:8421).", node, node);
        if (!can_resend)
                return error_set(&c->error, SANDBOXD_ERROR_WRONG_NODE, r,
                                 "The session is on node %s (%s): an upload read from a pipe cannot be sent "
                                 "twice; send it there.", node, node_url);
        path = startswith(url_in, c->base_url);
        if (!path)
                return 0;
        if (asprintf(ret_url, "%s%s", node_url, path) < 0) {
                *ret_url = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* The error of a request sent again to node at url that failed: if that one is wrong_node too,
 * it says where it went (no third try). */
void wrong_node_again(sandboxd_client *c, int r, const char *node, const char *url) {
        char first[sizeof(c->error.message)];

        if (r >= 0 || c->error.kind != SANDBOXD_ERROR_WRONG_NODE)
                return;
        snprintf(first, sizeof(first), "%s", c->error.message);
        error_set(&c->error, SANDBOXD_ERROR_WRONG_NODE, r, "Sent to node %s (%s) as " NODES_ENV " says: %s", node,
                  url, first);
}

/* Where an upload from a regular file starts (-1: from a pipe, a socket ...: not again). */
static off_t upload_start(int fd) {
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return -1;
        return lseek(fd, 0, SEEK_CUR);
}

static bool upload_rewind(int fd, off_t start) {
        return start >= 0 && lseek(fd, start, SEEK_SET) == start;
}

/* 421 wrong_node: once more, at the node's URL from SANDBOXD_NODES, when the request can be
 * sent again (its body in memory, or read from a regular file, read again from where it
 * started); else the error says which node has the session and why
 * it was not asked. */
static int follow_node(sandboxd_client *c, HttpCall *call, off_t start, int r) {
        _cleanup_free_ char *url = NULL;
        char node[NODE_NAME_MAX + 1];
        int k;

        k = wrong_node_url(c, r, call->url, call->upload_fd < 0 || upload_rewind(call->upload_fd, start), node, &url);
        if (k == -ENOMEM)
                return client_fail(c, k);
        if (k < 0 || !url)
                return k < 0 ? k : r;
        buf_done(&call->response);
        call->status = 0;
        call->allow[0] = call->content_type_out[0] = 0;
        call->abort_error = 0;
        error_clear(&c->error);
        r = perform_once(c, call, url, NULL);
        wrong_node_again(c, r, node, url);
        return r;
}

int http_call_perform(sandboxd_client *c, HttpCall *call) {
        off_t start = upload_start(call->upload_fd);
        int r;

        r = perform_once(c, call, call->url, c->unix_path);
        if (r < 0 && call->status == 421 && c->error.kind == SANDBOXD_ERROR_WRONG_NODE)
                return follow_node(c, call, start, r);
        return r;
}

void http_call_done(HttpCall *call) {
        buf_done(&call->response);
}

int http_json(sandboxd_client *c, const char *method, const char *url, json_object *body, long *ret_status,
              json_object **ret_json) {
        return http_json_scoped(c, method, url, body, NULL, ret_status, ret_json);
}

int http_json_scoped(sandboxd_client *c, const char *method, const char *url, json_object *body,
                     const char *scope_header, long *ret_status, json_object **ret_json) {
        _cleanup_free_ char *text = NULL;
        HttpCall call = HTTP_CALL_INIT;
        json_object *o = NULL;
        int r;

        if (body) {
                text = json_to_text(body);
                if (!text)
                        return client_fail(c, -ENOMEM);
        }
        call.method = method;
        call.url = url;
        call.scope_header = scope_header;
        call.body = text;
        call.body_size = text ? strlen(text) : 0;
        r = http_call_perform(c, &call);
        if (r >= 0 && ret_json) {
                if (call.response.len == 0)
                        r = error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "%s %s: empty answer", method, url);
                else if (json_parse_text(call.response.data, call.response.len, &o) < 0)
                        r = error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "%s %s: the answer is not JSON",
                                      method, url);
        }
        if (r >= 0 && ret_status)
                *ret_status = call.status;
        http_call_done(&call);
        if (r < 0)
                return r;
        if (ret_json)
                *ret_json = o;
        return 0;
}
