/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes what sandboxd reads of an imported image's own files (images.c): its os-release
 * (ID, VERSION_ID, PRETTY_NAME, as GET /v1/images shows them) and its nsswitch.conf. The
 * input is the file's text; a value found must be short, free of control characters and
 * the quote that ends it. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "images.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *text, const char *key) {
        char *v = image_os_release_value(text, key);

        if (!v)
                return;
        if (strlen(v) >= IMAGE_OS_FIELD_MAX)
                abort();
        for (const char *p = v; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        abort();
        free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text;

        if (size > 64 * 1024) /* images.c reads at most this much of either file */
                return 0;
        text = strndup((const char *) data, size);
        if (!text)
                return 0;
        check(text, "ID");
        check(text, "VERSION_ID");
        check(text, "PRETTY_NAME");
        (void) image_nsswitch_uses_systemd(text);
        free(text);
        return 0;
}
