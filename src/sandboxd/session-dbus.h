/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "session.h"

extern const sd_bus_vtable session_vtable[];

int session_bus_path(Session *s, char **ret);
/* The session of BUS_SESSION_PREFIX/<sid>[/...]; *ret_rest: what follows ("" or "/..."). */
Session *session_from_path(Manager *m, const char *path, const char **ret_rest);
/* Properties of a session and its commands are read, without polkit, by root and by the
 * session's own user only. sd-bus asks the find callbacks for everything it does on an
 * object: only a Properties call of someone else is refused (AccessDenied). */
int session_check_read_access(sd_bus *bus, Session *s, sd_bus_error *error);
/* Finds the session of an object path; the fallback vtable's find callback. */
int session_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                        sd_bus_error *error);
int session_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes, sd_bus_error *error);

/* Exec, Run and Close, of the Session object and of the Manager (by session id): the
 * remaining arguments of `call` are read here. */
int bus_session_exec(sd_bus_message *call, Session *s, bool run, sd_bus_error *error);
int bus_session_close(sd_bus_message *call, Session *s, bool purge, sd_bus_error *error);

/* PropertiesChanged for `property` (and what moves with it); SessionNew/SessionRemoved. */
void session_send_changed(Session *s, const char *property);
void session_send_signal(Session *s, bool new_session);
