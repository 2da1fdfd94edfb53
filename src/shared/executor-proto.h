/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The wire between sandboxd and a session's executor (src/executor/): one message per
 * SOCK_SEQPACKET datagram, a fixed 16-byte header, fixed-size bodies, host byte order
 * (both ends run on one host). Pure: both sides and the fuzzers link it, libc only.
 *
 * The executor runs as the session's dynamic user, so every command of the session can do
 * to it what it can do to itself: sandboxd treats each of its bytes as hostile.
 *
 *   executor -> sandboxd   HELLO    (first, once per connection)
 *                          STARTED  n, pid, cgroup name      (a command runs)
 *                          EXITED   n, how it ended, rusage  (it ended, or never ran)
 *                          READY    (after HELLO, every command it still knows was
 *                                    told again: STARTED, then EXITED if it ended)
 *   sandboxd -> executor   EXEC     n, limits; fds: spec memfd, stdin, stdout, stderr
 *                          ACK      n (the result is recorded: forget it, rmdir its cgroup)
 *
 * sandboxd never trusts the executor to signal, stop or time out a command: it does that
 * itself, to the pids of the command's cgroup, with the session's uid. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXECUTOR_PROTO_MAGIC   UINT32_C(0x45584253) /* "SBXE" read little-endian */
#define EXECUTOR_PROTO_VERSION 1

/* Command numbers are a session's (1.. MaxCommandsPerSession, at most this). */
#define EXECUTOR_N_MAX 100000u
/* Commands an executor keeps at once: running, or ended and not yet acknowledged. */
#define EXECUTOR_TABLE_MAX 512u
/* "c<n>-<16 hex>": the per-command cgroup below the executor unit's own. The random part
 * is there because a command can create c<n+1>-... ahead of time. */
#define EXECUTOR_CGROUP_NAME_MAX 32
/* What sandboxd reads per datagram: more is a violation (MSG_TRUNC). */
#define EXECUTOR_MSG_MAX 256
/* The exec spec memfd, at most. */
#define EXECUTOR_SPEC_MAX (4u * 1024u * 1024u)
#define EXECUTOR_SPEC_ARGC_MAX 4096u  /* REQUEST_ARGV_MAX */
#define EXECUTOR_SPEC_ENVC_MAX 4096u

/* Exit codes of a child that could not become the command, as systemd's own (result.c
 * maps them to "setup-chdir", "setup-exec", ...). */
#define EXECUTOR_EXIT_CHDIR 200
#define EXECUTOR_EXIT_EXEC  203
#define EXECUTOR_EXIT_STDIN 208

/* Where the executor finds sandboxd's listener, inside its unit. */
#define EXECUTOR_SOCKET_DIR  "/run/sandboxd-executor"
#define EXECUTOR_SOCKET_PATH EXECUTOR_SOCKET_DIR "/sock"

typedef enum ExecutorMsgType {
        EXECUTOR_MSG_HELLO = 1,
        EXECUTOR_MSG_STARTED,
        EXECUTOR_MSG_EXITED,
        EXECUTOR_MSG_READY,
        EXECUTOR_MSG_EXEC,
        EXECUTOR_MSG_ACK,
        _EXECUTOR_MSG_MAX,
} ExecutorMsgType;

typedef struct ExecutorHeader {
        uint32_t magic;
        uint16_t version;
        uint16_t type;
        uint32_t n;    /* the command; 0 for HELLO and READY */
        uint32_t size; /* of the whole datagram */
} ExecutorHeader;

/* HELLO flags: what the executor could set up in its delegated cgroup. */
#define EXECUTOR_HELLO_CGROUPS  (UINT32_C(1) << 0) /* per-command cgroups exist */
#define EXECUTOR_HELLO_CONTROLLERS (UINT32_C(1) << 1) /* and memory/pids are enabled there (cgroup v2) */

typedef struct ExecutorHello {
        ExecutorHeader header;
        uint32_t flags;
        uint32_t known; /* commands it knows; as many STARTED/EXITED lines follow before READY */
} ExecutorHello;

typedef struct ExecutorStarted {
        ExecutorHeader header;
        uint32_t pid;
        uint32_t reserved;
        uint64_t start_usec; /* CLOCK_MONOTONIC */
        char cgroup[EXECUTOR_CGROUP_NAME_MAX]; /* NUL-padded; "" when there are no per-command cgroups */
} ExecutorStarted;

typedef struct ExecutorExited {
        ExecutorHeader header;
        int32_t code;   /* CLD_EXITED, CLD_KILLED, CLD_DUMPED; 0: it never ran (fork failed) */
        int32_t status; /* exit status or signal */
        uint64_t utime_usec, stime_usec;
        uint64_t maxrss_bytes;
        uint64_t exit_usec; /* CLOCK_MONOTONIC */
} ExecutorExited;

typedef struct ExecutorReady {
        ExecutorHeader header;
} ExecutorReady;

/* EXEC flags */
#define EXECUTOR_EXEC_MEMORY_MAX (UINT32_C(1) << 0) /* memory_max is set */
#define EXECUTOR_EXEC_TASKS_MAX  (UINT32_C(1) << 1)

typedef struct ExecutorExec {
        ExecutorHeader header;
        uint32_t flags;
        uint32_t reserved;
        uint64_t memory_max; /* bytes, below the session's; cgroup v2 only */
        uint64_t tasks_max;
} ExecutorExec; /* + SCM_RIGHTS: spec memfd, stdin, stdout, stderr, in this order */

#define EXECUTOR_EXEC_FDS 4

typedef struct ExecutorAck {
        ExecutorHeader header;
} ExecutorAck;

/* One decoded message. */
typedef struct ExecutorMsg {
        ExecutorMsgType type;
        uint32_t n;
        union {
                ExecutorHello hello;
                ExecutorStarted started;
                ExecutorExited exited;
                ExecutorExec exec;
        };
} ExecutorMsg;

/* Fills the header of a message of `type` about command n (size from the type). */
void executor_msg_init(void *msg, ExecutorMsgType type, uint32_t n);

/* Checks one datagram of size bytes: magic, version, a known type, the size of that type,
 * n in range for the type (0 for HELLO/READY, 1..EXECUTOR_N_MAX otherwise), and for
 * STARTED a pid > 0 and a cgroup name that is "" or exactly c<n>-<16 lowercase hex> of its
 * own n, NUL-padded; for EXITED a code of CLD_EXITED/KILLED/DUMPED with a status in range,
 * or 0. from_executor: only the executor's types are allowed (HELLO, STARTED, EXITED,
 * READY), else only sandboxd's (EXEC, ACK). 0 and *ret filled, or -EBADMSG. */
int executor_msg_decode(const void *p, size_t size, bool from_executor, ExecutorMsg *ret);

/* "c<n>-<hex of 8 random bytes>" */
int executor_cgroup_name(uint32_t n, const uint8_t random[8], char ret[EXECUTOR_CGROUP_NAME_MAX]);

/* The exec spec, in a sealed memfd (F_SEAL_SHRINK|GROW|WRITE|SEAL):
 *     u32 magic EXECUTOR_SPEC_MAGIC, u32 argc, u32 envc, u32 flags (EXECUTOR_SPEC_*, no other bit),
 *     then 2 + argc + envc NUL-terminated strings: exe, cwd, argv[0..argc), env[0..envc)
 * and nothing after the last NUL. exe and cwd absolute, argc >= 1, each env entry
 * NAME=value with a non-empty name. */
#define EXECUTOR_SPEC_MAGIC UINT32_C(0x43455053) /* "SPEC" */
/* stdin is a pty slave: the child makes it the controlling terminal of the session it
 * leads (TIOCSCTTY), or exits EXECUTOR_EXIT_STDIN */
#define EXECUTOR_SPEC_TTY UINT32_C(1)
#define EXECUTOR_SPEC_FLAGS_ALL EXECUTOR_SPEC_TTY

typedef struct ExecutorSpec {
        const char *exe, *cwd;
        uint32_t argc, envc;
        uint32_t flags;
        char **argv; /* NULL-terminated, pointing into the buffer */
        char **env;
} ExecutorSpec;

/* Serializes; -E2BIG past EXECUTOR_SPEC_MAX or the counts. */
int executor_spec_format(const char *exe, const char *cwd, char * const *argv, char * const *env, uint32_t flags,
                         char **ret, size_t *ret_size);
/* Parses buf (size bytes, which it does not copy: argv/env point into it). -EBADMSG when it
 * is not exactly the format above. ret->argv/env are allocated (free with
 * executor_spec_done()). */
int executor_spec_parse(const char *buf, size_t size, ExecutorSpec *ret);
void executor_spec_done(ExecutorSpec *spec);
