/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
        static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

        if (*family == AF_INET6 && memcmp(addr, prefix, sizeof(prefix)) == 0) {
                memmove(addr, addr + 12, 4);
                memset(addr + 4, 0, 12);
                *family = AF_INET;
        }
}

AddressClass address_classify(int family, const void *addr) {
        static const struct {
                const char *range;
                AddressClass class;
        } table[] = {
                { "127.0.0.0/8", ADDRESS_LOOPBACK },
                { "::1/128", ADDRESS_LOOPBACK },
                { "169.254.0.0/16", ADDRESS_LINK_LOCAL },
                { "fe80::/10", ADDRESS_LINK_LOCAL },
                { "10.0.0.0/8", ADDRESS_PRIVATE },
                { "172.16.0.0/12", ADDRESS_PRIVATE },
                { "192.168.0.0/16", ADDRESS_PRIVATE },
                { "100.64.0.0/10", ADDRESS_PRIVATE },
                { "fc00::/7", ADDRESS_PRIVATE },
                { "0.0.0.0/8", ADDRESS_UNSPECIFIED },
                { "::/128", ADDRESS_UNSPECIFIED },
                { "224.0.0.0/4", ADDRESS_MULTICAST },
                { "255.255.255.255/32", ADDRESS_MULTICAST },
                { "ff00::/8", ADDRESS_MULTICAST },
                { "240.0.0.0/4", ADDRESS_RESERVED },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                AddressRange *r = NULL;
                size_t n = 0;
                bool hit;

                if (address_ranges_parse_one(table[i].range, &r, &n) < 0) {
                        free(r);
                        return _ADDRESS_CLASS_INVALID;
                }
                hit = address_range_contains(r, family, addr);
                free(r);
                if (hit)
                        return table[i].class;
        }
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

static bool label_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Lower-cased labels, no trailing dot, into ret (size n). */
static int normalize_labels(const char *s, char *ret, size_t n) {
        size_t l = strlen(s), label = 0;

        if (l > 0 && s[l - 1] == '.')
                l--;
        if (l == 0 || l > HOST_NAME_MAX_LEN || l >= n)
                return -EINVAL;
        for (size_t i = 0; i < l; i++) {
                char c = (char) tolower((unsigned char) s[i]);

                if (c == '.') {
                        if (label == 0)
                                return -EINVAL;
                        label = 0;
                } else if (label_char(c)) {
                        if (++label > 63)
                                return -EINVAL;
                } else
                        return -EINVAL;
                ret[i] = c;
        }
        if (label == 0)
                return -EINVAL;
        ret[l] = 0;
        return 0;
}

int host_name_normalize(const char *s, char ret[static HOST_NAME_MAX_LEN + 1]) {
        struct in6_addr a6;

        /* An IPv6 literal as a name: "::1" (brackets are the caller's to remove). */
        if (strchr(s, ':')) {
                if (strlen(s) > HOST_NAME_MAX_LEN || inet_pton(AF_INET6, s, &a6) != 1)
                        return -EINVAL;
                for (size_t i = 0; s[i]; i++)
                        ret[i] = (char) tolower((unsigned char) s[i]);
                ret[strlen(s)] = 0;
                return 0;
        }
        return normalize_labels(s, ret, HOST_NAME_MAX_LEN + 1);
}

int domain_pattern_normalize(const char *s, char ret[static HOST_NAME_MAX_LEN + 3]) {
        if (startswith(s, "*.")) {
                ret[0] = '*';
                ret[1] = '.';
                return normalize_labels(s + 2, ret + 2, HOST_NAME_MAX_LEN + 1);
        }
        return host_name_normalize(s, ret);
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
