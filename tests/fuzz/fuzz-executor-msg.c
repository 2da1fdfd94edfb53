/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the executor wire's decoder, as sandboxd reads the executor (hostile: the same uid
 * as the session's commands) and as the executor reads sandboxd. Whatever it accepts must be
 * exactly the bytes given, of a type of that direction, with every field within its rules. */

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "executor-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size, bool from_executor) {
        uint8_t again[EXECUTOR_MSG_MAX];
        ExecutorMsg m;
        size_t l;

        if (executor_msg_decode(data, size, from_executor, &m) < 0)
                return;

        assert(size <= EXECUTOR_MSG_MAX);
        assert(m.type >= EXECUTOR_MSG_HELLO && m.type < _EXECUTOR_MSG_MAX);
        assert(from_executor == (m.type <= EXECUTOR_MSG_READY));
        if (m.type == EXECUTOR_MSG_HELLO || m.type == EXECUTOR_MSG_READY)
                assert(m.n == 0);
        else
                assert(m.n >= 1 && m.n <= EXECUTOR_N_MAX);

        /* the header is what executor_msg_init() writes for that type and n */
        executor_msg_init(again, m.type, m.n);
        assert(((ExecutorHeader *) again)->size == size);
        assert(memcmp(again, data, sizeof(ExecutorHeader)) == 0);

        switch (m.type) {
        case EXECUTOR_MSG_HELLO:
                assert(memcmp(&m.hello, data, size) == 0);
                assert(m.hello.known <= EXECUTOR_TABLE_MAX);
                assert((m.hello.flags & ~(EXECUTOR_HELLO_CGROUPS | EXECUTOR_HELLO_CONTROLLERS)) == 0);
                break;
        case EXECUTOR_MSG_STARTED:
                assert(memcmp(&m.started, data, size) == 0);
                assert(m.started.pid > 0 && m.started.pid <= INT32_MAX);
                l = strnlen(m.started.cgroup, sizeof(m.started.cgroup));
                assert(l < sizeof(m.started.cgroup));
                if (l > 0) {
                        /* a name sandboxd may append to a path: c<n>-<hex>, nothing else */
                        char name[EXECUTOR_CGROUP_NAME_MAX];
                        uint8_t rnd[8];

                        assert(l > 17 && m.started.cgroup[0] == 'c');
                        assert(!strchr(m.started.cgroup, '/') && !strchr(m.started.cgroup, '.'));
                        for (size_t i = 0; i < 8; i++) {
                                unsigned v;

                                assert(sscanf(m.started.cgroup + l - 16 + 2 * i, "%2x", &v) == 1);
                                rnd[i] = (uint8_t) v;
                        }
                        assert(executor_cgroup_name(m.n, rnd, name) == 0);
                        assert(memcmp(name, m.started.cgroup, sizeof(name)) == 0);
                }
                break;
        case EXECUTOR_MSG_EXITED:
                assert(memcmp(&m.exited, data, size) == 0);
                assert(m.exited.code == 0 || m.exited.code == CLD_EXITED || m.exited.code == CLD_KILLED ||
                       m.exited.code == CLD_DUMPED);
                assert(m.exited.status >= 0 && (m.exited.code == 0 || m.exited.status <= 255));
                if (m.exited.code == CLD_KILLED || m.exited.code == CLD_DUMPED)
                        assert(m.exited.status >= 1 && m.exited.status <= 64);
                break;
        case EXECUTOR_MSG_EXEC:
                assert(memcmp(&m.exec, data, size) == 0);
                break;
        default:
                assert(size == sizeof(ExecutorHeader));
        }

        /* and decodes again the same */
        {
                ExecutorMsg m2;

                assert(executor_msg_decode(data, size, from_executor, &m2) == 0);
                assert(m2.type == m.type && m2.n == m.n);
                assert(executor_msg_decode(data, size, !from_executor, &m2) == -EBADMSG);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        check(data, size, true);
        check(data, size, false);
        return 0;
}
