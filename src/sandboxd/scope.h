/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "macro.h"

/* A scope is (tenant, user, workspace): what owns a workspace, a home and a dynamic user.
 * API-key tenants each have their own; every local caller (the unix socket, D-Bus) is the
 * one tenant "local", so a name cannot collide across tenants on any transport.
 *
 * Layout, as commands see it (systemd keeps the real directories below /var/lib/private):
 *   /var/lib/sandboxd/{ws,home,tmp}/<tenant>/<user>/<workspace>
 * The directories above a scope's own are root's, mode 0711: a command reaches its own
 * but cannot list the others'. */

#define SCOPE_TENANT_LOCAL "local"
#define SCOPE_PUBLIC_ROOT "/var/lib/sandboxd"
#define SCOPE_PRIVATE_ROOT "/var/lib/private/sandboxd"
#define SCOPE_LAYOUT_VERSION 2

/* The scope tenant of a session's creator: an API tenant is itself; local callers
 * ("unix:<uid>", "dbus:<uid>", none) are SCOPE_TENANT_LOCAL. */
const char *scope_tenant(const char *creator);

/* sbx-<first 16 hex digits of sha256("tenant/user/workspace")> */
int scope_dynamic_user(const char *tenant, const char *user, const char *workspace, char **ret);

/* "ws", "home", "tmp" */
extern const char *const scope_kinds[3];

/* Creates (or fixes the mode of) the root-owned 0711 directories above the scope's own in
 * every kind, before PID 1 makes the scope's own and its symlinks. */
int scope_prepare(const char *public_root, const char *tenant, const char *user);

/* Moves workspaces of layout 1 (<kind>/<user>/<workspace>, before tenants had scopes of
 * their own) to <kind>/<tenant>/<user>/<workspace>: a user's directories go to the one
 * API tenant that the session records name for that user, to "local" otherwise. Runs once:
 * <state>/layout says which layout the directories have. */
int scope_migrate(const char *state_dir, const char *public_root, const char *private_root);

/* The user and group records of the scope's dynamic user, as systemd's userdb drop-ins
 * (<name>.user, <uid>.user, <name>.group, <gid>.group) in `dir`, which every command of
 * the session sees at /run/userdb: commands see no other scope's user (PID 1's userdb
 * socket and /run/systemd/dynamic-uid are hidden from them) and still resolve their own
 * name. Replaces the records of another uid. */
int scope_userdb_write(const char *dir, const char *name, uid_t uid, const char *home);
/* The uid PID 1 gave the dynamic user `name` while a unit of it runs (-ESRCH: none). */
int scope_dynamic_uid(const char *name, uid_t *ret);
