/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <ini.h>
#include <limits.h>
#include <stddef.h>
#include <systemd/sd-id128.h>

#include "buf.h"
#include "config.h"
#include "encoding.h"
#include "validate.h"

void config_init(Config *c) {
        *c = (Config) {
                .idle_exit_usec = 60 * USEC_PER_SEC,
                .max_body_bytes = 1024 * 1024,
                .max_connections = 512,
                .connection_timeout_sec = 60,
                .max_unauthenticated = 64,
                .authentication_timeout_usec = 5 * USEC_PER_SEC,
                .session_limits = {
                        .memory_max = 1024ULL * 1024 * 1024,
                        .cpu_quota_percent = 100,
                        .tasks_max = 256,
                },
                .session_limits_max = {
                        .memory_max = 8ULL * 1024 * 1024 * 1024,
                        .cpu_quota_percent = 400,
                        .tasks_max = 4096,
                },
                .idle_timeout_usec = 30 * 60 * USEC_PER_SEC,
                .max_idle_timeout_usec = 24 * 3600 * USEC_PER_SEC,
                .max_lifetime_usec = 24 * 3600 * USEC_PER_SEC,
                .retain_closed_usec = 3600 * USEC_PER_SEC,
                .max_sessions_per_tenant = 64,
                .max_sessions_per_user = 16,
                .pool_profile = POOL_SHARED,
                .pool_size = 16,
                .pool_min_ready = 4,
                .default_timeout_usec = 600 * USEC_PER_SEC,
                .max_timeout_usec = 24 * 3600 * USEC_PER_SEC,
                .kill_grace_usec = 5 * USEC_PER_SEC,
                .output_max_bytes = 1024 * 1024,
                .max_commands_per_session = 256,
                .max_running_per_session = 64,
                .spool_max_per_session = 32 * 1024 * 1024,
                .spool_max = 256 * 1024 * 1024,
                .max_file_bytes = 1024ULL * 1024 * 1024,
                .default_exec_mode = EXEC_MODE_UNIT,
                .default_network_mode = NETWORK_PROXY,
                .proxy_max_connections = 1024,
                .proxy_max_connections_per_session = 64,
                .proxy_max_lookups = 64,
                .proxy_max_lookups_per_session = 8,
                .proxy_connect_timeout_usec = 30 * USEC_PER_SEC,
                .proxy_idle_timeout_usec = 600 * USEC_PER_SEC,
                .limit_fsize = UINT64_MAX,
                .image_max_bytes = 8ULL * 1024 * 1024 * 1024,
                .port_min = 1024,
                .port_max = 65535,
                .host_port_min = 40000,
                .host_port_max = 40999,
                .max_ports_per_session = 8,
                .port_max_connections = 64,
        };
        /* Direct connections in mode host: not to this host's loopback services (sandboxd's
         * own API among them), link-local addresses (cloud metadata) or multicast. */
        (void) address_ranges_parse("localhost link-local multicast", &c->ip_deny, &c->n_ip_deny);
}

const char *const config_builtin_inaccessible[] = {
        "/etc/ssh",
        "/etc/sandboxd",
        "/run/dbus",
        "/run/sandboxd",
        "/var/lib/sandboxd/sessions",
        /* What PID 1 keeps of every unit (their files name every session, their users, their
         * working directories), the users of other scopes (the userdb socket gets an
         * empty directory instead: systemd.c), the journal's sockets (nothing a
         * command logs can pass for another program's lines), and PID 1's oomd socket. */
        "/run/systemd/transient",
        "/run/systemd/units",
        "/run/systemd/dynamic-uid",
        "/run/systemd/journal",
        "/run/systemd/io.system.ManagedOOM",
        NULL,
};

static bool word_in_list(char * const *l, const char *w) {
        for (size_t i = 0; l && l[i]; i++)
                if (streq(l[i], w))
                        return true;
        return false;
}

bool config_tenant_may_use_host_network(const Config *c, const char *tenant) {
        return tenant && word_in_list(c->host_mode_tenants, tenant);
}

const char *pool_profile_to_string(PoolProfile p) {
        static const char *const table[_POOL_PROFILE_MAX] = {
                [POOL_SHARED] = "shared",
                [POOL_LOCAL] = "local",
        };
        if (p < 0 || p >= _POOL_PROFILE_MAX)
                return NULL;
        return table[p];
}

/* sandboxd's own app id for sd_id128_get_machine_app_specific(): fixed forever, or the
 * default names of nodes change */
#define NODE_APP_ID SD_ID128_MAKE(5e,9b,2c,41,d7,0a,4f,63,8e,12,b4,7c,a9,d3,06,f1)

int config_default_node_name(char ret[static NODE_NAME_MAX + 1]) {
        sd_id128_t id;
        char hex[SD_ID128_STRING_MAX];
        int r;

        r = sd_id128_get_machine_app_specific(NODE_APP_ID, &id);
        if (r < 0)
                return r;
        snprintf(ret, NODE_NAME_MAX + 1, "n%.8s", sd_id128_to_string(id, hex));
        return 0;
}

void config_done(Config *c) {
        free(c->path);
        c->path = NULL;
        free(c->admin_tenants);
        c->admin_tenants = NULL;
        free(c->admin_group);
        c->admin_group = NULL;
        strv_free(c->host_mode_tenants);
        strv_free(c->denied_domains);
        strv_free(c->allowed_domains);
        c->host_mode_tenants = c->denied_domains = c->allowed_domains = NULL;
        free(c->proxy_allowed);
        free(c->proxy_denied);
        free(c->ip_allow);
        free(c->ip_deny);
        c->proxy_allowed = c->proxy_denied = c->ip_allow = c->ip_deny = NULL;
        c->n_proxy_allowed = c->n_proxy_denied = c->n_ip_allow = c->n_ip_deny = 0;
        strv_free(c->allow_read);
        strv_free(c->allow_write);
        strv_free(c->deny_read);
        strv_free(c->deny_write);
        c->allow_read = c->allow_write = c->deny_read = c->deny_write = NULL;
        free(c->tools_directory);
        c->tools_directory = NULL;
        free(c->images_directory);
        c->images_directory = NULL;
        free(c->default_image);
        c->default_image = NULL;
}

typedef struct LoadState {
        Config *config;
        const char *file;
        void (*warn)(const char *msg);
        const char *text, *end; /* what inih has not read yet */
        unsigned line;          /* the line inih read last */
        bool line_too_long;
        bool oom;
        char *error;            /* the first invalid value, on error_line */
        unsigned error_line;
} LoadState;

static int set_error(LoadState *st, const char *section, const char *key, const char *value, const char *why) {
        Buf b = {};

        /* inih reports the first line in error: keep what was wrong there */
        if (st->error)
                return 0;
        if (buf_printf(&b, "%s: [%s] %s=%s: %s", st->file, section, key, value, why) < 0)
                st->oom = true;
        st->error = buf_steal(&b);
        st->error_line = st->line;
        return 0; /* tells inih to report this line */
}

static int set_oom(LoadState *st) {
        st->oom = true;
        return 0;
}

static int parse_limit_key(LoadState *st, Limits *l, const char *section, const char *key, const char *value,
                           const char *prefix) {
        char name[64];
        int r;

        snprintf(name, sizeof(name), "%sMemoryMax", prefix);
        if (streq(key, name)) {
                r = parse_size(value, &l->memory_max);
                if (r < 0 || l->memory_max < 4096 * 16)
                        return set_error(st, section, key, value, "expected a size of at least 64K, like 512M or 2G");
                return 1;
        }
        snprintf(name, sizeof(name), "%sCPUQuota", prefix);
        if (streq(key, name)) {
                r = parse_percent(value, &l->cpu_quota_percent);
                if (r < 0)
                        return set_error(st, section, key, value, "expected a percentage like 50% or 200%");
                return 1;
        }
        snprintf(name, sizeof(name), "%sTasksMax", prefix);
        if (streq(key, name)) {
                r = parse_uint64(value, &l->tasks_max);
                if (r < 0 || l->tasks_max == 0)
                        return set_error(st, section, key, value, "expected a positive number");
                return 1;
        }
        return -ENOENT;
}

/* Lists: every assignment adds its space-separated words, an empty one empties the list. */
typedef int (*WordCheck)(const char *word, char *normalized, size_t n);

static int add_words(char ***list, const char *value, WordCheck check, char **ret_bad) {
        size_t n = strv_length(*list);

        if (value[0] == 0) {
                strv_free(*list);
                *list = NULL;
                return 0;
        }
        while (*value) {
                char word[PATH_MAX], normalized[PATH_MAX], **l;
                size_t len;

                value += strspn(value, " \t");
                len = strcspn(value, " \t");
                if (len == 0)
                        break;
                if (len >= sizeof(word))
                        return -ENAMETOOLONG;
                memcpy(word, value, len);
                word[len] = 0;
                value += len;
                if (check(word, normalized, sizeof(normalized)) < 0) {
                        *ret_bad = strdup(word);
                        return -EINVAL;
                }
                if (word_in_list(*list, normalized))
                        continue;
                l = realloc(*list, (n + 2) * sizeof(char *));
                if (!l)
                        return -ENOMEM;
                *list = l;
                if (!(l[n] = strdup(normalized)))
                        return -ENOMEM;
                l[++n] = NULL;
        }
        return 0;
}

static int check_tenant(const char *w, char *out, size_t n) {
        if (strlen(w) >= n || strlen(w) > 64)
                return -EINVAL;
        strcpy(out, w);
        return 0;
}

static int check_domain(const char *w, char *out, size_t n) {
        char buf[HOST_NAME_MAX_LEN + 3];

        if (domain_pattern_normalize(w, buf) < 0 || strlen(buf) >= n)
                return -EINVAL;
        strcpy(out, buf);
        return 0;
}

/* An absolute path without ".", ".." or empty components, a trailing slash dropped: as
 * systemd wants the paths of ReadOnlyPaths= and the like (it refuses "//srv"). */
static int check_path(const char *w, char *out, size_t n) {
        size_t l = strlen(w);

        if (w[0] != '/' || l >= n || strstr(w, "//"))
                return -EINVAL;
        for (const char *p = w + 1; *p;) {
                size_t k = strcspn(p, "/");

                if ((k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
                        return -EINVAL;
                p += k;
                if (*p == '/')
                        p++;
        }
        strcpy(out, w);
        if (l > 1 && out[l - 1] == '/')
                out[l - 1] = 0;
        return streq(out, "/") ? -EINVAL : 0;
}

static int set_words(LoadState *st, char ***list, const char *section, const char *key, const char *value,
                     WordCheck check, const char *what) {
        _cleanup_free_ char *bad = NULL;
        int r;

        r = add_words(list, value, check, &bad);
        if (r == -ENOMEM)
                return set_oom(st);
        if (r < 0) {
                char why[256];

                snprintf(why, sizeof(why), "'%.100s' is not %s", bad ?: "?", what);
                return set_error(st, section, key, value, why);
        }
        return 1;
}

static int set_ranges(LoadState *st, AddressRange **list, size_t *n, const char *section, const char *key,
                      const char *value) {
        if (value[0] == 0) {
                free(*list);
                *list = NULL;
                *n = 0;
                return 1;
        }
        if (address_ranges_parse(value, list, n) < 0)
                return set_error(st, section, key, value,
                                 "expected addresses or prefixes like 10.0.0.0/8 or fd00::/8, or any, localhost, "
                                 "link-local, multicast, private");
        return 1;
}

static int handler(void *userdata, const char *section, const char *key, const char *value) {
        LoadState *st = userdata;
        Config *c = st->config;
        uint64_t v;
        int r;

        if (streq(section, "Node")) {
                if (streq(key, "Name")) {
                        if (!node_name_is_valid(value))
                                return set_error(st, section, key, value,
                                                 "expected a node name: 1 to 32 of a-z and 0-9, starting with a letter");
                        snprintf(c->node_name, sizeof(c->node_name), "%s", value);
                        return 1;
                }
        } else if (streq(section, "Daemon")) {
                if (streq(key, "IdleExitSec")) {
                        if (streq(value, "infinity") || streq(value, "0")) {
                                c->idle_exit_usec = 0;
                                return 1;
                        }
                        if (parse_duration(value, &c->idle_exit_usec) < 0)
                                return set_error(st, section, key, value, "expected a duration like 60s or 5min, or infinity");
                        return 1;
                }
                if (streq(key, "AdminGroup")) {
                        /* empty: none; a group name otherwise (whether it exists is asked per caller) */
                        if (*value && !user_name_is_valid(value))
                                return set_error(st, section, key, value, "expected a group name, or empty for none");
                        free(c->admin_group);
                        c->admin_group = !*value ? NULL : strdup(value);
                        return *value && !c->admin_group ? set_oom(st) : 1;
                }
        } else if (streq(section, "HTTP")) {
                if (streq(key, "MaxBodySize")) {
                        if (parse_size(value, &c->max_body_bytes) < 0 || c->max_body_bytes < 1024)
                                return set_error(st, section, key, value, "expected a size of at least 1K");
                        return 1;
                }
                if (streq(key, "MaxConnections")) {
                        if (parse_uint64(value, &v) < 0 || v == 0 || v > 65536)
                                return set_error(st, section, key, value, "expected a number between 1 and 65536");
                        c->max_connections = (unsigned) v;
                        return 1;
                }
                if (streq(key, "MaxConnectionsPerIP")) {
                        if (streq(value, "infinity"))
                                v = 0;
                        else if (parse_uint64(value, &v) < 0 || v == 0 || v > 65536)
                                return set_error(st, section, key, value, "expected a number between 1 and 65536, or infinity");
                        c->max_connections_per_ip = (unsigned) v;
                        return 1;
                }
                if (streq(key, "MaxUnauthenticatedConnections")) {
                        if (parse_uint64(value, &v) < 0 || v == 0 || v > 65536)
                                return set_error(st, section, key, value, "expected a number between 1 and 65536");
                        c->max_unauthenticated = (unsigned) v;
                        return 1;
                }
                if (streq(key, "AuthenticationTimeoutSec")) {
                        if (parse_duration(value, &v) < 0 || v < USEC_PER_SEC / 10 || v > 3600 * USEC_PER_SEC)
                                return set_error(st, section, key, value, "expected a duration between 100ms and 1h");
                        c->authentication_timeout_usec = v;
                        return 1;
                }
                if (streq(key, "AdminTenants")) {
                        free(c->admin_tenants);
                        c->admin_tenants = strdup(value);
                        return c->admin_tenants ? 1 : set_oom(st);
                }
                if (streq(key, "ConnectionTimeoutSec")) {
                        if (parse_duration(value, &v) < 0 || v < USEC_PER_SEC || v > 86400 * USEC_PER_SEC)
                                return set_error(st, section, key, value, "expected a duration between 1s and 1d");
                        c->connection_timeout_sec = (unsigned) (v / USEC_PER_SEC);
                        return 1;
                }
        } else if (streq(section, "Session")) {
                r = parse_limit_key(st, &c->session_limits, section, key, value, "");
                if (r != -ENOENT)
                        return r;
                r = parse_limit_key(st, &c->session_limits_max, section, key, value, "Max");
                if (r != -ENOENT)
                        return r;
                if (streq(key, "IdleTimeoutSec") || streq(key, "MaxIdleTimeoutSec") || streq(key, "MaxLifetimeSec") ||
                    streq(key, "RetainClosedSec")) {
                        if (parse_duration(value, &v) < 0 || v < USEC_PER_SEC)
                                return set_error(st, section, key, value, "expected a duration of at least 1s, like 30min or 1d");
                        if (streq(key, "IdleTimeoutSec"))
                                c->idle_timeout_usec = v;
                        else if (streq(key, "MaxIdleTimeoutSec"))
                                c->max_idle_timeout_usec = v;
                        else if (streq(key, "MaxLifetimeSec"))
                                c->max_lifetime_usec = v;
                        else
                                c->retain_closed_usec = v;
                        return 1;
                }
                if (streq(key, "ExecMode")) {
                        ExecMode mode = exec_mode_from_string(value);

                        if (mode < 0)
                                return set_error(st, section, key, value, "expected 'unit' or 'session'");
                        c->default_exec_mode = mode;
                        return 1;
                }
                if (streq(key, "MaxSessionsPerTenant") || streq(key, "MaxSessionsPerUser")) {
                        if (parse_uint64(value, &v) < 0 || v == 0 || v > 65536)
                                return set_error(st, section, key, value, "expected a number between 1 and 65536");
                        if (streq(key, "MaxSessionsPerTenant"))
                                c->max_sessions_per_tenant = (unsigned) v;
                        else
                                c->max_sessions_per_user = (unsigned) v;
                        return 1;
                }
        } else if (streq(section, "Pool")) {
                if (streq(key, "Profile")) {
                        if (streq(value, "shared"))
                                c->pool_profile = POOL_SHARED;
                        else if (streq(value, "local"))
                                c->pool_profile = POOL_LOCAL;
                        else
                                return set_error(st, section, key, value, "expected 'shared' or 'local'");
                        return 1;
                }
                if (streq(key, "PoolSize") || streq(key, "MinReady")) {
                        if (parse_uint64(value, &v) < 0 || v > 1024)
                                return set_error(st, section, key, value, "expected a number between 0 and 1024");
                        if (streq(key, "PoolSize"))
                                c->pool_size = (unsigned) v;
                        else
                                c->pool_min_ready = (unsigned) v;
                        return 1;
                }
        } else if (streq(section, "Command")) {
                if (streq(key, "DefaultTimeoutSec") || streq(key, "MaxTimeoutSec") || streq(key, "TimeoutStopSec")) {
                        if (parse_duration(value, &v) < 0 || v == 0)
                                return set_error(st, section, key, value, "expected a positive duration like 30s or 10min");
                        if (streq(key, "DefaultTimeoutSec"))
                                c->default_timeout_usec = v;
                        else if (streq(key, "MaxTimeoutSec"))
                                c->max_timeout_usec = v;
                        else
                                c->kill_grace_usec = v;
                        return 1;
                }
                if (streq(key, "OutputMax")) {
                        if (parse_size(value, &c->output_max_bytes) < 0)
                                return set_error(st, section, key, value, "expected a size like 1M");
                        return 1;
                }
                if (streq(key, "MaxCommandsPerSession") || streq(key, "MaxRunningCommandsPerSession")) {
                        if (parse_uint64(value, &v) < 0 || v == 0 || v > 65536)
                                return set_error(st, section, key, value, "expected a number between 1 and 65536");
                        if (streq(key, "MaxCommandsPerSession"))
                                c->max_commands_per_session = (unsigned) v;
                        else
                                c->max_running_per_session = (unsigned) v;
                        return 1;
                }
                if (streq(key, "SpoolMaxPerSession") || streq(key, "SpoolMax")) {
                        if (parse_size(value, &v) < 0)
                                return set_error(st, section, key, value, "expected a size like 32M");
                        if (streq(key, "SpoolMax"))
                                c->spool_max = v;
                        else
                                c->spool_max_per_session = v;
                        return 1;
                }
                if (streq(key, "Path")) {
                        if (value[0] != '/')
                                return set_error(st, section, key, value, "expected a colon-separated list of absolute directories");
                        free(c->path);
                        c->path = strdup(value);
                        return c->path ? 1 : set_oom(st);
                }
        } else if (streq(section, "Network")) {
                if (streq(key, "DefaultMode")) {
                        NetworkMode mode = network_mode_from_string(value);

                        if (mode != NETWORK_NONE && mode != NETWORK_PROXY)
                                return set_error(st, section, key, value, "expected 'proxy' or 'none'");
                        c->default_network_mode = mode;
                        return 1;
                }
                if (streq(key, "HostModeTenants"))
                        return set_words(st, &c->host_mode_tenants, section, key, value, check_tenant, "a tenant name");
                if (streq(key, "DefaultDeniedDomains") || streq(key, "AllowedDomains"))
                        return set_words(st, streq(key, "AllowedDomains") ? &c->allowed_domains : &c->denied_domains,
                                         section, key, value, check_domain,
                                         "a domain name like example.com or *.example.com");
                if (streq(key, "ProxyAllowedAddresses"))
                        return set_ranges(st, &c->proxy_allowed, &c->n_proxy_allowed, section, key, value);
                if (streq(key, "ProxyDeniedAddresses"))
                        return set_ranges(st, &c->proxy_denied, &c->n_proxy_denied, section, key, value);
                if (streq(key, "IPAddressAllow"))
                        return set_ranges(st, &c->ip_allow, &c->n_ip_allow, section, key, value);
                if (streq(key, "IPAddressDeny"))
                        return set_ranges(st, &c->ip_deny, &c->n_ip_deny, section, key, value);
                if (streq(key, "ProxyMaxConnections") || streq(key, "ProxyMaxConnectionsPerSession")) {
                        if (parse_uint64(value, &v) < 0 || v == 0 || v > 65536)
                                return set_error(st, section, key, value, "expected a number between 1 and 65536");
                        if (streq(key, "ProxyMaxConnections"))
                                c->proxy_max_connections = (unsigned) v;
                        else
                                c->proxy_max_connections_per_session = (unsigned) v;
                        return 1;
                }
                if (streq(key, "ProxyMaxLookups") || streq(key, "ProxyMaxLookupsPerSession")) {
                        /* each one a thread while it runs */
                        if (parse_uint64(value, &v) < 0 || v == 0 || v > 1024)
                                return set_error(st, section, key, value, "expected a number between 1 and 1024");
                        if (streq(key, "ProxyMaxLookups"))
                                c->proxy_max_lookups = (unsigned) v;
                        else
                                c->proxy_max_lookups_per_session = (unsigned) v;
                        return 1;
                }
                if (streq(key, "ProxyConnectTimeoutSec") || streq(key, "ProxyIdleTimeoutSec")) {
                        if (parse_duration(value, &v) < 0 || v < USEC_PER_SEC || v > 86400 * USEC_PER_SEC)
                                return set_error(st, section, key, value, "expected a duration between 1s and 1d");
                        if (streq(key, "ProxyConnectTimeoutSec"))
                                c->proxy_connect_timeout_usec = v;
                        else
                                c->proxy_idle_timeout_usec = v;
                        return 1;
                }
        } else if (streq(section, "Ports")) {
                if (streq(key, "Range") || streq(key, "HostRange")) {
                        uint64_t lo, hi;
                        const char *dash = strchr(value, '-');
                        char first[16];

                        if (!dash || (size_t) (dash - value) >= sizeof(first))
                                return set_error(st, section, key, value, "expected a range of ports like 1024-65535");
                        memcpy(first, value, (size_t) (dash - value));
                        first[dash - value] = 0;
                        if (parse_uint64(first, &lo) < 0 || parse_uint64(dash + 1, &hi) < 0 || lo == 0 || hi > 65535 ||
                            lo > hi)
                                return set_error(st, section, key, value, "expected a range of ports like 1024-65535");
                        if (streq(key, "Range")) {
                                c->port_min = (uint16_t) lo;
                                c->port_max = (uint16_t) hi;
                        } else {
                                c->host_port_min = (uint16_t) lo;
                                c->host_port_max = (uint16_t) hi;
                        }
                        return 1;
                }
                if (streq(key, "MaxPerSession") || streq(key, "MaxConnections")) {
                        if (parse_uint64(value, &v) < 0 || v == 0 || v > (streq(key, "MaxPerSession") ? 64 : 65536))
                                return set_error(st, section, key, value,
                                                 streq(key, "MaxPerSession") ? "expected a number between 1 and 64"
                                                                             : "expected a number between 1 and 65536");
                        if (streq(key, "MaxPerSession"))
                                c->max_ports_per_session = (unsigned) v;
                        else
                                c->port_max_connections = (unsigned) v;
                        return 1;
                }
        } else if (streq(section, "Sandbox")) {
                static const struct {
                        const char *key;
                        size_t offset;
                } path_lists[] = {
                        { "AllowRead", offsetof(Config, allow_read) },
                        { "AllowWrite", offsetof(Config, allow_write) },
                        { "DenyRead", offsetof(Config, deny_read) },
                        { "DenyWrite", offsetof(Config, deny_write) },
                };

                for (size_t i = 0; i < ELEMENTSOF(path_lists); i++)
                        if (streq(key, path_lists[i].key))
                                return set_words(st, (char ***) ((uint8_t *) c + path_lists[i].offset), section, key,
                                                 value, check_path,
                                                 "an absolute path without '.' or '..' components (and not /)");
                if (streq(key, "ToolsDirectory")) {
                        char buf[PATH_MAX];

                        if (value[0] == 0) {
                                free(c->tools_directory);
                                c->tools_directory = NULL;
                                return 1;
                        }
                        if (check_path(value, buf, sizeof(buf)) < 0 || strpbrk(value, " \t:"))
                                return set_error(st, section, key, value,
                                                 "expected an absolute path without '.', '..', ':' or spaces");
                        free(c->tools_directory);
                        c->tools_directory = strdup(buf);
                        return c->tools_directory ? 1 : set_oom(st);
                }
                if (streq(key, "LimitFSIZE")) {
                        if (streq(value, "infinity"))
                                c->limit_fsize = UINT64_MAX;
                        else if (parse_size(value, &c->limit_fsize) < 0 || c->limit_fsize == 0)
                                return set_error(st, section, key, value, "expected a size like 100M or 2G, or infinity");
                        return 1;
                }
        } else if (streq(section, "Images")) {
                if (streq(key, "Directory")) {
                        char buf[PATH_MAX];

                        if (check_path(value, buf, sizeof(buf)) < 0 || strpbrk(value, " \t:"))
                                return set_error(st, section, key, value,
                                                 "expected an absolute path without '.', '..', ':' or spaces");
                        free(c->images_directory);
                        c->images_directory = strdup(buf);
                        return c->images_directory ? 1 : set_oom(st);
                }
                if (streq(key, "MaxSize")) {
                        if (parse_size(value, &c->image_max_bytes) < 0 || c->image_max_bytes == 0)
                                return set_error(st, section, key, value, "expected a size like 2G");
                        return 1;
                }
                if (streq(key, "Default")) {
                        if (value[0] != 0 && !image_name_is_valid(value))
                                return set_error(st, section, key, value,
                                                 "expected an image name (a-z, 0-9, '_', '-'; 1 to 64, "
                                                 "starting with a letter or digit), or empty");
                        free(c->default_image);
                        c->default_image = value[0] ? strdup(value) : NULL;
                        return !value[0] || c->default_image ? 1 : set_oom(st);
                }
        } else if (streq(section, "Files")) {
                if (streq(key, "MaxFileSize")) {
                        if (streq(value, "infinity"))
                                c->max_file_bytes = UINT64_MAX;
                        else if (parse_size(value, &c->max_file_bytes) < 0)
                                return set_error(st, section, key, value, "expected a size like 512M or 4G, or infinity");
                        return 1;
                }
        }

        if (st->warn) {
                char msg[512];
                snprintf(msg, sizeof(msg), "%s: unknown setting [%s] %s=, ignoring.", st->file, section, key);
                st->warn(msg);
        }
        return 1;
}

/* inih's reader: one line at a time, counted. A line longer than inih's buffer would come
 * back as two lines, the second parsed as a setting of its own: refused instead. */
static char *read_line(char *str, int size, void *userdata) {
        LoadState *st = userdata;
        const char *eol;
        size_t n;

        if (st->text >= st->end || st->line_too_long)
                return NULL;
        eol = memchr(st->text, '\n', (size_t) (st->end - st->text));
        n = eol ? (size_t) (eol - st->text) + 1 : (size_t) (st->end - st->text);
        st->line++;
        if (n >= (size_t) size) {
                st->line_too_long = true;
                return NULL;
        }
        memcpy(str, st->text, n);
        str[n] = 0;
        st->text += n;
        return str;
}

int config_parse(Config *c, const char *name, const char *text, size_t size, void (*warn)(const char *msg),
                 char **ret_error) {
        LoadState st = { .config = c, .file = name, .warn = warn, .text = text, .end = text + size };
        _cleanup_free_ char *error = NULL;
        int line;

        bool utf8;
        size_t valid;

        if (memchr(text, 0, size)) {
                if (ret_error)
                        (void) asprintf(ret_error, "%s: contains a NUL byte", name);
                return -EINVAL;
        }
        /* Paths and Path= go to systemd as D-Bus strings, which are UTF-8. */
        valid = utf8_valid_prefix(text, size, &utf8);
        if (valid < size) {
                unsigned n = 1;

                for (size_t i = 0; i < valid; i++)
                        n += text[i] == '\n';
                if (ret_error)
                        (void) asprintf(ret_error, "%s:%u: not valid UTF-8", name, n);
                return -EINVAL;
        }

        line = ini_parse_stream(read_line, &st, handler, &st);
        error = TAKE_PTR(st.error);
        if (st.oom)
                return -ENOMEM;
        if (line == 0 && !st.line_too_long)
                return 0;

        if (ret_error) {
                if (line == 0)
                        (void) asprintf(ret_error, "%s:%u: the line is longer than %d bytes (a list can be split over "
                                        "several assignments)", name, st.line, INI_MAX_LINE - 3);
                else if (error && st.error_line == (unsigned) line)
                        (void) asprintf(ret_error, "%s (line %d)", error, line);
                else
                        (void) asprintf(ret_error, "%s:%d: syntax error", name, line);
        }
        return -EINVAL;
}

/* Parses the file at path on top of *c; a missing file is fine. */
static int load_file(Config *c, const char *path, void (*warn)(const char *msg), char **ret_error) {
        _cleanup_fclose_ FILE *f = NULL;
        Buf b = {};
        char chunk[4096];
        size_t n;
        int r;

        f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT)
                        return 0;
                r = -errno;
                if (ret_error)
                        (void) asprintf(ret_error, "%s: %s", path, strerror(-r));
                return r;
        }
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
                if (b.len + n > CONFIG_FILE_MAX) {
                        buf_done(&b);
                        if (ret_error)
                                (void) asprintf(ret_error, "%s: larger than %d bytes", path, CONFIG_FILE_MAX);
                        return -EFBIG;
                }
                r = buf_append(&b, chunk, n);
                if (r < 0) {
                        buf_done(&b);
                        return r;
                }
        }
        if (ferror(f)) {
                buf_done(&b);
                if (ret_error)
                        (void) asprintf(ret_error, "%s: %s", path, strerror(EIO));
                return -EIO;
        }
        r = config_parse(c, path, b.data ?: "", b.len, warn, ret_error);
        buf_done(&b);
        return r;
}

static int conf_filter(const struct dirent *de) {
        size_t l = strlen(de->d_name);
        return de->d_name[0] != '.' && l > 5 && streq(de->d_name + l - 5, ".conf");
}

int config_check(const Config *c, char **ret_error) {
        const char *what = NULL;

        if (c->session_limits.memory_max > c->session_limits_max.memory_max)
                what = "MemoryMax= is above MaxMemoryMax=";
        else if (c->session_limits.cpu_quota_percent > c->session_limits_max.cpu_quota_percent)
                what = "CPUQuota= is above MaxCPUQuota=";
        else if (c->session_limits.tasks_max > c->session_limits_max.tasks_max)
                what = "TasksMax= is above MaxTasksMax=";
        else if (c->default_timeout_usec > c->max_timeout_usec)
                what = "DefaultTimeoutSec= is above MaxTimeoutSec=";
        else if (c->idle_timeout_usec > c->max_idle_timeout_usec)
                what = "IdleTimeoutSec= is above MaxIdleTimeoutSec=";
        else if (c->pool_min_ready > c->pool_size)
                what = "MinReady= is above PoolSize=";
        else if (c->max_running_per_session > c->max_commands_per_session)
                what = "MaxRunningCommandsPerSession= is above MaxCommandsPerSession=";
        else if (c->spool_max_per_session > c->spool_max)
                what = "SpoolMaxPerSession= is above SpoolMax=";
        if (!what)
                return 0;

        if (ret_error)
                *ret_error = strdup(what);
        return -EINVAL;
}

int config_load(Config *c, const char *path, void (*warn)(const char *msg), char **ret_error) {
        _cleanup_free_ char *dropin = NULL, *error = NULL;
        struct dirent **list = NULL;
        int r, n;

        r = load_file(c, path, warn, &error);
        if (r < 0)
                goto fail;

        if (asprintf(&dropin, "%s.d", path) < 0)
                return -ENOMEM;

        n = scandir(dropin, &list, conf_filter, alphasort);
        if (n < 0 && errno != ENOENT) {
                r = -errno;
                (void) asprintf(&error, "%s: %s", dropin, strerror(-r));
                goto fail;
        }
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *p = NULL;

                if (r >= 0) {
                        if (asprintf(&p, "%s/%s", dropin, list[i]->d_name) < 0)
                                r = -ENOMEM;
                        else
                                r = load_file(c, p, warn, &error);
                }
                free(list[i]);
        }
        free(list);
        if (r < 0)
                goto fail;

        r = config_check(c, &error);
        if (r < 0)
                goto fail;

        return 0;

fail:
        if (!error)
                (void) asprintf(&error, "%s: %s", path, strerror(-r));
        if (ret_error)
                *ret_error = TAKE_PTR(error);
        return r;
}
