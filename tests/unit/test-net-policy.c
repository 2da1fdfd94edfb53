/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <sys/socket.h>

#include "net-policy.h"
#include "tests.h"

static void addr(const char *s, int *family, uint8_t a[16]) {
        memset(a, 0, 16);
        *family = strchr(s, ':') ? AF_INET6 : AF_INET;
        ASSERT(inet_pton(*family, s, a) == 1);
}

static const char *check_address(const ProxyPolicy *p, const char *s) {
        uint8_t a[16];
        int family;

        addr(s, &family, a);
        return proxy_policy_check_address(p, family, a);
}

static void test_ranges(void) {
        AddressRange *l = NULL;
        size_t n = 0;
        uint8_t a[16];
        int family;
        char buf[64];

        ASSERT(address_ranges_parse("10.1.2.3/8 fd00::/8 192.0.2.7 localhost", &l, &n) == 0);
        ASSERT(n == 5);
        ASSERT(address_range_format(&l[0], buf, sizeof(buf)) == 0);
        ASSERT_STREQ(buf, "10.0.0.0/8"); /* the network, not the host bits */
        addr("10.255.0.1", &family, a);
        ASSERT(address_in_ranges(l, n, family, a));
        addr("11.0.0.1", &family, a);
        ASSERT(!address_in_ranges(l, n, family, a));
        addr("fdff::1", &family, a);
        ASSERT(address_in_ranges(l, n, family, a));
        addr("192.0.2.7", &family, a);
        ASSERT(address_in_ranges(l, n, family, a));
        addr("192.0.2.8", &family, a);
        ASSERT(!address_in_ranges(l, n, family, a));
        addr("::1", &family, a);
        ASSERT(address_in_ranges(l, n, family, a));
        free(l), l = NULL, n = 0;

        ASSERT(address_ranges_parse("10.0.0.0/33", &l, &n) < 0);
        ASSERT(address_ranges_parse("10.0.0.0/", &l, &n) < 0);
        ASSERT(address_ranges_parse("300.1.1.1", &l, &n) < 0);
        ASSERT(address_ranges_parse("example.com", &l, &n) < 0);
        free(l);

        /* ::ffff:127.0.0.1 is loopback too */
        addr("::ffff:127.0.0.1", &family, a);
        address_unmap(&family, a);
        ASSERT(family == AF_INET && a[0] == 127 && a[3] == 1);
}

static void test_classes(void) {
        static const struct {
                const char *a;
                AddressClass c;
        } t[] = {
                { "127.0.0.1", ADDRESS_LOOPBACK },      { "127.255.0.9", ADDRESS_LOOPBACK },
                { "::1", ADDRESS_LOOPBACK },            { "169.254.169.254", ADDRESS_LINK_LOCAL },
                { "fe80::1", ADDRESS_LINK_LOCAL },      { "10.0.0.1", ADDRESS_PRIVATE },
                { "172.16.5.4", ADDRESS_PRIVATE },      { "172.32.0.1", ADDRESS_PUBLIC },
                { "192.168.1.1", ADDRESS_PRIVATE },     { "100.64.0.1", ADDRESS_PRIVATE },
                { "fd12::1", ADDRESS_PRIVATE },         { "0.0.0.0", ADDRESS_UNSPECIFIED },
                { "::", ADDRESS_UNSPECIFIED },          { "224.0.0.1", ADDRESS_MULTICAST },
                { "ff02::1", ADDRESS_MULTICAST },       { "255.255.255.255", ADDRESS_MULTICAST },
                { "240.0.0.1", ADDRESS_RESERVED },      { "93.184.216.34", ADDRESS_PUBLIC },
                { "2001:db8::1", ADDRESS_PUBLIC },
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                uint8_t a[16];
                int family;

                addr(t[i].a, &family, a);
                if (address_classify(family, a) != t[i].c)
                        fprintf(stderr, "class of %s\n", t[i].a);
                ASSERT(address_classify(family, a) == t[i].c);
        }
}

static NetHost host(const char *s) {
        NetHost h = {};
        int r = net_host_parse(s, strlen(s), &h);

        if (r < 0)
                fprintf(stderr, "not a host: %s\n", s);
        ASSERT(r == 0);
        return h;
}

/* Every notation inet_aton() takes is the address it denotes; ours agrees with glibc's. */
static void test_ipv4_numeric(void) {
        static const struct {
                const char *s;
                const char *addr; /* NULL: invalid */
        } t[] = {
                { "127.0.0.1", "127.0.0.1" },   { "0x7f000001", "127.0.0.1" }, { "0x7F000001", "127.0.0.1" },
                { "0x7f.1", "127.0.0.1" },      { "2130706433", "127.0.0.1" }, { "0177.0.0.1", "127.0.0.1" },
                { "0177.0.0.01", "127.0.0.1" }, { "127.1", "127.0.0.1" },      { "127.0.1", "127.0.0.1" },
                { "0x7f.0.0x0.1", "127.0.0.1" }, { "017700000001", "127.0.0.1" }, { "10.65535", "10.0.255.255" },
                { "169.254.43518", "169.254.169.254" }, { "0xa9fea9fe", "169.254.169.254" },
                { "0", "0.0.0.0" },             { "00", "0.0.0.0" },           { "0x0", "0.0.0.0" },
                { "4294967295", "255.255.255.255" }, { "0x00000000000000007f000001", "127.0.0.1" },
                { "4294967296", NULL },         { "256.0.0.1", NULL },         { "1.2.3.256", NULL },
                { "1.2.65536", NULL },          { "1.16777216", NULL },        { "1.2.3.4.5", NULL },
                { "0x", NULL },                 { "0x.1", NULL },              { "08", NULL },
                { "09.1", NULL },               { "1..2", NULL },              { ".1", NULL },
                { "1.", NULL },                 { "", NULL },                  { "+1", NULL },
                { "-1", NULL },                 { "0xg", NULL },               { "1e3", NULL },
                { " 1", NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                uint8_t a[4], want[4];
                struct in_addr glibc;
                int r = ipv4_parse_numeric(t[i].s, strlen(t[i].s), a);

                if ((r == 0) != !!t[i].addr)
                        fprintf(stderr, "ipv4_parse_numeric(%s) = %d\n", t[i].s, r);
                ASSERT((r == 0) == !!t[i].addr);
                ASSERT((inet_aton(t[i].s, &glibc) != 0) == !!t[i].addr);
                if (r == 0 && t[i].addr) {
                        ASSERT(inet_pton(AF_INET, t[i].addr, want) == 1);
                        ASSERT(memcmp(a, want, 4) == 0);
                        ASSERT(memcmp(&glibc, want, 4) == 0);
                }
        }
}

static void test_hosts(void) {
        static const struct {
                const char *s;
                int family;
                const char *text;
        } ok[] = {
                /* one address, every way to write it */
                { "127.0.0.1", AF_INET, "127.0.0.1" },       { "0x7f000001", AF_INET, "127.0.0.1" },
                { "0x7f.1", AF_INET, "127.0.0.1" },          { "2130706433", AF_INET, "127.0.0.1" },
                { "0177.0.0.1", AF_INET, "127.0.0.1" },      { "127.1", AF_INET, "127.0.0.1" },
                { "127.0.0.1.", AF_INET, "127.0.0.1" },      { "0X7F.1", AF_INET, "127.0.0.1" },
                { "::ffff:127.0.0.1", AF_INET, "127.0.0.1" }, { "::ffff:7f00:1", AF_INET, "127.0.0.1" },
                { "::FFFF:7F00:1", AF_INET, "127.0.0.1" },   { "::127.0.0.1", AF_INET, "127.0.0.1" },
                { "::7f00:1", AF_INET, "127.0.0.1" },        { "0:0:0:0:0:ffff:127.0.0.1", AF_INET, "127.0.0.1" },
                /* IPv6's own, in inet_ntop()'s form */
                { "::1", AF_INET6, "::1" },                  { "0:0:0:0:0:0:0:1", AF_INET6, "::1" },
                { "::", AF_INET6, "::" },                    { "FE80::1", AF_INET6, "fe80::1" },
                { "2001:DB8:0:0::1", AF_INET6, "2001:db8::1" },
                { "::ffff:0:7f00:1", AF_INET6, "::ffff:0:7f00:1" }, /* not mapped: SIIT's prefix */
                /* names */
                { "Example.COM.", AF_UNSPEC, "example.com" }, { "a_b-c.test", AF_UNSPEC, "a_b-c.test" },
                { "intranet", AF_UNSPEC, "intranet" },       { "0x7g.test", AF_UNSPEC, "0x7g.test" },
                { "1.2.3.4.example", AF_UNSPEC, "1.2.3.4.example" }, { "7f000001", AF_UNSPEC, "7f000001" },
        };
        static const char *const bad[] = {
                "", ".", "..", "a..b", "a.b..", "a b", "a/b", "[::1]", "x:y", "a@b", "a%b", "fe80::1%eth0",
                "fe80::1%25eth0", "::ffff:127.0.0.1%lo", "1.2.3.256", "1.2.3.4.5", "0x", "08", "example.08",
                "example.123", "foo.0x1", "a\xc3\xa9.test", ":::", "1::2::3",
        };
        char l63[64], l64[65], name[300];
        NetHost h;

        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                h = host(ok[i].s);
                if (h.family != ok[i].family || strcmp(h.text, ok[i].text) != 0)
                        fprintf(stderr, "%s -> %d %s\n", ok[i].s, h.family, h.text);
                ASSERT(h.family == ok[i].family);
                ASSERT_STREQ(h.text, ok[i].text);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (net_host_parse(bad[i], strlen(bad[i]), &h) >= 0)
                        fprintf(stderr, "a host: %s\n", bad[i]);
                ASSERT(net_host_parse(bad[i], strlen(bad[i]), &h) < 0);
        }
        /* the length counts, not a NUL */
        ASSERT(net_host_parse("example.com\0evil", 17, &h) < 0);
        ASSERT(net_host_parse("example.comX", 11, &h) == 0 && streq(h.text, "example.com"));

        /* 63-byte labels, 253 bytes in all (254 with the trailing dot), and no more */
        memset(l63, 'a', 63), l63[63] = 0;
        memset(l64, 'a', 64), l64[64] = 0;
        ASSERT(net_host_parse(l63, 63, &h) == 0);
        ASSERT(net_host_parse(l64, 64, &h) == -ENAMETOOLONG);
        snprintf(name, sizeof(name), "%s.%s.%s.%.61s", l63, l63, l63, l63);
        ASSERT(strlen(name) == 253);
        ASSERT(net_host_parse(name, 253, &h) == 0 && strlen(h.text) == 253);
        strcat(name, ".");
        ASSERT(net_host_parse(name, 254, &h) == 0 && strlen(h.text) == 253);
        snprintf(name, sizeof(name), "%s.%s.%s.%.62s", l63, l63, l63, l63);
        ASSERT(net_host_parse(name, 254, &h) == -ENAMETOOLONG);
        strcat(name, ".");
        ASSERT(net_host_parse(name, 255, &h) == -ENAMETOOLONG);

        ASSERT(net_host_is_single_label(&(NetHost) { .text = "intranet" }));
        h = host("intranet.");
        ASSERT(net_host_is_single_label(&h));
        h = host("a.b");
        ASSERT(!net_host_is_single_label(&h));
        h = host("127.1");
        ASSERT(!net_host_is_single_label(&h));
        h = host("2130706433");
        ASSERT(!net_host_is_single_label(&h));

        ASSERT(net_host_from_address(AF_INET6, (const uint8_t[16]) { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 }, &h) == 0);
        ASSERT(h.family == AF_INET && streq(h.text, "10.0.0.1"));
        ASSERT(net_host_from_address(AF_UNIX, (const uint8_t[16]) {}, &h) < 0);
}

static void test_names(void) {
        char h[HOST_NAME_MAX_LEN + 3];

        ASSERT(domain_pattern_normalize("*.Example.com", h) == 0);
        ASSERT_STREQ(h, "*.example.com");
        ASSERT(domain_pattern_normalize("0x7f.1", h) == 0);
        ASSERT_STREQ(h, "127.0.0.1"); /* a literal in a list is compared in its canonical form */
        ASSERT(domain_pattern_normalize("::FFFF:10.0.0.1", h) == 0);
        ASSERT_STREQ(h, "10.0.0.1");
        ASSERT(domain_pattern_normalize("Denied.Example.", h) == 0);
        ASSERT_STREQ(h, "denied.example");
        ASSERT(!domain_pattern_is_valid("*"));
        ASSERT(!domain_pattern_is_valid("*."));
        ASSERT(!domain_pattern_is_valid("*.*.x"));
        ASSERT(!domain_pattern_is_valid("a.*.x"));
        ASSERT(!domain_pattern_is_valid("*example.com"));
        ASSERT(!domain_pattern_is_valid("*.10.0.0.1"));
        ASSERT(!domain_pattern_is_valid("*.1.2"));
        ASSERT(!domain_pattern_is_valid("*.::1"));
        ASSERT(!domain_pattern_is_valid("*.example.com."));
        ASSERT(!domain_pattern_is_valid("1.2.3.256"));

        ASSERT(domain_matches("example.com", "example.com"));
        ASSERT(!domain_matches("example.com", "www.example.com")); /* exact means exact */
        ASSERT(domain_matches("*.example.com", "www.example.com"));
        ASSERT(domain_matches("*.example.com", "a.b.example.com"));
        ASSERT(!domain_matches("*.example.com", "example.com"));
        ASSERT(!domain_matches("*.example.com", "badexample.com"));
        ASSERT(!domain_matches("*.example.com", "example.com.evil.test"));
}

static const char *check_name(const ProxyPolicy *p, const char *s) {
        NetHost h = host(s);

        return proxy_policy_check_name(p, &h);
}

static void test_policy(void) {
        char *denied[] = { (char *) "evil.test", (char *) "*.tracker.test", (char *) "127.0.0.1", (char *) "93.184.216.99",
                           NULL };
        char *session_denied[] = { (char *) "more.test", NULL };
        char *allowed[] = { (char *) "*.pypi.test", (char *) "evil.test", NULL };
        char *none[] = { NULL };
        AddressRange *exc = NULL, *deny = NULL, *own = NULL;
        size_t n_exc = 0, n_deny = 0, n_own = 0;
        ProxyPolicy p = { .denied = denied };
        static const char *const loopback[] = {
                "127.0.0.1", "0x7f000001", "0x7f.1", "2130706433", "0177.0.0.1", "127.1", "127.0.0.1.",
                "::ffff:127.0.0.1", "::ffff:7f00:1", "::127.0.0.1", "::7f00:1",
        };

        ASSERT(check_name(&p, "example.test") == NULL);
        ASSERT_STREQ(check_name(&p, "evil.test"), "denied_domain");
        ASSERT_STREQ(check_name(&p, "EVIL.test."), "denied_domain");
        ASSERT_STREQ(check_name(&p, "x.tracker.test"), "denied_domain");
        ASSERT(check_name(&p, "tracker.test") == NULL);
        /* a denied literal, however it is written: the name check sees the canonical form */
        for (size_t i = 0; i < ELEMENTSOF(loopback); i++)
                ASSERT_STREQ(check_name(&p, loopback[i]), "denied_domain");
        ASSERT(check_name(&p, "127.0.0.2") == NULL);
        /* no search domains: a single label is never looked up */
        ASSERT_STREQ(check_name(&p, "evil"), "single_label");
        ASSERT_STREQ(check_name(&p, "localhost"), "single_label");
        ASSERT(check_name(&p, "2130706433") != NULL); /* an address, denied above, not a label */

        /* a session adds denials; the baseline stays */
        p.session_denied = session_denied;
        ASSERT_STREQ(check_name(&p, "more.test"), "denied_domain");
        ASSERT_STREQ(check_name(&p, "evil.test"), "denied_domain");

        /* allow lists narrow; a denial wins over an allowance */
        p.allowed = allowed;
        ASSERT(check_name(&p, "files.pypi.test") == NULL);
        ASSERT_STREQ(check_name(&p, "example.test"), "not_allowed");
        ASSERT_STREQ(check_name(&p, "evil.test"), "denied_domain");
        p.session_allowed = none; /* the session allows nothing at all */
        ASSERT_STREQ(check_name(&p, "files.pypi.test"), "not_allowed");
        p.allowed = NULL, p.session_allowed = NULL;

        /* addresses */
        ASSERT(check_address(&p, "93.184.216.34") == NULL);
        ASSERT_STREQ(check_address(&p, "127.0.0.2"), "loopback");
        ASSERT_STREQ(check_address(&p, "::ffff:127.0.0.2"), "loopback");
        ASSERT_STREQ(check_address(&p, "::127.0.0.2"), "loopback");
        ASSERT_STREQ(check_address(&p, "::ffff:169.254.169.254"), "link-local");
        ASSERT_STREQ(check_address(&p, "64:ff9b::169.254.169.254"), "link-local"); /* NAT64 */
        ASSERT_STREQ(check_address(&p, "64:ff9b::10.0.0.1"), "private");
        ASSERT(check_address(&p, "64:ff9b::93.184.216.34") == NULL);
        ASSERT_STREQ(check_address(&p, "::1"), "loopback");
        ASSERT_STREQ(check_address(&p, "::"), "unspecified");
        ASSERT_STREQ(check_address(&p, "::2"), "unspecified"); /* ::0.0.0.2 */
        ASSERT_STREQ(check_address(&p, "169.254.169.254"), "link-local");
        ASSERT_STREQ(check_address(&p, "10.200.0.2"), "private");
        ASSERT_STREQ(check_address(&p, "fd00::5"), "private");
        ASSERT_STREQ(check_address(&p, "0.0.0.0"), "unspecified");
        /* a literal of the denied list denies that address reached by a name too */
        ASSERT_STREQ(check_address(&p, "93.184.216.99"), "denied_domain");
        ASSERT_STREQ(check_address(&p, "::ffff:93.184.216.99"), "denied_domain");

        ASSERT(address_ranges_parse("10.200.0.0/24", &exc, &n_exc) == 0);
        ASSERT(address_ranges_parse("93.184.216.0/24 ::ffff:198.51.100.0/120", &deny, &n_deny) == 0);
        ASSERT(n_deny == 2 && deny[1].family == AF_INET && deny[1].prefixlen == 24);
        ASSERT(address_ranges_parse("198.51.100.7 203.0.113.0/24", &own, &n_own) == 0);
        p.allowed_ranges = exc, p.n_allowed_ranges = n_exc;
        p.denied_ranges = deny, p.n_denied_ranges = n_deny;
        ASSERT(check_address(&p, "198.51.101.7") == NULL);
        p.host_addresses = own, p.n_host_addresses = n_own;
        ASSERT(check_address(&p, "10.200.0.2") == NULL);           /* the config's exception */
        ASSERT_STREQ(check_address(&p, "10.200.1.2"), "private");  /* only that range */
        ASSERT_STREQ(check_address(&p, "93.184.216.34"), "denied_address");
        ASSERT_STREQ(check_address(&p, "::ffff:198.51.100.200"), "denied_address"); /* a mapped range */
        ASSERT(check_address(&p, "198.51.101.7") == NULL);
        ASSERT_STREQ(check_address(&p, "203.0.113.99"), "host_address"); /* a local route of a whole prefix */
        ASSERT_STREQ(check_address(&p, "::ffff:203.0.113.99"), "host_address");
        ASSERT_STREQ(check_address(&p, "::203.0.113.99"), "host_address");
        free(exc);
        free(deny);
        free(own);
}

int main(void) {
        test_ranges();
        test_classes();
        test_ipv4_numeric();
        test_hosts();
        test_names();
        test_policy();
        return TESTS_DONE();
}
