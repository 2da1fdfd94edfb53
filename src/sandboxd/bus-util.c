/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-util.h"

int bus_error_set_request(sd_bus_error *error, int r, const RequestError *e) {
        if (r == -EINVAL && e && e->code) {
                const ApiError *a = api_error_from_code(e->code);
                const char *name = a && a->bus_name ? a->bus_name : BUS_ERROR_INVALID_VALUE;

                return sd_bus_error_set(error, name, e->message);
        }
        return sd_bus_error_set_errnof(error, r, "%s", strerror(-r));
}
