/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* Writes all n bytes to a blocking fd, again after EINTR and short writes: 0, or -errno. */
int loop_write(int fd, const void *buf, size_t n);
/* A memfd holding the n bytes, read from its start, sealed against any change (a reader
 * gets exactly these bytes): the fd, or -errno. */
int sealed_memfd(const char *name, const void *data, size_t n);
