/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the Range header of a file download (http-range.c): the first 8 bytes are the
 * file's size, the rest the header's value. What it answers must lie within the file. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-range.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint64_t file_size = 0, start = 0, length = 0;
        char *value;
        int r;

        if (size > 8) {
                memcpy(&file_size, data, 8);
                data += 8;
                size -= 8;
        }
        /* sometimes a small file, where most ranges reach the end */
        if (file_size & 1)
                file_size = (file_size >> 1) % 4096;
        value = strndup((const char *) data, size);
        if (!value)
                return 0;
        r = http_range_parse(value, file_size, &start, &length);
        if (r == 1 && (length == 0 || start >= file_size || length > file_size - start))
                abort();
        if (r != 1 && r != 0 && r != -ERANGE)
                abort();
        free(value);
        return 0;
}
