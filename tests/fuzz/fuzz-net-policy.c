/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes host and address normalization and the policy made with them: a host parses to
 * one canonical form, which parses to itself; a name is never something inet_aton() or
 * inet_pton() would take for an address; our IPv4 reader agrees with glibc's inet_aton();
 * and every way to write an address gets the policy's answer for that address. */

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <sys/socket.h>

#include "net-policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *check_v4(const ProxyPolicy *p, const uint8_t v4[4]) {
        uint8_t a[16] = {};

        memcpy(a, v4, 4);
        return proxy_policy_check_address(p, AF_INET, a);
}

static void check_host(const char *s, size_t n) {
        char *denied[2] = {};
        ProxyPolicy p = { .denied = denied };
        NetHost h, again;
        int r;

        r = net_host_parse(s, n, &h);
        if (r < 0) {
                assert(r == -EINVAL || r == -ENAMETOOLONG);
                return;
        }
        assert(net_host_parse(h.text, strlen(h.text), &again) == 0);
        assert(again.family == h.family && streq(again.text, h.text) && memcmp(again.addr, h.addr, 16) == 0);

        if (h.family == AF_UNSPEC) {
                struct in_addr a4;
                struct in6_addr a6;

                assert(strlen(h.text) <= HOST_NAME_MAX_LEN);
                for (const char *c = h.text; *c; c++)
                        assert(islower((unsigned char) *c) || isdigit((unsigned char) *c) || strchr("-_.", *c));
                assert(inet_aton(h.text, &a4) == 0);
                assert(inet_pton(AF_INET6, h.text, &a6) != 1);
        } else {
                int family = h.family;
                uint8_t a[16];

                memcpy(a, h.addr, 16);
                address_unmap(&family, a);
                assert(family == h.family); /* already unmapped */
        }

        /* a host on the denied list is denied, however it was written */
        denied[0] = h.text;
        assert(proxy_policy_check_name(&p, &h));
        assert(streq(proxy_policy_check_name(&p, &h), "denied_domain"));
        if (h.family != AF_UNSPEC)
                assert(streq_ptr(proxy_policy_check_address(&p, h.family, h.addr), "denied_domain"));

        /* on both allow lists: only a single label is still refused, and only a name is one */
        {
                ProxyPolicy a = { .allowed = denied, .session_allowed = denied };
                const char *why = proxy_policy_check_name(&a, &h);

                assert(!why || (streq(why, "single_label") && net_host_is_single_label(&h)));
                assert(!net_host_is_single_label(&h) || h.family == AF_UNSPEC);
                a.session_allowed = (char *[]) { NULL };
                assert(streq_ptr(proxy_policy_check_name(&a, &h), "not_allowed"));
        }
}

static void check_numeric(const char *s, size_t n) {
        uint8_t ours[4];
        struct in_addr theirs;
        bool ok;

        /* inet_aton() stops at a NUL and takes trailing whitespace and what follows */
        for (size_t i = 0; i < n; i++)
                if (s[i] == 0 || isspace((unsigned char) s[i]))
                        return;
        ok = ipv4_parse_numeric(s, n, ours) == 0;
        assert(ok == (inet_aton(s, &theirs) != 0));
        if (ok)
                assert(memcmp(ours, &theirs, 4) == 0);
}

static void check_pattern(const char *s) {
        char a[HOST_NAME_MAX_LEN + 3], b[HOST_NAME_MAX_LEN + 3];

        if (domain_pattern_normalize(s, a) < 0)
                return;
        assert(domain_pattern_normalize(a, b) == 0 && streq(a, b));
        if (!startswith(a, "*."))
                assert(domain_matches(a, a));
        else
                assert(!domain_matches(a, a + 2));
}

static void check_ranges(const char *s) {
        AddressRange *l = NULL, *again = NULL;
        size_t n = 0, m = 0;

        if (address_ranges_parse(s, &l, &n) >= 0)
                for (size_t i = 0; i < n; i++) {
                        char buf[64];

                        assert(l[i].prefixlen <= (l[i].family == AF_INET ? 32U : 128U));
                        assert(address_range_format(&l[i], buf, sizeof(buf)) == 0);
                        assert(address_ranges_parse_one(buf, &again, &m) == 0);
                        assert(again[m - 1].family == l[i].family && again[m - 1].prefixlen == l[i].prefixlen);
                        assert(memcmp(again[m - 1].addr, l[i].addr, 16) == 0);
                        assert(address_range_contains(&l[i], l[i].family, l[i].addr));
                }
        free(l);
        free(again);
}

/* One address, four ways to reach it over IPv6: the same answer. */
static void check_addresses(const uint8_t *data, size_t size) {
        static const AddressRange own[] = { { AF_INET, { 198, 51, 100, 0 }, 24 }, { AF_INET6, { 0x20, 0x01, 0x0d, 0xb8 }, 32 } };
        static const AddressRange except[] = { { AF_INET, { 10, 231, 7, 2 }, 32 } };
        ProxyPolicy p = { .host_addresses = own, .n_host_addresses = 2, .allowed_ranges = except, .n_allowed_ranges = 1 };
        uint8_t v6[16] = {};
        const char *why;

        if (size < 4)
                return;
        why = check_v4(&p, data);
        memcpy(v6 + 12, data, 4);
        v6[10] = v6[11] = 0xff;
        assert(streq_ptr(proxy_policy_check_address(&p, AF_INET6, v6), why));
        v6[10] = v6[11] = 0;
        if (data[0] | data[1] | data[2] || data[3] > 1) /* ::, ::1 are IPv6's */
                assert(streq_ptr(proxy_policy_check_address(&p, AF_INET6, v6), why));
        v6[1] = 0x64, v6[2] = 0xff, v6[3] = 0x9b; /* NAT64: at least as strict */
        if (why)
                assert(proxy_policy_check_address(&p, AF_INET6, v6));
        if (size >= 16)
                (void) proxy_policy_check_address(&p, AF_INET6, data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s;

        if (size > 4096)
                return 0;
        check_host((const char *) data, size);
        check_addresses(data, size);

        s = strndup((const char *) data, size);
        if (!s)
                return 0;
        check_numeric(s, strlen(s));
        check_pattern(s);
        check_ranges(s);
        if (size > 0) {
                size_t split = data[0] % (strlen(s) + 1);
                char c = s[split];

                /* a pattern and a host: the bytes before the split and after it */
                s[split] = 0;
                (void) domain_matches(s, c ? s + split + 1 : s + split);
                s[split] = c;
        }
        free(s);
        return 0;
}
