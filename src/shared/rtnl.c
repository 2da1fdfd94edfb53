/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "rtnl.h"

/* The message layout is read through memcpy() into aligned copies: a datagram buffer
 * promises nothing about alignment. */

static int parse_route(const uint8_t *p, size_t n, RtnlRoute *ret) {
        struct rtmsg rtm;
        size_t off, alen;
        bool have_dst = false;

        if (n < sizeof(rtm))
                return -EBADMSG;
        memcpy(&rtm, p, sizeof(rtm));
        if (rtm.rtm_family != AF_INET && rtm.rtm_family != AF_INET6)
                return 0; /* not ours to read (IPMR, MPLS, ...) */
        alen = rtm.rtm_family == AF_INET ? 4 : 16;
        if (rtm.rtm_dst_len > alen * 8)
                return -EBADMSG;

        *ret = (RtnlRoute) {
                .family = rtm.rtm_family,
                .table = rtm.rtm_table,
                .type = rtm.rtm_type,
                .dst_len = rtm.rtm_dst_len,
        };
        for (off = NLMSG_ALIGN(sizeof(rtm)); off < n;) {
                struct rtattr rta;
                size_t payload;

                if (n - off < sizeof(rta))
                        return -EBADMSG;
                memcpy(&rta, p + off, sizeof(rta));
                if (rta.rta_len < sizeof(rta) || rta.rta_len > n - off)
                        return -EBADMSG;
                payload = rta.rta_len - RTA_LENGTH(0);
                switch (rta.rta_type) {
                case RTA_DST:
                        if (payload != alen || have_dst)
                                return -EBADMSG;
                        memcpy(ret->dst, p + off + RTA_LENGTH(0), alen);
                        have_dst = true;
                        break;
                case RTA_TABLE:
                        if (payload != sizeof(uint32_t))
                                return -EBADMSG;
                        memcpy(&ret->table, p + off + RTA_LENGTH(0), sizeof(uint32_t));
                        break;
                }
                off += MIN((size_t) RTA_ALIGN(rta.rta_len), n - off);
        }
        if (!have_dst && ret->dst_len != 0)
                return -EBADMSG; /* a prefix of no address */
        for (unsigned bit = ret->dst_len; bit < alen * 8; bit++)
                ret->dst[bit / 8] &= (uint8_t) ~(0x80U >> (bit % 8));
        return 1;
}

int rtnl_message_next(const uint8_t **buf, size_t *len, RtnlMessage *ret) {
        struct nlmsghdr h;
        const uint8_t *payload;
        size_t n;
        int r;

        assert(buf && len && ret);

        if (*len == 0)
                return 0;
        if (*len < sizeof(h))
                return -EBADMSG;
        memcpy(&h, *buf, sizeof(h));
        if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > *len)
                return -EBADMSG;
        payload = *buf + NLMSG_HDRLEN;
        n = h.nlmsg_len - NLMSG_HDRLEN;

        *ret = (RtnlMessage) {
                .type = h.nlmsg_type,
                .flags = h.nlmsg_flags,
                .seq = h.nlmsg_seq,
                .pid = h.nlmsg_pid,
        };
        switch (h.nlmsg_type) {
        case NLMSG_ERROR:
        case NLMSG_DONE: {
                int32_t e = 0;

                if (n >= sizeof(e))
                        memcpy(&e, payload, sizeof(e));
                else if (h.nlmsg_type == NLMSG_ERROR)
                        return -EBADMSG;
                /* an errno is small and negative; anything else is no errno */
                if (e > 0 || e < -4095)
                        return -EBADMSG;
                ret->error = e;
                break;
        }
        case RTM_NEWROUTE:
        case RTM_DELROUTE:
                r = parse_route(payload, n, &ret->route);
                if (r < 0)
                        return r;
                ret->has_route = r > 0;
                break;
        }

        /* the last message of a datagram need not be padded */
        *buf += MIN((size_t) NLMSG_ALIGN(h.nlmsg_len), *len);
        *len -= MIN((size_t) NLMSG_ALIGN(h.nlmsg_len), *len);
        return 1;
}

bool rtnl_route_is_local(const RtnlRoute *r) {
        return r->table == RT_TABLE_LOCAL &&
               (r->type == RTN_LOCAL || r->type == RTN_BROADCAST || r->type == RTN_ANYCAST ||
                r->type == RTN_MULTICAST);
}

size_t rtnl_route_dump_request(int family, uint32_t seq, void *buf, size_t size) {
        struct {
                struct nlmsghdr h;
                struct rtmsg rtm;
                struct rtattr rta;
                uint32_t table;
        } req = {
                .h.nlmsg_len = sizeof(req),
                .h.nlmsg_type = RTM_GETROUTE,
                .h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
                .h.nlmsg_seq = seq,
                .rtm.rtm_family = (uint8_t) family,
                .rtm.rtm_table = RT_TABLE_LOCAL,
                .rta.rta_len = RTA_LENGTH(sizeof(uint32_t)),
                .rta.rta_type = RTA_TABLE,
                .table = RT_TABLE_LOCAL,
        };

        _Static_assert(sizeof(req) <= RTNL_DUMP_REQUEST_MAX, "RTNL_DUMP_REQUEST_MAX");
        if (size < sizeof(req))
                return 0;
        memcpy(buf, &req, sizeof(req));
        return sizeof(req);
}
