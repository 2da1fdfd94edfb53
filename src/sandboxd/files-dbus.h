/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

/* io.sandboxd.sandbox1.Files on every session object: the HTTP API's .../files routes,
 * through the same operations (files.c, file-ops.c). */
extern const sd_bus_vtable files_vtable[];
