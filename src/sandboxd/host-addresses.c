/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>

#include "host-addresses.h"
#include "log.h"
#include "rtnl.h"

#define HOST_ADDRESSES_MAX 65536U            /* local routes; more, and we fail closed */
#define DUMP_FIRST_TIMEOUT_MSEC 5000         /* the read at start, which the loop waits for */
#define DUMP_RETRY_USEC (1 * USEC_PER_SEC)
#define RECV_BUFFER_SIZE (64U * 1024)        /* the kernel fills at most a page or so a datagram */
#define WATCH_RCVBUF (1024 * 1024)

struct HostAddresses {
        sd_event *event;
        int watch_fd, dump_fd;
        sd_event_source *watch_io, *dump_io, *retry;
        uint32_t seq;
        AddressRange *ranges;
        size_t n_ranges;
        bool known;
        /* the read in progress */
        int dumping;       /* AF_INET, AF_INET6, or AF_UNSPEC when none runs */
        bool again;        /* the kernel announced a change meanwhile: read again after this one */
        AddressRange *next;
        size_t n_next;
};

static int add_route(AddressRange **l, size_t *n, const RtnlRoute *rt) {
        AddressRange *nl;

        if (*n >= HOST_ADDRESSES_MAX)
                return -E2BIG;
        nl = realloc(*l, (*n + 1) * sizeof(AddressRange));
        if (!nl)
                return -ENOMEM;
        *l = nl;
        nl[*n] = (AddressRange) { .family = rt->family, .prefixlen = rt->dst_len };
        memcpy(nl[*n].addr, rt->dst, sizeof(rt->dst));
        (*n)++;
        return 0;
}

static int dump_start(HostAddresses *h, int family) {
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        uint8_t req[RTNL_DUMP_REQUEST_MAX];
        size_t n;

        n = rtnl_route_dump_request(family, ++h->seq, req, sizeof(req));
        if (n == 0)
                return -ENOBUFS;
        if (sendto(h->dump_fd, req, n, 0, (struct sockaddr *) &kernel, sizeof(kernel)) < 0)
                return -errno;
        if (family == AF_INET) {
                free(h->next);
                h->next = NULL;
                h->n_next = 0;
        }
        h->dumping = family;
        return 0;
}

/* One datagram from the kernel into buf (RECV_BUFFER_SIZE): its size, -EAGAIN when none
 * is there, another -errno on failure. Datagrams of other senders are skipped. */
static ssize_t recv_from_kernel(int fd, uint8_t *buf) {
        for (;;) {
                struct sockaddr_nl from = {};
                struct iovec iov = { .iov_base = buf, .iov_len = RECV_BUFFER_SIZE };
                struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1 };
                ssize_t k = recvmsg(fd, &mh, MSG_DONTWAIT);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (mh.msg_flags & MSG_TRUNC)
                        return -EMSGSIZE;
                if (from.nl_pid == 0)
                        return k;
        }
}

/* Reads what the kernel sent for the dump: 1 when it is complete, 0 when more is to come. */
static int dump_read(HostAddresses *h) {
        _cleanup_free_ uint8_t *buf = malloc(RECV_BUFFER_SIZE);

        if (!buf)
                return -ENOMEM;
        for (;;) {
                const uint8_t *p = buf;
                RtnlMessage m;
                ssize_t k;
                size_t left;
                int r;

                k = recv_from_kernel(h->dump_fd, buf);
                if (k < 0)
                        return k == -EAGAIN ? 0 : (int) k;

                for (left = (size_t) k; (r = rtnl_message_next(&p, &left, &m)) > 0;) {
                        if (m.seq != h->seq)
                                continue; /* of a read given up on */
                        if (m.flags & NLM_F_DUMP_INTR)
                                return -EAGAIN; /* the table changed under the dump */
                        if (m.type == NLMSG_ERROR && m.error < 0)
                                return m.error;
                        if (m.type == NLMSG_DONE) {
                                if (m.error < 0)
                                        return m.error;
                                if (h->dumping == AF_INET) {
                                        r = dump_start(h, AF_INET6);
                                        if (r < 0)
                                                return r;
                                        break;
                                }
                                h->dumping = AF_UNSPEC;
                                return 1;
                        }
                        if (m.has_route && rtnl_route_is_local(&m.route)) {
                                r = add_route(&h->next, &h->n_next, &m.route);
                                if (r < 0)
                                        return r;
                        }
                }
                if (r < 0)
                        return r;
        }
}

static void dump_finish(HostAddresses *h) {
        free(h->ranges);
        h->ranges = TAKE_PTR(h->next);
        h->n_ranges = h->n_next;
        h->n_next = 0;
        if (!h->known)
                log_info("Egress proxy: this host has %zu local routes.", h->n_ranges);
        else
                log_debug("Egress proxy: this host has %zu local routes.", h->n_ranges);
        h->known = true;
}

static void dump_failed(HostAddresses *h, int r) {
        h->dumping = AF_UNSPEC;
        free(h->next);
        h->next = NULL;
        h->n_next = 0;
        log_full_errno(h->known ? LOG_DEBUG : LOG_WARNING, r,
                       "Egress proxy: failed to read this host's local routes (%s), trying again: %m",
                       h->known ? "keeping the last ones" : "refusing every address meanwhile");
        (void) sd_event_source_set_time_relative(h->retry, DUMP_RETRY_USEC);
        (void) sd_event_source_set_enabled(h->retry, SD_EVENT_ONESHOT);
}

static void refresh(HostAddresses *h) {
        int r;

        if (h->dumping != AF_UNSPEC) {
                h->again = true;
                return;
        }
        h->again = false;
        r = dump_start(h, AF_INET);
        if (r < 0)
                dump_failed(h, r);
}

static int on_dump(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        HostAddresses *h = userdata;
        int r;

        if (h->dumping == AF_UNSPEC) {
                (void) dump_read(h); /* stray replies of a read given up on */
                return 0;
        }
        r = dump_read(h);
        if (r < 0)
                dump_failed(h, r);
        else if (r > 0) {
                dump_finish(h);
                if (h->again)
                        refresh(h);
        }
        return 0;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        refresh(userdata);
        return 0;
}

static int on_watch(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        _cleanup_free_ uint8_t *buf = malloc(RECV_BUFFER_SIZE);
        HostAddresses *h = userdata;
        bool changed = false;

        if (!buf)
                return 0;
        for (;;) {
                const uint8_t *p = buf;
                RtnlMessage m;
                size_t left;
                ssize_t k = recv_from_kernel(fd, buf);

                if (k == -EAGAIN)
                        break;
                /* ENOBUFS: announcements were lost; whatever else, read the table again */
                changed = true;
                if (k == -ENOBUFS)
                        continue;
                if (k < 0) {
                        log_debug_errno((int) k, "Egress proxy: reading route announcements failed: %m");
                        break;
                }
                /* A new local route counts at once, not only once the table was read again. */
                for (left = (size_t) k; rtnl_message_next(&p, &left, &m) > 0;)
                        if (h->known && m.type == RTM_NEWROUTE && m.has_route && rtnl_route_is_local(&m.route))
                                (void) add_route(&h->ranges, &h->n_ranges, &m.route);
        }
        if (changed)
                refresh(h);
        return 0;
}

static int netlink_open(int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

        fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int host_addresses_new(sd_event *e, HostAddresses **ret) {
        static const int groups[] = { RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR };
        HostAddresses *h;
        int r, one = 1, size = WATCH_RCVBUF;

        assert(e);
        assert(ret);

        h = calloc(1, sizeof(HostAddresses));
        if (!h)
                return -ENOMEM;
        h->event = sd_event_ref(e);
        h->watch_fd = h->dump_fd = -EBADF;
        h->dumping = AF_UNSPEC;

        /* Announcements first: a change during the first read is then not missed. */
        r = netlink_open(&h->watch_fd);
        if (r < 0)
                goto fail;
        (void) setsockopt(h->watch_fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
        for (size_t i = 0; i < ELEMENTSOF(groups); i++)
                if (setsockopt(h->watch_fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &groups[i], sizeof(groups[i])) < 0) {
                        r = -errno;
                        goto fail;
                }
        r = netlink_open(&h->dump_fd);
        if (r < 0)
                goto fail;
        /* The kernel then sends table local only (since 4.20); rtnl_route_is_local() filters anyway. */
        (void) setsockopt(h->dump_fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof(one));

        r = sd_event_add_time_relative(e, &h->retry, CLOCK_MONOTONIC, DUMP_RETRY_USEC, USEC_PER_SEC / 10, on_retry, h);
        if (r >= 0)
                r = sd_event_source_set_enabled(h->retry, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_io(e, &h->watch_io, h->watch_fd, EPOLLIN, on_watch, h);
        if (r >= 0)
                r = sd_event_add_io(e, &h->dump_io, h->dump_fd, EPOLLIN, on_dump, h);
        if (r >= 0) {
                (void) sd_event_source_set_description(h->retry, "host-addresses-retry");
                (void) sd_event_source_set_description(h->watch_io, "host-addresses-watch");
                (void) sd_event_source_set_description(h->dump_io, "host-addresses-dump");
        }
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(h->retry, "host-addresses-retry");
        (void) sd_event_source_set_description(h->watch_io, "host-addresses-watch");
        (void) sd_event_source_set_description(h->dump_io, "host-addresses-dump");

        /* The first read before anything is relayed: it takes a few milliseconds. */
        r = dump_start(h, AF_INET);
        while (r >= 0) {
                struct pollfd pfd = { .fd = h->dump_fd, .events = POLLIN };

                r = poll(&pfd, 1, DUMP_FIRST_TIMEOUT_MSEC);
                if (r == 0)
                        r = -ETIMEDOUT;
                else if (r > 0) {
                        r = dump_read(h);
                        if (r > 0) {
                                dump_finish(h);
                                break;
                        }
                } else if (errno == EINTR)
                        r = 0;
                else
                        r = -errno;
        }
        if (r < 0)
                dump_failed(h, r);

        *ret = h;
        return 0;

fail:
        host_addresses_free(h);
        return r;
}

HostAddresses *host_addresses_free(HostAddresses *h) {
        if (!h)
                return NULL;
        sd_event_source_disable_unref(h->watch_io);
        sd_event_source_disable_unref(h->dump_io);
        sd_event_source_disable_unref(h->retry);
        safe_close(h->watch_fd);
        safe_close(h->dump_fd);
        sd_event_unref(h->event);
        free(h->ranges);
        free(h->next);
        free(h);
        return NULL;
}

int host_addresses_get(HostAddresses *h, const AddressRange **ret, size_t *ret_n) {
        assert(ret);
        assert(ret_n);

        if (!h || !h->known)
                return -ENODATA;
        *ret = h->ranges;
        *ret_n = h->n_ranges;
        return 0;
}
