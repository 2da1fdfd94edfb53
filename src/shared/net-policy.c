/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "net-policy.h"

static int append_range(AddressRange **list, size_t *n, int family, const char *addr, unsigned prefixlen) {
        AddressRange r = { .family = family, .prefixlen = prefixlen }, *l;

        if (inet_pton(family, addr, r.addr) != 1)
                return -EINVAL;
        l = realloc(*list, (*n + 1) * sizeof(AddressRange));
        if (!l)
                return -ENOMEM;
        l[(*n)++] = r;
        *list = l;
        return 0;
}

static const struct {
        const char *keyword;
        const char *ranges;
} address_keywords[] = {
        { "any", "0.0.0.0/0 ::/0" },
        { "localhost", "127.0.0.0/8 ::1/128" },
        { "link-local", "169.254.0.0/16 fe80::/64" },
        { "multicast", "224.0.0.0/4 ff00::/8" },
        { "private", "10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 100.64.0.0/10 fc00::/7" },
};

int address_ranges_parse_one(const char *s, AddressRange **list, size_t *n) {
        char buf[INET6_ADDRSTRLEN + 8];
        const char *slash;
        unsigned long prefixlen;
        int family, r;

        for (size_t i = 0; i < ELEMENTSOF(address_keywords); i++)
                if (streq(s, address_keywords[i].keyword))
                        return address_ranges_parse(address_keywords[i].ranges, list, n);

        slash = strchr(s, '/');
        if (strlen(s) >= sizeof(buf))
                return -EINVAL;
        snprintf(buf, sizeof(buf), "%.*s", slash ? (int) (slash - s) : (int) strlen(s), s);
        family = strchr(buf, ':') ? AF_INET6 : AF_INET;
        if (slash) {
                char *end;

                if (!isdigit((unsigned char) slash[1]))
                        return -EINVAL;
                errno = 0;
                prefixlen = strtoul(slash + 1, &end, 10);
                if (errno != 0 || *end != 0 || prefixlen > (family == AF_INET ? 32U : 128U))
                        return -EINVAL;
        } else
                prefixlen = family == AF_INET ? 32 : 128;

        r = append_range(list, n, family, buf, (unsigned) prefixlen);
        if (r < 0)
                return r;
        /* Keep the network address only: 10.1.2.3/8 is 10.0.0.0/8. */
        for (unsigned bit = (unsigned) prefixlen; bit < (family == AF_INET ? 32U : 128U); bit++)
                (*list)[*n - 1].addr[bit / 8] &= (uint8_t) ~(0x80U >> (bit % 8));

        /* ::ffff:10.0.0.0/104 is 10.0.0.0/8: addresses are checked unmapped (address_unmap()) */
        if (family == AF_INET6 && prefixlen >= 96) {
                static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
                AddressRange *l = &(*list)[*n - 1];

                if (memcmp(l->addr, mapped, sizeof(mapped)) == 0) {
                        memmove(l->addr, l->addr + 12, 4);
                        memset(l->addr + 4, 0, 12);
                        l->family = AF_INET;
                        l->prefixlen -= 96;
                }
        }
        return 0;
}

int address_ranges_parse(const char *s, AddressRange **list, size_t *n) {
        while (*s) {
                char word[128];
                size_t l;
                int r;

                s += strspn(s, " \t");
                l = strcspn(s, " \t");
                if (l == 0)
                        break;
                if (l >= sizeof(word))
                        return -EINVAL;
                memcpy(word, s, l);
                word[l] = 0;
                r = address_ranges_parse_one(word, list, n);
                if (r < 0)
                        return r;
                s += l;
        }
        return 0;
}

int address_range_format(const AddressRange *r, char *buf, size_t n) {
        char a[INET6_ADDRSTRLEN];

        if (!inet_ntop(r->family, r->addr, a, sizeof(a)))
                return -errno;
        return snprintf(buf, n, "%s/%u", a, r->prefixlen) < (int) n ? 0 : -ENOBUFS;
}

bool address_range_contains(const AddressRange *r, int family, const void *addr) {
        const uint8_t *a = addr;
        unsigned full, rest;

        if (r->family != family)
                return false;
        full = r->prefixlen / 8;
        rest = r->prefixlen % 8;
        if (memcmp(r->addr, a, full) != 0)
                return false;
        if (rest == 0)
                return true;
        return ((r->addr[full] ^ a[full]) & (uint8_t) (0xffU << (8 - rest))) == 0;
}

bool address_in_ranges(const AddressRange *l, size_t n, int family, const void *addr) {
        for (size_t i = 0; i < n; i++)
                if (address_range_contains(&l[i], family, addr))
                        return true;
        return false;
}

void address_unmap(int *family, uint8_t addr[static 16]) {
        static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        static const uint8_t zero[12] = {};

        if (*family != AF_INET6)
                return;
        if (memcmp(addr, mapped, sizeof(mapped)) != 0) {
                /* ::a.b.c.d, but not :: and ::1, which are IPv6's own */
                if (memcmp(addr, zero, sizeof(zero)) != 0 ||
                    (addr[12] == 0 && addr[13] == 0 && addr[14] == 0 && addr[15] <= 1))
                        return;
        }
        memmove(addr, addr + 12, 4);
        memset(addr + 4, 0, 12);
        *family = AF_INET;
}

#define V4(a, b, c, d, len) { AF_INET, { a, b, c, d }, len }
#define V6(a, b, len) { AF_INET6, { a, b }, len }

AddressClass address_classify(int family, const void *addr) {
        static const struct {
                AddressRange range;
                AddressClass class;
        } table[] = {
                { V4(127, 0, 0, 0, 8), ADDRESS_LOOPBACK },
                { { AF_INET6, { [15] = 1 }, 128 }, ADDRESS_LOOPBACK },
                { V4(169, 254, 0, 0, 16), ADDRESS_LINK_LOCAL },
                { V6(0xfe, 0x80, 10), ADDRESS_LINK_LOCAL },
                { V4(10, 0, 0, 0, 8), ADDRESS_PRIVATE },
                { V4(172, 16, 0, 0, 12), ADDRESS_PRIVATE },
                { V4(192, 168, 0, 0, 16), ADDRESS_PRIVATE },
                { V4(100, 64, 0, 0, 10), ADDRESS_PRIVATE },
                { V6(0xfc, 0x00, 7), ADDRESS_PRIVATE },
                { V4(0, 0, 0, 0, 8), ADDRESS_UNSPECIFIED },
                { V6(0, 0, 128), ADDRESS_UNSPECIFIED },
                { V4(224, 0, 0, 0, 4), ADDRESS_MULTICAST },
                { V4(255, 255, 255, 255, 32), ADDRESS_MULTICAST },
                { V6(0xff, 0x00, 8), ADDRESS_MULTICAST },
                { V4(240, 0, 0, 0, 4), ADDRESS_RESERVED },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (address_range_contains(&table[i].range, family, addr))
                        return table[i].class;
        return ADDRESS_PUBLIC;
}

const char *address_class_to_string(AddressClass c) {
        static const char *const table[_ADDRESS_CLASS_MAX] = {
                [ADDRESS_PUBLIC] = "public",
                [ADDRESS_LOOPBACK] = "loopback",
                [ADDRESS_LINK_LOCAL] = "link-local",
                [ADDRESS_PRIVATE] = "private",
                [ADDRESS_UNSPECIFIED] = "unspecified",
                [ADDRESS_MULTICAST] = "multicast",
                [ADDRESS_RESERVED] = "reserved",
        };
        if (c < 0 || c >= _ADDRESS_CLASS_MAX)
                return NULL;
        return table[c];
}


/* --- hosts ----------------------------------------------------------------------- */

static int hex_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* One part of a numeric IPv4 address, as strtoul(..., 0) reads it after a digit. */
static int ipv4_parse_part(const char *s, size_t n, uint64_t *ret) {
        unsigned base = 10;
        uint64_t v = 0;
        size_t i = 0;

        if (n == 0 || s[0] < '0' || s[0] > '9')
                return -EINVAL;
        if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                base = 16;
                i = 2;
                if (n == 2)
                        return -EINVAL; /* "0x" alone: inet_aton() reads "0" and stops at "x" */
        } else if (s[0] == '0')
                base = 8;

        for (; i < n; i++) {
                int d = hex_value(s[i]);

                if (d < 0 || (unsigned) d >= base)
                        return -EINVAL;
                v = v * base + (unsigned) d;
                if (v > UINT32_MAX)
                        return -EINVAL;
        }
        *ret = v;
        return 0;
}

int ipv4_parse_numeric(const char *s, size_t n, uint8_t ret[static 4]) {
        uint64_t parts[4];
        size_t k = 0, start = 0;
        uint32_t v;

        for (size_t i = 0; i <= n; i++) {
                if (i < n && s[i] != '.')
                        continue;
                if (k >= 4 || ipv4_parse_part(s + start, i - start, &parts[k]) < 0)
                        return -EINVAL;
                k++;
                start = i + 1;
        }
        /* Every part but the last is one byte; the last fills the rest. */
        for (size_t i = 0; i + 1 < k; i++)
                if (parts[i] > 0xff)
                        return -EINVAL;
        if (parts[k - 1] > (UINT32_MAX >> (8 * (k - 1))))
                return -EINVAL;
        v = (uint32_t) parts[k - 1];
        for (size_t i = 0; i + 1 < k; i++)
                v |= (uint32_t) parts[i] << (24 - 8 * i);
        ret[0] = (uint8_t) (v >> 24);
        ret[1] = (uint8_t) (v >> 16);
        ret[2] = (uint8_t) (v >> 8);
        ret[3] = (uint8_t) v;
        return 0;
}

static bool label_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* The last label "is a number", so the whole must be an address (see net-policy.h). */
static bool label_is_number(const char *s, size_t n) {
        if (n >= 2 && s[0] == '0' && s[1] == 'x') {
                for (size_t i = 2; i < n; i++)
                        if (hex_value(s[i]) < 0)
                                return false;
                return true;
        }
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return n > 0;
}

int net_host_from_address(int family, const uint8_t *addr, NetHost *h) {
        uint8_t a[16] = {};

        if (family != AF_INET && family != AF_INET6)
                return -EAFNOSUPPORT;
        memcpy(a, addr, family == AF_INET ? 4 : 16);
        address_unmap(&family, a);
        *h = (NetHost) { .family = family };
        memcpy(h->addr, a, sizeof(a));
        if (!inet_ntop(family, a, h->text, sizeof(h->text)))
                return -errno;
        return 0;
}

int net_host_parse(const char *s, size_t n, NetHost *ret) {
        char buf[HOST_NAME_MAX_LEN + 1];
        size_t label = 0, last = 0;

        assert(s || n == 0);
        assert(ret);

        if (n == 0 || memchr(s, 0, n))
                return -EINVAL;

        if (memchr(s, ':', n)) {
                struct in6_addr a6;

                /* A zone id names an interface of this host, never a destination of ours. */
                if (memchr(s, '%', n) || n >= INET6_ADDRSTRLEN)
                        return -EINVAL;
                memcpy(buf, s, n);
                buf[n] = 0;
                if (inet_pton(AF_INET6, buf, &a6) != 1)
                        return -EINVAL;
                return net_host_from_address(AF_INET6, a6.s6_addr, ret);
        }

        if (s[n - 1] == '.')
                n--;
        if (n == 0)
                return -EINVAL;
        if (n > HOST_NAME_MAX_LEN)
                return -ENAMETOOLONG;
        for (size_t i = 0; i < n; i++) {
                char c = (char) tolower((unsigned char) s[i]);

                if (c == '.') {
                        if (label == 0)
                                return -EINVAL;
                        label = 0;
                        last = i + 1;
                } else if (label_char(c)) {
                        if (++label > 63)
                                return -ENAMETOOLONG;
                } else
                        return -EINVAL;
                buf[i] = c;
        }
        if (label == 0)
                return -EINVAL;
        buf[n] = 0;

        if (label_is_number(buf + last, n - last)) {
                uint8_t a[4];

                if (ipv4_parse_numeric(buf, n, a) < 0)
                        return -EINVAL;
                return net_host_from_address(AF_INET, a, ret);
        }
        *ret = (NetHost) { .family = AF_UNSPEC };
        memcpy(ret->text, buf, n + 1);
        return 0;
}

bool net_host_is_single_label(const NetHost *h) {
        return h->family == AF_UNSPEC && !strchr(h->text, '.');
}

int domain_pattern_normalize(const char *s, char ret[static HOST_NAME_MAX_LEN + 3]) {
        NetHost h;
        int r;

        if (startswith(s, "*.")) {
                /* below a name only: "*.10.0.0.1" means nothing */
                r = net_host_parse(s + 2, strlen(s + 2), &h);
                if (r < 0)
                        return r;
                if (h.family != AF_UNSPEC || s[strlen(s) - 1] == '.')
                        return -EINVAL;
                ret[0] = '*';
                ret[1] = '.';
                strcpy(ret + 2, h.text);
                return 0;
        }
        r = net_host_parse(s, strlen(s), &h);
        if (r < 0)
                return r;
        strcpy(ret, h.text);
        return 0;
}

bool domain_pattern_is_valid(const char *s) {
        char buf[HOST_NAME_MAX_LEN + 3];

        return domain_pattern_normalize(s, buf) >= 0;
}

bool domain_matches(const char *pattern, const char *host) {
        size_t lp, lh;

        if (!startswith(pattern, "*."))
                return strcasecmp(pattern, host) == 0;
        /* "*.example.com": names that end in ".example.com", at any depth */
        pattern++;
        lp = strlen(pattern);
        lh = strlen(host);
        return lh > lp && strcasecmp(host + lh - lp, pattern) == 0;
}

bool domain_matches_any(char * const *patterns, const char *host) {
        for (size_t i = 0; patterns && patterns[i]; i++)
                if (domain_matches(patterns[i], host))
                        return true;
        return false;
}

/* --- the policy ------------------------------------------------------------------------ */

const char *proxy_policy_check_name(const ProxyPolicy *p, const NetHost *host) {
        assert(p);
        assert(host);

        if (domain_matches_any(p->denied, host->text) || domain_matches_any(p->session_denied, host->text))
                return "denied_domain";
        if (p->allowed && p->allowed[0] && !domain_matches_any(p->allowed, host->text))
                return "not_allowed";
        if (p->session_allowed && !domain_matches_any(p->session_allowed, host->text))
                return "not_allowed";
        if (net_host_is_single_label(host))
                return "single_label";
        return NULL;
}

static const char *check_one_address(const ProxyPolicy *p, int family, const uint8_t a[static 16]) {
        char text[INET6_ADDRSTRLEN];
        AddressClass c;

        /* An address literal in a denied list denies that address however it is reached. */
        if (inet_ntop(family, a, text, sizeof(text)) &&
            (domain_matches_any(p->denied, text) || domain_matches_any(p->session_denied, text)))
                return "denied_domain";
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

const char *proxy_policy_check_address(const ProxyPolicy *p, int family, const uint8_t addr[static 16]) {
        static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
        uint8_t a[16] = {};
        const char *why;

        assert(p);
        assert(family == AF_INET || family == AF_INET6);

        memcpy(a, addr, family == AF_INET ? 4 : 16);
        address_unmap(&family, a);
        why = check_one_address(p, family, a);
        if (!why && family == AF_INET6 && memcmp(a, nat64, sizeof(nat64)) == 0) {
                uint8_t v4[16] = {};

                memcpy(v4, a + 12, 4);
                why = check_one_address(p, AF_INET, v4);
        }
        return why;
}
