/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "command.h"

extern const sd_bus_vtable command_vtable[];

/* The command of BUS_SESSION_PREFIX/<sid>/command/<n>. */
Command *command_from_path(Manager *m, const char *path);
int command_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                        sd_bus_error *error);

/* PropertiesChanged of the command's state; CommandFinished once it is terminal. */
void command_send_changed(Command *c);
void command_send_finished(Command *c);
