/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "manager.h"

/* An import of an image (images.h): sandboxd-unpack, a child process (posix_spawn(), so no
 * fork of this threaded process), unpacks a tar from its stdin, or copies a directory, into
 * a hidden staging directory of [Images] Directory=; sandboxd waits for it on a pidfd, never
 * blocking the loop. Then the tree is checked (image_check()), renamed into place
 * atomically, and NAME.json written. On any failure nothing stays behind.
 *
 * The tar comes either through a pipe sandboxd writes (an HTTP body: image_import_write()
 * takes what the pipe takes now and says when it has room again) or as a file descriptor
 * handed over whole (D-Bus: the caller's fd becomes the child's stdin). */


typedef struct ImageImportResult {
        int error;            /* 0, or negative errno-style */
        const char *code;     /* the error table's code when error < 0 */
        char message[256];    /* as RequestError's */
        uint64_t bytes;       /* regular file bytes unpacked: the image's size */
        uint64_t entries;
} ImageImportResult;

typedef void (*ImageImportDone)(ImageImport *imp, const ImageImportResult *result, void *userdata);
typedef void (*ImageImportWritable)(ImageImport *imp, void *userdata);

/* Starts the unpacker for NAME. input_fd >= 0: the tar is read from it (taken over, closed
 * here); input_fd == -1 with from_dir NULL: a pipe, fed by image_import_write() and ended
 * by image_import_end_input(); from_dir: that directory is copied. -EEXIST: an image or an
 * import of that name exists (*ret_result tells). done is called once, when it is over. */
int image_import_start(Manager *m, const char *name, int input_fd, const char *from_dir, ImageImportDone done,
                       void *userdata, ImageImport **ret, ImageImportResult *ret_result);

/* Writes what the pipe takes without blocking: *n is set to the bytes taken. When less than
 * all was taken, writable is called once the pipe has room again. Bytes after the unpacker
 * stopped reading (a refused archive) are dropped, as taken. */
int image_import_write(ImageImport *imp, const void *data, size_t *n, ImageImportWritable writable);
/* The end of the tar: the pipe is closed, the unpacker finishes. */
void image_import_end_input(ImageImport *imp);

/* The caller is gone: the unpacker is stopped (SIGTERM: it removes its tree), done is never
 * called, and everything is freed once the child is reaped. */
void image_import_abandon(ImageImport *imp);

/* Stops every import under way (sandboxd stops): their trees are removed. */
void image_import_stop_all(Manager *m);
