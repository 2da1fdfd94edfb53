/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The executor wire: every message type round-trips, and each rule of the decoder and of
 * the spec parser rejects what it is there to reject (the executor's bytes are hostile). */

#include <errno.h>
#include <signal.h>

#include "executor-proto.h"
#include "tests.h"

static const uint8_t RANDOM[8] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };

static int decode(const void *p, size_t size, bool from_executor) {
        ExecutorMsg m;

        return executor_msg_decode(p, size, from_executor, &m);
}

static void test_round_trips(void) {
        ExecutorHello hello;
        ExecutorStarted started;
        ExecutorExited exited;
        ExecutorReady ready;
        ExecutorExec exec;
        ExecutorAck ack;
        ExecutorMsg m;

        executor_msg_init(&hello, EXECUTOR_MSG_HELLO, 0);
        hello.flags = EXECUTOR_HELLO_CGROUPS | EXECUTOR_HELLO_CONTROLLERS;
        hello.known = 3;
        ASSERT(hello.header.size == 24 && hello.header.magic == EXECUTOR_PROTO_MAGIC && hello.header.version == 1);
        ASSERT(executor_msg_decode(&hello, sizeof(hello), true, &m) == 0);
        ASSERT(m.type == EXECUTOR_MSG_HELLO && m.n == 0 && m.hello.known == 3 &&
               m.hello.flags == (EXECUTOR_HELLO_CGROUPS | EXECUTOR_HELLO_CONTROLLERS));

        executor_msg_init(&started, EXECUTOR_MSG_STARTED, 42);
        started.pid = 1234;
        started.start_usec = 99;
        ASSERT(executor_cgroup_name(42, RANDOM, started.cgroup) == 0);
        ASSERT_STREQ(started.cgroup, "c42-0123456789abcdef");
        ASSERT(executor_msg_decode(&started, sizeof(started), true, &m) == 0);
        ASSERT(m.type == EXECUTOR_MSG_STARTED && m.n == 42 && m.started.pid == 1234 && m.started.start_usec == 99);
        ASSERT_STREQ(m.started.cgroup, "c42-0123456789abcdef");
        memset(started.cgroup, 0, sizeof(started.cgroup)); /* no per-command cgroups */
        ASSERT(decode(&started, sizeof(started), true) == 0);

        executor_msg_init(&exited, EXECUTOR_MSG_EXITED, EXECUTOR_N_MAX);
        exited.code = CLD_EXITED;
        exited.status = 3;
        exited.utime_usec = 10;
        exited.stime_usec = 20;
        exited.maxrss_bytes = 4096;
        exited.exit_usec = 30;
        ASSERT(executor_msg_decode(&exited, sizeof(exited), true, &m) == 0);
        ASSERT(m.type == EXECUTOR_MSG_EXITED && m.n == EXECUTOR_N_MAX && m.exited.code == CLD_EXITED &&
               m.exited.status == 3 && m.exited.utime_usec == 10 && m.exited.stime_usec == 20 &&
               m.exited.maxrss_bytes == 4096 && m.exited.exit_usec == 30);

        executor_msg_init(&ready, EXECUTOR_MSG_READY, 0);
        ASSERT(executor_msg_decode(&ready, sizeof(ready), true, &m) == 0 && m.type == EXECUTOR_MSG_READY);

        executor_msg_init(&exec, EXECUTOR_MSG_EXEC, 7);
        exec.flags = EXECUTOR_EXEC_MEMORY_MAX | EXECUTOR_EXEC_TASKS_MAX;
        exec.memory_max = 1 << 20;
        exec.tasks_max = 5;
        ASSERT(exec.header.size == 40);
        ASSERT(executor_msg_decode(&exec, sizeof(exec), false, &m) == 0);
        ASSERT(m.type == EXECUTOR_MSG_EXEC && m.n == 7 && m.exec.memory_max == 1 << 20 && m.exec.tasks_max == 5 &&
               m.exec.flags == (EXECUTOR_EXEC_MEMORY_MAX | EXECUTOR_EXEC_TASKS_MAX));

        executor_msg_init(&ack, EXECUTOR_MSG_ACK, 7);
        ASSERT(executor_msg_decode(&ack, sizeof(ack), false, &m) == 0 && m.type == EXECUTOR_MSG_ACK && m.n == 7);
}

static void test_header_rules(void) {
        uint8_t big[EXECUTOR_MSG_MAX] = {};
        ExecutorExited exited;
        ExecutorAck ack;
        ExecutorHello hello;
        ExecutorReady ready;

        executor_msg_init(&exited, EXECUTOR_MSG_EXITED, 1);
        exited.code = CLD_EXITED;
        ASSERT(decode(&exited, sizeof(exited), true) == 0);
        ASSERT(decode(NULL, 0, true) == -EBADMSG);
        ASSERT(decode(&exited, 0, true) == -EBADMSG);
        ASSERT(decode(&exited, sizeof(ExecutorHeader) - 1, true) == -EBADMSG);
        /* the size of the datagram, of the header and of the type must agree */
        ASSERT(decode(&exited, sizeof(exited) - 1, true) == -EBADMSG);
        memcpy(big, &exited, sizeof(exited));
        ASSERT(decode(big, sizeof(exited) + 1, true) == -EBADMSG);
        ((ExecutorHeader *) big)->size = sizeof(exited) + 1;
        ASSERT(decode(big, sizeof(exited) + 1, true) == -EBADMSG);
        exited.header.size = sizeof(exited) - 8;
        ASSERT(decode(&exited, sizeof(exited), true) == -EBADMSG);
        exited.header.size = sizeof(exited);

        exited.header.magic ^= 1;
        ASSERT(decode(&exited, sizeof(exited), true) == -EBADMSG);
        exited.header.magic ^= 1;
        exited.header.version = 2;
        ASSERT(decode(&exited, sizeof(exited), true) == -EBADMSG);
        exited.header.version = EXECUTOR_PROTO_VERSION;

        /* direction */
        ASSERT(decode(&exited, sizeof(exited), false) == -EBADMSG);
        executor_msg_init(&ack, EXECUTOR_MSG_ACK, 1);
        ASSERT(decode(&ack, sizeof(ack), true) == -EBADMSG);
        ASSERT(decode(&ack, sizeof(ack), false) == 0);
        executor_msg_init(&ready, EXECUTOR_MSG_READY, 0);
        ASSERT(decode(&ready, sizeof(ready), false) == -EBADMSG);

        /* unknown types: a READY-sized datagram with type 0, 7, 0xffff */
        ready.header.type = 0;
        ASSERT(decode(&ready, sizeof(ready), true) == -EBADMSG);
        ready.header.type = _EXECUTOR_MSG_MAX;
        ASSERT(decode(&ready, sizeof(ready), true) == -EBADMSG);
        ASSERT(decode(&ready, sizeof(ready), false) == -EBADMSG);
        ready.header.type = 0xffff;
        ASSERT(decode(&ready, sizeof(ready), false) == -EBADMSG);

        /* n: 0 and past the maximum where one is needed, anything but 0 where none is */
        exited.header.n = 0;
        ASSERT(decode(&exited, sizeof(exited), true) == -EBADMSG);
        exited.header.n = EXECUTOR_N_MAX + 1;
        ASSERT(decode(&exited, sizeof(exited), true) == -EBADMSG);
        ack.header.n = 0;
        ASSERT(decode(&ack, sizeof(ack), false) == -EBADMSG);
        executor_msg_init(&ready, EXECUTOR_MSG_READY, 1);
        ASSERT(decode(&ready, sizeof(ready), true) == -EBADMSG);
        executor_msg_init(&hello, EXECUTOR_MSG_HELLO, 1);
        ASSERT(decode(&hello, sizeof(hello), true) == -EBADMSG);

        /* HELLO: flags and known */
        executor_msg_init(&hello, EXECUTOR_MSG_HELLO, 0);
        hello.known = EXECUTOR_TABLE_MAX;
        ASSERT(decode(&hello, sizeof(hello), true) == 0);
        hello.known = EXECUTOR_TABLE_MAX + 1;
        ASSERT(decode(&hello, sizeof(hello), true) == -EBADMSG);
        hello.known = 0;
        hello.flags = EXECUTOR_HELLO_CONTROLLERS; /* controllers without cgroups */
        ASSERT(decode(&hello, sizeof(hello), true) == -EBADMSG);
        hello.flags = 1u << 5;
        ASSERT(decode(&hello, sizeof(hello), true) == -EBADMSG);
}

static void test_started_rules(void) {
        ExecutorStarted s;
        const char *bad[] = {
                "c8-0123456789abcdef",   /* another command's */
                "c70-0123456789abcdef",
                "c7-0123456789ABCDEF",   /* upper case */
                "c7-0123456789abcde",    /* 15 hex */
                "c7-0123456789abcdef0",  /* 17 hex */
                "c7_0123456789abcdef",
                "C7-0123456789abcdef",
                "c07-0123456789abcdef",
                "c7-0123456789abcdeg",
                "../supervisor",
                "c7-01234567/9abcdef",
                "supervisor",
        };

        executor_msg_init(&s, EXECUTOR_MSG_STARTED, 7);
        s.pid = 1;
        strcpy(s.cgroup, "c7-0123456789abcdef");
        ASSERT(decode(&s, sizeof(s), true) == 0);

        s.pid = 0;
        ASSERT(decode(&s, sizeof(s), true) == -EBADMSG);
        s.pid = UINT32_MAX; /* -1 as a pid_t */
        ASSERT(decode(&s, sizeof(s), true) == -EBADMSG);
        s.pid = 1;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(s.cgroup, 0, sizeof(s.cgroup));
                strcpy(s.cgroup, bad[i]);
                ASSERT(decode(&s, sizeof(s), true) == -EBADMSG);
        }

        /* garbage after the NUL, also after an empty name */
        memset(s.cgroup, 0, sizeof(s.cgroup));
        strcpy(s.cgroup, "c7-0123456789abcdef");
        s.cgroup[EXECUTOR_CGROUP_NAME_MAX - 1] = 'x';
        ASSERT(decode(&s, sizeof(s), true) == -EBADMSG);
        memset(s.cgroup, 0, sizeof(s.cgroup));
        s.cgroup[5] = 'x';
        ASSERT(decode(&s, sizeof(s), true) == -EBADMSG);
        /* no NUL at all */
        memset(s.cgroup, 'a', sizeof(s.cgroup));
        ASSERT(decode(&s, sizeof(s), true) == -EBADMSG);

        /* the name of the largest n still fits */
        executor_msg_init(&s, EXECUTOR_MSG_STARTED, EXECUTOR_N_MAX);
        s.pid = 1;
        ASSERT(executor_cgroup_name(EXECUTOR_N_MAX, RANDOM, s.cgroup) == 0);
        ASSERT(decode(&s, sizeof(s), true) == 0);
        ASSERT(executor_cgroup_name(0, RANDOM, s.cgroup) == -EINVAL);
        ASSERT(executor_cgroup_name(EXECUTOR_N_MAX + 1, RANDOM, s.cgroup) == -EINVAL);
}

static void test_exited_rules(void) {
        static const struct {
                int32_t code, status;
                bool ok;
        } cases[] = {
                { 0, 0, true },           { 0, EAGAIN, true },      { 0, -1, false },
                { CLD_EXITED, 0, true },  { CLD_EXITED, 255, true }, { CLD_EXITED, 256, false },
                { CLD_EXITED, -1, false }, { CLD_KILLED, 9, true },  { CLD_KILLED, 64, true },
                { CLD_KILLED, 0, false }, { CLD_KILLED, 65, false }, { CLD_DUMPED, 11, true },
                { CLD_DUMPED, 0, false }, { CLD_DUMPED, 65, false }, { CLD_TRAPPED, 5, false },
                { CLD_STOPPED, 19, false }, { CLD_CONTINUED, 18, false }, { 7, 0, false },
                { -1, 0, false },
        };
        ExecutorExited e;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                executor_msg_init(&e, EXECUTOR_MSG_EXITED, 1);
                e.code = cases[i].code;
                e.status = cases[i].status;
                ASSERT(decode(&e, sizeof(e), true) == (cases[i].ok ? 0 : -EBADMSG));
        }
}

static void test_exec_rules(void) {
        ExecutorExec x;

        executor_msg_init(&x, EXECUTOR_MSG_EXEC, 1);
        ASSERT(decode(&x, sizeof(x), false) == 0);
        x.flags = 1u << 2;
        ASSERT(decode(&x, sizeof(x), false) == -EBADMSG);
        ASSERT(decode(&x, sizeof(x) - 1, false) == -EBADMSG);
}

static void test_spec_round_trip(void) {
        char *argv[] = { (char *) "sh", (char *) "-c", (char *) "", (char *) "echo $X", NULL };
        char *env[] = { (char *) "X=1", (char *) "EMPTY=", (char *) "EQ=a=b", NULL };
        ExecutorSpec spec;
        char *buf;
        size_t size;

        ASSERT(executor_spec_format("/bin/sh", "/work", argv, env, 0, &buf, &size) == 0);
        ASSERT(size == 16 + 8 + 6 + 3 + 3 + 1 + 8 + 4 + 7 + 7);
        ASSERT(executor_spec_parse(buf, size, &spec) == 0);
        ASSERT_STREQ(spec.exe, "/bin/sh");
        ASSERT_STREQ(spec.cwd, "/work");
        ASSERT(spec.argc == 4 && spec.envc == 3);
        for (int i = 0; i < 4; i++)
                ASSERT_STREQ(spec.argv[i], argv[i]);
        ASSERT(spec.argv[4] == NULL);
        for (int i = 0; i < 3; i++)
                ASSERT_STREQ(spec.env[i], env[i]);
        ASSERT(spec.env[3] == NULL);
        ASSERT(spec.argv[0] >= buf && spec.argv[0] < buf + size); /* points into the buffer */
        executor_spec_done(&spec);
        ASSERT(spec.argv == NULL && spec.env == NULL);
        free(buf);

        /* the tty flag goes through; a bit this version does not know is refused */
        ASSERT(executor_spec_format("/bin/sh", "/work", argv, env, EXECUTOR_SPEC_TTY, &buf, &size) == 0);
        ASSERT(executor_spec_parse(buf, size, &spec) == 0);
        ASSERT(spec.flags == EXECUTOR_SPEC_TTY);
        executor_spec_done(&spec);
        ((uint32_t *) buf)[3] = EXECUTOR_SPEC_TTY | 2;
        ASSERT(executor_spec_parse(buf, size, &spec) == -EBADMSG);
        ((uint32_t *) buf)[3] = UINT32_C(1) << 31;
        ASSERT(executor_spec_parse(buf, size, &spec) == -EBADMSG);
        free(buf);

        /* no environment at all */
        ASSERT(executor_spec_format("/bin/true", "/", argv, NULL, 0, &buf, &size) == 0);
        ASSERT(executor_spec_parse(buf, size, &spec) == 0);
        ASSERT(spec.envc == 0 && spec.env && spec.env[0] == NULL);
        executor_spec_done(&spec);
        free(buf);
}

/* A spec from its parts, with the counts given separately (to lie about them). */
static size_t spec_build(char *buf, uint32_t magic, uint32_t argc, uint32_t envc, const char *body, size_t body_len) {
        uint32_t head[4] = { magic, argc, envc, 0 };

        memcpy(buf, head, sizeof(head));
        memcpy(buf + sizeof(head), body, body_len);
        return sizeof(head) + body_len;
}

#define BODY(s) s, sizeof(s) - 1 /* with the NULs written in s, without the literal's own */

static int parse(const char *buf, size_t size) {
        ExecutorSpec spec;
        int r = executor_spec_parse(buf, size, &spec);

        if (r == 0)
                executor_spec_done(&spec);
        return r;
}

static void test_spec_rules(void) {
        char buf[256];
        size_t size;
        char *big, **many;

        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 1, BODY("/x\0/\0x\0A=1\0"));
        ASSERT(parse(buf, size) == 0);
        ASSERT(parse(buf, size - 1) == -EBADMSG);        /* the last NUL missing */
        ASSERT(parse(buf, 15) == -EBADMSG);              /* shorter than the head */
        ASSERT(parse(NULL, 0) == -EBADMSG);
        buf[size] = 0;
        ASSERT(parse(buf, size + 1) == -EBADMSG);        /* a trailing byte, even a NUL */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC + 1, 1, 1, BODY("/x\0/\0x\0A=1\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* magic */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 0, 0, BODY("/x\0/\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* argc 0 */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 2, 1, BODY("/x\0/\0x\0A=1\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* more strings counted than there are */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 0, BODY("/x\0/\0x\0A=1\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* fewer */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, EXECUTOR_SPEC_ARGC_MAX + 1, 0, BODY("/x\0/\0x\0"));
        ASSERT(parse(buf, size) == -EBADMSG);
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, EXECUTOR_SPEC_ENVC_MAX + 1, BODY("/x\0/\0x\0"));
        ASSERT(parse(buf, size) == -EBADMSG);
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, UINT32_MAX, UINT32_MAX, BODY("/x\0/\0x\0"));
        ASSERT(parse(buf, size) == -EBADMSG);
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 0, BODY("x\0/\0x\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* relative exe */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 0, BODY("/x\0tmp\0x\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* relative cwd */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 0, BODY("\0/\0x\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* empty exe */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 1, BODY("/x\0/\0x\0NOEQ\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* env without '=' */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 1, BODY("/x\0/\0x\0=v\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* env with an empty name */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 1, BODY("/x\0/\0x\0\0"));
        ASSERT(parse(buf, size) == -EBADMSG);            /* empty env entry */
        size = spec_build(buf, EXECUTOR_SPEC_MAGIC, 1, 1, BODY("/x\0/\0\0A=\0"));
        ASSERT(parse(buf, size) == 0);                   /* empty argv[0] and value are fine */

        /* past the size limit, even when well-formed */
        big = malloc(EXECUTOR_SPEC_MAX + 1);
        ASSERT(big);
        if (big) {
                memset(big, 'a', EXECUTOR_SPEC_MAX + 1);
                big[16] = '/';
                size = spec_build(big, EXECUTOR_SPEC_MAGIC, 1, 0, BODY("/x\0/\0"));
                big[EXECUTOR_SPEC_MAX] = 0;
                ASSERT(parse(big, EXECUTOR_SPEC_MAX + 1) == -EBADMSG);
                free(big);
        }

        /* the formatter refuses what the parser would */
        many = calloc(EXECUTOR_SPEC_ARGC_MAX + 2, sizeof(char *));
        ASSERT(many);
        if (many) {
                for (size_t i = 0; i <= EXECUTOR_SPEC_ARGC_MAX; i++)
                        many[i] = (char *) "a";
                ASSERT(executor_spec_format("/x", "/", many, NULL, 0, &big, &size) == -E2BIG);
                ASSERT(executor_spec_format("/x", "/", (char *[]) { (char *) "a", NULL }, many, 0, &big, &size) == -E2BIG);
                many[EXECUTOR_SPEC_ARGC_MAX] = NULL;
                ASSERT(executor_spec_format("/x", "/", many, NULL, 0, &big, &size) == 0);
                ASSERT(parse(big, size) == 0);
                free(big);
                free(many);
        }
        big = malloc(EXECUTOR_SPEC_MAX);
        ASSERT(big);
        if (big) {
                char *argv[] = { big, NULL }, *out;

                memset(big, 'a', EXECUTOR_SPEC_MAX - 1);
                big[EXECUTOR_SPEC_MAX - 1] = 0;
                ASSERT(executor_spec_format("/x", "/", argv, NULL, 0, &out, &size) == -E2BIG);
                free(big);
        }
}

int main(void) {
        test_round_trips();
        test_header_rules();
        test_started_rules();
        test_exited_rules();
        test_exec_rules();
        test_spec_round_trip();
        test_spec_rules();
        return TESTS_DONE();
}
