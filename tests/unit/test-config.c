/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <sys/socket.h>
#include <sys/stat.h>

#include "config.h"
#include "tests.h"

static char dir[] = "/tmp/test-config-XXXXXX";
static int n_warnings;

static void warn(const char *msg) {
        n_warnings++;
}

static void write_file(const char *name, const char *text) {
        char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "w");
        ASSERT(f);
        fputs(text, f);
        fclose(f);
}

static int load(Config *c, char **error) {
        char path[256];

        snprintf(path, sizeof(path), "%s/sandboxd.conf", dir);
        config_init(c);
        return config_load(c, path, warn, error);
}

static void test_defaults_when_missing(void) {
        Config c;
        char *error = NULL;

        ASSERT(load(&c, &error) == 0);
        ASSERT(c.session_limits.memory_max == 1024ULL * 1024 * 1024);
        ASSERT(c.session_limits.cpu_quota_percent == 100);
        ASSERT(c.idle_exit_usec == 60 * USEC_PER_SEC);
        ASSERT(c.output_max_bytes == 1024 * 1024);
        ASSERT(c.max_file_bytes == 1024ULL * 1024 * 1024);
        ASSERT(c.default_exec_mode == EXEC_MODE_UNIT);
        config_done(&c);
}

static void test_exec_mode(void) {
        Config c;
        char *error = NULL;

        write_file("sandboxd.conf", "[Session]\nExecMode=session\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.default_exec_mode == EXEC_MODE_SESSION);
        config_done(&c);

        write_file("sandboxd.conf", "[Session]\nExecMode=session\nExecMode=unit\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.default_exec_mode == EXEC_MODE_UNIT); /* the last one wins */
        config_done(&c);

        write_file("sandboxd.conf", "[Session]\nExecMode=thread\n");
        ASSERT(load(&c, &error) == -EINVAL);
        ASSERT(error && strstr(error, "ExecMode=thread") && strstr(error, "'unit' or 'session'"));
        free(error), error = NULL;
        config_done(&c);

        write_file("sandboxd.conf", "[Session]\nExecMode=\n");
        ASSERT(load(&c, &error) == -EINVAL);
        ASSERT(error && strstr(error, "ExecMode="));
        free(error), error = NULL;
        config_done(&c);

        write_file("sandboxd.conf", "[Session]\nExecMode=Session\n");
        ASSERT(load(&c, &error) == -EINVAL);
        free(error), error = NULL;
        config_done(&c);
}

static void test_values_and_dropins(void) {
        Config c;
        char *error = NULL;
        char d[300];

        write_file("sandboxd.conf", "[Session]\nMemoryMax=512M\nCPUQuota=50%\n[Daemon]\nIdleExitSec=5min\n"
                                    "[Command]\nDefaultTimeoutSec=30s\nPath=/usr/bin:/bin\n");
        snprintf(d, sizeof(d), "%s/sandboxd.conf.d", dir);
        mkdir(d, 0755);
        write_file("sandboxd.conf.d/20-later.conf", "[Session]\nMemoryMax=256M\n");
        write_file("sandboxd.conf.d/10-first.conf", "[Session]\nMemoryMax=2G\nTasksMax=64\n");
        write_file("sandboxd.conf.d/ignored.txt", "[Session]\nMemoryMax=garbage\n");

        n_warnings = 0;
        ASSERT(load(&c, &error) == 0);
        ASSERT(!error);
        ASSERT(c.session_limits.memory_max == 256ULL * 1024 * 1024); /* 20- wins over 10- and the main file */
        ASSERT(c.session_limits.tasks_max == 64);
        ASSERT(c.session_limits.cpu_quota_percent == 50);
        ASSERT(c.idle_exit_usec == 300 * USEC_PER_SEC);
        ASSERT(c.default_timeout_usec == 30 * USEC_PER_SEC);
        ASSERT_STREQ(c.path, "/usr/bin:/bin");
        ASSERT(n_warnings == 0);
        config_done(&c);
}

static void test_errors(void) {
        Config c;
        char *error = NULL;

        write_file("sandboxd.conf", "[Session]\nMemoryMax=lots\n");
        ASSERT(load(&c, &error) == -EINVAL);
        ASSERT(error && strstr(error, "MemoryMax=lots"));
        free(error), error = NULL;
        config_done(&c);

        write_file("sandboxd.conf", "[Session]\nCPUQuota=50\n");
        ASSERT(load(&c, &error) == -EINVAL);
        ASSERT(error && strstr(error, "percentage"));
        free(error), error = NULL;
        config_done(&c);

        write_file("sandboxd.conf", "this is not ini\n");
        ASSERT(load(&c, &error) == -EINVAL);
        ASSERT(error);
        free(error), error = NULL;
        config_done(&c);

        /* a default above its ceiling is refused */
        write_file("sandboxd.conf", "[Session]\nTasksMax=100\nMaxTasksMax=10\n");
        ASSERT(load(&c, &error) == -EINVAL);
        ASSERT(error && strstr(error, "TasksMax"));
        free(error), error = NULL;
        config_done(&c);

        /* unknown keys warn, and are otherwise ignored */
        write_file("sandboxd.conf", "[Session]\nFrobnicate=yes\n");
        n_warnings = 0;
        ASSERT(load(&c, &error) == 0);
        ASSERT(n_warnings == 1);
        config_done(&c);
}

static void test_max_file_size(void) {
        Config c;
        char *error = NULL;

        write_file("sandboxd.conf", "[Files]\nMaxFileSize=64K\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.max_file_bytes == 64 * 1024);
        config_done(&c);

        write_file("sandboxd.conf", "[Files]\nMaxFileSize=infinity\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.max_file_bytes == UINT64_MAX);
        config_done(&c);

        write_file("sandboxd.conf", "[Files]\nMaxFileSize=big\n");
        ASSERT(load(&c, &error) == -EINVAL);
        ASSERT(error && strstr(error, "MaxFileSize=big"));
        free(error), error = NULL;
        config_done(&c);
}

static void test_text(void) {
        char text[512], *error = NULL;
        Config c;

        /* the first mistake is the one reported, with its own line */
        config_init(&c);
        ASSERT(config_parse(&c, "a.conf", "[Session]\nMemoryMax=1\n\nTasksMax=0\n", 34, NULL, &error) == -EINVAL);
        ASSERT(error && strstr(error, "MemoryMax=1") && strstr(error, "(line 2)"));
        free(error), error = NULL;
        config_done(&c);

        config_init(&c);
        ASSERT(config_parse(&c, "a.conf", "[Session]\nno value here\nTasksMax=0\n", 35, NULL, &error) == -EINVAL);
        ASSERT_STREQ(error, "a.conf:2: syntax error");
        free(error), error = NULL;
        config_done(&c);

        /* inih cuts lines at 199 bytes: the rest would be a line of its own ("ib:/sbin" as a
         * key named ".../b" with the value "/sbin", ignored), and Path= would be cut short */
        snprintf(text, sizeof(text), "[Command]\nPath=%0190d:/usr/bin\n", 0);
        text[15] = '/';
        config_init(&c);
        ASSERT(config_parse(&c, "a.conf", text, strlen(text), NULL, &error) == -EINVAL);
        ASSERT(error && strstr(error, "a.conf:2: the line is longer than 197 bytes"));
        ASSERT(!c.path);
        free(error), error = NULL;
        config_done(&c);

        /* as long as inih reads at once, with and without the newline */
        snprintf(text, sizeof(text), "[Command]\nPath=/%0192d\n", 0);
        ASSERT(strlen(text) == 10 + 199);
        config_init(&c);
        ASSERT(config_parse(&c, "a.conf", text, strlen(text), NULL, &error) == 0);
        ASSERT(c.path && strlen(c.path) == 193);
        ASSERT(config_parse(&c, "a.conf", text, strlen(text) - 1, NULL, &error) == 0);
        config_done(&c);

        config_init(&c);
        ASSERT(config_parse(&c, "a.conf", "[Sandbox]\n# \xe9t\xe9\n", 16, NULL, &error) == -EINVAL);
        ASSERT_STREQ(error, "a.conf:2: not valid UTF-8");
        free(error), error = NULL;
        ASSERT(config_parse(&c, "a.conf", "[Sandbox]\n# \xc3\xa9t\xc3\xa9\n", 18, NULL, &error) == 0);
        config_done(&c);

        /* a NUL byte would end the text early */
        config_init(&c);
        ASSERT(config_parse(&c, "a.conf", "[Session]\nTasksMax=7\0\nTasksMax=9\n", 33, NULL, &error) == -EINVAL);
        ASSERT_STREQ(error, "a.conf: contains a NUL byte");
        free(error), error = NULL;
        config_done(&c);
}

static bool has(char * const *l, const char *w) {
        for (size_t i = 0; l && l[i]; i++)
                if (streq(l[i], w))
                        return true;
        return false;
}

static void test_network(void) {
        const uint8_t meta[16] = { 169, 254, 169, 254 }, lo6[16] = { [15] = 1 }, ten[16] = { 10, 200, 0, 2 };
        Config c;
        char *error = NULL;

        /* defaults: mode proxy, no host mode for anyone, direct IP off loopback and link-local */
        write_file("sandboxd.conf", "");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.default_network_mode == NETWORK_PROXY);
        ASSERT(!config_tenant_may_use_host_network(&c, "tenant1"));
        ASSERT(!config_tenant_may_use_host_network(&c, NULL));
        ASSERT(address_in_ranges(c.ip_deny, c.n_ip_deny, AF_INET, meta));
        ASSERT(address_in_ranges(c.ip_deny, c.n_ip_deny, AF_INET6, lo6));
        ASSERT(c.n_ip_allow == 0 && !c.denied_domains && !c.allowed_domains);
        ASSERT(c.limit_fsize == UINT64_MAX && !c.tools_directory);
        /* fair shares: each session a part of the proxy's totals */
        ASSERT(c.proxy_max_connections == 1024 && c.proxy_max_connections_per_session == 64);
        ASSERT(c.proxy_max_lookups == 64 && c.proxy_max_lookups_per_session == 8);
        ASSERT(c.max_unauthenticated == 64 && c.authentication_timeout_usec == 5 * USEC_PER_SEC);
        config_done(&c);

        write_file("sandboxd.conf", "[Network]\nDefaultMode=none\nHostModeTenants=ci unix:0\n"
                                    "DefaultDeniedDomains=Evil.TEST *.tracker.test\nDefaultDeniedDomains=b.test\n"
                                    "AllowedDomains=*.pypi.test\nProxyAllowedAddresses=10.200.0.0/24\n"
                                    "ProxyDeniedAddresses=203.0.113.7\nIPAddressDeny=\nIPAddressAllow=any\n"
                                    "ProxyMaxConnections=8\nProxyIdleTimeoutSec=30s\n"
                                    "ProxyMaxConnectionsPerSession=4\nProxyMaxLookups=16\nProxyMaxLookupsPerSession=2\n"
                                    "[HTTP]\nMaxUnauthenticatedConnections=10\nAuthenticationTimeoutSec=500ms\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.default_network_mode == NETWORK_NONE);
        ASSERT(config_tenant_may_use_host_network(&c, "ci") && config_tenant_may_use_host_network(&c, "unix:0"));
        ASSERT(!config_tenant_may_use_host_network(&c, "c"));
        ASSERT(strv_length(c.denied_domains) == 3);
        ASSERT(has(c.denied_domains, "evil.test") && has(c.denied_domains, "*.tracker.test") && has(c.denied_domains, "b.test"));
        ASSERT(has(c.allowed_domains, "*.pypi.test"));
        ASSERT(address_in_ranges(c.proxy_allowed, c.n_proxy_allowed, AF_INET, ten));
        ASSERT(c.n_proxy_denied == 1 && c.n_ip_deny == 0 && c.n_ip_allow == 2);
        ASSERT(c.proxy_max_connections == 8 && c.proxy_idle_timeout_usec == 30 * USEC_PER_SEC);
        ASSERT(c.proxy_max_connections_per_session == 4 && c.proxy_max_lookups == 16 && c.proxy_max_lookups_per_session == 2);
        ASSERT(c.max_unauthenticated == 10 && c.authentication_timeout_usec == 500 * USEC_PER_MSEC);
        config_done(&c);

        /* an empty assignment empties a list, as in systemd */
        write_file("sandboxd.conf", "[Network]\nDefaultDeniedDomains=a.test\nDefaultDeniedDomains=\nDefaultDeniedDomains=c.test\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(strv_length(c.denied_domains) == 1 && has(c.denied_domains, "c.test"));
        config_done(&c);

        static const char *const bad[] = {
                "[Network]\nDefaultMode=host\n",                 /* host is asked for, never a default */
                "[Network]\nDefaultMode=wifi\n",
                "[Network]\nDefaultDeniedDomains=*\n",
                "[Network]\nDefaultDeniedDomains=a..b\n",
                "[Network]\nAllowedDomains=exa mple.com/x\n",
                "[Network]\nProxyAllowedAddresses=10.0.0.0/33\n",
                "[Network]\nIPAddressAllow=nowhere\n",
                "[Network]\nProxyMaxConnections=0\n",
                "[Network]\nProxyMaxConnectionsPerSession=0\n",
                "[Network]\nProxyMaxLookups=1025\n",
                "[Network]\nProxyMaxLookupsPerSession=none\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                write_file("sandboxd.conf", bad[i]);
                ASSERT(load(&c, &error) == -EINVAL);
                ASSERT(error && strstr(error, "[Network]"));
                free(error), error = NULL;
                config_done(&c);
        }
        static const char *const bad_http[] = {
                "[HTTP]\nMaxUnauthenticatedConnections=0\n",
                "[HTTP]\nAuthenticationTimeoutSec=10ms\n",
                "[HTTP]\nAuthenticationTimeoutSec=2h\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_http); i++) {
                write_file("sandboxd.conf", bad_http[i]);
                ASSERT(load(&c, &error) == -EINVAL);
                ASSERT(error && strstr(error, "[HTTP]"));
                free(error), error = NULL;
                config_done(&c);
        }
}

static void test_sandbox(void) {
        Config c;
        char *error = NULL;

        write_file("sandboxd.conf", "[Sandbox]\nAllowRead=/srv/data/\nAllowWrite=/srv/scratch /srv/out\n"
                                    "DenyRead=/srv/secret\nDenyWrite=/srv/data/ro\nToolsDirectory=/opt/tools\n"
                                    "LimitFSIZE=100M\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(strv_length(c.allow_read) == 1 && has(c.allow_read, "/srv/data"));
        ASSERT(strv_length(c.allow_write) == 2 && has(c.allow_write, "/srv/out"));
        ASSERT(has(c.deny_read, "/srv/secret") && has(c.deny_write, "/srv/data/ro"));
        ASSERT_STREQ(c.tools_directory, "/opt/tools");
        ASSERT(c.limit_fsize == 100ULL << 20);
        config_done(&c);

        /* the built-in protections are not config: they are always there */
        ASSERT(has((char **) config_builtin_inaccessible, "/etc/ssh"));
        ASSERT(has((char **) config_builtin_inaccessible, "/etc/sandboxd"));
        ASSERT(has((char **) config_builtin_inaccessible, "/run/sandboxd"));

        static const char *const bad[] = {
                "[Sandbox]\nAllowWrite=relative/path\n",
                "[Sandbox]\nAllowWrite=/\n",
                "[Sandbox]\nDenyRead=/srv/../etc\n",
                "[Sandbox]\nAllowRead=/srv/./x\n",
                "[Sandbox]\nAllowRead=/srv/..\n",
                "[Sandbox]\nDenyRead=//srv\n",
                "[Sandbox]\nDenyWrite=/srv//x\n",
                "[Sandbox]\nToolsDirectory=/opt/a:b\n",
                "[Sandbox]\nLimitFSIZE=0\n",
                "[Sandbox]\nLimitFSIZE=lots\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                write_file("sandboxd.conf", bad[i]);
                ASSERT(load(&c, &error) == -EINVAL);
                ASSERT(error && strstr(error, "[Sandbox]"));
                free(error), error = NULL;
                config_done(&c);
        }
}

static void test_parsers(void) {
        uint64_t v;

        ASSERT(parse_size("1024", &v) == 0 && v == 1024);
        ASSERT(parse_size("4K", &v) == 0 && v == 4096);
        ASSERT(parse_size("2G", &v) == 0 && v == 2ULL << 30);
        ASSERT(parse_size("-1", &v) < 0);
        ASSERT(parse_size("1X", &v) < 0);
        ASSERT(parse_size("99999999999T", &v) == -ERANGE);
        ASSERT(parse_duration("500ms", &v) == 0 && v == 500 * USEC_PER_MSEC);
        ASSERT(parse_duration("2h", &v) == 0 && v == 7200 * USEC_PER_SEC);
        ASSERT(parse_duration("10", &v) == 0 && v == 10 * USEC_PER_SEC);
        ASSERT(parse_duration("1 s", &v) < 0);
        ASSERT(parse_percent("150%", &v) == 0 && v == 150);
        ASSERT(parse_percent("0%", &v) < 0);
        ASSERT(parse_percent("%", &v) < 0);
}

static void test_admin_group(void) {
        Config c;
        char *error = NULL;

        write_file("sandboxd.conf", "");
        ASSERT(load(&c, &error) == 0);
        ASSERT(!c.admin_group);
        config_done(&c);

        write_file("sandboxd.conf", "[Daemon]\nAdminGroup=wheel\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.admin_group && streq(c.admin_group, "wheel"));
        config_done(&c);

        /* empty: none again */
        write_file("sandboxd.conf", "[Daemon]\nAdminGroup=wheel\nAdminGroup=\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(!c.admin_group);
        config_done(&c);

        write_file("sandboxd.conf", "[Daemon]\nAdminGroup=Not A Group\n");
        ASSERT(load(&c, &error) == -EINVAL);
        ASSERT(error && strstr(error, "AdminGroup="));
        free(error), error = NULL;
        config_done(&c);
}

static void test_quotas(void) {
        Config c;
        char *error = NULL;

        write_file("sandboxd.conf", "");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.max_sessions_per_tenant == 64);
        ASSERT(c.max_sessions_per_user == 16);
        ASSERT(c.max_commands_per_session == 256);
        ASSERT(c.max_running_per_session == 64);
        ASSERT(c.spool_max_per_session == 32ULL * 1024 * 1024);
        ASSERT(c.spool_max == 256ULL * 1024 * 1024);
        config_done(&c);

        write_file("sandboxd.conf", "[Session]\nMaxSessionsPerTenant=3\nMaxSessionsPerUser=2\n"
                                    "[Command]\nMaxCommandsPerSession=5\nMaxRunningCommandsPerSession=4\n"
                                    "SpoolMaxPerSession=1M\nSpoolMax=2G\n");
        ASSERT(load(&c, &error) == 0);
        ASSERT(c.max_sessions_per_tenant == 3 && c.max_sessions_per_user == 2);
        ASSERT(c.max_commands_per_session == 5 && c.max_running_per_session == 4);
        ASSERT(c.spool_max_per_session == 1024 * 1024 && c.spool_max == 2ULL * 1024 * 1024 * 1024);
        config_done(&c);

        static const char *const bad[] = {
                "[Session]\nMaxSessionsPerTenant=0\n",
                "[Session]\nMaxSessionsPerUser=many\n",
                "[Command]\nMaxCommandsPerSession=65537\n",
                "[Command]\nMaxRunningCommandsPerSession=0\n",
                "[Command]\nSpoolMax=lots\n",
                /* running ones are kept too; a session's share within the total */
                "[Command]\nMaxCommandsPerSession=8\nMaxRunningCommandsPerSession=9\n",
                "[Command]\nSpoolMaxPerSession=2G\nSpoolMax=1G\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                write_file("sandboxd.conf", bad[i]);
                ASSERT(load(&c, &error) == -EINVAL);
                ASSERT(error);
                free(error), error = NULL;
                config_done(&c);
        }
}

static void test_node(void) {
        char *error = NULL, name[NODE_NAME_MAX + 1], again[NODE_NAME_MAX + 1];
        Config c;

        config_init(&c);
        ASSERT_STREQ(c.node_name, "");
        ASSERT(config_parse(&c, "a.conf", "[Node]\nName=n2\n", 15, NULL, &error) == 0);
        ASSERT_STREQ(c.node_name, "n2");
        /* refused, and the name before stays */
        ASSERT(config_parse(&c, "a.conf", "[Node]\nName=N_2\n", 16, NULL, &error) == -EINVAL);
        ASSERT(error && strstr(error, "[Node] Name=N_2") && strstr(error, "a node name"));
        free(error), error = NULL;
        ASSERT_STREQ(c.node_name, "n2");
        ASSERT(config_parse(&c, "a.conf", "[Node]\nName=\n", 13, NULL, &error) == -EINVAL);
        free(error), error = NULL;
        ASSERT(config_parse(&c, "a.conf", "[Node]\nName=a23456789012345678901234567890123\n", 46, NULL, &error) == -EINVAL);
        free(error), error = NULL;
        ASSERT_STREQ(c.node_name, "n2");
        config_done(&c);

        /* the default: "n" and 8 hex digits, the same each time (where there is a machine id) */
        if (config_default_node_name(name) >= 0) {
                ASSERT(node_name_is_valid(name) && strlen(name) == 9 && name[0] == 'n' &&
                       strspn(name + 1, "0123456789abcdef") == 8);
                ASSERT(config_default_node_name(again) >= 0);
                ASSERT_STREQ(name, again);
        }
}

int main(void) {
        ASSERT(mkdtemp(dir));
        test_defaults_when_missing();
        test_values_and_dropins();
        test_errors();
        test_max_file_size();
        test_text();
        test_node();
        test_network();
        test_exec_mode();
        test_sandbox();
        test_parsers();
        test_admin_group();
        test_quotas();
        return TESTS_DONE();
}
