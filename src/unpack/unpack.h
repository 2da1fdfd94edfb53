/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The safe unpacker (unpack.c has the rules): a tar stream, or a directory tree, into a new
 * directory that nothing of the input can reach out of. */

#define UNPACK_MAX_BYTES_DEFAULT (UINT64_C(8) << 30)   /* 8 GiB of regular file bytes */
#define UNPACK_MAX_ENTRIES_DEFAULT UINT64_C(1000000)

typedef enum UnpackCode {
        UNPACK_OK,
        UNPACK_UNSAFE_PATH,        /* .., absolute, through a symlink, a hard link out or to a non-file */
        UNPACK_DEVICE_NODE,        /* a character or block device */
        UNPACK_TOO_LARGE,          /* more regular file bytes than max_bytes */
        UNPACK_TOO_MANY_ENTRIES,   /* more entries than max_entries */
        UNPACK_INVALID_ARCHIVE,    /* not a tar libarchive reads, truncated, malformed */
        UNPACK_IO_ERROR,           /* reading the input or writing the tree failed */
        UNPACK_EXISTS,             /* the destination exists already */
        _UNPACK_CODE_MAX,
} UnpackCode;

typedef struct UnpackLimits {
        uint64_t max_bytes;
        uint64_t max_entries;
} UnpackLimits;

typedef struct UnpackResult {
        UnpackCode code;
        uint64_t bytes;            /* regular file bytes, as counted against max_bytes */
        uint64_t entries;          /* entries read, skipped ones included */
        char message[512];         /* one line, printable ASCII, when code != UNPACK_OK */
} UnpackResult;

/* "unsafe_path", ... as sandboxd-unpack prints them */
const char *unpack_code_to_string(UnpackCode code);
/* 0, 65 (EX_DATAERR: a refused archive) or 74 (EX_IOERR) */
int unpack_code_to_exit_status(UnpackCode code);

/* Each creates dest (its parent must exist, dest must not), fills it, and returns 0; or
 * removes whatever it created and returns a negative errno-style value with *ret telling
 * why. ret is always filled in. The caller's working directory is kept. */
int unpack_tar_fd(int fd, const char *dest, const UnpackLimits *limits, UnpackResult *ret);
int unpack_tar_memory(const void *data, size_t size, const char *dest, const UnpackLimits *limits,
                      UnpackResult *ret);
int unpack_from_dir(const char *src, const char *dest, const UnpackLimits *limits, UnpackResult *ret);

/* Set from a signal handler: the running unpack stops (io_error) and cleans up. */
extern volatile int unpack_interrupted;
