/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* Sets up everything around the manager (the bus, the HTTP servers, the proxy, the threads,
 * signals, the idle timer) and recovers the sessions of the sandboxd before. */
int daemon_startup(Manager *m, const char *listen_path);
/* Tells systemd it is ready and runs the loop until the exit. */
int daemon_run(Manager *m);
/* The sessions (their records due written), the front ends, then the manager. */
Manager *daemon_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, daemon_free);
