/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What a command request needs checked against its session before a unit is built:
 * the executable, the working directory, the environment. */

#include <sys/stat.h>

#include "command.h"
#include "files.h"
#include "session.h"
#include "validate.h"

int find_executable(const char *name, const char *path, char **ret) {
        const char *p = path ?: DEFAULT_PATH;

        if (strchr(name, '/')) {
                if (name[0] != '/')
                        return -EINVAL; /* relative paths would depend on the cwd inside the sandbox */
                *ret = strdup(name);
                return *ret ? 0 : -ENOMEM;
        }

        while (*p) {
                const char *e = strchrnul(p, ':');
                _cleanup_free_ char *candidate = NULL;
                struct stat st;

                if (asprintf(&candidate, "%.*s/%s", (int) (e - p), p, name) < 0)
                        return -ENOMEM;
                if (stat(candidate, &st) >= 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) {
                        *ret = TAKE_PTR(candidate);
                        return 0;
                }
                p = *e ? e + 1 : e;
        }
        return -ENOENT;
}

int command_resolve_cwd(Session *s, const char *cwd, char **ret, RequestError *e) {
        _cleanup_free_ char *rel = NULL;
        int r;

        if (!cwd) {
                *ret = strdup(s->workspace_dir);
                return *ret ? 0 : -ENOMEM;
        }

        r = cwd_relative_to(s->workspace_dir, cwd, &rel);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                e->code = "invalid_path";
                snprintf(e->message, sizeof(e->message), "cwd must stay inside the workspace %s.", s->workspace_dir);
                return -EINVAL;
        }

        if (rel[0] != 0) {
                /* On the host the workspace of a dynamic user lives below /var/lib/private. */
                /* symlinks included: openat2(RESOLVE_BENEATH) decides, not string checks alone */
                r = workspace_check_dir_beneath(s->workspace_host_dir, rel);
                if (r == -EXDEV || r == -ELOOP) {
                        e->code = "invalid_path";
                        snprintf(e->message, sizeof(e->message), "cwd resolves outside the workspace.");
                        return -EINVAL;
                }
                if (r < 0) {
                        e->code = "invalid_path";
                        snprintf(e->message, sizeof(e->message), "cwd '%.128s' is not a directory in the workspace: %s.",
                                 rel, strerror(-r));
                        return -EINVAL;
                }
        }

        if (asprintf(ret, "%s%s%s", s->workspace_dir, rel[0] ? "/" : "", rel) < 0)
                return -ENOMEM;
        return 0;
}

int command_build_env(Session *s, unsigned command_n, char * const *user_env, char ***ret) {
        const Config *c = &s->manager->config;
        size_t n = strv_length(user_env), k = 0;
        char **env;

        env = calloc(n + 24, sizeof(char *));
        if (!env)
                return -ENOMEM;

#define ADD(...)                                                \
        do {                                                    \
                if (asprintf(&env[k], __VA_ARGS__) < 0) {       \
                        env[k] = NULL;                          \
                        strv_free(env);                         \
                        return -ENOMEM;                         \
                }                                               \
                k++;                                            \
        } while (0)

        ADD("PATH=%s", c->path ?: DEFAULT_PATH);
        ADD("LANG=C.UTF-8");
        if (s->network == NETWORK_PROXY) {
                /* The only way out. The user name tells the proxy which command asks (for
                 * its network_denied events); curl reads only the lower-case http_proxy. */
                static const char *const names[] = { "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY" };

                for (size_t i = 0; i < ELEMENTSOF(names); i++)
                        ADD("%s=http://c%u:sandboxd@127.0.0.1:%u", names[i], command_n, PROXY_PORT);
                ADD("all_proxy=socks5h://c%u:sandboxd@127.0.0.1:%u", command_n, PROXY_PORT);
                ADD("ALL_PROXY=socks5h://c%u:sandboxd@127.0.0.1:%u", command_n, PROXY_PORT);
                ADD("no_proxy=localhost,127.0.0.1,::1");
                ADD("NO_PROXY=localhost,127.0.0.1,::1");
        }
        for (size_t i = 0; i < n; i++) {
                /* The caller's PATH and LANG replace ours. */
                if (startswith(user_env[i], "PATH=")) {
                        free(env[0]);
                        env[0] = strdup(user_env[i]);
                } else if (startswith(user_env[i], "LANG=")) {
                        free(env[1]);
                        env[1] = strdup(user_env[i]);
                } else
                        ADD("%s", user_env[i]);
                if (!env[0] || !env[1]) {
                        strv_free(env);
                        return -ENOMEM;
                }
        }
        /* The scope's own directories, after the caller's so they cannot be overridden. */
        ADD("HOME=%s", s->home_dir);
        ADD("TMPDIR=%s", s->tmp_dir);
        ADD("XDG_CONFIG_HOME=%s/.config", s->home_dir);
        ADD("XDG_CACHE_HOME=%s/.cache", s->home_dir);
        ADD("XDG_DATA_HOME=%s/.local/share", s->home_dir);
        ADD("XDG_STATE_HOME=%s/.local/state", s->home_dir);
#undef ADD

        *ret = env;
        return 0;
}


/* "-path": a path that does not exist is no error for PID 1. */
static int add_paths(char ***list, size_t *n, char * const *paths) {
        for (size_t i = 0; paths && paths[i]; i++) {
                char **l = realloc(*list, (*n + 2) * sizeof(char *));

                if (!l)
                        return -ENOMEM;
                *list = l;
                l[*n + 1] = NULL;
                if (asprintf(&l[*n], "-%s", paths[i]) < 0) {
                        l[*n] = NULL;
                        return -ENOMEM;
                }
                (*n)++;
        }
        if (!*list && !(*list = calloc(1, sizeof(char *))))
                return -ENOMEM;
        return 0;
}

int command_build_paths(const Config *c, char ***ret_inaccessible, char ***ret_read_only, char ***ret_read_write) {
        _cleanup_strv_free_ char **inacc = NULL, **ro = NULL, **rw = NULL;
        size_t ni = 0, nro = 0, nrw = 0;
        int r;

        if ((r = add_paths(&inacc, &ni, (char * const *) config_builtin_inaccessible)) < 0 ||
            (r = add_paths(&inacc, &ni, c->deny_read)) < 0 ||
            (r = add_paths(&ro, &nro, c->allow_read)) < 0 ||
            (r = add_paths(&ro, &nro, c->deny_write)) < 0 ||
            (r = add_paths(&rw, &nrw, c->allow_write)) < 0)
                return r;
        *ret_inaccessible = TAKE_PTR(inacc);
        *ret_read_only = TAKE_PTR(ro);
        *ret_read_write = TAKE_PTR(rw);
        return 0;
}
