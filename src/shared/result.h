/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

typedef enum CommandStatus {
        COMMAND_PENDING,   /* accepted, not yet terminal */
        COMMAND_RUNNING,
        COMMAND_SUCCEEDED, /* exit 0 */
        COMMAND_FAILED,    /* non-zero exit, or the unit could not start */
        COMMAND_TIMED_OUT,
        COMMAND_SIGNALED,
        COMMAND_LOST,
        _COMMAND_STATUS_MAX,
        _COMMAND_STATUS_INVALID = -EINVAL,
} CommandStatus;

const char *command_status_to_string(CommandStatus s);
CommandStatus command_status_from_string(const char *s);
static inline bool command_status_is_terminal(CommandStatus s) {
        return s >= COMMAND_SUCCEEDED;
}

typedef struct CommandUsage {
        uint64_t cpu_usec;
        uint64_t memory_bytes; /* peak observed */
        uint64_t tasks;        /* peak observed */
} CommandUsage;

typedef struct CommandResult {
        CommandStatus status;
        int exit_code;    /* -1 when the process did not exit normally */
        int signal;       /* 0 when not killed by a signal */
        char reason[64];  /* systemd's Result, "oom-kill", "setup-exec", ... */
        uint64_t duration_ms;
        CommandUsage usage;
} CommandResult;

/* Map what systemd reports about a finished service unit to our terminal status.
 *   unit_result: the Service's Result property ("success", "exit-code", "timeout", ...)
 *   exec_code:   ExecMainCode (CLD_EXITED=1, CLD_KILLED=2, CLD_DUMPED=3, 0 = never ran)
 *   exec_status: ExecMainStatus (exit status or signal number)
 *   oom_killed:  whether sandboxd detected the kernel OOM killer in the unit's slice
 *                (on cgroup v1 systemd only reports SIGKILL). */
int command_result_from_unit(const char *unit_result, int exec_code, int exec_status, bool oom_killed,
                             CommandResult *ret);

/* The same for a command whose end sandboxd learnt from its session's executor: `code` as
 * ExecMainCode (0: it never ran), `status` its exit status or signal. Maps that end to the
 * Result PID 1 would give a unit for it and goes through command_result_from_unit(), so
 * both exec modes give one status and reason for one end. -EINVAL for a code or status no
 * process can end with (the executor is not trusted). */
int command_result_from_exit(bool timed_out, int code, int status, bool oom_killed, CommandResult *ret);

/* Name of one of systemd's own exit statuses 200..243 in lower case ("exec", "chdir", ...),
 * NULL for anything else. */
const char *systemd_exit_status_to_string(int status);

const char *signal_to_string(int sig); /* "SIGKILL"; NULL if unknown */
int signal_from_string(const char *s);  /* -EINVAL if unknown */
