/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <netinet/in.h>

#include "macro.h"

/* The egress policy's vocabulary: address ranges, hosts as clients name them, domain
 * patterns, and the decisions made with them. Pure functions, so that the proxy's
 * decisions can be tested (and fuzzed) without a network. */

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

/* An IPv6 address that the kernel treats as an IPv4 one is that IPv4 address: IPv4-mapped
 * (::ffff:a.b.c.d, which a dual-stack socket connects to over IPv4) and IPv4-compatible
 * (::a.b.c.d but :: and ::1, which the sit driver tunnels to a.b.c.d). Rewrites *family
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

/* The IPv4 notations inet_aton() accepts, and only those: one to four parts separated by
 * dots, each decimal, octal (leading 0) or hexadecimal (0x), the last part filling the
 * bytes that are left ("127.1", "0x7f000001", "0177.0.0.1", "2130706433"). No whitespace,
 * no trailing garbage: exactly n bytes. */
int ipv4_parse_numeric(const char *s, size_t n, uint8_t ret[static 4]);

/* A host as a client names it, normalized once, where it comes in: every later check sees
 * only this form.
 *  - IPv6 literals (no brackets): as inet_ntop() writes them; IPv4-mapped and -compatible
 *    ones become their IPv4 address (address_unmap()); zone ids ("%eth0") are refused.
 *  - A name whose last label is a number (all digits, or 0x and hex digits) is an IPv4
 *    literal in one of inet_aton()'s notations, or invalid: "0x7f.1" is 127.0.0.1, and
 *    "1.2.3.256" is no name either. A name is never something the resolver could take
 *    for an address.
 *  - Names: labels of [A-Za-z0-9_-] (at most 63 bytes each, 253 in all), lower-cased,
 *    one trailing dot dropped. */
#define HOST_NAME_MAX_LEN 253
typedef struct NetHost {
        int family;             /* AF_UNSPEC: a name; AF_INET or AF_INET6: an address literal */
        uint8_t addr[16];
        char text[HOST_NAME_MAX_LEN + 1]; /* the canonical form */
} NetHost;

/* s: n bytes, not NUL-terminated. -EINVAL when it is no valid host, -ENAMETOOLONG when a
 * name or a label is too long. */
int net_host_parse(const char *s, size_t n, NetHost *ret);
/* An address (4 or 16 bytes) as a host, as net_host_parse() would give it. */
int net_host_from_address(int family, const uint8_t *addr, NetHost *ret);
/* A name of one label ("intranet", "localhost"): the resolver would try it in its search
 * domains, so the proxy never looks one up. */
bool net_host_is_single_label(const NetHost *h);

/* "example.com" (that name only) or "*.example.com" (every name below it, not the name
 * itself); an IP address literal also counts as a name, in its canonical form (so
 * "0x7f.1" is "127.0.0.1"). Normalized (net_host_parse()) into ret. */
int domain_pattern_normalize(const char *s, char ret[static HOST_NAME_MAX_LEN + 3]);
bool domain_pattern_is_valid(const char *s);
/* host: canonical (NetHost.text) */
bool domain_matches(const char *pattern, const char *host);
bool domain_matches_any(char * const *patterns, const char *host);

/* What a session's proxy lets through. */
typedef struct ProxyPolicy {
        char * const *denied;          /* the host's baseline */
        char * const *session_denied;  /* the session's additions */
        char * const *allowed;         /* the host's allow list (NULL or empty: none) */
        char * const *session_allowed; /* the session's allow list (NULL: none) */
        const AddressRange *allowed_ranges; /* exceptions to the refused classes */
        size_t n_allowed_ranges;
        const AddressRange *denied_ranges;
        size_t n_denied_ranges;
        const AddressRange *host_addresses; /* this host's own (its local routes) */
        size_t n_host_addresses;
} ProxyPolicy;

/* NULL when the host may be asked for, else why not: "denied_domain", "not_allowed",
 * "single_label". An address literal is checked as a name too (by its canonical text). */
const char *proxy_policy_check_name(const ProxyPolicy *p, const NetHost *host);
/* NULL when sandboxd may connect to the address, else why not: "denied_domain" (a denied
 * list names this address), "denied_address", "loopback", "link-local", "private",
 * "unspecified", "multicast", "reserved", "host_address". IPv4-mapped and -compatible
 * addresses are checked as their IPv4 address; an address of the NAT64 prefix
 * 64:ff9b::/96 as its IPv4 address too (a NAT64 gateway would take it there). */
const char *proxy_policy_check_address(const ProxyPolicy *p, int family, const uint8_t addr[static 16]);
