/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the handling of query strings: the input is split into key=value pairs at '&' and
 * decoded as libmicrohttpd does for sandboxd ('+' to space, then MHD_http_unescape(), noting a %00, which
 * sandboxd refuses), then every value goes through each parser a route uses for one:
 * flags (?wait, ?purge, ?eof, ?recursive, ?overwrite, ?mkdir, ?stat), ?offset=, ?mode=,
 * ?user=, and ?move_to= as a path in a workspace. */

#include <microhttpd.h>

#include "parse-util.h"
#include "route.h"
#include "validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse_value(const char *v) {
        RoutePath p = ROUTE_PATH_NULL;
        uint64_t u;
        unsigned mode;

        (void) parse_flag(v);
        (void) parse_uint64(v, &u);
        (void) parse_mode(v, &mode);
        (void) user_name_is_valid(v);
        if (route_path_split(v, &p) >= 0)
                route_path_done(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *q = strndup((const char *) data, size), *save = NULL;

        if (!q)
                return 0;
        for (char *pair = strtok_r(q, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
                char *eq = strchr(pair, '='), *value = NULL;
                size_t n;

                if (eq) {
                        *eq = 0;
                        value = eq + 1;
                }
                for (char *c = pair; *c; c++)
                        if (*c == '+')
                                *c = ' ';
                n = MHD_http_unescape(pair);
                if (strlen(pair) != n)
                        continue; /* %00 in the key: sandboxd answers 400 */
                if (value) {
                        n = MHD_http_unescape(value);
                        if (strlen(value) != n)
                                continue;
                }
                parse_value(value ?: "");
        }
        free(q);
        return 0;
}
