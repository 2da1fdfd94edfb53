/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* A small reader of rtnetlink messages (routes), enough to learn this host's own addresses
 * from the kernel's local routing table. sd-netlink is not public API of libsystemd, so
 * this is ours: pure, bounded and validated, with a fuzzer (tests/fuzz/fuzz-rtnl.c). */

typedef struct RtnlRoute {
        int family;       /* AF_INET or AF_INET6 */
        uint32_t table;   /* RT_TABLE_*, RTA_TABLE when given */
        uint8_t type;     /* RTN_* */
        uint8_t dst_len;  /* prefix length */
        uint8_t dst[16];  /* RTA_DST, host bits cleared; all zero without one (a default route) */
} RtnlRoute;

typedef struct RtnlMessage {
        uint16_t type;    /* NLMSG_DONE, NLMSG_ERROR, RTM_NEWROUTE, RTM_NEWADDR, ... */
        uint16_t flags;   /* NLM_F_* */
        uint32_t seq;
        uint32_t pid;
        int error;        /* NLMSG_ERROR (0: an ack), NLMSG_DONE: a negative errno or 0 */
        bool has_route;   /* RTM_NEWROUTE or RTM_DELROUTE of an IPv4 or IPv6 route: in route */
        RtnlRoute route;
} RtnlMessage;

/* The next message of a datagram: 1 with *ret filled and *buf, *len moved past it; 0 when
 * nothing is left; -EBADMSG when the rest is malformed (a length that does not fit, a route
 * attribute of the wrong size, a prefix longer than the address): then the datagram says
 * nothing reliable and the reader must start over. */
int rtnl_message_next(const uint8_t **buf, size_t *len, RtnlMessage *ret);

/* A route that delivers to this host: in the local table, of type local (an address of
 * this host, or a prefix such as "ip route add local 10.99.0.0/16 dev lo"), broadcast,
 * anycast or multicast. */
bool rtnl_route_is_local(const RtnlRoute *r);

/* An RTM_GETROUTE dump request for the local table of one family (the kernel filters when
 * NETLINK_GET_STRICT_CHK is on; rtnl_route_is_local() filters anyway). Returns its size, or
 * 0 when buf is too small (RTNL_DUMP_REQUEST_MAX bytes always do). */
#define RTNL_DUMP_REQUEST_MAX 64
size_t rtnl_route_dump_request(int family, uint32_t seq, void *buf, size_t size);
