/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "buf.h"
#include "http.h"
#include "http-head.h"
#include "http-relay.h"
#include "list.h"
#include "log.h"
#include "manager.h"
#include "session.h"

struct HttpRelayEngine {
        Manager *manager;
        CURLM *multi;
        sd_event_source *timer;
        HttpRelay *relays;
        unsigned n_relays;
};

struct HttpRelay {
        HttpRelayEngine *engine;
        unsigned n_ref;              /* the request's, and the response's while MHD has it */
        HttpRequest *request;        /* NULL once the request is over */
        struct MHD_Connection *connection;
        char session_id[SESSION_ID_SIZE];

        CURL *easy;
        bool in_multi;
        struct curl_slist *headers;
        char error[CURL_ERROR_SIZE];

        /* up: the request's body */
        Buf up;
        size_t up_off;
        bool up_done;                /* the client's body is all in */
        bool up_paused;              /* curl's read paused: nothing to give */
        bool up_waiting;             /* the request suspended: the buffer was full */
        bool up_discard;             /* the upstream is done: drop the rest of the body */

        /* the upstream's head */
        unsigned status;
        Buf head;                    /* "Name: value\0" lines of the final head */
        size_t head_lines;
        bool head_done;
        bool head_too_large;
        int64_t content_length;      /* -1: none, or chunked */
        bool waiting_head;           /* the request suspended for the head */
        bool answered;               /* the response (or a refusal) is queued */

        /* down: the response's body */
        Buf down;
        size_t down_off;
        bool down_paused;            /* curl's write paused: the buffer was full */
        bool reader_suspended;       /* MHD's reader suspended the connection: nothing to give */
        bool done;                   /* curl finished */
        CURLcode result;

        uint64_t last_progress;
        sd_event_source *idle_timer;

        /* A WebSocket upgrade: our own connection to the upstream, `up` the request's head
         * then the client's bytes, `head` what the upstream answered, `down` its bytes. */
        bool websocket;
        int upstream_fd;
        sd_event_source *upstream_io;
        HttpHead *ws_head;
        bool tunnel;                 /* upgraded: bytes both ways */
        int client_fd;
        sd_event_source *client_io;
        struct MHD_UpgradeResponseHandle *urh;
        bool client_eof, upstream_eof, client_shut, upstream_shut;

        LIST_FIELDS(HttpRelay, relays);
};

static bool header_is_hop_by_hop(const char *name) {
        static const char *const names[] = {
                "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
                "TE", "Trailer", "Transfer-Encoding", "Upgrade",
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcasecmp(name, names[i]) == 0)
                        return true;
        return false;
}

/* --- the engine: curl's multi handle on sd-event ----------------------------- */

static void engine_check_done(HttpRelayEngine *e);

static void relay_touch(HttpRelay *rl) {
        (void) sd_event_now(rl->engine->manager->event, CLOCK_MONOTONIC, &rl->last_progress);
}

static int on_curl_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpRelayEngine *e = userdata;
        int action = 0, running;

        if (revents & EPOLLIN)
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;
        (void) curl_multi_socket_action(e->multi, fd, action, &running);
        engine_check_done(e);
        return 0;
}

static int on_curl_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpRelayEngine *e = userdata;
        int running;

        (void) curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        engine_check_done(e);
        return 0;
}

static int curl_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        HttpRelayEngine *e = userp;
        sd_event_source *s = socketp;
        uint32_t events = 0;
        int r;

        if (what == CURL_POLL_REMOVE) {
                sd_event_source_disable_unref(s);
                (void) curl_multi_assign(e->multi, fd, NULL);
                return 0;
        }
        if (what & CURL_POLL_IN)
                events |= EPOLLIN;
        if (what & CURL_POLL_OUT)
                events |= EPOLLOUT;
        if (s) {
                r = sd_event_source_set_io_events(s, events);
                if (r >= 0)
                        r = sd_event_source_set_enabled(s, SD_EVENT_ON);
        } else {
                r = sd_event_add_io(e->manager->event, &s, fd, events, on_curl_io, e);
                if (r >= 0) {
                        (void) sd_event_source_set_description(s, "relay-io");
                        r = curl_multi_assign(e->multi, fd, s) == CURLM_OK ? 0 : -ENOMEM;
                }
        }
        if (r < 0) {
                log_warning_errno(r, "Failed to watch a relay's socket: %m");
                return -1;
        }
        return 0;
}

static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp) {
        HttpRelayEngine *e = userp;
        int r;

        if (timeout_ms < 0)
                return sd_event_source_set_enabled(e->timer, SD_EVENT_OFF) < 0 ? -1 : 0;
        r = sd_event_source_set_time_relative(e->timer, (uint64_t) timeout_ms * USEC_PER_MSEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(e->timer, SD_EVENT_ONESHOT);
        return r < 0 ? -1 : 0;
}

static int engine_get(Manager *m, HttpRelayEngine **ret) {
        HttpRelayEngine *e;
        int r;

        if (m->relay_engine) {
                *ret = m->relay_engine;
                return 0;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -ENOMEM;
        e = calloc(1, sizeof(HttpRelayEngine));
        if (!e)
                return -ENOMEM;
        e->manager = m;
        e->multi = curl_multi_init();
        if (!e->multi) {
                free(e);
                return -ENOMEM;
        }
        r = sd_event_add_time(m->event, &e->timer, CLOCK_MONOTONIC, USEC_INFINITY, 1, on_curl_timer, e);
        if (r < 0) {
                curl_multi_cleanup(e->multi);
                free(e);
                return r;
        }
        (void) sd_event_source_set_enabled(e->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(e->timer, "relay-timer");
        (void) curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
        (void) curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
        (void) curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
        (void) curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
        m->relay_engine = *ret = e;
        return 0;
}

static void tunnel_close(HttpRelay *rl);

void http_relay_close_tunnels(Manager *m) {
        HttpRelay *rl, *next;

        if (!m->relay_engine)
                return;
        for (rl = m->relay_engine->relays; rl; rl = next) {
                next = rl->relays_next;
                /* may free rl, never another */
                tunnel_close(rl);
        }
}

HttpRelayEngine *http_relay_engine_free(HttpRelayEngine *e) {
        if (!e)
                return NULL;
        /* the relays went with their requests (MHD stopped first) */
        curl_multi_cleanup(e->multi);
        sd_event_source_disable_unref(e->timer);
        free(e);
        return NULL;
}

unsigned http_relay_count(Manager *m, const char *session_id) {
        HttpRelayEngine *e = m->relay_engine;
        unsigned n = 0;
        HttpRelay *rl;

        if (!e)
                return 0;
        if (!session_id)
                return e->n_relays;
        /* at most RELAYS_MAX, once per relay started */
        LIST_FOREACH(relays, rl, e->relays)
                if (streq(rl->session_id, session_id))
                        n++;
        return n;
}

/* --- one relay ------------------------------------------------------------------ */

static void relay_unref(HttpRelay *rl) {
        if (!rl || --rl->n_ref > 0)
                return;
        if (rl->in_multi)
                (void) curl_multi_remove_handle(rl->engine->multi, rl->easy);
        curl_easy_cleanup(rl->easy);
        sd_event_source_disable_unref(rl->upstream_io);
        sd_event_source_disable_unref(rl->client_io);
        if (rl->upstream_fd >= 0)
                (void) close(rl->upstream_fd);
        free(rl->ws_head);
        curl_slist_free_all(rl->headers);
        sd_event_source_disable_unref(rl->idle_timer);
        buf_done(&rl->up);
        buf_done(&rl->head);
        buf_done(&rl->down);
        LIST_REMOVE(relays, rl->engine->relays, rl);
        rl->engine->n_relays--;
        free(rl);
}

/* curl is done with it (or it was given up): the transfer leaves the multi handle. */
static void relay_stop(HttpRelay *rl, CURLcode result) {
        if (rl->in_multi) {
                (void) curl_multi_remove_handle(rl->engine->multi, rl->easy);
                rl->in_multi = false;
        }
        rl->done = true;
        rl->result = result;
        rl->idle_timer = sd_event_source_disable_unref(rl->idle_timer);
        if (rl->websocket && !rl->tunnel) {
                rl->upstream_io = sd_event_source_disable_unref(rl->upstream_io);
                if (rl->upstream_fd >= 0)
                        (void) close(rl->upstream_fd);
                rl->upstream_fd = -EBADF;
        }
}

static struct MHD_Response *ws_response(HttpRelay *rl);

static ssize_t relay_read(void *cls, uint64_t pos, char *buf, size_t max) {
        HttpRelay *rl = cls;
        size_t n = rl->down.len - rl->down_off;

        if (n > 0) {
                n = MIN(n, max);
                memcpy(buf, rl->down.data + rl->down_off, n);
                rl->down_off += n;
                if (rl->down_off == rl->down.len)
                        rl->down_off = rl->down.len = 0;
                relay_touch(rl);
                if (rl->down_paused && !rl->done && rl->down.len - rl->down_off + RELAY_CURL_CHUNK <= RELAY_BUFFER_MAX) {
                        /* may hand us the bytes it kept at once (curl_write()) */
                        rl->down_paused = false;
                        (void) curl_easy_pause(rl->easy, rl->up_paused ? CURLPAUSE_RECV_CONT | CURLPAUSE_SEND
                                                                       : CURLPAUSE_CONT);
                }
                return (ssize_t) n;
        }
        if (rl->done)
                return rl->result == CURLE_OK ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;

        /* nothing yet: park the connection until curl writes (returning 0 would spin) */
        rl->reader_suspended = true;
        MHD_suspend_connection(rl->connection);
        return 0;
}

static void relay_response_freed(void *cls) {
        relay_unref(cls);
}

static void relay_wake_reader(HttpRelay *rl) {
        if (rl->reader_suspended) {
                rl->reader_suspended = false;
                MHD_resume_connection(rl->connection);
        }
}

static struct MHD_Response *relay_response(HttpRelay *rl) {
        struct MHD_Response *resp;
        uint64_t size = rl->content_length >= 0 ? (uint64_t) rl->content_length : MHD_SIZE_UNKNOWN;

        resp = MHD_create_response_from_callback(size, 64 * 1024, relay_read, rl, relay_response_freed);
        if (!resp)
                return NULL;
        rl->n_ref++;
        for (const char *l = rl->head.data, *end = l + rl->head.len; l && l < end; l += strlen(l) + 1) {
                _cleanup_free_ char *name = NULL;
                const char *colon = strchr(l, ':');

                name = strndup(l, (size_t) (colon - l));
                if (name)
                        (void) MHD_add_response_header(resp, name, colon + 1 + strspn(colon + 1, " \t"));
        }
        return resp;
}

/* The answer, once the upstream's head came or the transfer ended without one: its
 * status and response; false while neither. */
static bool relay_answer(HttpRelay *rl, unsigned *ret_status, struct MHD_Response **ret_resp) {
        if (rl->head_done) {
                *ret_status = rl->status;
                *ret_resp = rl->websocket ? ws_response(rl) : relay_response(rl);
                return true;
        }
        if (!rl->done)
                return false;
        if (rl->result == CURLE_OPERATION_TIMEDOUT) {
                *ret_status = http_error_status("upstream_timeout");
                *ret_resp = http_error_response("upstream_timeout", "The exposed port's server moved no byte for 60 s.");
        } else if (rl->result == CURLE_URL_MALFORMAT) {
                *ret_status = http_error_status("invalid_url");
                *ret_resp = http_error_response("invalid_url", "The path or query cannot be relayed.");
        } else {
                *ret_status = http_error_status("upstream_unavailable");
                *ret_resp = http_error_response(
                        "upstream_unavailable",
                        rl->head_too_large ? "The exposed port's server sent a response head that is too large."
                                           : "Nothing answered on the exposed port, or its server closed the connection "
                                             "without an answer.");
        }
        return true;
}

/* The request waits, its body in: answer it if the upstream's head (or its end) came. */
static void relay_answer_if_ready(HttpRelay *rl) {
        struct MHD_Response *resp;
        unsigned status;

        if (!rl->request || rl->answered || !rl->waiting_head || !relay_answer(rl, &status, &resp))
                return;
        rl->answered = true;
        rl->waiting_head = false;
        http_complete(rl->request, status, resp);
}

static size_t curl_header(char *data, size_t size, size_t n, void *userdata) {
        HttpRelay *rl = userdata;
        size_t len = n, l;
        const char *colon;

        relay_touch(rl);
        while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
                len--;
        if (startswith(data, "HTTP/")) {
                /* a new head: an interim 1xx one is forgotten */
                long code = 0;

                (void) curl_easy_getinfo(rl->easy, CURLINFO_RESPONSE_CODE, &code);
                rl->status = (unsigned) code;
                rl->head.len = 0;
                rl->head_lines = 0;
                rl->content_length = -1;
                return n;
        }
        if (len == 0) {
                if (rl->status >= 200) {
                        rl->head_done = true;
                        relay_answer_if_ready(rl);
                }
                return n;
        }
        colon = memchr(data, ':', len);
        if (!colon || colon == data)
                return n; /* not a header (folded lines are obsolete): dropped */
        l = (size_t) (colon - data);
        {
                char name[128];

                if (l >= sizeof(name))
                        return n;
                memcpy(name, data, l);
                name[l] = 0;
                if (header_is_hop_by_hop(name))
                        return n;
                if (strcasecmp(name, "Content-Length") == 0) {
                        char v[32];
                        size_t vl = MIN(len - l - 1, sizeof(v) - 1);

                        memcpy(v, colon + 1, vl);
                        v[vl] = 0;
                        rl->content_length = strtoll(v, NULL, 10);
                        if (rl->content_length < 0)
                                rl->content_length = -1;
                        return n;
                }
        }
        if (rl->head.len + len + 1 > RELAY_HEAD_MAX) {
                rl->head_too_large = true;
                return 0; /* curl fails the transfer */
        }
        if (buf_append(&rl->head, data, len) < 0 || buf_append(&rl->head, "", 1) < 0)
                return 0;
        rl->head_lines++;
        return n;
}

static size_t curl_write(char *data, size_t size, size_t n, void *userdata) {
        HttpRelay *rl = userdata;

        if (rl->down.len - rl->down_off + n > RELAY_BUFFER_MAX) {
                rl->down_paused = true;
                return CURL_WRITEFUNC_PAUSE;
        }
        if (rl->down_off > 0 && rl->down.len + n > RELAY_BUFFER_MAX) {
                memmove(rl->down.data, rl->down.data + rl->down_off, rl->down.len - rl->down_off);
                rl->down.len -= rl->down_off;
                rl->down_off = 0;
        }
        if (buf_append(&rl->down, data, n) < 0)
                return 0;
        relay_touch(rl);
        relay_wake_reader(rl);
        return n;
}

static size_t curl_read(char *buf, size_t size, size_t n, void *userdata) {
        HttpRelay *rl = userdata;
        size_t have = rl->up.len - rl->up_off;

        if (have == 0) {
                if (rl->up_done)
                        return 0;
                rl->up_paused = true;
                return CURL_READFUNC_PAUSE;
        }
        have = MIN(have, n);
        memcpy(buf, rl->up.data + rl->up_off, have);
        rl->up_off += have;
        if (rl->up_off == rl->up.len)
                rl->up_off = rl->up.len = 0;
        relay_touch(rl);
        if (rl->up_waiting && rl->request) {
                rl->up_waiting = false;
                http_resume(rl->request);
        }
        return have;
}

static int on_idle_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpRelay *rl = userdata;

        if (rl->last_progress + RELAY_IDLE_USEC > usec) {
                (void) sd_event_source_set_time(es, rl->last_progress + RELAY_IDLE_USEC);
                (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
                return 0;
        }
        log_debug("Relay to session %s: no progress for %llu s, ending it.", rl->session_id,
                  (unsigned long long) (RELAY_IDLE_USEC / USEC_PER_SEC));
        relay_stop(rl, CURLE_OPERATION_TIMEDOUT);
        if (rl->up_waiting && rl->request) {
                rl->up_waiting = false;
                rl->up_discard = true;
                http_resume(rl->request);
        }
        relay_answer_if_ready(rl);
        relay_wake_reader(rl);
        return 0;
}

static void engine_check_done(HttpRelayEngine *e) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(e->multi, &left))) {
                HttpRelay *rl = NULL;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &rl);
                if (!rl)
                        continue;
                if (msg->data.result != CURLE_OK)
                        log_debug("Relay to session %s: %s", rl->session_id,
                                  rl->error[0] ? rl->error : curl_easy_strerror(msg->data.result));
                relay_stop(rl, msg->data.result);
                /* a body the upstream did not read goes nowhere */
                if (rl->request && !rl->up_done) {
                        rl->up_discard = true;
                        if (rl->up_waiting) {
                                rl->up_waiting = false;
                                http_resume(rl->request);
                        }
                }
                relay_answer_if_ready(rl);
                relay_wake_reader(rl);
        }
}

static int relay_add_header(HttpRelay *rl, const char *name, const char *value) {
        _cleanup_free_ char *h = NULL;
        struct curl_slist *l;

        /* "Name;" sends a header with an empty value, "Name:" would drop it */
        if (asprintf(&h, value[0] ? "%s: %s" : "%s;", name, value) < 0)
                return -ENOMEM;
        l = curl_slist_append(rl->headers, h);
        if (!l)
                return -ENOMEM;
        rl->headers = l;
        return 0;
}

typedef struct HeaderCopy {
        HttpRelay *relay;
        bool has_body;
        int error;
} HeaderCopy;

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *name, const char *value) {
        HeaderCopy *c = cls;

        if (!value)
                value = "";
        if (strcasecmp(name, "Content-Length") == 0 || strcasecmp(name, "Transfer-Encoding") == 0) {
                c->has_body = true;
                return MHD_YES;
        }
        /* never sandboxd's bearer key; the forwarding headers are ours to set; MHD answered
         * "Expect" already */
        if (header_is_hop_by_hop(name) || strcasecmp(name, "Authorization") == 0 || strcasecmp(name, "Expect") == 0 ||
            strncasecmp(name, "X-Forwarded-", 12) == 0)
                return MHD_YES;
        if (relay_add_header(c->relay, name, value) < 0) {
                c->error = -ENOMEM;
                return MHD_NO;
        }
        return MHD_YES;
}

static int relay_setup(HttpRelay *rl, HttpRequest *r, const char *socket_path, const char *prefix, const char *rest) {
        const union MHD_ConnectionInfo *info;
        HeaderCopy c = { .relay = rl };
        _cleanup_free_ char *url = NULL;
        const char *cl;
        CURL *h = rl->easy;

        if (asprintf(&url, "http://localhost%s%s", rest[0] == '/' ? "" : "/", rest) < 0)
                return -ENOMEM;

        (void) MHD_get_connection_values(r->connection, MHD_HEADER_KIND, copy_header, &c);
        if (c.error < 0)
                return c.error;
        if (relay_add_header(rl, "X-Forwarded-Proto", "http") < 0 || relay_add_header(rl, "X-Forwarded-Prefix", prefix) < 0)
                return -ENOMEM;
        info = MHD_get_connection_info(r->connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!r->server->is_unix && info && info->client_addr) {
                char a[INET6_ADDRSTRLEN] = "";
                const struct sockaddr *sa = info->client_addr;

                if (sa->sa_family == AF_INET)
                        (void) inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, a, sizeof(a));
                else if (sa->sa_family == AF_INET6)
                        (void) inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, a, sizeof(a));
                if (a[0] && relay_add_header(rl, "X-Forwarded-For", a) < 0)
                        return -ENOMEM;
        }
        /* not curl's own "Expect: 100-continue" for a large body */
        {
                struct curl_slist *l = curl_slist_append(rl->headers, "Expect:");

                if (!l)
                        return -ENOMEM;
                rl->headers = l;
        }

        if (curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK)
                return -EINVAL;
        (void) curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, socket_path);
        (void) curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
        (void) curl_easy_setopt(h, CURLOPT_PROXY, "");
        (void) curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
        (void) curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1);
        /* A connection of its own for each request, closed after it (as nginx's proxy does by
         * default): no request of one client can meet a connection another left in a state
         * its server did not expect, and a server that writes its head and body apart (Nagle)
         * is not met by a delayed ACK of a connection past its start: reused, a small GET
         * took 45 ms instead of 4 (bench/ports.py). */
        (void) curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
        (void) curl_easy_setopt(h, CURLOPT_HTTPHEADER, rl->headers);
        (void) curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, curl_header);
        (void) curl_easy_setopt(h, CURLOPT_HEADERDATA, rl);
        (void) curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, curl_write);
        (void) curl_easy_setopt(h, CURLOPT_WRITEDATA, rl);
        (void) curl_easy_setopt(h, CURLOPT_PRIVATE, rl);
        (void) curl_easy_setopt(h, CURLOPT_ERRORBUFFER, rl->error);
        (void) curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long) RELAY_CURL_CHUNK);
        (void) curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long) (RELAY_IDLE_USEC / USEC_PER_MSEC));

        if (streq(r->method, "HEAD"))
                (void) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        else if (c.has_body) {
                cl = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
                (void) curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
                (void) curl_easy_setopt(h, CURLOPT_READFUNCTION, curl_read);
                (void) curl_easy_setopt(h, CURLOPT_READDATA, rl);
                /* no length: chunked, as the client sent it */
                (void) curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t) (cl ? strtoll(cl, NULL, 10) : -1));
        }
        if (!streq(r->method, "GET") && !streq(r->method, "HEAD"))
                (void) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
        if (c.has_body)
                rl->up_done = false;
        else
                rl->up_done = true;
        return 0;
}

/* --- a WebSocket upgrade ---------------------------------------------------------- */

typedef struct HeadCopy {
        Buf *buf;
        int error;
} HeadCopy;

static enum MHD_Result copy_ws_header(void *cls, enum MHD_ValueKind kind, const char *name, const char *value) {
        HeadCopy *c = cls;

        if (header_is_hop_by_hop(name) || strcasecmp(name, "Authorization") == 0 || strcasecmp(name, "Content-Length") == 0 ||
            strncasecmp(name, "X-Forwarded-", 12) == 0)
                return MHD_YES;
        if (buf_printf(c->buf, "%s: %s\r\n", name, value ?: "") < 0) {
                c->error = -ENOMEM;
                return MHD_NO;
        }
        return MHD_YES;
}

static void tunnel_close(HttpRelay *rl) {
        if (!rl->tunnel)
                return;
        rl->tunnel = false;
        rl->client_io = sd_event_source_disable_unref(rl->client_io);
        rl->upstream_io = sd_event_source_disable_unref(rl->upstream_io);
        if (rl->upstream_fd >= 0)
                (void) close(rl->upstream_fd);
        rl->upstream_fd = -EBADF;
        /* MHD closes the client's socket on its next run */
        (void) MHD_upgrade_action(rl->urh, MHD_UPGRADE_ACTION_CLOSE);
        rl->done = true;
        relay_unref(rl);
}

/* Moves what it can from fd into b (bounded): 0, or -errno; *eof at the end. */
static int pump_in(int fd, Buf *b, size_t *off, bool *eof) {
        if (*off > 0 && *off == b->len)
                *off = b->len = 0;
        while (b->len < RELAY_BUFFER_MAX) {
                ssize_t n;

                if (buf_reserve(b, MIN(RELAY_BUFFER_MAX - b->len, (size_t) 65536)) < 0)
                        return -ENOMEM;
                n = read(fd, b->data + b->len, MIN(b->cap - b->len - 1, RELAY_BUFFER_MAX - b->len));
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                if (n == 0) {
                        *eof = true;
                        return 0;
                }
                b->len += (size_t) n;
        }
        return 0;
}

static int pump_out(int fd, Buf *b, size_t *off) {
        while (*off < b->len) {
                ssize_t n = send(fd, b->data + *off, b->len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                *off += (size_t) n;
        }
        *off = b->len = 0;
        return 0;
}

/* The tunnel's events from what each buffer holds: a full buffer stops reading its source. */
static int tunnel_update(HttpRelay *rl) {
        uint32_t c = 0, u = 0;

        if (!rl->client_eof && rl->up.len < RELAY_BUFFER_MAX)
                c |= EPOLLIN;
        if (rl->down.len > rl->down_off)
                c |= EPOLLOUT;
        if (!rl->upstream_eof && rl->down.len < RELAY_BUFFER_MAX)
                u |= EPOLLIN;
        if (rl->up.len > rl->up_off)
                u |= EPOLLOUT;
        /* an end that came through: the other side's writing half closes too */
        if (rl->client_eof && rl->up.len == rl->up_off && !rl->upstream_shut) {
                (void) shutdown(rl->upstream_fd, SHUT_WR);
                rl->upstream_shut = true;
        }
        if (rl->upstream_eof && rl->down.len == rl->down_off && !rl->client_shut) {
                (void) shutdown(rl->client_fd, SHUT_WR);
                rl->client_shut = true;
        }
        if (rl->upstream_shut && rl->client_shut)
                return -ECONNRESET;
        /* nothing to wait for on a side: off, or its hang-up would wake us without end */
        if ((c ? sd_event_source_set_io_events(rl->client_io, c) : 0) < 0 ||
            sd_event_source_set_enabled(rl->client_io, c ? SD_EVENT_ON : SD_EVENT_OFF) < 0 ||
            (u ? sd_event_source_set_io_events(rl->upstream_io, u) : 0) < 0 ||
            sd_event_source_set_enabled(rl->upstream_io, u ? SD_EVENT_ON : SD_EVENT_OFF) < 0)
                return -EIO;
        return 0;
}

static int on_tunnel_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpRelay *rl = userdata;
        int r = 0;

        if (fd == rl->client_fd) {
                if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                        r = pump_in(fd, &rl->up, &rl->up_off, &rl->client_eof);
                if (r >= 0 && (revents & EPOLLOUT))
                        r = pump_out(fd, &rl->down, &rl->down_off);
        } else {
                if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                        r = pump_in(fd, &rl->down, &rl->down_off, &rl->upstream_eof);
                if (r >= 0 && (revents & EPOLLOUT))
                        r = pump_out(fd, &rl->up, &rl->up_off);
        }
        /* and at once the other way, what just came in */
        if (r >= 0)
                r = pump_out(rl->upstream_fd, &rl->up, &rl->up_off);
        if (r >= 0)
                r = pump_out(rl->client_fd, &rl->down, &rl->down_off);
        if (r >= 0)
                r = tunnel_update(rl);
        if (r < 0)
                tunnel_close(rl);
        return 0;
}

static void on_upgrade(void *cls, struct MHD_Connection *connection, void *req_cls, const char *extra_in,
                       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
        HttpRelay *rl = cls;
        Manager *m = rl->engine->manager;
        int r;

        rl->n_ref++; /* the tunnel's, until tunnel_close() */
        rl->tunnel = true;
        rl->urh = urh;
        rl->client_fd = sock;
        rl->idle_timer = sd_event_source_disable_unref(rl->idle_timer);
        rl->upstream_io = sd_event_source_disable_unref(rl->upstream_io);
        (void) fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
        rl->up.len = rl->up_off = 0;
        if (extra_in_size > 0 && buf_append(&rl->up, extra_in, extra_in_size) < 0) {
                tunnel_close(rl);
                return;
        }
        r = sd_event_add_io(m->event, &rl->client_io, sock, EPOLLIN, on_tunnel_io, rl);
        if (r >= 0)
                r = sd_event_add_io(m->event, &rl->upstream_io, rl->upstream_fd, EPOLLIN, on_tunnel_io, rl);
        if (r >= 0) {
                (void) sd_event_source_set_description(rl->client_io, "relay-ws-client");
                (void) sd_event_source_set_description(rl->upstream_io, "relay-ws-upstream");
                r = pump_out(sock, &rl->down, &rl->down_off);
        }
        if (r >= 0)
                r = tunnel_update(rl);
        if (r < 0) {
                log_debug_errno(r, "Relay to session %s: the WebSocket tunnel failed: %m", rl->session_id);
                tunnel_close(rl);
        }
}

/* 101: MHD's upgrade with the upstream's fields; else its status, fields and the body read. */
static struct MHD_Response *ws_response(HttpRelay *rl) {
        HttpHead *h = rl->ws_head;
        struct MHD_Response *resp;

        if (h->status == 101)
                resp = MHD_create_response_for_upgrade(on_upgrade, rl);
        else
                resp = MHD_create_response_from_buffer(rl->down.len, rl->down.data, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return NULL;
        for (size_t i = 0; i < h->n_fields; i++) {
                char name[128], value[HTTP_HEAD_MAX];
                const HttpHeadField *f = &h->fields[i];

                if (f->name_len >= sizeof(name))
                        continue;
                memcpy(name, f->name, f->name_len);
                name[f->name_len] = 0;
                memcpy(value, f->value, f->value_len);
                value[f->value_len] = 0;
                if (strcasecmp(name, "Content-Length") == 0 ||
                    (header_is_hop_by_hop(name) && !(h->status == 101 && strcasecmp(name, "Upgrade") == 0)))
                        continue;
                (void) MHD_add_response_header(resp, name, value);
        }
        return resp;
}

/* What the upstream answered, in rl->head: 1 once answered (head, and for a refusal its
 * body), 0 for more, < 0 for a bad answer. */
static int ws_head_check(HttpRelay *rl) {
        const HttpHeadField *f;
        size_t body;
        int r;

        if (!rl->ws_head) {
                rl->ws_head = malloc(sizeof(HttpHead));
                if (!rl->ws_head)
                        return -ENOMEM;
        }
        r = http_head_parse(rl->head.data, rl->head.len, rl->ws_head);
        if (r <= 0)
                return r;
        body = rl->head.len - rl->ws_head->size;
        if (rl->ws_head->status == 101)
                return 1;
        /* a refusal: its body, by its length or to the end (chunked bodies are not relayed) */
        f = http_head_find(rl->ws_head, "Content-Length");
        if (http_head_find(rl->ws_head, "Transfer-Encoding"))
                body = 0;
        else if (f) {
                unsigned long long want = strtoull(f->value, NULL, 10);

                if (want > RELAY_BUFFER_MAX)
                        return -E2BIG;
                if (body < want && !rl->upstream_eof)
                        return 0;
                body = MIN(body, (size_t) want);
        } else if (!rl->upstream_eof)
                return 0;
        rl->down.len = 0;
        if (buf_append(&rl->down, rl->head.data + rl->ws_head->size, body) < 0)
                return -ENOMEM;
        return 1;
}

static int on_ws_upstream(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpRelay *rl = userdata;
        int r = 0;

        relay_touch(rl);
        if (rl->up_off < rl->up.len) {
                r = pump_out(fd, &rl->up, &rl->up_off);
                if (r >= 0 && rl->up.len == 0)
                        r = sd_event_source_set_io_events(es, EPOLLIN);
        } else if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                if (rl->head.len >= HTTP_HEAD_MAX + RELAY_BUFFER_MAX)
                        r = -E2BIG;
                else {
                        ssize_t n;

                        r = buf_reserve(&rl->head, 16384);
                        n = r < 0 ? -1 : read(fd, rl->head.data + rl->head.len,
                                              MIN(rl->head.cap - rl->head.len - 1, HTTP_HEAD_MAX + RELAY_BUFFER_MAX - rl->head.len));
                        if (n < 0 && r >= 0)
                                r = errno == EAGAIN || errno == EINTR ? 0 : -errno;
                        else if (n == 0)
                                rl->upstream_eof = true;
                        else if (n > 0)
                                rl->head.len += (size_t) n;
                }
                if (r >= 0)
                        r = ws_head_check(rl);
                if (r == 0 && rl->upstream_eof)
                        r = -ECONNRESET;
                if (r > 0) {
                        if (rl->ws_head->status == 101) {
                                /* what came after the head goes to the client first */
                                rl->down.len = rl->down_off = 0;
                                if (buf_append(&rl->down, rl->head.data + rl->ws_head->size,
                                               rl->head.len - rl->ws_head->size) < 0)
                                        r = -ENOMEM;
                        }
                        rl->status = rl->ws_head->status;
                        rl->head_done = true;
                        (void) sd_event_source_set_enabled(es, SD_EVENT_OFF);
                        if (rl->ws_head->status != 101)
                                relay_stop(rl, CURLE_OK);
                        relay_answer_if_ready(rl);
                        return 0;
                }
        }
        if (r < 0) {
                log_debug_errno(r, "Relay to session %s: the upstream's answer to the upgrade failed: %m", rl->session_id);
                relay_stop(rl, CURLE_RECV_ERROR);
                relay_answer_if_ready(rl);
        }
        return 0;
}

static int ws_setup(HttpRelay *rl, HttpRequest *r, const char *socket_path, const char *prefix, const char *rest) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        HeadCopy c = { .buf = &rl->up };
        int fd;

        rl->websocket = true;
        rl->up_done = true;
        if (buf_printf(&rl->up, "GET %s%s HTTP/1.1\r\n", rest[0] == '?' ? "/" : "", rest) < 0)
                return -ENOMEM;
        (void) MHD_get_connection_values(r->connection, MHD_HEADER_KIND, copy_ws_header, &c);
        if (c.error < 0 ||
            buf_printf(&rl->up, "Connection: Upgrade\r\nUpgrade: websocket\r\nX-Forwarded-Proto: http\r\n"
                                "X-Forwarded-Prefix: %s\r\n\r\n", prefix) < 0)
                return -ENOMEM;

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        rl->upstream_fd = fd;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                /* a unix socket connects at once or not at all (EAGAIN: its backlog is full) */
                log_debug_errno(errno, "Relay to session %s: connecting to %s failed: %m", rl->session_id, socket_path);
                relay_stop(rl, CURLE_COULDNT_CONNECT);
                return 0;
        }
        return sd_event_add_io(rl->engine->manager->event, &rl->upstream_io, fd, EPOLLOUT | EPOLLIN, on_ws_upstream, rl);
}

static bool request_is_websocket(HttpRequest *r) {
        const char *u = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_UPGRADE);
        const char *c = MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION);

        return streq(r->method, "GET") && u && c && http_value_has_token(u, strlen(u), "websocket") &&
               http_value_has_token(c, strlen(c), "upgrade");
}

int http_relay_begin(HttpRequest *r, const char *socket_path, const char *prefix) {
        Manager *m = r->server->manager;
        HttpRelayEngine *e;
        HttpRelay *rl;
        const char *rest;
        int ret;

        if (http_relay_count(m, NULL) >= RELAYS_MAX)
                return http_refuse_upload_error(r, "too_many_relays", "sandboxd relays as many requests as it may (512); try again later.");
        if (http_relay_count(m, r->target->id) >= RELAYS_PER_SESSION_MAX)
                return http_refuse_upload_error(r, "too_many_relays", "This session has as many relayed requests open as it may (64).");

        /* the raw path and query after the prefix, as the client sent them */
        rest = r->raw_uri ? startswith(r->raw_uri, prefix) : NULL;
        if (!rest || (rest[0] != '/' && rest[0] != '?'))
                return http_refuse_upload_error(r, "invalid_url", "Relayed paths are /v1/sessions/ID/ports/PORT/ followed by the "
                                                                  "upstream's path, written without escapes in that prefix.");

        ret = engine_get(m, &e);
        if (ret < 0)
                return MHD_NO;
        rl = calloc(1, sizeof(HttpRelay));
        if (!rl)
                return MHD_NO;
        rl->engine = e;
        rl->n_ref = 1;
        rl->request = r;
        rl->connection = r->connection;
        rl->content_length = -1;
        rl->upstream_fd = rl->client_fd = -EBADF;
        memcpy(rl->session_id, r->target->id, sizeof(rl->session_id));
        LIST_PREPEND(relays, e->relays, rl);
        e->n_relays++;
        r->relay = rl; /* http_relay_detach() frees it from now on */

        relay_touch(rl);
        if (request_is_websocket(r)) {
                ret = ws_setup(rl, r, socket_path, prefix, rest);
                if (ret < 0)
                        return MHD_NO;
                if (!rl->done) {
                        ret = sd_event_add_time(m->event, &rl->idle_timer, CLOCK_MONOTONIC,
                                                rl->last_progress + RELAY_IDLE_USEC, USEC_PER_SEC, on_idle_timer, rl);
                        if (ret < 0)
                                return MHD_NO;
                }
                log_debug("Relaying a WebSocket upgrade %s to %s.", r->url, socket_path);
                return MHD_YES;
        }

        rl->easy = curl_easy_init();
        if (!rl->easy)
                return MHD_NO;
        ret = relay_setup(rl, r, socket_path, prefix, rest);
        if (ret == -EINVAL)
                return http_refuse_upload_error(r, "invalid_url", "The path or query cannot be relayed.");
        if (ret < 0)
                return MHD_NO;

        relay_touch(rl);
        ret = sd_event_add_time(m->event, &rl->idle_timer, CLOCK_MONOTONIC, rl->last_progress + RELAY_IDLE_USEC,
                                USEC_PER_SEC, on_idle_timer, rl);
        if (ret < 0)
                return MHD_NO;
        (void) sd_event_source_set_description(rl->idle_timer, "relay-idle");
        if (curl_multi_add_handle(e->multi, rl->easy) != CURLM_OK)
                return MHD_NO;
        rl->in_multi = true;
        log_debug("Relaying %s %s to %s.", r->method, r->url, socket_path);
        return MHD_YES;
}

int http_relay_data(HttpRequest *r, const char *data, size_t *size) {
        HttpRelay *rl = r->relay;
        size_t room, n;

        if (rl->up_discard || rl->done) {
                *size = 0;
                return MHD_YES;
        }
        if (rl->up_off > 0) {
                memmove(rl->up.data, rl->up.data + rl->up_off, rl->up.len - rl->up_off);
                rl->up.len -= rl->up_off;
                rl->up_off = 0;
        }
        room = RELAY_BUFFER_MAX - rl->up.len;
        n = MIN(room, *size);
        if (n > 0) {
                if (buf_append(&rl->up, data, n) < 0)
                        return MHD_NO;
                *size -= n;
                relay_touch(rl);
                if (rl->up_paused) {
                        rl->up_paused = false;
                        (void) curl_easy_pause(rl->easy, rl->down_paused ? CURLPAUSE_SEND_CONT | CURLPAUSE_RECV
                                                                        : CURLPAUSE_CONT);
                }
        }
        if (*size > 0 && !rl->up_discard && !rl->done) {
                /* full: the client waits until curl took some */
                rl->up_waiting = true;
                http_suspend(r);
        }
        return MHD_YES;
}

int http_relay_finish(HttpRequest *r) {
        HttpRelay *rl = r->relay;
        struct MHD_Response *resp;
        unsigned status;

        if (!rl->up_done) {
                rl->up_done = true;
                if (rl->up_paused && !rl->done) {
                        rl->up_paused = false;
                        (void) curl_easy_pause(rl->easy, rl->down_paused ? CURLPAUSE_SEND_CONT | CURLPAUSE_RECV
                                                                        : CURLPAUSE_CONT);
                }
        }
        if (relay_answer(rl, &status, &resp)) {
                rl->answered = true;
                return http_queue(r, status, resp);
        }
        rl->waiting_head = true;
        http_suspend(r);
        return MHD_YES;
}

void http_relay_detach(HttpRequest *r) {
        HttpRelay *rl = r->relay;

        if (!rl)
                return;
        r->relay = NULL;
        rl->request = NULL;
        if (!rl->done)
                relay_stop(rl, CURLE_ABORTED_BY_CALLBACK);
        relay_unref(rl);
}
