/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the parser of the API keys file (/etc/sandboxd/api-keys and the credential
 * api-keys): what it accepts are tenants a TCP request can be bound to. */

#include <assert.h>

#include "auth.h"
#include "scope.h"
#include "validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Manager m = {};
        ApiKey *keys = NULL;
        char *error = NULL, *tenant = NULL;
        size_t n = 0, lines = 1;
        int r;

        r = auth_parse_keys((const char *) data, size, &keys, &n, &error);
        if (r < 0) {
                assert(r == -EINVAL || r == -ENOMEM);
                assert(r != -EINVAL || (error && startswith(error, "line ")));
                assert(!keys);
                free(error);
                return 0;
        }
        assert(!error);
        for (size_t i = 0; i < size; i++)
                lines += data[i] == '\n';
        assert(n <= lines); /* at most a key a line */
        for (size_t i = 0; i < n; i++)
                assert(user_name_is_valid(keys[i].tenant) && !streq(keys[i].tenant, SCOPE_TENANT_LOCAL));

        /* a key of the input's first bytes, against them all */
        m.keys = keys;
        m.n_keys = n;
        {
                char key[65];

                snprintf(key, sizeof(key), "%.*s", (int) MIN(size, sizeof(key) - 1), (const char *) data);
                r = auth_check_key(&m, key, &tenant);
                assert(r == -EACCES || (r == 0 && user_name_is_valid(tenant)));
                free(tenant);
        }
        free(keys);
        return 0;
}
