/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The executor wire (executor-proto.h). libc only: the executor links this file alone. */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor-proto.h"

/* The sizes are the contract: sandboxd and an executor of another build must agree. */
_Static_assert(sizeof(ExecutorHeader) == 16, "ExecutorHeader");
_Static_assert(sizeof(ExecutorHello) == 24, "ExecutorHello");
_Static_assert(sizeof(ExecutorStarted) == 64, "ExecutorStarted");
_Static_assert(sizeof(ExecutorExited) == 56, "ExecutorExited");
_Static_assert(sizeof(ExecutorReady) == 16, "ExecutorReady");
_Static_assert(sizeof(ExecutorExec) == 40, "ExecutorExec");
_Static_assert(sizeof(ExecutorAck) == 16, "ExecutorAck");
_Static_assert(sizeof(ExecutorStarted) <= EXECUTOR_MSG_MAX, "a message fits the receive buffer");

static size_t msg_size(ExecutorMsgType type) {
        switch (type) {
        case EXECUTOR_MSG_HELLO:
                return sizeof(ExecutorHello);
        case EXECUTOR_MSG_STARTED:
                return sizeof(ExecutorStarted);
        case EXECUTOR_MSG_EXITED:
                return sizeof(ExecutorExited);
        case EXECUTOR_MSG_READY:
                return sizeof(ExecutorReady);
        case EXECUTOR_MSG_EXEC:
                return sizeof(ExecutorExec);
        case EXECUTOR_MSG_ACK:
                return sizeof(ExecutorAck);
        default:
                return 0;
        }
}

void executor_msg_init(void *msg, ExecutorMsgType type, uint32_t n) {
        size_t size = msg_size(type);

        memset(msg, 0, size);
        *(ExecutorHeader *) msg = (ExecutorHeader) {
                .magic = EXECUTOR_PROTO_MAGIC,
                .version = EXECUTOR_PROTO_VERSION,
                .type = (uint16_t) type,
                .n = n,
                .size = (uint32_t) size,
        };
}

int executor_cgroup_name(uint32_t n, const uint8_t random[8], char ret[EXECUTOR_CGROUP_NAME_MAX]) {
        int r;

        if (n == 0 || n > EXECUTOR_N_MAX)
                return -EINVAL;
        memset(ret, 0, EXECUTOR_CGROUP_NAME_MAX);
        r = snprintf(ret, EXECUTOR_CGROUP_NAME_MAX, "c%u-%02x%02x%02x%02x%02x%02x%02x%02x", (unsigned) n, random[0],
                     random[1], random[2], random[3], random[4], random[5], random[6], random[7]);
        return r > 0 && r < EXECUTOR_CGROUP_NAME_MAX ? 0 : -EINVAL;
}

/* "" or exactly c<n>-<16 lowercase hex> of this n, and only NULs after it. */
static bool cgroup_name_valid(const char name[EXECUTOR_CGROUP_NAME_MAX], uint32_t n) {
        char prefix[16];
        size_t len = strnlen(name, EXECUTOR_CGROUP_NAME_MAX), l;

        if (len == EXECUTOR_CGROUP_NAME_MAX)
                return false; /* no NUL */
        for (size_t i = len; i < EXECUTOR_CGROUP_NAME_MAX; i++)
                if (name[i] != 0)
                        return false;
        if (len == 0)
                return true;

        l = (size_t) snprintf(prefix, sizeof(prefix), "c%u-", (unsigned) n);
        if (len != l + 16 || memcmp(name, prefix, l) != 0)
                return false;
        for (size_t i = l; i < len; i++)
                if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
                        return false;
        return true;
}

static bool exited_valid(const ExecutorExited *e) {
        switch (e->code) {
        case 0: /* never ran: the status is an errno */
                return e->status >= 0;
        case CLD_EXITED:
                return e->status >= 0 && e->status <= 255;
        case CLD_KILLED:
        case CLD_DUMPED:
                return e->status >= 1 && e->status <= 64;
        default:
                return false;
        }
}

int executor_msg_decode(const void *p, size_t size, bool from_executor, ExecutorMsg *ret) {
        ExecutorHeader h;
        ExecutorMsg m = {};
        bool needs_n;

        if (!p || size < sizeof(h))
                return -EBADMSG;
        memcpy(&h, p, sizeof(h));
        if (h.magic != EXECUTOR_PROTO_MAGIC || h.version != EXECUTOR_PROTO_VERSION)
                return -EBADMSG;
        if (h.type < EXECUTOR_MSG_HELLO || h.type >= _EXECUTOR_MSG_MAX)
                return -EBADMSG;
        if (from_executor != (h.type <= EXECUTOR_MSG_READY))
                return -EBADMSG;
        if (h.size != size || size != msg_size(h.type))
                return -EBADMSG;
        needs_n = h.type != EXECUTOR_MSG_HELLO && h.type != EXECUTOR_MSG_READY;
        if (needs_n ? h.n == 0 || h.n > EXECUTOR_N_MAX : h.n != 0)
                return -EBADMSG;

        m.type = h.type;
        m.n = h.n;
        switch (h.type) {
        case EXECUTOR_MSG_HELLO:
                memcpy(&m.hello, p, size);
                /* no unknown flags, controllers only with cgroups, no more than a table holds */
                if ((m.hello.flags & ~(EXECUTOR_HELLO_CGROUPS | EXECUTOR_HELLO_CONTROLLERS)) != 0 ||
                    (m.hello.flags & (EXECUTOR_HELLO_CGROUPS | EXECUTOR_HELLO_CONTROLLERS)) == EXECUTOR_HELLO_CONTROLLERS ||
                    m.hello.known > EXECUTOR_TABLE_MAX)
                        return -EBADMSG;
                break;
        case EXECUTOR_MSG_STARTED:
                memcpy(&m.started, p, size);
                if (m.started.pid == 0 || m.started.pid > INT32_MAX)
                        return -EBADMSG;
                if (!cgroup_name_valid(m.started.cgroup, h.n))
                        return -EBADMSG;
                break;
        case EXECUTOR_MSG_EXITED:
                memcpy(&m.exited, p, size);
                if (!exited_valid(&m.exited))
                        return -EBADMSG;
                break;
        case EXECUTOR_MSG_EXEC:
                memcpy(&m.exec, p, size);
                if ((m.exec.flags & ~(EXECUTOR_EXEC_MEMORY_MAX | EXECUTOR_EXEC_TASKS_MAX)) != 0)
                        return -EBADMSG;
                break;
        default:
                break; /* READY and ACK: the header is all */
        }
        if (ret)
                *ret = m;
        return 0;
}

/* The spec */

typedef struct SpecHead {
        uint32_t magic, argc, envc, flags;
} SpecHead;

int executor_spec_format(const char *exe, const char *cwd, char * const *argv, char * const *env, uint32_t flags,
                         char **ret, size_t *ret_size) {
        SpecHead head = { .magic = EXECUTOR_SPEC_MAGIC, .flags = flags };
        size_t size = sizeof(head), k;
        char *buf, *q;

        if (!exe || !cwd || !argv || !ret || !ret_size || (flags & ~EXECUTOR_SPEC_FLAGS_ALL))
                return -EINVAL;
        size += strlen(exe) + 1 + strlen(cwd) + 1;
        for (k = 0; argv[k]; k++) {
                if (k >= EXECUTOR_SPEC_ARGC_MAX)
                        return -E2BIG;
                size += strlen(argv[k]) + 1;
                if (size > EXECUTOR_SPEC_MAX)
                        return -E2BIG;
        }
        head.argc = (uint32_t) k;
        for (k = 0; env && env[k]; k++) {
                if (k >= EXECUTOR_SPEC_ENVC_MAX)
                        return -E2BIG;
                size += strlen(env[k]) + 1;
                if (size > EXECUTOR_SPEC_MAX)
                        return -E2BIG;
        }
        head.envc = (uint32_t) k;
        if (size > EXECUTOR_SPEC_MAX)
                return -E2BIG;

        buf = malloc(size);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, &head, sizeof(head));
        q = stpcpy(buf + sizeof(head), exe) + 1;
        q = stpcpy(q, cwd) + 1;
        for (k = 0; argv[k]; k++)
                q = stpcpy(q, argv[k]) + 1;
        for (k = 0; env && env[k]; k++)
                q = stpcpy(q, env[k]) + 1;
        *ret = buf;
        *ret_size = size;
        return 0;
}

void executor_spec_done(ExecutorSpec *spec) {
        if (!spec)
                return;
        free(spec->argv);
        free(spec->env);
        *spec = (ExecutorSpec) {};
}

static bool env_entry_valid(const char *s) {
        const char *eq = strchr(s, '=');

        return eq && eq != s;
}

int executor_spec_parse(const char *buf, size_t size, ExecutorSpec *ret) {
        ExecutorSpec spec = {};
        SpecHead head;
        const char *p, *end;
        size_t total, i;

        if (!buf || !ret || size < sizeof(head) || size > EXECUTOR_SPEC_MAX)
                return -EBADMSG;
        memcpy(&head, buf, sizeof(head));
        if (head.magic != EXECUTOR_SPEC_MAGIC || head.argc < 1 || head.argc > EXECUTOR_SPEC_ARGC_MAX ||
            head.envc > EXECUTOR_SPEC_ENVC_MAX || (head.flags & ~EXECUTOR_SPEC_FLAGS_ALL))
                return -EBADMSG;

        spec.argc = head.argc;
        spec.envc = head.envc;
        spec.flags = head.flags;
        spec.argv = calloc(head.argc + 1, sizeof(char *));
        spec.env = calloc(head.envc + 1, sizeof(char *));
        if (!spec.argv || !spec.env) {
                executor_spec_done(&spec);
                return -ENOMEM;
        }

        /* exactly 2 + argc + envc strings, each ending in a NUL inside the buffer */
        p = buf + sizeof(head);
        end = buf + size;
        total = 2 + (size_t) head.argc + head.envc;
        for (i = 0; i < total; i++) {
                const char *nul = memchr(p, 0, (size_t) (end - p));

                if (!nul)
                        goto bad;
                if (i == 0)
                        spec.exe = p;
                else if (i == 1)
                        spec.cwd = p;
                else if (i < 2 + head.argc)
                        spec.argv[i - 2] = (char *) p; /* the API hands out char **, as execve wants */
                else {
                        if (!env_entry_valid(p))
                                goto bad;
                        spec.env[i - 2 - head.argc] = (char *) p;
                }
                p = nul + 1;
        }
        if (p != end || spec.exe[0] != '/' || spec.cwd[0] != '/')
                goto bad;

        *ret = spec;
        return 0;
bad:
        executor_spec_done(&spec);
        return -EBADMSG;
}
