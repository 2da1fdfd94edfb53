/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "host-addresses.h"
#include "rtnl.h"
#include "tests.h"

/* Builds netlink datagrams by hand, as the kernel lays them out. */
typedef struct Dgram {
        uint8_t data[4096];
        size_t len;
} Dgram;

static size_t put_route(Dgram *d, uint16_t type, int family, uint8_t table8, uint8_t rtype, uint8_t dst_len,
                        const char *dst, long table32) {
        struct nlmsghdr h = { .nlmsg_type = type, .nlmsg_flags = NLM_F_MULTI, .nlmsg_seq = 7 };
        struct rtmsg rtm = { .rtm_family = (uint8_t) family, .rtm_table = table8, .rtm_type = rtype, .rtm_dst_len = dst_len };
        size_t start = d->len, off;

        off = start + NLMSG_HDRLEN;
        memcpy(d->data + off, &rtm, sizeof(rtm));
        off += NLMSG_ALIGN(sizeof(rtm));
        if (dst) {
                uint8_t a[16];
                size_t alen = family == AF_INET ? 4 : 16;
                struct rtattr rta = { .rta_len = (unsigned short) RTA_LENGTH(alen), .rta_type = RTA_DST };

                ASSERT(inet_pton(family, dst, a) == 1);
                memcpy(d->data + off, &rta, sizeof(rta));
                memcpy(d->data + off + RTA_LENGTH(0), a, alen);
                off += RTA_ALIGN(rta.rta_len);
        }
        if (table32 >= 0) {
                uint32_t t = (uint32_t) table32;
                struct rtattr rta = { .rta_len = RTA_LENGTH(sizeof(t)), .rta_type = RTA_TABLE };

                memcpy(d->data + off, &rta, sizeof(rta));
                memcpy(d->data + off + RTA_LENGTH(0), &t, sizeof(t));
                off += RTA_ALIGN(rta.rta_len);
        }
        h.nlmsg_len = (uint32_t) (off - start);
        memcpy(d->data + start, &h, sizeof(h));
        d->len = NLMSG_ALIGN(off);
        return start;
}

static void put_done(Dgram *d, int32_t error) {
        struct nlmsghdr h = { .nlmsg_len = NLMSG_LENGTH(sizeof(error)), .nlmsg_type = NLMSG_DONE, .nlmsg_flags = NLM_F_MULTI,
                              .nlmsg_seq = 7 };

        memcpy(d->data + d->len, &h, sizeof(h));
        memcpy(d->data + d->len + NLMSG_HDRLEN, &error, sizeof(error));
        d->len += NLMSG_ALIGN(h.nlmsg_len);
}

/* Reads all of a datagram: the number of messages, the local routes in out; < 0 when malformed. */
static int read_all(const Dgram *d, RtnlRoute *out, size_t *n_out, int *done_error) {
        const uint8_t *p = d->data;
        size_t left = d->len;
        RtnlMessage m;
        int r, n = 0;

        *n_out = 0;
        while ((r = rtnl_message_next(&p, &left, &m)) > 0) {
                n++;
                if (m.type == NLMSG_DONE)
                        *done_error = m.error;
                if (m.has_route && rtnl_route_is_local(&m.route))
                        out[(*n_out)++] = m.route;
        }
        return r < 0 ? r : n;
}

static void test_parse(void) {
        RtnlRoute routes[16];
        int done_error = 1;
        size_t n;
        Dgram d = {};

        put_route(&d, RTM_NEWROUTE, AF_INET, RT_TABLE_LOCAL, RTN_LOCAL, 32, "127.0.0.1", RT_TABLE_LOCAL);
        put_route(&d, RTM_NEWROUTE, AF_INET, RT_TABLE_LOCAL, RTN_LOCAL, 16, "10.99.1.2", -1); /* ip route add local 10.99.0.0/16 */
        put_route(&d, RTM_NEWROUTE, AF_INET, RT_TABLE_LOCAL, RTN_BROADCAST, 32, "10.231.7.255", RT_TABLE_LOCAL);
        put_route(&d, RTM_NEWROUTE, AF_INET, RT_TABLE_MAIN, RTN_UNICAST, 24, "10.231.7.0", RT_TABLE_MAIN);   /* not local */
        put_route(&d, RTM_NEWROUTE, AF_INET, RT_TABLE_UNSPEC, RTN_LOCAL, 32, "192.0.2.1", 1000);              /* another table */
        put_route(&d, RTM_NEWROUTE, AF_INET6, RT_TABLE_LOCAL, RTN_ANYCAST, 64, "fe80::", RT_TABLE_LOCAL);
        put_route(&d, RTM_NEWROUTE, AF_INET6, RT_TABLE_UNSPEC, RTN_LOCAL, 128, "2001:db8::5", RT_TABLE_LOCAL);
        put_route(&d, RTM_NEWROUTE, AF_INET, RT_TABLE_LOCAL, RTN_LOCAL, 0, NULL, -1);                        /* local default */
        put_route(&d, RTM_NEWROUTE, 128 /* RTNL_FAMILY_IPMR */, RT_TABLE_LOCAL, RTN_LOCAL, 0, NULL, -1);
        put_done(&d, 0);

        ASSERT(read_all(&d, routes, &n, &done_error) == 10);
        ASSERT(done_error == 0);
        ASSERT(n == 6);
        ASSERT(routes[0].family == AF_INET && routes[0].dst_len == 32 && memcmp(routes[0].dst, "\x7f\0\0\x01", 4) == 0);
        /* the host bits of a prefix are dropped */
        ASSERT(routes[1].dst_len == 16 && memcmp(routes[1].dst, "\x0a\x63\0\0", 4) == 0);
        ASSERT(routes[2].type == RTN_BROADCAST);
        ASSERT(routes[3].family == AF_INET6 && routes[3].type == RTN_ANYCAST && routes[3].dst[0] == 0xfe);
        ASSERT(routes[4].family == AF_INET6 && routes[4].dst[15] == 5 && routes[4].table == RT_TABLE_LOCAL);
        ASSERT(routes[5].dst_len == 0 && memcmp(routes[5].dst, "\0\0\0\0", 4) == 0);

        /* the last message need not be padded */
        {
                Dgram e = {};
                put_done(&e, -ENOENT);
                ASSERT(read_all(&e, routes, &n, &done_error) == 1 && done_error == -ENOENT);
        }
}

static void test_malformed(void) {
        RtnlRoute routes[16];
        int done_error;
        size_t n, at;
        Dgram d = {}, bad;
        struct nlmsghdr h;
        struct rtattr rta;
        struct rtmsg rtm;

        at = put_route(&d, RTM_NEWROUTE, AF_INET, RT_TABLE_LOCAL, RTN_LOCAL, 32, "127.0.0.1", RT_TABLE_LOCAL);
        ASSERT(read_all(&d, routes, &n, &done_error) == 1);

        /* a message longer than the datagram, shorter than its header */
        bad = d;
        memcpy(&h, bad.data + at, sizeof(h));
        h.nlmsg_len = (uint32_t) bad.len + 4;
        memcpy(bad.data + at, &h, sizeof(h));
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);
        h.nlmsg_len = 8;
        memcpy(bad.data + at, &h, sizeof(h));
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);
        bad.len = 10;
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);

        /* a route message too short for its rtmsg */
        bad = d;
        h = (struct nlmsghdr) { .nlmsg_len = NLMSG_LENGTH(4), .nlmsg_type = RTM_NEWROUTE };
        memcpy(bad.data, &h, sizeof(h));
        bad.len = NLMSG_ALIGN(h.nlmsg_len);
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);

        /* a prefix longer than the address */
        bad = d;
        memcpy(&rtm, bad.data + NLMSG_HDRLEN, sizeof(rtm));
        rtm.rtm_dst_len = 33;
        memcpy(bad.data + NLMSG_HDRLEN, &rtm, sizeof(rtm));
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);

        /* an RTA_DST of the wrong size, an attribute past the message, a zero-length one */
        bad = d;
        memcpy(&rta, bad.data + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(rtm)), sizeof(rta));
        ASSERT(rta.rta_type == RTA_DST);
        rta.rta_len = RTA_LENGTH(3);
        memcpy(bad.data + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(rtm)), &rta, sizeof(rta));
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);
        rta.rta_len = 200;
        memcpy(bad.data + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(rtm)), &rta, sizeof(rta));
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);
        rta.rta_len = 2;
        memcpy(bad.data + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(rtm)), &rta, sizeof(rta));
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);

        /* a prefix without an address */
        bad = (Dgram) {};
        put_route(&bad, RTM_NEWROUTE, AF_INET, RT_TABLE_LOCAL, RTN_LOCAL, 8, NULL, -1);
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);

        /* an error message must carry its errno, and a sane one */
        bad = (Dgram) {};
        h = (struct nlmsghdr) { .nlmsg_len = NLMSG_HDRLEN, .nlmsg_type = NLMSG_ERROR };
        memcpy(bad.data, &h, sizeof(h));
        bad.len = NLMSG_HDRLEN;
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);
        bad = (Dgram) {};
        put_done(&bad, 5);
        ASSERT(read_all(&bad, routes, &n, &done_error) == -EBADMSG);
}

static void test_request(void) {
        uint8_t buf[RTNL_DUMP_REQUEST_MAX];
        struct nlmsghdr h;
        struct rtmsg rtm;
        size_t n;

        ASSERT(rtnl_route_dump_request(AF_INET, 1, buf, 8) == 0);
        n = rtnl_route_dump_request(AF_INET6, 42, buf, sizeof(buf));
        ASSERT(n > NLMSG_HDRLEN);
        memcpy(&h, buf, sizeof(h));
        memcpy(&rtm, buf + NLMSG_HDRLEN, sizeof(rtm));
        ASSERT(h.nlmsg_len == n && h.nlmsg_type == RTM_GETROUTE && h.nlmsg_seq == 42);
        ASSERT(h.nlmsg_flags == (NLM_F_REQUEST | NLM_F_DUMP));
        ASSERT(rtm.rtm_family == AF_INET6 && rtm.rtm_table == RT_TABLE_LOCAL);
}

/* The kernel's own answer, through the daemon's reader: 127.0.0.1 is this host's. */
static void test_live(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        HostAddresses *h = NULL;
        const AddressRange *l;
        size_t n;
        int r;

        ASSERT(sd_event_new(&e) >= 0);
        r = host_addresses_new(e, &h);
        if (r < 0) {
                printf("# no rtnetlink here (%s): the live read is skipped\n", strerror(-r));
                return;
        }
        r = host_addresses_get(h, &l, &n);
        if (r < 0)
                printf("# the local table could not be read: the live read is skipped\n");
        else {
                printf("# %zu local routes\n", n);
                ASSERT(address_in_ranges(l, n, AF_INET, "\x7f\0\0\x01"));
                ASSERT(!address_in_ranges(l, n, AF_INET, "\xc0\x00\x02\xfe")); /* 192.0.2.254, TEST-NET-1 */
        }
        host_addresses_free(h);
}

int main(void) {
        test_parse();
        test_malformed();
        test_request();
        test_live();
        return TESTS_DONE();
}
