/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <resolv.h>
#include <sys/socket.h>
/* <resolv.h> brings <sys/param.h>'s: ours follow */
#undef MIN
#undef MAX

#include "host-addresses.h"
#include "log.h"
#include "proxy-resolve.h"

struct ProxyLookupGroup {
        unsigned n_ref;
        unsigned n_running;
};

struct ProxyLookup {
        int notify_fd;       /* the resolver's pipe: the thread touches nothing else of ours */
        ProxyLookupGroup *group;
        ProxyLookupFn fn;    /* NULL once cancelled */
        void *userdata;
        char name[HOST_NAME_MAX_LEN + 1];
        int error;
        struct addrinfo *result;
};

struct ProxyResolver {
        int pipe[2];
        sd_event_source *io;
        unsigned n_running, max_running, max_per_group;
        HostAddresses *host;
};

int proxy_lookup_group_new(ProxyLookupGroup **ret) {
        ProxyLookupGroup *g;

        assert(ret);
        g = calloc(1, sizeof(ProxyLookupGroup));
        if (!g)
                return -ENOMEM;
        g->n_ref = 1;
        *ret = g;
        return 0;
}

ProxyLookupGroup *proxy_lookup_group_unref(ProxyLookupGroup *g) {
        if (g && --g->n_ref == 0)
                free(g);
        return NULL;
}

unsigned proxy_lookup_group_running(const ProxyLookupGroup *g) {
        return g ? g->n_running : 0;
}

static void *lookup_thread(void *arg) {
        ProxyLookup *l = arg;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP };

        /* No search domains, no HOSTALIASES: the name is looked up as it is, in /etc/hosts and
         * in DNS alike. (A trailing dot would do it for DNS, but /etc/hosts then finds nothing.)
         * _res is this thread's own, and glibc keeps what we change in it. */
        if (res_init() == 0) {
                _res.options &= ~(RES_DNSRCH | RES_DEFNAMES);
                _res.options |= RES_NOALIASES;
                l->error = getaddrinfo(l->name, NULL, &hints, &l->result);
        } else
                l->error = EAI_SYSTEM;
        while (write(l->notify_fd, &l, sizeof(l)) < 0 && errno == EINTR)
                ;
        return NULL;
}

static int lookup_error(int e) {
        switch (e) {
        case 0:
                return 0;
        case EAI_NONAME:
        case EAI_NODATA:
        case EAI_ADDRFAMILY:
                return -ENXIO;
        case EAI_AGAIN:
                return -EAGAIN;
        case EAI_MEMORY:
                return -ENOMEM;
        default:
                return -EIO;
        }
}

static int on_resolved(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyResolver *r = userdata;
        ProxyLookup *l;

        while (read(fd, &l, sizeof(l)) == (ssize_t) sizeof(l)) {
                NetAddress addrs[PROXY_ADDRESSES_MAX];
                size_t n = 0;

                r->n_running--;
                l->group->n_running--;
                l->group = proxy_lookup_group_unref(l->group);
                for (struct addrinfo *i = l->error == 0 ? l->result : NULL; i && n < PROXY_ADDRESSES_MAX; i = i->ai_next) {
                        NetAddress a = { .family = i->ai_family };
                        bool dup = false;

                        if (i->ai_family == AF_INET && i->ai_addrlen >= sizeof(struct sockaddr_in))
                                memcpy(a.addr, &((struct sockaddr_in *) i->ai_addr)->sin_addr, 4);
                        else if (i->ai_family == AF_INET6 && i->ai_addrlen >= sizeof(struct sockaddr_in6))
                                memcpy(a.addr, &((struct sockaddr_in6 *) i->ai_addr)->sin6_addr, 16);
                        else
                                continue;
                        for (size_t k = 0; k < n; k++)
                                dup = dup || memcmp(&addrs[k], &a, sizeof(a)) == 0;
                        if (!dup)
                                addrs[n++] = a;
                }
                if (l->fn)
                        l->fn(l->error == 0 && n == 0 ? -ENXIO : lookup_error(l->error), addrs, n, l->userdata);
                if (l->result)
                        freeaddrinfo(l->result);
                free(l);
        }
        return 0;
}

int proxy_resolver_lookup(ProxyResolver *r, ProxyLookupGroup *g, const char *name, ProxyLookupFn fn, void *userdata,
                          ProxyLookup **ret) {
        pthread_attr_t attr;
        pthread_t t;
        ProxyLookup *l;
        int k;

        assert(r);
        assert(g);
        assert(name);
        assert(fn);
        assert(ret);

        if (strlen(name) >= sizeof(l->name))
                return -EINVAL;
        if (g->n_running >= r->max_per_group)
                return -EDQUOT;
        if (r->n_running >= r->max_running)
                return -EBUSY;
        l = calloc(1, sizeof(ProxyLookup));
        if (!l)
                return -ENOMEM;
        l->notify_fd = r->pipe[1];
        l->fn = fn;
        l->userdata = userdata;
        strcpy(l->name, name);

        k = pthread_attr_init(&attr);
        if (k == 0) {
                (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                k = pthread_create(&t, &attr, lookup_thread, l);
                pthread_attr_destroy(&attr);
        }
        if (k != 0) {
                free(l);
                return -k;
        }
        r->n_running++;
        g->n_running++;
        g->n_ref++;
        l->group = g;
        *ret = l;
        return 0;
}

ProxyLookup *proxy_lookup_cancel(ProxyLookup *l) {
        if (l)
                l->fn = NULL; /* freed when the thread's answer comes */
        return NULL;
}

const char *proxy_resolver_check_address(ProxyResolver *r, const ProxyPolicy *p, int family,
                                         const uint8_t addr[static 16]) {
        static const AddressRange everything[] = { { .family = AF_INET }, { .family = AF_INET6 } };
        ProxyPolicy q = *p;

        assert(r);
        assert(p);

        if (host_addresses_get(r->host, &q.host_addresses, &q.n_host_addresses) < 0) {
                /* not known: fail closed */
                q.host_addresses = everything;
                q.n_host_addresses = ELEMENTSOF(everything);
        }
        return proxy_policy_check_address(&q, family, addr);
}

int proxy_resolver_new(sd_event *e, unsigned max_running, unsigned max_per_group, ProxyResolver **ret) {
        ProxyResolver *r;
        int k;

        assert(e);
        assert(max_running > 0);
        assert(max_per_group > 0);
        assert(ret);

        r = calloc(1, sizeof(ProxyResolver));
        if (!r)
                return -ENOMEM;
        r->max_running = max_running;
        r->max_per_group = max_per_group;
        r->pipe[0] = r->pipe[1] = -EBADF;
        if (pipe2(r->pipe, O_CLOEXEC) < 0) {
                k = -errno;
                goto fail;
        }
        (void) fcntl(r->pipe[0], F_SETFL, O_NONBLOCK);
        k = sd_event_add_io(e, &r->io, r->pipe[0], EPOLLIN, on_resolved, r);
        if (k < 0)
                goto fail;
        (void) sd_event_source_set_description(r->io, "proxy-resolved");
        k = host_addresses_new(e, &r->host);
        if (k < 0)
                /* The rest of sandboxd works; the proxy refuses every address (fails closed). */
                log_error_errno(k, "Failed to watch this host's local routes, the egress proxy refuses every address: %m");
        *ret = r;
        return 0;
fail:
        proxy_resolver_free(r);
        return k;
}

HostAddresses *proxy_resolver_host_addresses(ProxyResolver *r) {
        return r ? r->host : NULL;
}

ProxyResolver *proxy_resolver_free(ProxyResolver *r) {
        if (!r)
                return NULL;
        host_addresses_free(r->host);
        sd_event_source_disable_unref(r->io);
        safe_close(r->pipe[0]);
        /* A lookup still running writes here when it is done: leave its end open (we are
         * exiting) rather than let it write into an fd that was reused. */
        if (r->n_running == 0)
                safe_close(r->pipe[1]);
        free(r);
        return NULL;
}
