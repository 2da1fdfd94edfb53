/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <cap-ng.h>
#include <getopt.h>
#include <linux/capability.h>

#include "auth.h"
#include "daemon.h"
#include "http.h"
#include "log.h"
#include "scope.h"
#include "validate.h"
#include "manager.h"

static const char *arg_config = SANDBOXD_CONFIG_FILE;
static const char *arg_keys = SANDBOXD_API_KEYS_FILE;
static const char *arg_listen = NULL;

static void help(void) {
        printf("sandboxd [OPTIONS...]\n\n"
               "Runs untrusted commands in transient systemd units and serves them over HTTP.\n"
               "Normally started by sandboxd.socket; see sandboxd(8).\n\n"
               "  -h --help              Show this help\n"
               "     --version           Show the version\n"
               "     --config=PATH       Configuration file (default: %s,\n"
               "                         then PATH.d/*.conf)\n"
               "     --api-keys=PATH     API keys for TCP clients (default: %s)\n"
               "     --listen=PATH       Listen on this unix socket when not socket-activated\n"
               "     --log-level=LEVEL   debug, info, notice, warning or err\n"
               "     --hash-key[=TENANT] Read an API key on stdin, print its line for the keys file\n"
               "     --list-routes       Print the HTTP routes served, one \"METHOD PATH\" a line\n",
               SANDBOXD_CONFIG_FILE, SANDBOXD_API_KEYS_FILE);
}

static int hash_key(const char *tenant) {
        _cleanup_free_ char *hashed = NULL;
        char key[4096];
        size_t n;

        if (tenant && (!user_name_is_valid(tenant) || streq(tenant, SCOPE_TENANT_LOCAL)))
                return log_error_errno(-EINVAL, "Invalid tenant name '%s': ^[a-z_][a-z0-9_-]{0,31}$, and not '%s'.",
                                       tenant, SCOPE_TENANT_LOCAL);
        if (!fgets(key, sizeof(key), stdin))
                return log_error_errno(-EINVAL, "No key on standard input.");
        n = strcspn(key, "\r\n");
        key[n] = 0;
        if (auth_hash_key(key, &hashed) < 0)
                return log_error_errno(-EINVAL, "API keys must be at least 16 characters long.");
        printf("%s %s\n", tenant ?: "TENANT", hashed);
        return 0;
}

static int parse_log_level(const char *s) {
        static const char *const levels[] = {
                [LOG_ERR] = "err", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
                [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
        };
        for (size_t i = 0; i < ELEMENTSOF(levels); i++)
                if (levels[i] && streq(s, levels[i]))
                        return (int) i;
        return -EINVAL;
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_CONFIG, ARG_KEYS, ARG_LISTEN, ARG_LOG_LEVEL, ARG_HASH_KEY, ARG_LIST_ROUTES };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "api-keys", required_argument, NULL, ARG_KEYS },
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                { "hash-key", optional_argument, NULL, ARG_HASH_KEY },
                { "list-routes", no_argument, NULL, ARG_LIST_ROUTES },
                {},
        };
        int c, level;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("sandboxd %s\n", PROJECT_VERSION);
                        return 0;
                case ARG_CONFIG:
                        arg_config = optarg;
                        break;
                case ARG_KEYS:
                        arg_keys = optarg;
                        break;
                case ARG_LISTEN:
                        arg_listen = optarg;
                        break;
                case ARG_LOG_LEVEL:
                        level = parse_log_level(optarg);
                        if (level < 0)
                                return log_error_errno(level, "Invalid log level: %s", optarg);
                        log_set_max_level(level);
                        break;
                case ARG_HASH_KEY:
                        return hash_key(optarg) < 0 ? -EINVAL : 0;
                case ARG_LIST_ROUTES:
                        http_routes_dump(stdout);
                        return 0;
                case '?':
                        return -EINVAL;
                default:
                        return log_error_errno(-EINVAL, "Unhandled option");
                }

        if (optind < argc)
                return log_error_errno(-EINVAL, "%s takes no arguments.", program_invocation_short_name);
        return 1;
}

/* What sandboxd keeps, and why:
 *   CAP_SETUID,         everything it does inside a workspace (the file API, a command's
 *   CAP_SETGID          cwd, the disk usage) runs with the file-system uid/gid of the
 *                       workspace's owner (setfsuid/setfsgid, files.c). Files
 *                       it writes then belong to the scope's dynamic user, and it can do there
 *                       what that user can and nothing more: no CAP_DAC_OVERRIDE or CAP_CHOWN,
 *                       no root-owned files in a sandbox, no window between creating and
 *                       chowning a file, and nothing a command plants in its workspace
 *                       (links, swapped directories) can borrow sandboxd's rights. POSIX ACLs
 *                       would not do: they name a uid, and a dynamic user's uid may change
 *                       (systemd then chowns the files, not ACL entries), and the sandbox
 *                       could strip them from the files it owns.
 * Nothing else, bounding set included: PID 1 authorizes StartTransientUnit, KillUnit and
 * Unref for callers with uid 0 (it does not trust capabilities read from /proc), so root
 * without CAP_SYS_ADMIN is enough. */
static int drop_capabilities(void) {
        static const int keep[] = { CAP_SETUID, CAP_SETGID };
        bool bounding;
        int r;

        if (geteuid() != 0)
                return 0;

        /* Under sandboxd.service the bounding set is already cut down (without CAP_SETPCAP,
         * which changing it would need); run by hand, we cut it ourselves. */
        capng_get_caps_process();
        bounding = capng_have_capability(CAPNG_EFFECTIVE, CAP_SETPCAP);

        bool have[ELEMENTSOF(keep)];
        for (size_t i = 0; i < ELEMENTSOF(keep); i++)
                have[i] = capng_have_capability(CAPNG_PERMITTED, (unsigned) keep[i]);

        capng_clear(CAPNG_SELECT_BOTH);
        for (size_t i = 0; i < ELEMENTSOF(keep); i++) {
                if (!have[i]) {
                        log_warning("Capability %s is not available; some operations will fail.", capng_capability_to_name((unsigned) keep[i]));
                        continue;
                }
                if (capng_update(CAPNG_ADD, CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET, (unsigned) keep[i]) < 0)
                        return log_error_errno(-EINVAL, "Failed to build the capability set.");
        }
        r = capng_apply(bounding ? CAPNG_SELECT_BOTH : CAPNG_SELECT_CAPS);
        if (r < 0)
                return log_error_errno(-EPERM, "Failed to drop capabilities (capng_apply: %d).", r);
        return 0;
}

int main(int argc, char *argv[]) {
        _cleanup_(daemon_freep) Manager *m = NULL;
        int r;

        /* Under systemd, stderr goes to the journal: prefix levels. */
        log_set_prefix(!isatty(STDERR_FILENO));

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;

        r = drop_capabilities();
        if (r < 0)
                return EXIT_FAILURE;

        r = manager_new(&m);
        if (r < 0) {
                log_error_errno(r, "Failed to set up: %m");
                return EXIT_FAILURE;
        }
        r = manager_load_config(m, arg_config);
        if (r < 0)
                return EXIT_FAILURE;
        r = auth_load_keys(m, arg_keys);
        if (r < 0)
                return EXIT_FAILURE;
        r = daemon_startup(m, arg_listen);
        if (r < 0)
                return EXIT_FAILURE;

        log_info("sandboxd %s running.", PROJECT_VERSION);
        r = daemon_run(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
