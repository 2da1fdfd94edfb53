/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the executor's parser of the exec spec memfd (sandboxd writes it, but the
 * executor checks it as any input). Whatever it accepts: every string lies inside the
 * buffer and ends in a NUL there, they follow each other with nothing after the last, the
 * rules of the format hold, and formatting the parts gives the same bytes back. */

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "executor-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* s lies in [buf, buf+size) with its NUL; returns where the next string starts */
static const char *check_string(const char *buf, size_t size, const char *s) {
        assert(s >= buf && s < buf + size);
        assert(memchr(s, 0, (size_t) (buf + size - s)));
        return s + strlen(s) + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *buf = (const char *) data, *next;
        ExecutorSpec spec;
        char *again;
        size_t again_size;

        if (executor_spec_parse(buf, size, &spec) < 0)
                return 0;

        assert(spec.argc >= 1 && spec.argc <= EXECUTOR_SPEC_ARGC_MAX && spec.envc <= EXECUTOR_SPEC_ENVC_MAX);
        assert((spec.flags & ~EXECUTOR_SPEC_FLAGS_ALL) == 0);
        assert(spec.exe == buf + 16);
        next = check_string(buf, size, spec.exe);
        assert(spec.cwd == next);
        next = check_string(buf, size, spec.cwd);
        assert(spec.exe[0] == '/' && spec.cwd[0] == '/');
        for (uint32_t i = 0; i < spec.argc; i++) {
                assert(spec.argv[i] == next);
                next = check_string(buf, size, spec.argv[i]);
        }
        assert(spec.argv[spec.argc] == NULL);
        for (uint32_t i = 0; i < spec.envc; i++) {
                assert(spec.env[i] == next);
                next = check_string(buf, size, spec.env[i]);
                assert(spec.env[i][0] != '=' && strchr(spec.env[i], '='));
        }
        assert(spec.env[spec.envc] == NULL);
        assert(next == buf + size);

        assert(executor_spec_format(spec.exe, spec.cwd, spec.argv, spec.env, spec.flags, &again, &again_size) == 0);
        assert(again_size == size);
        assert(memcmp(again, buf, size) == 0); /* magic, argc, envc, flags and the strings */
        free(again);
        executor_spec_done(&spec);
        return 0;
}
