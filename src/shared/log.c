/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>

#include "log.h"

static int max_level = LOG_INFO;
static bool use_prefix = true;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_set_prefix(bool prefix) {
        use_prefix = prefix;
}

int log_internal(int level, int error, const char *file, int line, const char *format, ...) {
        char buf[2048];
        va_list ap;

        /* %m refers to the error we were passed, not to whatever errno happens to be. */
        errno = abs(error);
        va_start(ap, format);
        (void) vsnprintf(buf, sizeof(buf), format, ap);
        va_end(ap);

        if (use_prefix)
                fprintf(stderr, "<%d>%s\n", level, buf);
        else if (level >= LOG_DEBUG)
                fprintf(stderr, "%s:%d: %s\n", file, line, buf);
        else
                fprintf(stderr, "%s\n", buf);

        return -abs(error);
}
