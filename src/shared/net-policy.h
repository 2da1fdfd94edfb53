/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <netinet/in.h>

#include "macro.h"

/* The egress policy's vocabulary: address ranges, host names and domain patterns. Pure
 * functions, so that the proxy's decisions can be tested without a network. */

typedef struct AddressRange {
        int family;          /* AF_INET or AF_INET6 */
        uint8_t addr[16];    /* network byte order; 4 bytes used for AF_INET */
        unsigned prefixlen;
} AddressRange;

/* "10.0.0.0/8", "fe80::/10", a bare address (a /32 or /128), or one of the keywords
 * "any", "localhost", "link-local", "multicast", "private" (several ranges each), as
 * systemd's IPAddressAllow= knows most of them. Appends to *list. */
int address_ranges_parse_one(const char *s, AddressRange **list, size_t *n);
/* Space-separated words of the above. */
int address_ranges_parse(const char *s, AddressRange **list, size_t *n);
/* "10.0.0.0/8" */
int address_range_format(const AddressRange *r, char *buf, size_t n);

bool address_range_contains(const AddressRange *r, int family, const void *addr);
bool address_in_ranges(const AddressRange *l, size_t n, int family, const void *addr);

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4 address. Rewrites *family
 * and addr (16 bytes) in place. */
void address_unmap(int *family, uint8_t addr[static 16]);

typedef enum AddressClass {
        ADDRESS_PUBLIC,
        ADDRESS_LOOPBACK,     /* 127.0.0.0/8, ::1 */
        ADDRESS_LINK_LOCAL,   /* 169.254.0.0/16 (cloud metadata lives there), fe80::/10 */
        ADDRESS_PRIVATE,      /* RFC 1918, 100.64.0.0/10, fc00::/7 */
        ADDRESS_UNSPECIFIED,  /* 0.0.0.0/8, :: */
        ADDRESS_MULTICAST,    /* 224.0.0.0/4, 255.255.255.255, ff00::/8 */
        ADDRESS_RESERVED,     /* 240.0.0.0/4 */
        _ADDRESS_CLASS_MAX,
        _ADDRESS_CLASS_INVALID = -EINVAL,
} AddressClass;

AddressClass address_classify(int family, const void *addr);
const char *address_class_to_string(AddressClass c);

/* A host name as a client may ask the proxy for: labels of [A-Za-z0-9_-], at most 253
 * bytes. Lower-cases it and drops one trailing dot into ret (NAME_MAX_LEN + 1 bytes). */
#define HOST_NAME_MAX_LEN 253
int host_name_normalize(const char *s, char ret[static HOST_NAME_MAX_LEN + 1]);

/* "example.com" (that name only) or "*.example.com" (every name below it, not the name
 * itself); an IP address literal also counts as a name. Lower-cased into ret. */
int domain_pattern_normalize(const char *s, char ret[static HOST_NAME_MAX_LEN + 3]);
bool domain_pattern_is_valid(const char *s);
/* host: normalized (host_name_normalize) */
bool domain_matches(const char *pattern, const char *host);
bool domain_matches_any(char * const *patterns, const char *host);
