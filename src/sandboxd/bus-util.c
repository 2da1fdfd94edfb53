/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-util.h"

/* One name per code of the request rules (request.c, session.c, command.c). */
static const struct {
        const char *code;
        const char *name;
} error_table[] = {
        { "invalid_name", BUS_ERROR_INVALID_NAME },
        { "invalid_type", BUS_ERROR_INVALID_TYPE },
        { "invalid_value", BUS_ERROR_INVALID_VALUE },
        { "missing_field", BUS_ERROR_INVALID_VALUE },
        { "unknown_field", BUS_ERROR_UNKNOWN_OPTION },
        { "invalid_path", BUS_ERROR_INVALID_PATH },
        { "reserved_env", BUS_ERROR_RESERVED_ENVIRONMENT },
        { "limit_exceeded", BUS_ERROR_LIMIT_EXCEEDED },
        { "not_found", BUS_ERROR_EXECUTABLE_NOT_FOUND },
        { "unsupported", BUS_ERROR_NOT_SUPPORTED },
        { "session_not_active", BUS_ERROR_SESSION_NOT_ACTIVE },
        { "draining", BUS_ERROR_DRAINING },
        { "overloaded", BUS_ERROR_OVERLOADED },
        { "too_many_sessions", BUS_ERROR_TOO_MANY_SESSIONS },
        { "too_many_running", BUS_ERROR_TOO_MANY_RUNNING },
        { "too_many_commands", BUS_ERROR_TOO_MANY_COMMANDS },
        { "spool_full", BUS_ERROR_SPOOL_FULL },
        { "forbidden", SD_BUS_ERROR_ACCESS_DENIED },
};

int bus_error_set_request(sd_bus_error *error, int r, const RequestError *e) {
        if (r == -EINVAL && e && e->code) {
                for (size_t i = 0; i < ELEMENTSOF(error_table); i++)
                        if (streq(e->code, error_table[i].code))
                                return sd_bus_error_set(error, error_table[i].name, e->message);
                return sd_bus_error_set(error, BUS_ERROR_INVALID_VALUE, e->message);
        }
        return sd_bus_error_set_errnof(error, r, "%s", strerror(-r));
}
