/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <ini.h>
#include <limits.h>

#include "buf.h"
#include "config.h"

void config_init(Config *c) {
        *c = (Config) {
                .idle_exit_usec = 60 * USEC_PER_SEC,
                .max_body_bytes = 1024 * 1024,
                .max_connections = 512,
                .connection_timeout_sec = 60,
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
                .pool_profile = POOL_SHARED,
                .pool_size = 16,
                .pool_min_ready = 4,
                .default_timeout_usec = 600 * USEC_PER_SEC,
                .max_timeout_usec = 24 * 3600 * USEC_PER_SEC,
                .kill_grace_usec = 5 * USEC_PER_SEC,
                .output_max_bytes = 1024 * 1024,
                .max_file_bytes = 1024ULL * 1024 * 1024,
        };
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

void config_done(Config *c) {
        free(c->path);
        c->path = NULL;
        free(c->admin_tenants);
        c->admin_tenants = NULL;
}

typedef struct LoadState {
        Config *config;
        const char *file;
        void (*warn)(const char *msg);
        char *error;
} LoadState;

static int set_error(LoadState *st, const char *section, const char *key, const char *value, const char *why) {
        Buf b = {};

        free(st->error);
        (void) buf_printf(&b, "%s: [%s] %s=%s: %s", st->file, section, key, value, why);
        st->error = buf_steal(&b);
        return 0; /* tells inih to report this line */
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

static int handler(void *userdata, const char *section, const char *key, const char *value) {
        LoadState *st = userdata;
        Config *c = st->config;
        uint64_t v;
        int r;

        if (streq(section, "Daemon")) {
                if (streq(key, "IdleExitSec")) {
                        if (streq(value, "infinity") || streq(value, "0")) {
                                c->idle_exit_usec = 0;
                                return 1;
                        }
                        if (parse_duration(value, &c->idle_exit_usec) < 0)
                                return set_error(st, section, key, value, "expected a duration like 60s or 5min, or infinity");
                        return 1;
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
                if (streq(key, "AdminTenants")) {
                        free(c->admin_tenants);
                        c->admin_tenants = strdup(value);
                        return c->admin_tenants ? 1 : 0;
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
                if (streq(key, "Path")) {
                        if (value[0] != '/')
                                return set_error(st, section, key, value, "expected a colon-separated list of absolute directories");
                        free(c->path);
                        c->path = strdup(value);
                        return c->path ? 1 : 0;
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

static int load_one(LoadState *st, const char *path) {
        _cleanup_fclose_ FILE *f = NULL;
        int line;

        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;

        st->file = path;
        line = ini_parse_file(f, handler, st);
        if (line != 0) {
                if (!st->error) {
                        Buf b = {};
                        (void) buf_printf(&b, "%s:%d: syntax error", path, line);
                        st->error = buf_steal(&b);
                } else {
                        Buf b = {};
                        (void) buf_printf(&b, "%s (line %d)", st->error, line);
                        free(st->error);
                        st->error = buf_steal(&b);
                }
                return -EINVAL;
        }
        return 0;
}

static int conf_filter(const struct dirent *de) {
        size_t l = strlen(de->d_name);
        return de->d_name[0] != '.' && l > 5 && streq(de->d_name + l - 5, ".conf");
}

static int check_consistency(LoadState *st) {
        const Config *c = st->config;
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
        if (!what)
                return 0;

        st->error = strdup(what);
        return -EINVAL;
}

int config_load(Config *c, const char *path, void (*warn)(const char *msg), char **ret_error) {
        LoadState st = { .config = c, .warn = warn };
        _cleanup_free_ char *dropin = NULL;
        struct dirent **list = NULL;
        int r, n;

        r = load_one(&st, path);
        if (r < 0)
                goto fail;

        if (asprintf(&dropin, "%s.d", path) < 0)
                return -ENOMEM;

        n = scandir(dropin, &list, conf_filter, alphasort);
        if (n < 0 && errno != ENOENT) {
                r = -errno;
                goto fail;
        }
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *p = NULL;

                if (r >= 0) {
                        if (asprintf(&p, "%s/%s", dropin, list[i]->d_name) < 0)
                                r = -ENOMEM;
                        else
                                r = load_one(&st, p);
                }
                free(list[i]);
        }
        free(list);
        if (r < 0)
                goto fail;

        r = check_consistency(&st);
        if (r < 0)
                goto fail;

        return 0;

fail:
        if (ret_error && !st.error)
                (void) asprintf(&st.error, "%s: %s", path, strerror(-r));
        if (ret_error)
                *ret_error = st.error;
        else
                free(st.error);
        return r;
}
