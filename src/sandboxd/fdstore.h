/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"
#include "validate.h"

/* The names of the fds sandboxd keeps in systemd's fd store (FDNAME=), which come back
 * from sd_listen_fds_with_names() after a restart. */

typedef enum FdStoreKind {
        FDSTORE_STDOUT, /* out-<sid>-<n>: our end of command n's stdout pipe */
        FDSTORE_STDERR, /* err-<sid>-<n> */
        FDSTORE_STDIN,  /* in-<sid>-<n>: our end of its stdin pipe ("stdin":"stream") */
        FDSTORE_PROXY,  /* proxy-<sid>: the listening socket of session sid's egress proxy */
        _FDSTORE_KIND_MAX,
        _FDSTORE_KIND_INVALID = -EINVAL,
} FdStoreKind;

typedef struct FdStoreName {
        FdStoreKind kind;
        char session_id[SESSION_ID_SIZE];
        unsigned n; /* the command's number, 1 and up; 0 for a session's fd */
} FdStoreName;

/* Longer than any name formatted here, NUL included. */
#define FDSTORE_NAME_MAX 80

/* 1 and *ret for a name of ours; 0 for a name that is not (a socket's, say); -EINVAL for
 * one that has a prefix of ours but is not valid otherwise. Pure: the name is what systemd
 * hands over, and tests/fuzz/fuzz-fdstore-name.c fuzzes it. */
int fdstore_name_parse(const char *name, FdStoreName *ret);
/* The name of *n, as fdstore_name_parse() reads it back; -EINVAL if *n is not valid. */
int fdstore_name_format(const FdStoreName *n, char ret[static FDSTORE_NAME_MAX]);
