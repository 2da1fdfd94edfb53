/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "command.h"
#include "encoding.h"
#include "log.h"
#include "ndjson.h"
#include "proxy.h"
#include "session.h"
#include "store.h"
#include "systemd.h"

#define PROXY_HEAD_MAX (16U * 1024)       /* request line and headers */
#define PROXY_BUF_MAX (256U * 1024)       /* per direction, before reading pauses */
#define PROXY_RESOLVERS_MAX 32U           /* name lookups in flight */
#define PROXY_ADDRS_MAX 8U

/* --- the policy ---------------------------------------------------------------- */

const char *proxy_policy_check_name(const ProxyPolicy *p, const char *host) {
        if (domain_matches_any(p->denied, host) || domain_matches_any(p->session_denied, host))
                return "denied_domain";
        if (p->allowed && p->allowed[0] && !domain_matches_any(p->allowed, host))
                return "not_allowed";
        if (p->session_allowed && !domain_matches_any(p->session_allowed, host))
                return "not_allowed";
        return NULL;
}

const char *proxy_policy_check_address(const ProxyPolicy *p, int family, const uint8_t addr[static 16]) {
        uint8_t a[16];
        AddressClass c;

        memcpy(a, addr, sizeof(a));
        address_unmap(&family, a);
        if (address_in_ranges(p->denied_ranges, p->n_denied_ranges, family, a))
                return "denied_address";
        if (address_in_ranges(p->allowed_ranges, p->n_allowed_ranges, family, a))
                return NULL;
        c = address_classify(family, a);
        if (c != ADDRESS_PUBLIC)
                return address_class_to_string(c);
        if (address_in_ranges(p->host_addresses, p->n_host_addresses, family, a))
                return "host_address";
        return NULL;
}

/* --- objects ----------------------------------------------------------------------- */

typedef struct ProxyConn ProxyConn;

typedef struct Resolve {
        int notify_fd;   /* the proxy's pipe: the thread must not touch the Proxy itself */
        ProxyConn *conn; /* NULL once the connection went away */
        char host[HOST_NAME_MAX_LEN + 1];
        int error;
        struct addrinfo *result;
} Resolve;

typedef enum ConnState {
        CONN_HEAD,          /* reading the HTTP request head or the SOCKS greeting */
        CONN_SOCKS_AUTH,
        CONN_SOCKS_REQUEST,
        CONN_RESOLVING,
        CONN_CONNECTING,
        CONN_RELAY,
        CONN_FLUSH,         /* writing a refusal, then closing */
} ConnState;

typedef enum ConnKind {
        KIND_HTTP,    /* a forward request: GET http://host/path */
        KIND_CONNECT, /* CONNECT host:port */
        KIND_SOCKS,
} ConnKind;

struct ProxyConn {
        ProxyListener *listener;
        int cfd, ufd;
        sd_event_source *cio, *uio, *timer;
        ConnState state;
        ConnKind kind;
        Buf in;  /* from the client, not yet handled */
        Buf up;  /* to upstream */
        Buf out; /* to the client */
        bool c_eof, u_eof, c_shut, u_shut;
        char host[HOST_NAME_MAX_LEN + 1];
        uint16_t port;
        unsigned command; /* "c<N>" of the proxy credentials; 0: not said */
        Resolve *resolve;
        struct sockaddr_storage addrs[PROXY_ADDRS_MAX];
        socklen_t addrlens[PROXY_ADDRS_MAX];
        size_t n_addrs, next_addr;
        LIST_FIELDS(ProxyConn, conns);
};

struct ProxyListener {
        Proxy *proxy;
        Session *session;
        int fd;
        char *dir, *path;
        sd_event_source *io;
        ProxyConn *conns;
        LIST_FIELDS(ProxyListener, listeners);
};

struct Proxy {
        Manager *manager;
        int resolve_pipe[2];
        sd_event_source *resolve_io;
        unsigned n_resolving;
        unsigned n_connections;
        ProxyListener *listeners;
};

static void conn_free(ProxyConn *c);
static void conn_update(ProxyConn *c);
static void conn_connect_next(ProxyConn *c);

unsigned proxy_count_connections(Proxy *p) {
        return p ? p->n_connections : 0;
}

/* --- reporting a refusal ---------------------------------------------------------------- */

static void report_denial(ProxyConn *c, const char *reason) {
        Session *s = c->listener->session;
        Manager *m = c->listener->proxy->manager;
        bool any = false;
        Command *cmd;
        Buf line = {};

        m->metrics.network_denials++;
        log_notice("Egress proxy of session %s (%s/%s): refused %s:%u: %s.", s->id, s->user, s->workspace, c->host,
                   c->port, reason);

        if (buf_puts(&line, "{\"type\":\"network_denied\",\"host\":") < 0 ||
            json_append_string(&line, c->host, strlen(c->host)) < 0 ||
            buf_printf(&line, ",\"port\":%u,\"reason\":\"%s\"}\n", c->port, reason) < 0) {
                buf_done(&line);
                return;
        }
        /* The command that named itself, else every running one of the session. */
        for (int pass = 0; pass < 2 && !any; pass++)
                LIST_FOREACH(commands, cmd, s->commands) {
                        if (!command_status_is_running(cmd) || !cmd->output || cmd->output->finished)
                                continue;
                        if (pass == 0 && (c->command == 0 || cmd->n != c->command))
                                continue;
                        if (output_append_event(cmd->output, line.data, line.len) < 0)
                                log_warning("Failed to add a network_denied event to %s, ignoring.", cmd->unit);
                        any = true;
                }
        buf_done(&line);
}

/* --- answers ------------------------------------------------------------------------------ */

static void conn_refuse_http(ProxyConn *c, unsigned status, const char *phrase, const char *denied, const char *fmt,
                             ...) _printf_(5, 6);
static void conn_refuse_http(ProxyConn *c, unsigned status, const char *phrase, const char *denied, const char *fmt,
                             ...) {
        char body[512];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(body, sizeof(body) - 1, fmt, ap);
        va_end(ap);
        strcat(body, "\n");

        (void) buf_printf(&c->out, "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                   "Content-Length: %zu\r\nConnection: close\r\n", status, phrase, strlen(body));
        if (denied)
                (void) buf_printf(&c->out, "X-Sandboxd-Denied: %s\r\n", denied);
        (void) buf_printf(&c->out, "\r\n%s", body);
        c->state = CONN_FLUSH;
}

static void conn_refuse_socks(ProxyConn *c, uint8_t rep) {
        const uint8_t reply[10] = { 5, rep, 0, 1, 0, 0, 0, 0, 0, 0 };

        (void) buf_append(&c->out, reply, sizeof(reply));
        c->state = CONN_FLUSH;
}

/* Refused by the policy: reported everywhere, and told to the client. */
static void conn_deny(ProxyConn *c, const char *reason) {
        report_denial(c, reason);
        if (c->kind == KIND_SOCKS)
                conn_refuse_socks(c, 2); /* connection not allowed by ruleset */
        else
                conn_refuse_http(c, 403, "Forbidden", reason, "sandboxd: %s:%u is not allowed by the network policy (%s).",
                                 c->host, c->port, reason);
}

static void conn_fail(ProxyConn *c, unsigned http_status, uint8_t socks_rep, const char *why) {
        log_debug("Egress proxy: %s:%u: %s.", c->host, c->port, why);
        if (c->kind == KIND_SOCKS)
                conn_refuse_socks(c, socks_rep);
        else
                conn_refuse_http(c, http_status, http_status == 504 ? "Gateway Timeout" : "Bad Gateway", NULL,
                                 "sandboxd: %s:%u: %s.", c->host, c->port, why);
}

static void conn_bad_request(ProxyConn *c, const char *why) {
        if (c->kind == KIND_SOCKS)
                conn_refuse_socks(c, 1);
        else
                conn_refuse_http(c, 400, "Bad Request", NULL, "sandboxd proxy: %s", why);
}

/* --- the policy of a connection ------------------------------------------------------------ */

static int add_host_address(AddressRange **l, size_t *n, int family, const void *a) {
        AddressRange *nl = realloc(*l, (*n + 1) * sizeof(AddressRange));

        if (!nl)
                return -ENOMEM;
        *l = nl;
        nl[*n] = (AddressRange) { .family = family, .prefixlen = family == AF_INET ? 32 : 128 };
        memcpy(nl[*n].addr, a, family == AF_INET ? 4 : 16);
        (*n)++;
        return 0;
}

/* This host's own addresses, without netlink (sandboxd has no AF_NETLINK): SIOCGIFCONF
 * for IPv4, /proc/self/net/if_inet6 for IPv6. */
static int host_addresses(AddressRange **ret, size_t *ret_n) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_fclose_ FILE *f = NULL;
        struct ifreq reqs[64];
        struct ifconf ifc = { .ifc_len = sizeof(reqs), .ifc_req = reqs };
        AddressRange *l = NULL;
        size_t n = 0;
        char line[256];
        int r = 0;

        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || ioctl(fd, SIOCGIFCONF, &ifc) < 0)
                r = -errno;
        for (size_t i = 0; r >= 0 && i < (size_t) ifc.ifc_len / sizeof(struct ifreq); i++)
                if (reqs[i].ifr_addr.sa_family == AF_INET)
                        r = add_host_address(&l, &n, AF_INET, &((struct sockaddr_in *) &reqs[i].ifr_addr)->sin_addr);

        f = fopen("/proc/self/net/if_inet6", "re");
        while (r >= 0 && f && fgets(line, sizeof(line), f)) {
                uint8_t a[16];
                bool ok = strlen(line) >= 32;

                for (size_t i = 0; ok && i < 16; i++) {
                        unsigned v;

                        ok = sscanf(line + 2 * i, "%2x", &v) == 1;
                        a[i] = (uint8_t) v;
                }
                if (ok)
                        r = add_host_address(&l, &n, AF_INET6, a);
        }
        if (r < 0) {
                free(l);
                return r;
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

static void conn_policy(ProxyConn *c, ProxyPolicy *ret) {
        const Config *cfg = &c->listener->proxy->manager->config;
        Session *s = c->listener->session;

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

/* The name is known: check it, then resolve it (or take it as the address it is). */
static void conn_addresses(ProxyConn *c, struct addrinfo *ai);

static void *resolve_thread(void *arg) {
        Resolve *q = arg;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP };

        /* getaddrinfo() blocks (DNS): here, not in the event loop. */
        q->error = getaddrinfo(q->host, NULL, &hints, &q->result);
        while (write(q->notify_fd, &q, sizeof(q)) < 0 && errno == EINTR)
                ;
        return NULL;
}

static void conn_target_known(ProxyConn *c) {
        ProxyPolicy pol;
        const char *why;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
        struct addrinfo *ai = NULL;
        Proxy *p = c->listener->proxy;
        pthread_attr_t attr;
        pthread_t t;
        Resolve *q;

        conn_policy(c, &pol);
        why = proxy_policy_check_name(&pol, c->host);
        if (why) {
                conn_deny(c, why);
                return;
        }
        if (getaddrinfo(c->host, NULL, &hints, &ai) == 0) {
                conn_addresses(c, ai);
                freeaddrinfo(ai);
                return;
        }

        if (p->n_resolving >= PROXY_RESOLVERS_MAX) {
                conn_fail(c, 502, 1, "too many name lookups in progress");
                return;
        }
        q = calloc(1, sizeof(Resolve));
        if (!q) {
                conn_fail(c, 502, 1, "out of memory");
                return;
        }
        q->notify_fd = p->resolve_pipe[1];
        q->conn = c;
        snprintf(q->host, sizeof(q->host), "%s", c->host);
        if (pthread_attr_init(&attr) != 0) {
                free(q);
                conn_fail(c, 502, 1, "cannot resolve now");
                return;
        }
        (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, resolve_thread, q) != 0) {
                pthread_attr_destroy(&attr);
                free(q);
                conn_fail(c, 502, 1, "cannot resolve now");
                return;
        }
        pthread_attr_destroy(&attr);
        p->n_resolving++;
        c->resolve = q;
        c->state = CONN_RESOLVING;
}

/* Keeps the addresses the policy allows; refuses when there is none. */
static void conn_addresses(ProxyConn *c, struct addrinfo *ai) {
        const char *first_denial = NULL;
        ProxyPolicy pol;
        int r;

        conn_policy(c, &pol);
        r = host_addresses((AddressRange **) &pol.host_addresses, &pol.n_host_addresses);
        if (r < 0)
                log_warning_errno(r, "Failed to list this host's addresses, ignoring: %m");

        c->n_addrs = c->next_addr = 0;
        for (struct addrinfo *i = ai; i && c->n_addrs < PROXY_ADDRS_MAX; i = i->ai_next) {
                uint8_t a[16] = {};
                const char *why;

                if (i->ai_family == AF_INET)
                        memcpy(a, &((struct sockaddr_in *) i->ai_addr)->sin_addr, 4);
                else if (i->ai_family == AF_INET6)
                        memcpy(a, &((struct sockaddr_in6 *) i->ai_addr)->sin6_addr, 16);
                else
                        continue;
                why = proxy_policy_check_address(&pol, i->ai_family, a);
                if (why) {
                        first_denial = first_denial ?: why;
                        continue;
                }
                memcpy(&c->addrs[c->n_addrs], i->ai_addr, i->ai_addrlen);
                c->addrlens[c->n_addrs] = i->ai_addrlen;
                if (i->ai_family == AF_INET)
                        ((struct sockaddr_in *) &c->addrs[c->n_addrs])->sin_port = htons(c->port);
                else
                        ((struct sockaddr_in6 *) &c->addrs[c->n_addrs])->sin6_port = htons(c->port);
                c->n_addrs++;
        }
        free((AddressRange *) pol.host_addresses);

        if (c->n_addrs == 0) {
                if (first_denial)
                        conn_deny(c, first_denial);
                else
                        conn_fail(c, 502, 4, "no address to connect to");
                return;
        }
        conn_connect_next(c);
}

static int on_resolved(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Proxy *p = userdata;
        Resolve *q;
        ssize_t n;

        while ((n = read(fd, &q, sizeof(q))) == (ssize_t) sizeof(q)) {
                ProxyConn *c = q->conn;

                p->n_resolving--;
                if (c) {
                        c->resolve = NULL;
                        if (q->error != 0)
                                conn_fail(c, 502, 4, "cannot resolve the name");
                        else
                                conn_addresses(c, q->result);
                        conn_update(c);
                }
                if (q->result)
                        freeaddrinfo(q->result);
                free(q);
        }
        return 0;
}

/* --- connecting ------------------------------------------------------------------------------- */

static int on_upstream(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static void conn_connected(ProxyConn *c) {
        static const uint8_t socks_ok[10] = { 5, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
        const Config *cfg = &c->listener->proxy->manager->config;

        if (c->kind == KIND_CONNECT)
                (void) buf_puts(&c->out, "HTTP/1.1 200 Connection established\r\n\r\n");
        else if (c->kind == KIND_SOCKS)
                (void) buf_append(&c->out, socks_ok, sizeof(socks_ok));
        /* What the client sent after its request (a TLS hello, a body) goes on as is. */
        if (c->in.len > 0) {
                (void) buf_append(&c->up, c->in.data, c->in.len);
                c->in.len = 0;
        }
        c->state = CONN_RELAY;
        (void) sd_event_source_set_time_relative(c->timer, cfg->proxy_idle_timeout_usec);
        log_debug("Egress proxy: relaying to %s:%u.", c->host, c->port);
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
                c->state = CONN_CONNECTING;
                (void) sd_event_source_set_time_relative(c->timer, m->config.proxy_connect_timeout_usec);
                return;
        }
        conn_fail(c, 502, 5, "cannot connect");
}

/* --- reading requests --------------------------------------------------------------------------- */

/* "c<N>" as the proxy user name names the command. */
static unsigned parse_command_user(const char *user, size_t n) {
        unsigned v = 0;

        if (n < 2 || n > 10 || user[0] != 'c')
                return 0;
        for (size_t i = 1; i < n; i++) {
                if (user[i] < '0' || user[i] > '9')
                        return 0;
                v = v * 10 + (unsigned) (user[i] - '0');
        }
        return v;
}

static void parse_proxy_authorization(ProxyConn *c, const char *v, size_t n) {
        Buf b = {};
        const char *colon;

        while (n > 0 && (*v == ' ' || *v == '\t'))
                v++, n--;
        if (n < 6 || strncasecmp(v, "Basic ", 6) != 0)
                return;
        v += 6;
        n -= 6;
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
        if (base64_decode(v, n, &b) >= 0 && b.data && (colon = memchr(b.data, ':', b.len)))
                c->command = parse_command_user(b.data, (size_t) (colon - b.data));
        buf_done(&b);
}

/* host[:port] or [v6][:port] into c->host and c->port. */
static int parse_authority(ProxyConn *c, const char *a, size_t n, uint16_t default_port) {
        char host[HOST_NAME_MAX_LEN + 1];
        const char *h = a, *port = NULL;
        size_t hl = n;
        const char *at = memchr(a, '@', n);

        if (at) { /* userinfo: not ours to pass on */
                n -= (size_t) (at + 1 - a);
                a = h = at + 1;
                hl = n;
        }
        if (n > 0 && a[0] == '[') {
                const char *close = memchr(a, ']', n);

                if (!close)
                        return -EINVAL;
                h = a + 1;
                hl = (size_t) (close - h);
                if (close + 1 < a + n) {
                        if (close[1] != ':')
                                return -EINVAL;
                        port = close + 2;
                }
        } else {
                const char *colon = memchr(a, ':', n);

                if (colon) {
                        hl = (size_t) (colon - a);
                        port = colon + 1;
                }
        }
        if (hl == 0 || hl > HOST_NAME_MAX_LEN)
                return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = 0;
        if (host_name_normalize(host, c->host) < 0)
                return -EINVAL;

        if (port) {
                unsigned long v = 0;
                size_t pl = (size_t) (a + n - port);

                if (pl == 0 || pl > 5)
                        return -EINVAL;
                for (size_t i = 0; i < pl; i++) {
                        if (port[i] < '0' || port[i] > '9')
                                return -EINVAL;
                        v = v * 10 + (unsigned long) (port[i] - '0');
                }
                if (v == 0 || v > 65535)
                        return -EINVAL;
                c->port = (uint16_t) v;
        } else if (default_port > 0)
                c->port = default_port;
        else
                return -EINVAL;
        return 0;
}

static bool header_is(const char *line, size_t n, const char *name) {
        size_t l = strlen(name);

        return n > l && line[l] == ':' && strncasecmp(line, name, l) == 0;
}

/* An HTTP request head is complete in c->in: decide what it asks for. */
static void conn_http_head(ProxyConn *c, size_t head_len) {
        const char *p = c->in.data, *end = c->in.data + head_len, *eol, *sp1, *sp2;
        const char *method, *target, *version;
        size_t ml, tl, vl;
        const char *path = "/";
        size_t path_len = 1;

        eol = memmem(p, (size_t) (end - p), "\r\n", 2);
        sp1 = memchr(p, ' ', (size_t) (eol - p));
        sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t) (eol - sp1 - 1)) : NULL;
        if (!sp1 || !sp2) {
                conn_bad_request(c, "not an HTTP request.");
                return;
        }
        method = p;
        ml = (size_t) (sp1 - p);
        target = sp1 + 1;
        tl = (size_t) (sp2 - target);
        version = sp2 + 1;
        vl = (size_t) (eol - version);
        if (vl < 7 || strncmp(version, "HTTP/1.", 7) != 0 || ml == 0 || tl == 0) {
                conn_bad_request(c, "not an HTTP/1 request.");
                return;
        }

        if (ml == 7 && strncmp(method, "CONNECT", 7) == 0) {
                c->kind = KIND_CONNECT;
                if (parse_authority(c, target, tl, 0) < 0) {
                        conn_bad_request(c, "CONNECT needs host:port.");
                        return;
                }
        } else {
                const char *a, *slash;

                c->kind = KIND_HTTP;
                if (tl < 7 || strncasecmp(target, "http://", 7) != 0) {
                        conn_bad_request(c, tl >= 8 && strncasecmp(target, "https://", 8) == 0
                                                    ? "use CONNECT for https."
                                                    : "send an absolute http:// URL (this is a proxy).");
                        return;
                }
                a = target + 7;
                slash = a;
                while (slash < target + tl && *slash != '/' && *slash != '?')
                        slash++;
                if (parse_authority(c, a, (size_t) (slash - a), 80) < 0) {
                        conn_bad_request(c, "invalid host in the URL.");
                        return;
                }
                if (slash < target + tl) {
                        path = slash;
                        path_len = (size_t) (target + tl - slash);
                }
                /* The request as the server expects it: origin form, one request per connection. */
                if (buf_printf(&c->up, "%.*s %s%.*s %.*s\r\n", (int) ml, method, path[0] == '?' ? "/" : "",
                               (int) path_len, path, (int) vl, version) < 0) {
                        conn_fail(c, 502, 1, "out of memory");
                        return;
                }
        }

        for (p = eol + 2; p < end; p = eol + 2) {
                size_t n;

                eol = memmem(p, (size_t) (end - p), "\r\n", 2);
                if (!eol || eol == p)
                        break;
                n = (size_t) (eol - p);
                if (header_is(p, n, "Proxy-Authorization")) {
                        parse_proxy_authorization(c, p + 20, n - 20);
                        continue;
                }
                if (c->kind != KIND_HTTP || header_is(p, n, "Proxy-Connection") || header_is(p, n, "Connection") ||
                    header_is(p, n, "Keep-Alive"))
                        continue;
                (void) buf_append(&c->up, p, n);
                (void) buf_puts(&c->up, "\r\n");
        }
        if (c->kind == KIND_HTTP)
                (void) buf_puts(&c->up, "Connection: close\r\n\r\n");

        /* What follows the head (a body, early TLS bytes) waits in c->in. */
        memmove(c->in.data, c->in.data + head_len, c->in.len - head_len);
        c->in.len -= head_len;
        conn_target_known(c);
}

/* > 0: consumed that many bytes and moved on; 0: need more; < 0: refused (state FLUSH). */
static int conn_socks(ProxyConn *c) {
        const uint8_t *b = (const uint8_t *) c->in.data;
        size_t n = c->in.len, need;

        switch (c->state) {
        case CONN_HEAD: { /* greeting: 5, nmethods, methods */
                bool none = false, userpass = false;

                if (n < 2)
                        return 0;
                need = 2 + (size_t) b[1];
                if (n < need)
                        return 0;
                for (size_t i = 2; i < need; i++) {
                        none = none || b[i] == 0;
                        userpass = userpass || b[i] == 2;
                }
                /* With a user name the command can say who it is. */
                if (userpass) {
                        (void) buf_append(&c->out, (const uint8_t[]) { 5, 2 }, 2);
                        c->state = CONN_SOCKS_AUTH;
                } else if (none) {
                        (void) buf_append(&c->out, (const uint8_t[]) { 5, 0 }, 2);
                        c->state = CONN_SOCKS_REQUEST;
                } else {
                        (void) buf_append(&c->out, (const uint8_t[]) { 5, 0xff }, 2);
                        c->state = CONN_FLUSH;
                        return -EPROTO;
                }
                return (int) need;
        }
        case CONN_SOCKS_AUTH: /* 1, ulen, user, plen, pass */
                if (n < 2)
                        return 0;
                if (n < 3 + (size_t) b[1] || n < 3 + (size_t) b[1] + b[2 + b[1]])
                        return 0;
                need = 3 + (size_t) b[1] + b[2 + b[1]];
                c->command = parse_command_user((const char *) b + 2, b[1]);
                (void) buf_append(&c->out, (const uint8_t[]) { 1, 0 }, 2);
                c->state = CONN_SOCKS_REQUEST;
                return (int) need;
        case CONN_SOCKS_REQUEST: { /* 5, cmd, 0, atyp, address, port */
                char host[HOST_NAME_MAX_LEN + 1];
                size_t alen;

                if (n < 5)
                        return 0;
                if (b[0] != 5) {
                        conn_refuse_socks(c, 1);
                        return -EPROTO;
                }
                switch (b[3]) {
                case 1:
                        alen = 4;
                        break;
                case 3:
                        alen = 1 + (size_t) b[4];
                        break;
                case 4:
                        alen = 16;
                        break;
                default:
                        conn_refuse_socks(c, 8);
                        return -EPROTO;
                }
                need = 4 + alen + 2;
                if (n < need)
                        return 0;
                if (b[1] != 1) { /* CONNECT only */
                        conn_refuse_socks(c, 7);
                        return -EPROTO;
                }
                if (b[3] == 3) {
                        memcpy(host, b + 5, b[4]);
                        host[b[4]] = 0;
                } else if (!inet_ntop(b[3] == 1 ? AF_INET : AF_INET6, b + 4, host, sizeof(host))) {
                        conn_refuse_socks(c, 1);
                        return -EPROTO;
                }
                if (memchr(host, 0, b[3] == 3 ? b[4] : 0) || host_name_normalize(host, c->host) < 0) {
                        snprintf(c->host, sizeof(c->host), "invalid");
                        conn_refuse_socks(c, 4);
                        return -EPROTO;
                }
                c->port = (uint16_t) ((b[need - 2] << 8) | b[need - 1]);
                return (int) need;
        }
        default:
                return -EINVAL;
        }
}

static void conn_consume(ProxyConn *c, size_t n) {
        memmove(c->in.data, c->in.data + n, c->in.len - n);
        c->in.len -= n;
}

/* New bytes from the client before a target is known. */
static void conn_parse(ProxyConn *c) {
        for (;;) {
                if (c->state == CONN_HEAD && c->in.len > 0 && (uint8_t) c->in.data[0] == 5)
                        c->kind = KIND_SOCKS;
                if (c->kind == KIND_SOCKS) {
                        ConnState before = c->state;
                        int k = conn_socks(c);

                        if (k <= 0)
                                return;
                        conn_consume(c, (size_t) k);
                        if (before == CONN_SOCKS_REQUEST) {
                                conn_target_known(c);
                                return;
                        }
                        continue;
                }
                if (c->state == CONN_HEAD) {
                        const char *e = c->in.len > 0 ? memmem(c->in.data, c->in.len, "\r\n\r\n", 4) : NULL;

                        if (!e) {
                                if (c->in.len >= PROXY_HEAD_MAX)
                                        conn_refuse_http(c, 431, "Request Header Fields Too Large", NULL,
                                                         "sandboxd proxy: the request head is too large.");
                                return;
                        }
                        conn_http_head(c, (size_t) (e + 4 - c->in.data));
                }
                return;
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
        case CONN_HEAD:
        case CONN_SOCKS_AUTH:
        case CONN_SOCKS_REQUEST:
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
                case CONN_HEAD:
                case CONN_SOCKS_AUTH:
                case CONN_SOCKS_REQUEST:
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
                        log_debug_errno(-err, "Egress proxy: connecting to %s:%u failed: %m", c->host, c->port);
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
                        conn_fail(c, 504, 4, "timed out connecting");
                }
                (void) sd_event_source_set_time_relative(s, 10 * USEC_PER_SEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                conn_update(c);
                return 0;
        default:
                log_debug("Egress proxy: closing a connection of session %s (idle).", c->listener->session->id);
                conn_free(c);
                return 0;
        }
}

static void conn_free(ProxyConn *c) {
        if (!c)
                return;
        if (c->resolve)
                c->resolve->conn = NULL; /* the thread's answer is dropped when it comes */
        LIST_REMOVE(conns, c->listener->conns, c);
        c->listener->proxy->n_connections--;
        sd_event_source_disable_unref(c->cio);
        sd_event_source_disable_unref(c->uio);
        sd_event_source_disable_unref(c->timer);
        safe_close(c->cfd);
        safe_close(c->ufd);
        buf_done(&c->in);
        buf_done(&c->up);
        buf_done(&c->out);
        free(c);
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyListener *l = userdata;
        Proxy *p = l->proxy;
        Manager *m = p->manager;
        ProxyConn *c;
        int cfd, r;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        log_debug_errno(-errno, "Egress proxy: accept failed, ignoring: %m");
                return 0;
        }
        if (p->n_connections >= m->config.proxy_max_connections || l->session->state != SESSION_ACTIVE) {
                log_notice("Egress proxy: refusing a connection of session %s: %s.", l->session->id,
                           l->session->state != SESSION_ACTIVE ? "the session is not active" : "too many connections");
                safe_close(cfd);
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
        c->state = CONN_HEAD;
        c->kind = KIND_HTTP;
        snprintf(c->host, sizeof(c->host), "?");
        LIST_PREPEND(conns, l->conns, c);
        p->n_connections++;

        r = sd_event_add_io(m->event, &c->cio, cfd, EPOLLIN, on_client, c);
        if (r >= 0)
                /* The request must come soon; later the same timer watches the connect and idleness. */
                r = sd_event_add_time_relative(m->event, &c->timer, CLOCK_MONOTONIC, m->config.proxy_connect_timeout_usec,
                                               USEC_PER_SEC / 10, on_timer, c);
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

int proxy_listen(Proxy *p, Session *s, ProxyListener **ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *top = NULL;
        ProxyListener *l;
        int r;

        l = calloc(1, sizeof(ProxyListener));
        if (!l)
                return -ENOMEM;
        l->proxy = p;
        l->session = s;
        l->fd = -EBADF;

        /* <runtime>/proxy is root's alone; the session's directory only lets the
         * relay (a dynamic user, which gets it bound) reach the socket in it. */
        if (asprintf(&top, "%s/proxy", p->manager->runtime_dir) < 0 || proxy_session_dir(p->manager, s->id, &l->dir) < 0 ||
            asprintf(&l->path, "%s/%s", l->dir, PROXY_SOCKET_NAME) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        if (strlen(l->path) >= sizeof(sa.sun_path)) {
                r = -ENAMETOOLONG;
                goto fail;
        }
        r = store_mkdir_p(top, 0700);
        if (r >= 0 && mkdir(l->dir, 0711) < 0 && errno != EEXIST)
                r = -errno;
        if (r >= 0 && chmod(l->dir, 0711) < 0)
                r = -errno;
        if (r < 0)
                goto fail;

        strcpy(sa.sun_path, l->path);
        (void) unlink(l->path);
        l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (l->fd < 0 || bind(l->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(l->path, 0666) < 0 ||
            listen(l->fd, SOMAXCONN) < 0) {
                r = -errno;
                goto fail;
        }
        r = sd_event_add_io(p->manager->event, &l->io, l->fd, EPOLLIN, on_accept, l);
        if (r < 0)
                goto fail;

        LIST_PREPEND(listeners, p->listeners, l);
        *ret = l;
        return 0;

fail:
        log_error_errno(r, "Failed to listen on %s for the egress proxy of session %s: %m", l->path ?: "?", s->id);
        sd_event_source_disable_unref(l->io);
        safe_close(l->fd);
        free(l->dir);
        free(l->path);
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
        if (l->path)
                (void) unlink(l->path);
        if (l->dir)
                (void) rmdir(l->dir);
        free(l->dir);
        free(l->path);
        free(l);
        return NULL;
}

/* --- the proxy ------------------------------------------------------------------------------ */

int proxy_new(Manager *m, Proxy **ret) {
        Proxy *p;
        int r;

        p = calloc(1, sizeof(Proxy));
        if (!p)
                return -ENOMEM;
        p->manager = m;
        p->resolve_pipe[0] = p->resolve_pipe[1] = -EBADF;
        if (pipe2(p->resolve_pipe, O_CLOEXEC) < 0) {
                r = -errno;
                goto fail;
        }
        (void) fcntl(p->resolve_pipe[0], F_SETFL, O_NONBLOCK);
        r = sd_event_add_io(m->event, &p->resolve_io, p->resolve_pipe[0], EPOLLIN, on_resolved, p);
        if (r < 0)
                goto fail;
        *ret = p;
        return 0;
fail:
        proxy_free(p);
        return r;
}

Proxy *proxy_free(Proxy *p) {
        if (!p)
                return NULL;
        while (p->listeners)
                proxy_listener_free(p->listeners);
        sd_event_source_disable_unref(p->resolve_io);
        safe_close(p->resolve_pipe[0]);
        /* A lookup thread still running writes here when it is done: leave its end open
         * (we are exiting) rather than let it write into an fd that was reused. */
        if (p->n_resolving == 0)
                safe_close(p->resolve_pipe[1]);
        free(p);
        return NULL;
}
