/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the rtnetlink reader with datagrams as the kernel (or anyone) might send them:
 * it must stay inside the buffer, always move on, and give only routes that make sense. */

#include <assert.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "net-policy.h"
#include "rtnl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *p = data;
        size_t left = size;
        RtnlMessage m;
        int r;

        while ((r = rtnl_message_next(&p, &left, &m)) > 0) {
                assert(p > data && p <= data + size && left == size - (size_t) (p - data));
                if (m.type == NLMSG_ERROR || m.type == NLMSG_DONE)
                        assert(m.error <= 0 && m.error >= -4095);
                if (m.has_route) {
                        AddressRange range = { .family = m.route.family, .prefixlen = m.route.dst_len };
                        size_t bits = m.route.family == AF_INET ? 32 : 128;

                        assert(m.type == RTM_NEWROUTE || m.type == RTM_DELROUTE);
                        assert(m.route.family == AF_INET || m.route.family == AF_INET6);
                        assert(m.route.dst_len <= bits);
                        for (size_t bit = m.route.dst_len; bit < 128; bit++)
                                assert(!(m.route.dst[bit / 8] & (0x80U >> (bit % 8))));
                        memcpy(range.addr, m.route.dst, 16);
                        assert(address_range_contains(&range, m.route.family, m.route.dst));
                        if (rtnl_route_is_local(&m.route))
                                assert(m.route.table == RT_TABLE_LOCAL);
                }
        }
        assert(r == 0 || r == -EBADMSG);

        /* our own request reads back as one message, not a route */
        if (size >= 5) {
                uint8_t req[RTNL_DUMP_REQUEST_MAX];
                uint32_t seq;
                size_t n;

                memcpy(&seq, data + 1, sizeof(seq));
                n = rtnl_route_dump_request(data[0], seq, req, data[0] % 2 ? sizeof(req) : data[0] % 32);
                if (n > 0) {
                        p = req;
                        left = n;
                        assert(rtnl_message_next(&p, &left, &m) == 1 && left == 0);
                        assert(m.type == RTM_GETROUTE && m.seq == seq && !m.has_route);
                }
        }
        return 0;
}
