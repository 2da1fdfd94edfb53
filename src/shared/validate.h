/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Names that end up in unit names, user names and paths. Each check is exact: anything
 * outside the grammar is refused, never mangled. */
bool user_name_is_valid(const char *s);      /* ^[a-z_][a-z0-9_-]{0,31}$ */
bool workspace_name_is_valid(const char *s); /* ^[a-z0-9_-]{1,64}$ */
bool image_name_is_valid(const char *s);      /* ^[a-z0-9][a-z0-9_-]{0,63}$ */
bool request_id_is_valid(const char *s);
/* "sandboxd." and anything below it: request ids of sandboxd's own commands */
bool request_id_is_reserved(const char *s);     /* ^[A-Za-z0-9._-]{1,64}$ */

/* Node names ([Node] Name=): ^[a-z][a-z0-9]{0,31}$. They begin the ids of the node's sessions. */
#define NODE_NAME_MAX 32
bool node_name_is_valid(const char *s);

/* Session ids: NODE_HEX, the node's name, '_', 16 lowercase hex digits (HAProxy routes on the
 * part before '_'); or the 16 hex digits alone, the ids from before nodes had names, which
 * belong to whichever node has them. Neither form has '-' or '.': in a unit name
 * (sandboxd-ID-N.service) or a file name (ID-N.env) the id ends at the first of them. */
#define SESSION_ID_HEX 16
#define SESSION_ID_MAX (NODE_NAME_MAX + 1 + SESSION_ID_HEX)
#define SESSION_ID_SIZE (SESSION_ID_MAX + 1) /* a buffer for one, NUL included */
bool session_id_is_valid(const char *s);
/* The length of the node part of a valid id (0: the old form, no node named). */
size_t session_id_node_len(const char *id);
/* Whether a valid id is node's: its node part is node, or it has none. */
bool session_id_is_of_node(const char *id, const char *node);
/* The session id that s begins with, up to the first character no id has ('-', '.', NUL, ...),
 * copied into ret: its length, or 0 (ret "") when that prefix is not a valid id. */
size_t session_id_prefix(const char *s, char ret[static SESSION_ID_SIZE]);
bool env_name_is_valid(const char *s);       /* ^[A-Za-z_][A-Za-z0-9_]*$, at most 255 */
bool env_name_is_reserved(const char *s);    /* HOME, TMPDIR, XDG_*_HOME, ...: the scope's own */

/* Whether the value of an X-Sandboxd-Scope header is "USER/WORKSPACE" of these: each byte as
 * it is or percent-encoded (%2F is a byte of a name, not the separator); a bad escape, a NUL
 * or more than 256 bytes decoded is no match. */
#define SCOPE_HEADER "X-Sandboxd-Scope"
bool scope_header_matches(const char *value, const char *user, const char *workspace);

/* Lexically normalizes a path relative to the workspace: refuses absolute paths, ".."
 * that would climb above the top, empty components are dropped, "." ignored. Returns
 * the normalized relative path ("" for the top itself). */
int relative_path_normalize(const char *path, char **ret);

/* Resolves a command's cwd against the workspace as the command sees it (`top`, absolute):
 * a relative cwd is taken below top, an absolute one must lie below it. Returns the
 * normalized path relative to top ("" for top itself); -EPERM if it leaves the workspace. */
int cwd_relative_to(const char *top, const char *cwd, char **ret);
