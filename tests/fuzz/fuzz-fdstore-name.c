/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the names of the fds systemd hands back from its fd store at start-up
 * (sd_listen_fds_with_names()): a name that parses is exactly the one sandboxd would
 * have given that fd, so no two names can stand for the same pipe. */

#include <assert.h>

#include "fdstore.h"
#include "validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        FdStoreName id = { .kind = _FDSTORE_KIND_INVALID }, copy;
        char *name, formatted[FDSTORE_NAME_MAX];
        int r;

        /* systemd's names are strings: up to the first NUL */
        name = strndup((const char *) data, size);
        if (!name)
                return 0;

        r = fdstore_name_parse(name, &id);
        assert(r >= -EINVAL && r <= 1);
        if (r <= 0)
                assert(id.kind == _FDSTORE_KIND_INVALID); /* untouched */
        else {
                assert(id.kind >= 0 && id.kind < _FDSTORE_KIND_MAX);
                assert(session_id_is_valid(id.session_id) && (id.n > 0) == (id.kind != FDSTORE_PROXY));
                assert(fdstore_name_format(&id, formatted) >= 0);
                assert(streq(formatted, name));
                assert(fdstore_name_parse(formatted, &copy) == 1 && memcmp(&copy, &id, sizeof(id)) == 0);
        }
        free(name);
        return 0;
}
