/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "manager.h"

/* A small asynchronous polkit client for D-Bus method calls.
 *
 * A method handler calls polkit_verify() before it changes or reveals anything. The first
 * time, the answer is not known: CheckAuthorization goes out to polkit (the subject is the
 * caller's unique bus name), 0 is returned and the handler returns 1 without replying.
 * When polkit answers, the very same call is dispatched again (sd_bus_enqueue_for_read):
 * the handler runs from the top, looks everything up anew, and this time polkit_verify()
 * returns the answer. If polkit cannot be reached, or answers with an error, the answer
 * is no. */

#define POLKIT_ACTION_MANAGE_SESSIONS "io.sandboxd.sandbox1.manage-sessions"
#define POLKIT_ACTION_MANAGE_ALL "io.sandboxd.sandbox1.manage-all"

typedef struct PolkitQuery PolkitQuery;

/* > 0: authorized. 0: asked, the call comes back later. < 0: not authorized, *error says
 * why (org.freedesktop.DBus.Error.AccessDenied, or ...InteractiveAuthorizationRequired
 * when polkit would have asked for a password and the caller did not allow that).
 * details: NULL-terminated key, value, key, value, ... for the rules (action.lookup()).
 * interactive: may polkit ask the user, if the caller allows it (its message flag)? */
int polkit_verify(Manager *m, sd_bus_message *call, const char *action, const char * const *details,
                  bool interactive, sd_bus_error *error);

/* The handler is done with `call`: forgets its answers, unless another question about the
 * same call is still out. */
void polkit_forget(Manager *m, sd_bus_message *call);

/* Questions still waiting for polkit. */
unsigned polkit_pending(Manager *m);

/* At the stop (manager_bus_stop(), while the loop runs, so that the answers go out before
 * sd-bus closes the bus at its exit) and again at exit: every call still waiting for polkit
 * is answered now, once, with io.sandboxd.sandbox1.Error.Stopping (the error table's
 * "stopping"), since its handler never runs again; then all is forgotten. Calls that come
 * in while stopping are answered Stopping at once, before any question to polkit.
 * The check itself is not an Op (op.h): the call, dispatched again, is its handle. */
void polkit_free_all(Manager *m);

typedef struct PolkitScope {
        Manager *manager;
        sd_bus_message *call;
} PolkitScope;

static inline void polkit_scope_done(PolkitScope *s) {
        polkit_forget(s->manager, s->call);
}

/* At the top of a method handler that asks polkit: its answers go when the handler returns. */
#define POLKIT_SCOPE(m, call) _cleanup_(polkit_scope_done) _unused_ PolkitScope _polkit_scope_ = { (m), (call) }
