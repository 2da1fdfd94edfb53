/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "exec-env.h"

/* Inside double quotes systemd's env-file parser takes a backslash before one of these as
 * the character itself and keeps every other byte, newlines too, as it is. */
static int append_quoted(Buf *b, const char *name, size_t name_len, const char *value) {
        int r;

        r = buf_append(b, name, name_len);
        if (r >= 0)
                r = buf_puts(b, "=\"");
        for (const char *p = value; r >= 0 && *p; p++) {
                if (strchr("\"\\`$", *p))
                        r = buf_append(b, "\\", 1);
                if (r >= 0)
                        r = buf_append(b, p, 1);
        }
        if (r >= 0)
                r = buf_puts(b, "\"\n");
        return r;
}

int exec_env_format(Buf *b, const char *path, char * const *argv, char * const *env) {
        size_t n = 0;
        char name[sizeof(EXEC_ENV_PREFIX "ARGV_") + 20];
        int r;

        for (size_t i = 0; env && env[i]; i++) {
                const char *eq = strchr(env[i], '=');

                if (!eq || eq == env[i])
                        return -EINVAL;
                r = append_quoted(b, env[i], (size_t) (eq - env[i]), eq + 1);
                if (r < 0)
                        return r;
        }
        while (argv && argv[n])
                n++;
        if (!path || path[0] != '/' || n == 0)
                return -EINVAL;
        r = append_quoted(b, EXEC_ENV_PREFIX "PATH", strlen(EXEC_ENV_PREFIX "PATH"), path);
        if (r >= 0)
                r = buf_printf(b, EXEC_ENV_PREFIX "ARGC=%zu\n" EXEC_ENV_PREFIX "USERDB=" EXEC_USERDB_DIR "\n", n);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                snprintf(name, sizeof(name), EXEC_ENV_PREFIX "ARGV_%zu", i);
                r = append_quoted(b, name, strlen(name), argv[i]);
        }
        return r < 0 ? r : 0;
}
