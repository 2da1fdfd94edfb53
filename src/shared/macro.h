/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _pure_ __attribute__((pure))
#define _noreturn_ __attribute__((noreturn))
#define _fallthrough_ __attribute__((fallthrough))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define FLAGS_SET(v, flags) ((~(v) & (flags)) == 0)
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define TAKE_PTR(p)                             \
        ({                                      \
                __typeof__(p) _tp_ = (p);       \
                (p) = NULL;                     \
                _tp_;                           \
        })

#define TAKE_FD(fd)                             \
        ({                                      \
                int _tf_ = (fd);                \
                (fd) = -EBADF;                  \
                _tf_;                           \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void strv_free(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}
static inline void strv_freep(char ***l) {
        strv_free(*l);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)

static inline size_t strv_length(char * const *l) {
        size_t n = 0;
        if (l)
                while (l[n])
                        n++;
        return n;
}

static inline char **strv_copy(char * const *l) {
        size_t n = strv_length(l);
        char **c = calloc(n + 1, sizeof(char *));

        for (size_t i = 0; c && i < n; i++)
                if (!(c[i] = strdup(l[i]))) {
                        strv_free(c);
                        return NULL;
                }
        return c;
}

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)         \
        static inline void func##p(type *p) {           \
                if (*p)                                 \
                        func(*p);                       \
        }

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
#define streq(a, b) (strcmp((a), (b)) == 0)

static inline const char *strempty(const char *s) {
        return s ?: "";
}

static inline const char *startswith(const char *s, const char *prefix) {
        size_t l = strlen(prefix);
        return strncmp(s, prefix, l) == 0 ? s + l : NULL;
}

/* Never returns NULL on allocation failure in paths where we cannot recover; callers check. */
static inline void *memdup(const void *p, size_t n) {
        void *q = malloc(n ? n : 1);
        if (q && n)
                memcpy(q, p, n);
        return q;
}

#define USEC_PER_SEC ((uint64_t) 1000000ULL)
#define USEC_PER_MSEC ((uint64_t) 1000ULL)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)
#define USEC_INFINITY ((uint64_t) UINT64_MAX)
