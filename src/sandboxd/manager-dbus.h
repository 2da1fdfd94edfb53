/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "bus-api.h"
#include "manager.h"

/* The Manager object, the vtables of all three interfaces, and the observer that emits
 * the signals of sessions and commands. */

/* Registers the objects, before the bus name is requested. */
int manager_bus_register(Manager *m);

/* Restarts the idle countdown: a D-Bus call is activity. */
void manager_bus_activity(Manager *m);
