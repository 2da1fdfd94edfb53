/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* Writes all n bytes to a blocking fd, again after EINTR and short writes: 0, or -errno. */
int loop_write(int fd, const void *buf, size_t n);
