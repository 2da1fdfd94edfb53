/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What a command request needs checked against its session before a unit is built:
 * the executable, the working directory, the environment; and the session's sandbox,
 * which its command units and its executor unit share. */

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include "cgroup.h"
#include "command.h"
#include "files.h"
#include "host-addresses.h"
#include "log.h"
#include "proxy.h"
#include "scope.h"
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

/* Mode host: IPAddressDeny= of the config and every address of this host, so that its
 * services on any of them are no nearer than on loopback (which the config denies). From
 * the kernel's local routing table (host-addresses.c); in the moment before its first read
 * after a start, from the interfaces. */
static int host_mode_deny(Manager *m, AddressRange **ret, size_t *ret_n) {
        _cleanup_free_ AddressRange *l = NULL;
        const AddressRange *host;
        size_t n = m->config.n_ip_deny, n_host;
        struct ifaddrs *ifa = NULL;

        if (host_addresses_get(proxy_host_addresses(m->proxy), &host, &n_host) < 0) {
                host = NULL;
                n_host = 0;
                if (getifaddrs(&ifa) < 0)
                        return -errno;
                for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
                        n_host++;
        }
        l = calloc(n + n_host + 1, sizeof(AddressRange));
        if (!l) {
                freeifaddrs(ifa);
                return -ENOMEM;
        }
        if (n > 0)
                memcpy(l, m->config.ip_deny, n * sizeof(AddressRange));
        if (host) {
                memcpy(l + n, host, n_host * sizeof(AddressRange));
                n += n_host;
        }
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
                if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
                        continue;
                l[n] = (AddressRange) { .family = i->ifa_addr->sa_family,
                                        .prefixlen = i->ifa_addr->sa_family == AF_INET ? 32 : 128 };
                if (i->ifa_addr->sa_family == AF_INET)
                        memcpy(l[n].addr, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, 4);
                else
                        memcpy(l[n].addr, &((struct sockaddr_in6 *) i->ifa_addr)->sin6_addr, 16);
                n++;
        }
        freeifaddrs(ifa);
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}

int session_sandbox_spec(Session *s, SessionSandbox *b) {
        Manager *m = s->manager;
        int r;

        *b = (SessionSandbox) {};

        r = command_build_paths(&m->config, &b->inaccessible, &b->read_only, &b->read_write);
        if (r < 0)
                goto fail;
        if (asprintf(&b->cgroup_parent, "%s/" SANDBOXD_SLICE, m->cgroup_root ?: "") < 0) {
                b->cgroup_parent = NULL;
                r = -ENOMEM;
                goto fail;
        }
        r = cgroup_session_view(b->cgroup_parent, s->slice, &b->cgroup_tmpfs, &b->cgroup_binds);
        if (r < 0) {
                log_error_errno(r, "Failed to look at the cgroup file systems: %m");
                goto fail;
        }
        if (s->network == NETWORK_HOST) {
                r = host_mode_deny(m, &b->ip_deny, &b->n_ip_deny);
                if (r < 0) {
                        log_error_errno(r, "Failed to list this host's addresses: %m");
                        goto fail;
                }
        }
        if (s->network == NETWORK_PROXY) {
                r = systemd_proxy_unit_names(s->id, &b->proxy_socket, NULL);
                if (r < 0)
                        goto fail;
        }

        /* StateDirectory= takes paths below /var/lib: the scope's, as scope.h lays them out */
        snprintf(b->state_dirs[0], sizeof(b->state_dirs[0]), "sandboxd/ws/%s/%s/%s", scope_tenant(s->tenant), s->user,
                 s->workspace);
        snprintf(b->state_dirs[1], sizeof(b->state_dirs[1]), "sandboxd/home/%s/%s/%s", scope_tenant(s->tenant),
                 s->user, s->workspace);
        snprintf(b->state_dirs[2], sizeof(b->state_dirs[2]), "sandboxd/tmp/%s/%s/%s", scope_tenant(s->tenant), s->user,
                 s->workspace);

        b->spec = (SandboxSpec) {
                .slice = s->slice,
                .user = s->dynamic_user,
                .state_directories = { b->state_dirs[0], b->state_dirs[1], b->state_dirs[2] },
                .network = s->network,
                .proxy_socket_unit = b->proxy_socket,
                .ip_allow = m->config.ip_allow,
                .n_ip_allow = m->config.n_ip_allow,
                .ip_deny = b->ip_deny,
                .n_ip_deny = b->n_ip_deny,
                .inaccessible_paths = b->inaccessible,
                .cgroup_tmpfs = b->cgroup_tmpfs,
                .cgroup_binds = b->cgroup_binds,
                .userdb_dir = s->userdb_dir,
                .read_only_paths = b->read_only,
                .read_write_paths = b->read_write,
                .tools_directory = m->config.tools_directory,
                .root_directory = s->image_root,
                .limit_fsize = m->config.limit_fsize,
        };
        return 0;

fail:
        session_sandbox_done(b);
        return r;
}

void session_sandbox_done(SessionSandbox *b) {
        if (!b)
                return;
        strv_free(b->inaccessible);
        strv_free(b->read_only);
        strv_free(b->read_write);
        strv_free(b->cgroup_tmpfs);
        strv_free(b->cgroup_binds);
        free(b->cgroup_parent);
        free(b->ip_deny);
        free(b->proxy_socket);
        *b = (SessionSandbox) {};
}

int session_start_executor_unit(Session *s, const char *unit, const char *listen_dir, Pid1Call **ret_call,
                                sd_bus_message_handler_t cb, void *userdata) {
        _cleanup_(session_sandbox_done) SessionSandbox sandbox = {};
        _cleanup_free_ char *description = NULL, *cgroup_bind = NULL;
        int r;

        r = session_sandbox_spec(s, &sandbox);
        if (r < 0)
                return r;
        r = cgroup_executor_bind(sandbox.cgroup_parent, s->slice, unit, &cgroup_bind);
        if (r < 0)
                return log_error_errno(r, "Failed to find where the executor's cgroup of session %s will be: %m", s->id);
        if (asprintf(&description, "sandboxd executor of session %s", s->id) < 0)
                return -ENOMEM;

        ExecutorUnitSpec spec = {
                .sandbox = sandbox.spec,
                .unit = unit,
                .description = description,
                .working_directory = s->workspace_dir,
                .timeout_stop_usec = s->manager->config.kill_grace_usec,
                .listener_dir = listen_dir,
                .cgroup_bind = cgroup_bind,
        };
        return systemd_start_executor_async(s->manager->pid1, ret_call, &spec, cb, userdata);
}
