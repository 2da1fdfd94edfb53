/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <syslog.h>

#include "macro.h"

/* Messages go to stderr with a <N> priority prefix that journald understands; the daemon's
 * unit sets SyslogLevelPrefix=yes (the default), so levels survive into the journal. */

void log_set_max_level(int level);
int log_get_max_level(void);
void log_set_prefix(bool prefix);

int log_internal(int level, int error, const char *file, int line, const char *format, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...)                                          \
        ({                                                                         \
                int _level = (level), _e = (error);                                \
                _level <= log_get_max_level()                                      \
                        ? log_internal(_level, _e, __FILE__, __LINE__, __VA_ARGS__) \
                        : -abs(_e);                                                \
        })

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_notice_errno(e, ...) log_full_errno(LOG_NOTICE, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

#define log_debug(...) log_debug_errno(0, __VA_ARGS__)
#define log_info(...) log_info_errno(0, __VA_ARGS__)
#define log_notice(...) log_notice_errno(0, __VA_ARGS__)
#define log_warning(...) log_warning_errno(0, __VA_ARGS__)
#define log_error(...) log_error_errno(0, __VA_ARGS__)

#define log_oom() log_error_errno(-ENOMEM, "Out of memory.")
