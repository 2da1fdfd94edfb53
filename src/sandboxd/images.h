/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

/* Images: root file systems a session's commands run in (RootDirectory=) instead of the
 * host's. An image is a directory NAME/ in [Images] Directory= (IMAGES_DEFAULT_DIRECTORY),
 * with NAME.json beside it (what sandboxd learnt when it imported it: size, creation time).
 * A directory put there by hand is an image too, its size unknown until imported.
 * Hidden entries (".NAME...") are imports and removals under way. This module knows
 * nothing of sessions; which ones use an image is session.c's to count. */

#define IMAGES_DEFAULT_DIRECTORY "/var/lib/sandboxd/images"
#define IMAGES_MAX 1024          /* listed at most */
#define IMAGE_OS_FIELD_MAX 256   /* an os-release value, at most */

typedef struct ImageInfo {
        char name[65];
        char *path;             /* the root directory */
        uint64_t size_bytes;    /* UINT64_MAX: not known (not imported by sandboxd) */
        uint64_t created_usec;  /* CLOCK_REALTIME: the import, or the directory's mtime */
        char *os_id, *os_version_id, *os_pretty_name; /* from its os-release; NULL: none */
        bool user_names;        /* nss-systemd is there: the dynamic user has a name inside */
} ImageInfo;

const char *images_directory(const Config *c);

/* -EINVAL: not a valid name; -ENOENT: no such image (or not a directory); *ret: its root. */
int image_root_path(const Config *c, const char *name, char **ret);

/* What images_list() and GET /v1/images/NAME show: reads NAME.json and the image's
 * os-release, both small, through openat2(RESOLVE_IN_ROOT): nothing of the host is read
 * through a symlink of the image. */
int image_get(const Config *c, const char *name, ImageInfo *ret);
int images_list(const Config *c, ImageInfo **ret, size_t *ret_n); /* by name */
void image_info_done(ImageInfo *i);
void image_info_free_many(ImageInfo *l, size_t n);

/* Parsers of an image's own files (hostile bytes, NUL-terminated, at most 64K; fuzz-image-files):
 * KEY=value or KEY="value" of os-release(5), the quoted form's \" \\ \$ \` unescaped, NULL
 * if absent, over IMAGE_OS_FIELD_MAX, not UTF-8 or with control characters; and whether
 * nsswitch.conf(5)'s passwd: line names systemd. */
char *image_os_release_value(const char *text, const char *key);
bool image_nsswitch_uses_systemd(const char *text);

/* argv[0] looked up as sandboxd-exec will inside the image: each directory of PATH
 * resolved in root (RESOLVE_IN_ROOT), /.tools/... in tools_dir. */
int image_find_executable(const char *root, const char *tools_dir, const char *name, const char *path, char **ret);

/* What commands need of an image, checked at import: -ENOEXEC and *ret_reason (static)
 * if it lacks /bin/sh or an os-release. */
int image_check(const char *root, const char **ret_reason);


/* Writes NAME.json for the image NAME (its size and now). */
int image_write_metadata(const Config *c, const char *name, uint64_t size_bytes, uint64_t created_usec);

/* Renames NAME/ out of the way (hidden) and removes NAME.json, then the tree in a thread
 * of its own: the image is gone (for lookups and for a new import of its name) when this
 * returns, and the event loop does not walk a big tree. */
int image_remove_async(const Config *c, const char *name);
/* Removes what imports and removals left behind (".import-*", ".remove-*"), at start-up. */
void images_clean_leftovers(const Config *c);
