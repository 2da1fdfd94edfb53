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
bool session_id_is_valid(const char *s);     /* 16 lowercase hex digits */
bool env_name_is_valid(const char *s);       /* ^[A-Za-z_][A-Za-z0-9_]*$, at most 255 */
bool env_name_is_reserved(const char *s);    /* HOME, TMPDIR, XDG_*_HOME, ...: the scope's own */

/* Lexically normalizes a path relative to the workspace: refuses absolute paths, ".."
 * that would climb above the top, empty components are dropped, "." ignored. Returns
 * the normalized relative path ("" for the top itself). */
int relative_path_normalize(const char *path, char **ret);

/* Resolves a command's cwd against the workspace as the command sees it (`top`, absolute):
 * a relative cwd is taken below top, an absolute one must lie below it. Returns the
 * normalized path relative to top ("" for top itself); -EPERM if it leaves the workspace. */
int cwd_relative_to(const char *top, const char *cwd, char **ret);
