/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the configuration: the input as the text of one file, then, cut at its NUL bytes,
 * as sandboxd.conf and drop-ins read in turn (as config_load() does, up to the first
 * error), then the consistency check and what the daemon derives from the result (the
 * paths of command units). What was accepted must hold what the parser promises. */

#include <assert.h>

#include "command.h"
#include "config.h"
#include "encoding.h"
#include "net-policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void warn(const char *msg) {
        assert(msg && msg[0]);
}

/* What check_path() lets through: absolute, normalized, not "/". */
static bool path_is_normalized(const char *p) {
        size_t l = strlen(p);

        return p[0] == '/' && l > 1 && p[l - 1] != '/' && !strstr(p, "//") && !strstr(p, "/./") &&
               !strstr(p, "/../") && !(l >= 2 && streq(p + l - 2, "/.")) && !(l >= 3 && streq(p + l - 3, "/.."));
}

/* What goes to systemd must fit in a D-Bus string. */
static bool is_utf8(const char *s) {
        bool valid;

        return utf8_valid_prefix(s, strlen(s), &valid) == strlen(s) && valid;
}

static void check_paths(char * const *l) {
        for (size_t i = 0; l && l[i]; i++) {
                assert(path_is_normalized(l[i]) && is_utf8(l[i]));
                for (size_t j = 0; j < i; j++)
                        assert(!streq(l[i], l[j]));
        }
}

static void check_domains(char * const *l) {
        for (size_t i = 0; l && l[i]; i++)
                assert(domain_pattern_is_valid(l[i]));
}

static void check_config(const Config *c) {
        _cleanup_strv_free_ char **inaccessible = NULL, **read_only = NULL, **read_write = NULL;

        assert(c->session_limits.memory_max <= c->session_limits_max.memory_max);
        assert(c->session_limits.memory_max >= 64 * 1024 && c->session_limits.tasks_max > 0);
        assert(c->session_limits.cpu_quota_percent > 0);
        assert(c->default_timeout_usec > 0 && c->default_timeout_usec <= c->max_timeout_usec);
        assert(c->idle_timeout_usec <= c->max_idle_timeout_usec);
        assert(c->pool_min_ready <= c->pool_size && c->pool_size <= 1024);
        assert(pool_profile_to_string(c->pool_profile));
        assert(c->default_network_mode == NETWORK_NONE || c->default_network_mode == NETWORK_PROXY);
        assert(c->max_connections >= 1 && c->max_connections <= 65536);
        assert(c->connection_timeout_sec >= 1 && c->connection_timeout_sec <= 86400);
        assert(c->max_body_bytes >= 1024 && c->limit_fsize > 0);
        assert(!c->path || (c->path[0] == '/' && is_utf8(c->path)));
        assert(!c->tools_directory || (path_is_normalized(c->tools_directory) && is_utf8(c->tools_directory) &&
                                       !strpbrk(c->tools_directory, " \t:")));
        check_paths(c->allow_read);
        check_paths(c->allow_write);
        check_paths(c->deny_read);
        check_paths(c->deny_write);
        check_domains(c->denied_domains);
        check_domains(c->allowed_domains);
        for (size_t i = 0; c->host_mode_tenants && c->host_mode_tenants[i]; i++)
                assert(config_tenant_may_use_host_network(c, c->host_mode_tenants[i]));
        assert(!config_tenant_may_use_host_network(c, NULL));

        /* what command units get from it: "-/path" (a missing one is no error) */
        assert(command_build_paths(c, &inaccessible, &read_only, &read_write) >= 0);
        for (char **p = inaccessible; p && *p; p++)
                assert((*p)[0] == '-' && path_is_normalized(*p + 1));
        for (char **p = read_only; p && *p; p++)
                assert((*p)[0] == '-' && path_is_normalized(*p + 1));
        for (char **p = read_write; p && *p; p++)
                assert((*p)[0] == '-' && path_is_normalized(*p + 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *) data;
        char *error = NULL;
        Config c;
        int r;

        /* one file */
        config_init(&c);
        r = config_parse(&c, "sandboxd.conf", text, size, warn, &error);
        assert(r == 0 || r == -EINVAL || r == -ENOMEM);
        assert((r == -EINVAL) == !!error);
        if (r >= 0 && config_check(&c, &error) >= 0)
                check_config(&c);
        free(error);
        error = NULL;
        config_done(&c);

        /* the file and its drop-ins, cut at the NUL bytes */
        config_init(&c);
        r = 0;
        for (size_t start = 0, i = 0; r >= 0 && i <= size; i++)
                if (i == size || data[i] == 0) {
                        char name[64];

                        snprintf(name, sizeof(name), "sandboxd.conf.d/%zu.conf", start);
                        r = config_parse(&c, name, text + start, i - start, warn, &error);
                        assert((r == -EINVAL) == !!error);
                        start = i + 1;
                }
        if (r >= 0) {
                r = config_check(&c, &error);
                assert(r >= 0 || error);
                if (r >= 0)
                        check_config(&c);
        }
        free(error);
        config_done(&c);
        return 0;
}
