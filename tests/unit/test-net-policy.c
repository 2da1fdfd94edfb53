/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <sys/socket.h>

#include "net-policy.h"
#include "proxy.h"
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

static void test_names(void) {
        char h[HOST_NAME_MAX_LEN + 3];

        ASSERT(host_name_normalize("Example.COM.", h) == 0);
        ASSERT_STREQ(h, "example.com");
        ASSERT(host_name_normalize("a_b-c.test", h) == 0);
        ASSERT(host_name_normalize("::1", h) == 0);
        ASSERT(host_name_normalize("", h) < 0);
        ASSERT(host_name_normalize(".", h) < 0);
        ASSERT(host_name_normalize("a..b", h) < 0);
        ASSERT(host_name_normalize("a b", h) < 0);
        ASSERT(host_name_normalize("a/b", h) < 0);
        ASSERT(host_name_normalize("[::1]", h) < 0);
        ASSERT(host_name_normalize("x:y", h) < 0);

        ASSERT(domain_pattern_normalize("*.Example.com", h) == 0);
        ASSERT_STREQ(h, "*.example.com");
        ASSERT(!domain_pattern_is_valid("*"));
        ASSERT(!domain_pattern_is_valid("*."));
        ASSERT(!domain_pattern_is_valid("*.*.x"));
        ASSERT(!domain_pattern_is_valid("a.*.x"));
        ASSERT(!domain_pattern_is_valid("*example.com"));

        ASSERT(domain_matches("example.com", "example.com"));
        ASSERT(!domain_matches("example.com", "www.example.com")); /* exact means exact */
        ASSERT(domain_matches("*.example.com", "www.example.com"));
        ASSERT(domain_matches("*.example.com", "a.b.example.com"));
        ASSERT(!domain_matches("*.example.com", "example.com"));
        ASSERT(!domain_matches("*.example.com", "badexample.com"));
        ASSERT(!domain_matches("*.example.com", "example.com.evil.test"));
}

static void test_policy(void) {
        char *denied[] = { (char *) "evil.test", (char *) "*.tracker.test", NULL };
        char *session_denied[] = { (char *) "more.test", NULL };
        char *allowed[] = { (char *) "*.pypi.test", (char *) "evil.test", NULL };
        char *none[] = { NULL };
        AddressRange *exc = NULL, *deny = NULL, *own = NULL;
        size_t n_exc = 0, n_deny = 0, n_own = 0;
        ProxyPolicy p = { .denied = denied };

        ASSERT(proxy_policy_check_name(&p, "example.test") == NULL);
        ASSERT_STREQ(proxy_policy_check_name(&p, "evil.test"), "denied_domain");
        ASSERT_STREQ(proxy_policy_check_name(&p, "x.tracker.test"), "denied_domain");
        ASSERT(proxy_policy_check_name(&p, "tracker.test") == NULL);

        /* a session adds denials; the baseline stays */
        p.session_denied = session_denied;
        ASSERT_STREQ(proxy_policy_check_name(&p, "more.test"), "denied_domain");
        ASSERT_STREQ(proxy_policy_check_name(&p, "evil.test"), "denied_domain");

        /* allow lists narrow; a denial wins over an allowance */
        p.allowed = allowed;
        ASSERT(proxy_policy_check_name(&p, "files.pypi.test") == NULL);
        ASSERT_STREQ(proxy_policy_check_name(&p, "example.test"), "not_allowed");
        ASSERT_STREQ(proxy_policy_check_name(&p, "evil.test"), "denied_domain");
        p.session_allowed = none; /* the session allows nothing at all */
        ASSERT_STREQ(proxy_policy_check_name(&p, "files.pypi.test"), "not_allowed");

        /* addresses */
        ASSERT(check_address(&p, "93.184.216.34") == NULL);
        ASSERT_STREQ(check_address(&p, "127.0.0.1"), "loopback");
        ASSERT_STREQ(check_address(&p, "::ffff:127.0.0.1"), "loopback");
        ASSERT_STREQ(check_address(&p, "169.254.169.254"), "link-local");
        ASSERT_STREQ(check_address(&p, "10.200.0.2"), "private");
        ASSERT_STREQ(check_address(&p, "fd00::5"), "private");
        ASSERT_STREQ(check_address(&p, "0.0.0.0"), "unspecified");

        ASSERT(address_ranges_parse("10.200.0.0/24", &exc, &n_exc) == 0);
        ASSERT(address_ranges_parse("93.184.216.0/24", &deny, &n_deny) == 0);
        ASSERT(address_ranges_parse("198.51.100.7", &own, &n_own) == 0);
        p.allowed_ranges = exc, p.n_allowed_ranges = n_exc;
        p.denied_ranges = deny, p.n_denied_ranges = n_deny;
        p.host_addresses = own, p.n_host_addresses = n_own;
        ASSERT(check_address(&p, "10.200.0.2") == NULL);           /* the config's exception */
        ASSERT_STREQ(check_address(&p, "10.200.1.2"), "private");  /* only that range */
        ASSERT_STREQ(check_address(&p, "93.184.216.34"), "denied_address");
        ASSERT_STREQ(check_address(&p, "198.51.100.7"), "host_address"); /* this host's public address */
        free(exc);
        free(deny);
        free(own);
}

int main(void) {
        test_ranges();
        test_classes();
        test_names();
        test_policy();
        return TESTS_DONE();
}
