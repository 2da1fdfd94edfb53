/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The error table: one row per code, each status an error, each D-Bus name valid and
 * sandboxd's own, and the ways from a code to a name and back meet. */

#include <errno.h>

#include "bus-util.h"
#include "error-table.h"
#include "tests.h"

/* D-Bus error names follow the rules of interface names (D-Bus specification). */
static bool bus_name_is_valid(const char *name) {
        size_t elements = 0, n = strlen(name);

        if (n == 0 || n > 255)
                return false;
        for (const char *p = name; *p;) {
                size_t k = 0;

                if (!(p[0] == '_' || (p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z')))
                        return false;
                while (p[k] && p[k] != '.') {
                        char c = p[k];
                        if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
                                return false;
                        k++;
                }
                elements++;
                p += k;
                if (*p == '.' && !*++p)
                        return false;
        }
        return elements >= 2;
}

static bool code_is_valid(const char *code) {
        if (!code || !code[0])
                return false;
        for (const char *p = code; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || *p == '_'))
                        return false;
        return true;
}

static void test_rows(void) {
        size_t n, n_aliases;
        const ApiError *t = api_error_table(&n);
        const ApiErrorAlias *aliases = api_error_bus_aliases(&n_aliases);

        ASSERT(n >= 30);
        for (size_t i = 0; i < n; i++) {
                ASSERT(code_is_valid(t[i].code));
                ASSERT(t[i].http_status >= 400 && t[i].http_status <= 599);
                ASSERT(t[i].errno_value > 0 && t[i].errno_value < 4096);
                /* the kind libsandboxd gives the status is the row's */
                ASSERT(api_error_kind_from_http(t[i].http_status) == t[i].kind);
                ASSERT(t[i].kind != SANDBOXD_ERROR_NONE && t[i].kind < _SANDBOXD_ERROR_KIND_MAX);
                for (size_t j = 0; j < i; j++) {
                        ASSERT(!streq(t[i].code, t[j].code));
                        ASSERT(!t[i].bus_name || !t[j].bus_name || !streq(t[i].bus_name, t[j].bus_name));
                }
                /* code → row, code → name → code */
                ASSERT(api_error_from_code(t[i].code) == &t[i]);
                if (t[i].bus_name) {
                        ASSERT(bus_name_is_valid(t[i].bus_name));
                        ASSERT(api_error_from_bus_name(t[i].bus_name) == &t[i]);
                }
        }
        for (size_t i = 0; i < n_aliases; i++) {
                const ApiError *a = api_error_from_code(aliases[i].code);

                ASSERT(bus_name_is_valid(aliases[i].bus_name));
                /* another name of a code that has a name of its own, and no row's */
                ASSERT(a && a->bus_name);
                ASSERT(api_error_from_bus_name(aliases[i].bus_name) == a);
                for (size_t j = 0; j < n; j++)
                        ASSERT(!t[j].bus_name || !streq(t[j].bus_name, aliases[i].bus_name));
                for (size_t j = 0; j < i; j++)
                        ASSERT(!streq(aliases[i].bus_name, aliases[j].bus_name));
        }
        ASSERT(!api_error_from_code("no_such_code"));
        ASSERT(!api_error_from_code(NULL));
        ASSERT(!api_error_from_bus_name(BUS_ERROR_PREFIX "NoSuchThing"));
        ASSERT(!api_error_from_bus_name(NULL));

        /* what changed: one failure, one code on both transports */
        ASSERT_STREQ(api_error_from_bus_name(BUS_ERROR_EXECUTABLE_NOT_FOUND)->code, "executable_not_found");
        ASSERT_STREQ(api_error_from_bus_name(BUS_ERROR_NO_SUCH_COMMAND)->code, "not_found");
        ASSERT_STREQ(api_error_from_bus_name(BUS_ERROR_COMMAND_NOT_RUNNING)->code, "not_running");
        ASSERT_STREQ(api_error_from_bus_name(BUS_ERROR_NOT_SUPPORTED)->code, "unsupported");
        ASSERT_STREQ(api_error_from_bus_name(SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED)->code, "forbidden");
}

/* Every BUS_ERROR_ name the daemon uses is a row's or an alias's. */
static void test_daemon_names(void) {
        static const char *const names[] = {
                BUS_ERROR_NO_SUCH_SESSION,     BUS_ERROR_NO_SUCH_COMMAND,      BUS_ERROR_INVALID_ARGUMENTS,
                BUS_ERROR_INVALID_NAME,        BUS_ERROR_INVALID_TYPE,         BUS_ERROR_INVALID_VALUE,
                BUS_ERROR_UNKNOWN_OPTION,      BUS_ERROR_INVALID_PATH,         BUS_ERROR_RESERVED_ENVIRONMENT,
                BUS_ERROR_LIMIT_EXCEEDED,      BUS_ERROR_EXECUTABLE_NOT_FOUND, BUS_ERROR_NOT_SUPPORTED,
                BUS_ERROR_SESSION_NOT_ACTIVE,  BUS_ERROR_DRAINING,             BUS_ERROR_STOPPING,
                BUS_ERROR_OVERLOADED,          BUS_ERROR_TOO_MANY_SESSIONS,    BUS_ERROR_TOO_MANY_RUNNING,
                BUS_ERROR_TOO_MANY_COMMANDS,   BUS_ERROR_SPOOL_FULL,           BUS_ERROR_SESSION_STARTING,
                BUS_ERROR_COMMAND_NOT_RUNNING, BUS_ERROR_SYSTEMD_FAILED,       BUS_ERROR_BUSY,
                BUS_ERROR_PURGE_FAILED,        BUS_ERROR_NOT_PURGED,
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                if (!api_error_from_bus_name(names[i]))
                        fprintf(stderr, "%s is in no row of the error table\n", names[i]);
                ASSERT(api_error_from_bus_name(names[i]));
        }
}

/* sd-bus gives every name the errno of its row, once the map is registered. */
static void test_bus_map(void) {
        size_t n, n_aliases, k = 0;
        const ApiError *t = api_error_table(&n);
        const sd_bus_error_map *map = api_error_bus_map();

        (void) api_error_bus_aliases(&n_aliases);
        ASSERT(api_error_bus_map() == map); /* built once */
        ASSERT(sd_bus_error_add_map(map) >= 0);
        for (; map[k].name; k++) {
                const ApiError *a = api_error_from_bus_name(map[k].name);

                ASSERT(a && map[k].code == a->errno_value);
        }
        ASSERT(k > n_aliases && k <= n + n_aliases);

        for (size_t i = 0; i < n; i++) {
                sd_bus_error e = SD_BUS_ERROR_NULL;

                if (!t[i].bus_name)
                        continue;
                ASSERT(sd_bus_error_set(&e, t[i].bus_name, "why") == -t[i].errno_value);
                ASSERT(sd_bus_error_get_errno(&e) == t[i].errno_value);
                sd_bus_error_free(&e);
        }
        /* ExecutableNotFound is ENOENT; the standard names keep sd-bus's EACCES */
        sd_bus_error e = SD_BUS_ERROR_NULL;
        ASSERT(sd_bus_error_set(&e, BUS_ERROR_EXECUTABLE_NOT_FOUND, "x") == -ENOENT);
        sd_bus_error_free(&e);
        ASSERT(sd_bus_error_set(&e, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, "x") ==
               -api_error_from_code("forbidden")->errno_value);
        sd_bus_error_free(&e);
}

/* A RequestError goes out as its row's name. */
static void test_request_errors(void) {
        size_t n;
        const ApiError *t = api_error_table(&n);

        for (size_t i = 0; i < n; i++) {
                sd_bus_error error = SD_BUS_ERROR_NULL;
                RequestError e = { .code = t[i].code, .message = "why" };

                ASSERT(bus_error_set_request(&error, -EINVAL, &e) < 0);
                ASSERT_STREQ(error.name, t[i].bus_name ?: BUS_ERROR_INVALID_VALUE);
                ASSERT_STREQ(error.message, "why");
                sd_bus_error_free(&error);
        }

        sd_bus_error error = SD_BUS_ERROR_NULL;
        RequestError e = { .code = "executable_not_found", .message = "no exe" };
        ASSERT(bus_error_set_request(&error, -EINVAL, &e) == -ENOENT);
        ASSERT_STREQ(error.name, BUS_ERROR_EXECUTABLE_NOT_FOUND);
        ASSERT_STREQ(api_error_from_bus_name(error.name)->code, e.code);
        sd_bus_error_free(&error);
}

int main(void) {
        test_rows();
        test_daemon_names();
        test_bus_map();
        test_request_errors();
        return TESTS_DONE();
}
