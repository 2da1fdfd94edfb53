/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Allocation failures in a JSON builder: libsandboxd's exec request, built field by field.
 * This executable's malloc() and the like (they come before libc's, and before ASan's, in
 * the lookup order, and so serve json-c too) fail the k-th allocation once armed; for
 * k = 1, 2, ... each setter either succeeds fully or answers -ENOMEM and leaves the request
 * as it was. Under ASan (tools/dev's build-asan) what a failed setter leaked is reported. */

#include <dlfcn.h>
#include <errno.h>

#include "internal.h"
#include "tests.h"

/* --- failing allocations -------------------------------------------------------------------- */

/* _public_ (internal.h): the project builds with -fvisibility=hidden, and json-c must see them.
 * Not instrumented: ASan allocates while it starts, before its shadow memory is there. */
#define _uninstrumented_ __attribute__((no_sanitize("address", "undefined")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);

/* dlsym() may allocate before the real functions are known: from here, and never freed */
static char bootstrap[4096];
static size_t bootstrap_used;

static unsigned long fail_at;  /* the allocation that fails; 0: none */
static unsigned long n_allocs; /* allocations since armed */

_uninstrumented_ static void *bootstrap_alloc(size_t n) {
        void *p;

        n = (n + 15) & ~(size_t) 15;
        if (n > sizeof(bootstrap) - bootstrap_used)
                return NULL;
        p = bootstrap + bootstrap_used;
        bootstrap_used += n;
        return p;
}

_uninstrumented_ static bool resolve(void) {
        static bool resolving;

        if (real_free)
                return true;
        if (resolving)
                return false;
        resolving = true;
        real_malloc = dlsym(RTLD_NEXT, "malloc");
        real_calloc = dlsym(RTLD_NEXT, "calloc");
        real_realloc = dlsym(RTLD_NEXT, "realloc");
        real_free = dlsym(RTLD_NEXT, "free");
        resolving = false;
        return real_free;
}

_uninstrumented_ static bool fail_now(void) {
        return fail_at > 0 && ++n_allocs == fail_at;
}

_uninstrumented_ _public_ void *malloc(size_t n) {
        if (!resolve())
                return bootstrap_alloc(n);
        if (fail_now()) {
                errno = ENOMEM;
                return NULL;
        }
        return real_malloc(n);
}

_uninstrumented_ _public_ void *calloc(size_t n, size_t size) {
        if (!resolve())
                return bootstrap_alloc(n * size); /* static, so zeroed */
        if (fail_now()) {
                errno = ENOMEM;
                return NULL;
        }
        return real_calloc(n, size);
}

_uninstrumented_ _public_ void *realloc(void *p, size_t n) {
        if (!resolve())
                return NULL;
        if (fail_now()) {
                errno = ENOMEM;
                return NULL;
        }
        return real_realloc(p, n);
}

_uninstrumented_ _public_ void free(void *p) {
        if ((char *) p >= bootstrap && (char *) p < bootstrap + sizeof(bootstrap))
                return;
        if (resolve())
                real_free(p);
}

/* libc's own strdup() would not call the malloc() above */
_public_ char *strdup(const char *s) {
        size_t n = strlen(s) + 1;
        char *p = malloc(n);

        return p ? memcpy(p, s, n) : NULL;
}

_public_ char *strndup(const char *s, size_t max) {
        size_t n = strnlen(s, max);
        char *p = malloc(n + 1);

        if (!p)
                return NULL;
        memcpy(p, s, n);
        p[n] = 0;
        return p;
}

/* --- the builder ------------------------------------------------------------------------------ */

typedef int (*Step)(sandboxd_exec *e);

static int set_argv(sandboxd_exec *e) {
        return sandboxd_exec_set_argv(e, (const char *const[]) { "/bin/echo", "a fairly long argument, not inline", "b",
                                                                 NULL });
}
static int set_env_first(sandboxd_exec *e) {
        return sandboxd_exec_set_env(e, "GREETING", "hello, the first variable of the request");
}
static int set_env_second(sandboxd_exec *e) {
        return sandboxd_exec_set_env(e, "LANG", "C.UTF-8");
}
static int set_cwd(sandboxd_exec *e) {
        return sandboxd_exec_set_cwd(e, "src/some/directory/of/the/workspace");
}
static int set_stdin(sandboxd_exec *e) {
        return sandboxd_exec_set_stdin(e, "input\n\0with a NUL", 17);
}
static int set_timeout(sandboxd_exec *e) {
        return sandboxd_exec_set_timeout_ms(e, 1500);
}
static int set_request_id(sandboxd_exec *e) {
        return sandboxd_exec_set_request_id(e, "build-1");
}

static const Step steps[] = { set_argv, set_env_first, set_env_second, set_cwd, set_stdin, set_timeout, set_request_id };

static const char *body_text(sandboxd_exec *e) {
        return json_object_to_json_string_ext(e->body, JSON_C_TO_STRING_PLAIN);
}

static void test_exec_builder(void) {
        const char *expected = "{\"argv\":[\"\\/bin\\/echo\",\"a fairly long argument, not inline\",\"b\"],"
                               "\"env\":{\"GREETING\":\"hello, the first variable of the request\",\"LANG\":\"C.UTF-8\"},"
                               "\"cwd\":\"src\\/some\\/directory\\/of\\/the\\/workspace\","
                               "\"stdin\":{\"base64\":\"aW5wdXQKAHdpdGggYSBOVUw=\"},\"timeout_ms\":1500,"
                               "\"request_id\":\"build-1\"}";

        /* each step with the steps before it done: the k-th allocation of the step fails */
        for (size_t s = 0; s < ELEMENTSOF(steps); s++) {
                unsigned long failures = 0;

                for (unsigned long k = 1;; k++) {
                        sandboxd_exec *e = NULL;
                        char *before;
                        int r;

                        ASSERT(sandboxd_exec_new(&e) == 0);
                        for (size_t i = 0; i < s; i++)
                                ASSERT(steps[i](e) == 0);
                        before = strdup(body_text(e));
                        ASSERT(before);

                        n_allocs = 0;
                        fail_at = k;
                        r = steps[s](e);
                        fail_at = 0;

                        if (n_allocs < k) {
                                /* the step needs fewer than k allocations: it ran without a failure */
                                ASSERT(r == 0);
                                if (s == ELEMENTSOF(steps) - 1)
                                        ASSERT_STREQ(body_text(e), expected);
                                free(before);
                                sandboxd_exec_free(e);
                                break;
                        }
                        failures++;
                        if (r != -ENOMEM || strcmp(body_text(e), before) != 0)
                                fprintf(stderr, "step %zu, allocation %lu failing: r=%d, %s\n", s, k, r, body_text(e));
                        ASSERT(r == -ENOMEM);
                        ASSERT_STREQ(body_text(e), before);
                        free(before);
                        sandboxd_exec_free(e);
                }
                /* every step allocates; otherwise the injection did not reach json-c */
                ASSERT(failures > 0);
        }
}

int main(void) {
        test_exec_builder();
        return TESTS_DONE();
}
