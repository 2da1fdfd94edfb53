/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The egress proxy's sockets, its one job although over 800 lines: accepting a session's
 * connections, reading request heads through proxy-proto.c, resolving and checking them
 * (proxy-resolve.c, net-policy.c), and relaying bytes with bounded buffers, fair shares
 * and timers. */

#include <arpa/inet.h>
#include <assert.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "ndjson.h"
#include "proxy-proto.h"
#include "proxy-resolve.h"
#include "proxy.h"
#include "store.h"
#include "systemd.h"

/* The relay: sockets, buffers and timers. What the client asks is proxy-proto.c's to read,
 * whether and where it may go proxy-resolve.c's to say. */

#define PROXY_BUF_MAX (256U * 1024) /* per direction, before reading pauses */

typedef enum ConnState {
        CONN_HANDSHAKE,  /* reading the request (and the SOCKS5 greeting before it) */
        CONN_RESOLVING,
        CONN_CONNECTING,
        CONN_RELAY,
        CONN_FLUSH,      /* writing a refusal, then closing */
} ConnState;

typedef struct ProxyConn ProxyConn;

struct ProxyConn {
        ProxyListener *listener;
        int cfd, ufd;
        sd_event_source *cio, *uio, *timer;
        ConnState state;
        ProxyParser parser;
        ProxyRequest req;   /* valid from CONN_RESOLVING on */
        Buf in;  /* from the client, not yet handled */
        Buf up;  /* to upstream */
        Buf out; /* to the client */
        bool c_eof, u_eof, c_shut, u_shut;
        ProxyLookup *lookup;
        struct sockaddr_storage addrs[PROXY_ADDRESSES_MAX];
        socklen_t addrlens[PROXY_ADDRESSES_MAX];
        size_t n_addrs, next_addr;
        /* Came in over the session's share or the proxy's total: its request is read only
         * to be answered with this refusal. */
        ProxyOutcome refusal;
        const char *refusal_why;
        LIST_FIELDS(ProxyConn, conns);
};

struct ProxyListener {
        Proxy *proxy;
        ProxySession session;
        int fd;
        char *dir, *path, *fdname;
        sd_event_source *io;
        ProxyConn *conns;
        unsigned n_conns;    /* served: its share of ProxyMaxConnections= */
        unsigned n_refusing; /* being told they came over it, at most PROXY_REFUSING_MAX */
        bool at_share;       /* logged that it reached its share */
        ProxyLookupGroup *lookups;
        LIST_FIELDS(ProxyListener, listeners);
};

struct Proxy {
        Manager *manager;
        ProxyResolver *resolver;
        unsigned n_connections;
        ProxyListener *listeners;
};

static void conn_free(ProxyConn *c);
static void conn_update(ProxyConn *c);
static void conn_connect_next(ProxyConn *c);

unsigned proxy_count_connections(Proxy *p) {
        return p ? p->n_connections : 0;
}

static unsigned share_connections(const Config *c) {
        return MIN(c->proxy_max_connections_per_session, c->proxy_max_connections);
}

unsigned proxy_relay_max_connections(const Config *c) {
        /* socket-proxyd passes on what sandboxd serves, and the few it answers with a
         * refusal; beyond that it closes them itself. */
        return share_connections(c) + PROXY_REFUSING_MAX;
}

static const char *conn_host(const ProxyConn *c) {
        return c->state == CONN_HANDSHAKE || !c->req.host.text[0] ? "?" : c->req.host.text;
}

/* --- reporting a refusal ---------------------------------------------------------------- */

static void report_denial(ProxyConn *c, const char *reason) {
        const ProxySession *s = &c->listener->session;
        Manager *m = c->listener->proxy->manager;
        Buf line = {};

        m->metrics.network_denials++;
        log_notice("Egress proxy of session %s (%s/%s): refused %s:%u: %s.", s->id, s->user, s->workspace,
                   conn_host(c), c->req.port, reason);

        if (buf_puts(&line, "{\"type\":\"network_denied\",\"host\":") < 0 ||
            json_append_string(&line, conn_host(c), strlen(conn_host(c))) < 0 ||
            buf_printf(&line, ",\"port\":%u,\"reason\":\"%s\"}\n", c->req.port, reason) < 0) {
                buf_done(&line);
                return;
        }
        if (s->denied)
                s->denied(s->userdata, c->req.command, line.data, line.len);
        buf_done(&line);
}

/* --- answers ------------------------------------------------------------------------------ */

static void conn_finish(ProxyConn *c, ProxyOutcome o, const char *why) {
        if (proxy_reply(&c->req, o, why, &c->out) < 0)
                log_oom();
        c->state = CONN_FLUSH;
}

/* Refused by the policy: reported everywhere, and told to the client. */
static void conn_deny(ProxyConn *c, const char *reason) {
        report_denial(c, reason);
        conn_finish(c, PROXY_OUTCOME_DENIED, reason);
}

static void conn_fail(ProxyConn *c, ProxyOutcome o, const char *why) {
        log_debug("Egress proxy: %s:%u: %s.", conn_host(c), c->req.port, why);
        conn_finish(c, o, why);
}

/* --- where to ------------------------------------------------------------------------------ */

static void conn_policy(ProxyConn *c, ProxyPolicy *ret) {
        const Config *cfg = &c->listener->proxy->manager->config;
        const ProxySession *s = &c->listener->session;

        *ret = (ProxyPolicy) {
                .denied = cfg->denied_domains,
                .session_denied = s->net_deny,
                .allowed = cfg->allowed_domains,
                .session_allowed = s->net_allow,
                .allowed_ranges = cfg->proxy_allowed,
                .n_allowed_ranges = cfg->n_proxy_allowed,
                .denied_ranges = cfg->proxy_denied,
                .n_denied_ranges = cfg->n_proxy_denied,
        };
}

/* Keeps the addresses the policy allows; refuses when there is none. */
static void conn_addresses(ProxyConn *c, const NetAddress *addrs, size_t n) {
        ProxyResolver *r = c->listener->proxy->resolver;
        const char *first_denial = NULL;
        ProxyPolicy pol;

        conn_policy(c, &pol);
        c->n_addrs = c->next_addr = 0;
        for (size_t i = 0; i < n && c->n_addrs < PROXY_ADDRESSES_MAX; i++) {
                const char *why = proxy_resolver_check_address(r, &pol, addrs[i].family, addrs[i].addr);
                struct sockaddr_storage *sa = &c->addrs[c->n_addrs];
                int family = addrs[i].family;
                uint8_t a[16];

                if (why) {
                        first_denial = first_denial ?: why;
                        continue;
                }
                /* ::ffff:a.b.c.d is a.b.c.d, the address that was checked */
                memcpy(a, addrs[i].addr, sizeof(a));
                address_unmap(&family, a);
                memset(sa, 0, sizeof(*sa));
                if (family == AF_INET) {
                        struct sockaddr_in *in = (struct sockaddr_in *) sa;

                        in->sin_family = AF_INET;
                        in->sin_port = htons(c->req.port);
                        memcpy(&in->sin_addr, a, 4);
                        c->addrlens[c->n_addrs] = sizeof(*in);
                } else {
                        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) sa;

                        in6->sin6_family = AF_INET6;
                        in6->sin6_port = htons(c->req.port);
                        memcpy(&in6->sin6_addr, a, 16);
                        c->addrlens[c->n_addrs] = sizeof(*in6);
                }
                c->n_addrs++;
        }

        if (c->n_addrs == 0) {
                if (first_denial)
                        conn_deny(c, first_denial);
                else
                        conn_fail(c, PROXY_OUTCOME_UNRESOLVED, "no address to connect to");
                return;
        }
        conn_connect_next(c);
}

static void on_lookup(int error, const NetAddress *addrs, size_t n, void *userdata) {
        ProxyConn *c = userdata;

        c->lookup = NULL;
        if (error < 0)
                conn_fail(c, PROXY_OUTCOME_UNRESOLVED, "cannot resolve the name");
        else
                conn_addresses(c, addrs, n);
        conn_update(c);
}

/* The request is complete: check the name, then resolve it (or take it as the address it is). */
static void conn_request(ProxyConn *c) {
        ProxyPolicy pol;
        const char *why;
        int r;

        if (c->refusal != _PROXY_OUTCOME_INVALID) {
                log_debug("Egress proxy of session %s: refused a request for %s:%u: %s.", c->listener->session.id,
                          conn_host(c), c->req.port, c->refusal_why);
                conn_finish(c, c->refusal, c->refusal_why);
                return;
        }
        c->state = CONN_RESOLVING;
        conn_policy(c, &pol);
        why = proxy_policy_check_name(&pol, &c->req.host);
        if (why) {
                conn_deny(c, why);
                return;
        }
        if (c->req.host.family != AF_UNSPEC) {
                NetAddress a = { .family = c->req.host.family };

                memcpy(a.addr, c->req.host.addr, sizeof(a.addr));
                conn_addresses(c, &a, 1);
                return;
        }
        r = proxy_resolver_lookup(c->listener->proxy->resolver, c->listener->lookups, c->req.host.text, on_lookup, c,
                                  &c->lookup);
        if (r == -EDQUOT) {
                c->listener->proxy->manager->metrics.proxy_refused_share++;
                conn_fail(c, PROXY_OUTCOME_LIMITED,
                          "too many name lookups of this session in progress (ProxyMaxLookupsPerSession=)");
        } else if (r == -EBUSY) {
                c->listener->proxy->manager->metrics.proxy_refused_busy++;
                conn_fail(c, PROXY_OUTCOME_BUSY, "too many name lookups in progress (ProxyMaxLookups=)");
        } else if (r < 0)
                conn_fail(c, PROXY_OUTCOME_FAILED, "cannot resolve now");
}

/* --- connecting ------------------------------------------------------------------------------- */

static int on_upstream(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static void conn_connected(ProxyConn *c) {
        const Config *cfg = &c->listener->proxy->manager->config;

        if (proxy_reply(&c->req, PROXY_OUTCOME_CONNECTED, NULL, &c->out) < 0 ||
            buf_append(&c->up, c->req.upstream.data, c->req.upstream.len) < 0) {
                conn_fail(c, PROXY_OUTCOME_FAILED, "out of memory");
                return;
        }
        /* What the client sent after its request (a TLS hello, a body) goes on as is. */
        if (c->in.len > 0) {
                if (buf_append(&c->up, c->in.data, c->in.len) < 0) {
                        conn_fail(c, PROXY_OUTCOME_FAILED, "out of memory");
                        return;
                }
                c->in.len = 0;
        }
        c->state = CONN_RELAY;
        (void) sd_event_source_set_time_relative(c->timer, cfg->proxy_idle_timeout_usec);
        log_debug("Egress proxy: relaying to %s:%u.", c->req.host.text, c->req.port);
}

static void conn_connect_next(ProxyConn *c) {
        Manager *m = c->listener->proxy->manager;
        int r;

        c->uio = sd_event_source_disable_unref(c->uio);
        c->ufd = safe_close(c->ufd);

        while (c->next_addr < c->n_addrs) {
                size_t i = c->next_addr++;

                c->ufd = socket(c->addrs[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (c->ufd < 0)
                        continue;
                if (connect(c->ufd, (struct sockaddr *) &c->addrs[i], c->addrlens[i]) < 0 && errno != EINPROGRESS) {
                        c->ufd = safe_close(c->ufd);
                        continue;
                }
                r = sd_event_add_io(m->event, &c->uio, c->ufd, EPOLLOUT, on_upstream, c);
                if (r < 0) {
                        c->ufd = safe_close(c->ufd);
                        break;
                }
                (void) sd_event_source_set_description(c->uio, "proxy-upstream");
                c->state = CONN_CONNECTING;
                (void) sd_event_source_set_time_relative(c->timer, m->config.proxy_connect_timeout_usec);
                return;
        }
        conn_fail(c, PROXY_OUTCOME_UNREACHABLE, "cannot connect");
}

/* --- reading the request --------------------------------------------------------------------- */

static void conn_consume(ProxyConn *c, size_t n) {
        memmove(c->in.data, c->in.data + n, c->in.len - n);
        c->in.len -= n;
}

/* New bytes from the client before a target is known. */
static void conn_parse(ProxyConn *c) {
        while (c->state == CONN_HANDSHAKE) {
                size_t consumed = 0;
                int r;

                r = proxy_parse(&c->parser, c->in.data, c->in.len, &consumed, &c->out, &c->req);
                if (r < 0) {
                        log_oom();
                        c->state = CONN_FLUSH;
                        return;
                }
                conn_consume(c, consumed);
                switch (r) {
                case PROXY_STEP_MORE:
                        return;
                case PROXY_STEP_REPLY:
                        break;
                case PROXY_STEP_REFUSED:
                        log_debug("Egress proxy of session %s: refused a request: %s.", c->listener->session.id,
                                  c->parser.refusal);
                        c->state = CONN_FLUSH;
                        return;
                case PROXY_STEP_REQUEST:
                        conn_request(c);
                        return;
                }
        }
}

/* --- moving bytes ------------------------------------------------------------------------------ */

/* Reads what fits into b; true at EOF or on an error. */
static bool read_into(int fd, Buf *b, size_t max) {
        while (b->len < max) {
                ssize_t n;

                if (buf_reserve(b, MIN((size_t) 65536, max - b->len)) < 0)
                        return true;
                n = read(fd, b->data + b->len, MIN((size_t) 65536, max - b->len));
                if (n > 0) {
                        b->len += (size_t) n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return !(n < 0 && errno == EAGAIN);
        }
        return false;
}

/* Writes what it can of b; < 0 on an error. */
static int write_from(int fd, Buf *b) {
        size_t done = 0;

        while (done < b->len) {
                ssize_t n = send(fd, b->data + done, b->len - done, MSG_NOSIGNAL);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                done += (size_t) n;
        }
        memmove(b->data, b->data + done, b->len - done);
        b->len -= done;
        return done > 0;
}

static void set_events(sd_event_source *s, uint32_t events) {
        if (!s)
                return;
        if (events == 0) {
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_io_events(s, events);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
}

/* Arms both ends for what the state needs; frees the connection when it is over. */
static void conn_update(ProxyConn *c) {
        uint32_t ce = 0, ue = 0;

        switch (c->state) {
        case CONN_HANDSHAKE:
                if (c->c_eof) {
                        conn_free(c);
                        return;
                }
                ce = EPOLLIN | (c->out.len > 0 ? EPOLLOUT : 0);
                break;
        case CONN_RESOLVING:
                ce = c->out.len > 0 ? EPOLLOUT : 0;
                break;
        case CONN_CONNECTING:
                ce = c->out.len > 0 ? EPOLLOUT : 0;
                ue = EPOLLOUT;
                break;
        case CONN_FLUSH:
                if (c->out.len == 0) {
                        conn_free(c);
                        return;
                }
                ce = EPOLLOUT;
                break;
        case CONN_RELAY:
                /* Half-closes travel on once everything before them is delivered. */
                if (c->c_eof && c->up.len == 0 && !c->u_shut) {
                        (void) shutdown(c->ufd, SHUT_WR);
                        c->u_shut = true;
                }
                if (c->u_eof && c->out.len == 0 && !c->c_shut) {
                        (void) shutdown(c->cfd, SHUT_WR);
                        c->c_shut = true;
                }
                if (c->c_shut && c->u_shut) {
                        conn_free(c);
                        return;
                }
                ce = (!c->c_eof && c->up.len < PROXY_BUF_MAX ? EPOLLIN : 0) | (c->out.len > 0 ? EPOLLOUT : 0);
                ue = (!c->u_eof && c->out.len < PROXY_BUF_MAX ? EPOLLIN : 0) | (c->up.len > 0 ? EPOLLOUT : 0);
                break;
        }
        set_events(c->cio, ce);
        set_events(c->uio, ue);
}

static int on_client(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyConn *c = userdata;
        const Config *cfg = &c->listener->proxy->manager->config;

        if (revents & EPOLLOUT) {
                if (write_from(c->cfd, &c->out) < 0) {
                        conn_free(c);
                        return 0;
                }
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                switch (c->state) {
                case CONN_HANDSHAKE:
                        /* at most one request head: the parser refuses a longer one */
                        c->c_eof = read_into(c->cfd, &c->in, PROXY_HEAD_MAX);
                        conn_parse(c);
                        break;
                case CONN_RELAY:
                        c->c_eof = read_into(c->cfd, &c->up, PROXY_BUF_MAX) || c->c_eof;
                        (void) sd_event_source_set_time_relative(c->timer, cfg->proxy_idle_timeout_usec);
                        break;
                default:
                        if (revents & (EPOLLHUP | EPOLLERR)) {
                                conn_free(c);
                                return 0;
                        }
                }
        }
        conn_update(c);
        return 0;
}

static int on_upstream(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyConn *c = userdata;
        const Config *cfg = &c->listener->proxy->manager->config;

        if (c->state == CONN_CONNECTING) {
                int err = 0;
                socklen_t l = sizeof(err);

                if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
                        err = errno;
                if (err != 0) {
                        log_debug_errno(-err, "Egress proxy: connecting to %s:%u failed: %m", c->req.host.text, c->req.port);
                        conn_connect_next(c);
                } else
                        conn_connected(c);
                conn_update(c);
                return 0;
        }
        if (revents & EPOLLOUT) {
                if (write_from(c->ufd, &c->up) < 0) {
                        conn_free(c);
                        return 0;
                }
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                c->u_eof = read_into(c->ufd, &c->out, PROXY_BUF_MAX) || c->u_eof;
                (void) sd_event_source_set_time_relative(c->timer, cfg->proxy_idle_timeout_usec);
        }
        conn_update(c);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ProxyConn *c = userdata;

        switch (c->state) {
        case CONN_CONNECTING:
                if (c->next_addr < c->n_addrs)
                        conn_connect_next(c);
                else {
                        c->uio = sd_event_source_disable_unref(c->uio);
                        c->ufd = safe_close(c->ufd);
                        conn_fail(c, PROXY_OUTCOME_TIMEOUT, "timed out connecting");
                }
                (void) sd_event_source_set_time_relative(s, 10 * USEC_PER_SEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                conn_update(c);
                return 0;
        default:
                log_debug("Egress proxy: closing a connection of session %s (idle).", c->listener->session.id);
                conn_free(c);
                return 0;
        }
}

static void conn_free(ProxyConn *c) {
        if (!c)
                return;
        proxy_lookup_cancel(c->lookup); /* the thread's answer is dropped when it comes */
        LIST_REMOVE(conns, c->listener->conns, c);
        if (c->refusal != _PROXY_OUTCOME_INVALID)
                c->listener->n_refusing--;
        else {
                c->listener->n_conns--;
                c->listener->proxy->n_connections--;
                if (c->listener->n_conns < share_connections(&c->listener->proxy->manager->config))
                        c->listener->at_share = false;
        }
        sd_event_source_disable_unref(c->cio);
        sd_event_source_disable_unref(c->uio);
        sd_event_source_disable_unref(c->timer);
        safe_close(c->cfd);
        safe_close(c->ufd);
        proxy_request_done(&c->req);
        buf_done(&c->in);
        buf_done(&c->up);
        buf_done(&c->out);
        free(c);
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyListener *l = userdata;
        Proxy *p = l->proxy;
        Manager *m = p->manager;
        ProxyOutcome refusal = _PROXY_OUTCOME_INVALID;
        const char *why = NULL;
        ProxyConn *c;
        int cfd, r;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        log_debug_errno(-errno, "Egress proxy: accept failed, ignoring: %m");
                return 0;
        }
        if (!l->session.accepting(l->session.userdata)) {
                log_notice("Egress proxy: refusing a connection of session %s: the session is not active.", l->session.id);
                safe_close(cfd);
                return 0;
        }

        /* Each session gets its share, whatever the others do; the total bounds them all. */
        if (l->n_conns >= share_connections(&m->config)) {
                refusal = PROXY_OUTCOME_LIMITED;
                why = "too many connections of this session (ProxyMaxConnectionsPerSession=)";
                m->metrics.proxy_refused_share++;
                if (!l->at_share)
                        log_notice("Egress proxy: session %s has %u connections open, its share: refusing more.",
                                   l->session.id, l->n_conns);
                l->at_share = true;
        } else if (p->n_connections >= m->config.proxy_max_connections) {
                refusal = PROXY_OUTCOME_BUSY;
                why = "too many connections (ProxyMaxConnections=)";
                m->metrics.proxy_refused_busy++;
                log_notice("Egress proxy: refusing a connection of session %s: %u connections are open, the most allowed.",
                           l->session.id, p->n_connections);
        }
        if (refusal != _PROXY_OUTCOME_INVALID && l->n_refusing >= PROXY_REFUSING_MAX) {
                safe_close(cfd); /* already telling enough of them */
                return 0;
        }

        c = calloc(1, sizeof(ProxyConn));
        if (!c) {
                safe_close(cfd);
                return 0;
        }
        c->listener = l;
        c->cfd = cfd;
        c->ufd = -EBADF;
        c->state = CONN_HANDSHAKE;
        c->parser = (ProxyParser) PROXY_PARSER_INIT;
        c->refusal = refusal;
        c->refusal_why = why;
        LIST_PREPEND(conns, l->conns, c);
        if (refusal != _PROXY_OUTCOME_INVALID)
                l->n_refusing++;
        else {
                l->n_conns++;
                p->n_connections++;
        }

        r = sd_event_add_io(m->event, &c->cio, cfd, EPOLLIN, on_client, c);
        if (r >= 0)
                /* The request must come soon; later the same timer watches the connect and idleness. */
                r = sd_event_add_time_relative(m->event, &c->timer, CLOCK_MONOTONIC, m->config.proxy_connect_timeout_usec,
                                               USEC_PER_SEC / 10, on_timer, c);
        if (r >= 0) {
                (void) sd_event_source_set_description(c->cio, "proxy-client");
                (void) sd_event_source_set_description(c->timer, "proxy-connection-timer");
        }
        if (r < 0) {
                log_warning_errno(r, "Egress proxy: failed to watch a connection, ignoring: %m");
                conn_free(c);
        }
        return 0;
}

/* --- listeners ------------------------------------------------------------------------------ */

int proxy_session_dir(Manager *m, const char *session_id, char **ret) {
        return asprintf(ret, "%s/proxy/%s", m->runtime_dir, session_id) < 0 ? -ENOMEM : 0;
}

/* The listening socket waits in systemd's fd store while sandboxd restarts: the relay of the
 * session keeps connecting to it, and the next sandboxd takes the connections from its
 * backlog. */
static void fdstore_put(ProxyListener *l) {
        _cleanup_free_ char *msg = NULL;
        int r;

        if (asprintf(&msg, "FDSTORE=1\nFDNAME=%s", l->fdname) < 0) {
                log_oom();
                return;
        }
        r = sd_pid_notify_with_fds(0, false, msg, &l->fd, 1);
        if (r < 0)
                log_warning_errno(r, "Failed to put the proxy socket of session %s in the fd store, ignoring: %m",
                                  l->session.id);
}

static void fdstore_remove(ProxyListener *l) {
        _cleanup_free_ char *msg = NULL;

        if (asprintf(&msg, "FDSTOREREMOVE=1\nFDNAME=%s", l->fdname) >= 0)
                (void) sd_notify(false, msg);
}

/* Binds and listens on l->path, in l->dir, made when missing. */
static int listener_bind(ProxyListener *l) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *top = NULL;
        int r;

        if (strlen(l->path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        /* <runtime>/proxy is root's alone; the session's directory only lets the relay (a
         * dynamic user, which gets it bound) reach the socket in it. */
        if (asprintf(&top, "%s/proxy", l->proxy->manager->runtime_dir) < 0)
                return -ENOMEM;
        r = store_mkdir_p(top, 0700);
        if (r < 0)
                return r;
        if (mkdir(l->dir, 0711) < 0 && errno != EEXIST)
                return -errno;
        if (chmod(l->dir, 0711) < 0)
                return -errno;

        strcpy(sa.sun_path, l->path);
        (void) unlink(l->path);
        l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (l->fd < 0 || bind(l->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(l->path, 0666) < 0 ||
            listen(l->fd, SOMAXCONN) < 0)
                return -errno;
        return 0;
}

int proxy_listen(Proxy *p, const ProxySession *s, ProxyListener **ret) {
        Manager *m = p->manager;
        ProxyListener *l;
        int r, fd;

        l = calloc(1, sizeof(ProxyListener));
        if (!l)
                return -ENOMEM;
        l->proxy = p;
        l->session = *s;
        l->fd = -EBADF;
        r = proxy_lookup_group_new(&l->lookups);
        if (r < 0)
                goto fail;
        if (proxy_session_dir(m, s->id, &l->dir) < 0 || asprintf(&l->path, "%s/%s", l->dir, PROXY_SOCKET_NAME) < 0 ||
            asprintf(&l->fdname, "proxy-%s", s->id) < 0) {
                r = -ENOMEM;
                goto fail;
        }

        /* After a restart: the socket the relay still connects to, from the fd store. The
         * directory stayed: the relay has it bound, a new one would not be seen there. */
        fd = manager_take_stored_fd(m, l->fdname);
        if (fd >= 0 && sd_is_socket_unix(fd, SOCK_STREAM, 1, l->path, 0) > 0) {
                l->fd = fd;
                (void) fcntl(l->fd, F_SETFL, O_NONBLOCK);
                log_debug("Egress proxy of session %s: listening on %s again.", s->id, l->path);
        } else {
                if (fd >= 0) {
                        log_warning("Stored fd %s is not the listening socket %s, ignoring it.", l->fdname, l->path);
                        safe_close(fd);
                        fdstore_remove(l);
                }
                r = listener_bind(l);
                if (r < 0)
                        goto fail;
                fdstore_put(l);
        }
        r = sd_event_add_io(m->event, &l->io, l->fd, EPOLLIN, on_accept, l);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(l->io, "proxy-listener");

        LIST_PREPEND(listeners, p->listeners, l);
        *ret = l;
        return 0;

fail:
        log_error_errno(r, "Failed to listen on %s for the egress proxy of session %s: %m", l->path ?: "?", s->id);
        sd_event_source_disable_unref(l->io);
        safe_close(l->fd);
        proxy_lookup_group_unref(l->lookups);
        free(l->dir);
        free(l->path);
        free(l->fdname);
        free(l);
        return r;
}

ProxyListener *proxy_listener_free(ProxyListener *l) {
        if (!l)
                return NULL;
        while (l->conns)
                conn_free(l->conns);
        LIST_REMOVE(listeners, l->proxy->listeners, l);
        sd_event_source_disable_unref(l->io);
        safe_close(l->fd);
        proxy_lookup_group_unref(l->lookups);
        free(l->dir);
        free(l->path);
        free(l->fdname);
        free(l);
        return NULL;
}

ProxyListener *proxy_listener_close(ProxyListener *l) {
        if (!l)
                return NULL;
        fdstore_remove(l);
        (void) unlink(l->path);
        (void) rmdir(l->dir);
        return proxy_listener_free(l);
}

/* --- the proxy ------------------------------------------------------------------------------ */

int proxy_new(Manager *m, Proxy **ret) {
        Proxy *p;
        int r;

        p = calloc(1, sizeof(Proxy));
        if (!p)
                return -ENOMEM;
        p->manager = m;
        r = proxy_resolver_new(m->event, m->config.proxy_max_lookups,
                               MIN(m->config.proxy_max_lookups_per_session, m->config.proxy_max_lookups), &p->resolver);
        if (r < 0) {
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

HostAddresses *proxy_host_addresses(Proxy *p) {
        return p ? proxy_resolver_host_addresses(p->resolver) : NULL;
}

Proxy *proxy_free(Proxy *p) {
        if (!p)
                return NULL;
        while (p->listeners)
                proxy_listener_free(p->listeners);
        proxy_resolver_free(p->resolver);
        free(p);
        return NULL;
}
