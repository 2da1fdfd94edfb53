/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* command_result_from_exit(): an end the executor reports gives exactly what the same end of
 * a command unit gives, for every kind of end. The table says what PID 1 reports for each
 * (its Result; a main process killed by SIGTERM, SIGINT, SIGHUP or SIGPIPE is a clean end to
 * it), and what a client sees. */

#include <signal.h>
#include <sys/wait.h>

#include "result.h"
#include "tests.h"

static const struct {
        bool timed_out;
        int code, status;
        bool oom;
        const char *pid1_result;  /* what PID 1 reports for a unit that ends so */
        CommandStatus status_expected;
        int exit_code, signal;
        const char *reason;
} table[] = {
        { false, CLD_EXITED, 0, false, "success", COMMAND_SUCCEEDED, 0, 0, "success" },
        { false, CLD_EXITED, 1, false, "exit-code", COMMAND_FAILED, 1, 0, "exit-code" },
        { false, CLD_EXITED, 255, false, "exit-code", COMMAND_FAILED, 255, 0, "exit-code" },
        { false, CLD_EXITED, 200, false, "exit-code", COMMAND_FAILED, 200, 0, "setup-chdir" },
        { false, CLD_EXITED, 203, false, "exit-code", COMMAND_FAILED, 203, 0, "setup-exec" },
        { false, CLD_EXITED, 244, false, "exit-code", COMMAND_FAILED, 244, 0, "exit-code" },
        { false, CLD_KILLED, SIGKILL, false, "signal", COMMAND_SIGNALED, -1, SIGKILL, "signal" },
        { false, CLD_KILLED, SIGTERM, false, "success", COMMAND_SIGNALED, -1, SIGTERM, "signal" },
        { false, CLD_KILLED, SIGPIPE, false, "success", COMMAND_SIGNALED, -1, SIGPIPE, "signal" },
        { false, CLD_KILLED, SIGUSR1, false, "signal", COMMAND_SIGNALED, -1, SIGUSR1, "signal" },
        { false, CLD_DUMPED, SIGSEGV, false, "core-dump", COMMAND_SIGNALED, -1, SIGSEGV, "core-dump" },
        { false, CLD_DUMPED, SIGABRT, false, "core-dump", COMMAND_SIGNALED, -1, SIGABRT, "core-dump" },
        /* the timeout: SIGTERM, or SIGKILL after the grace, or it ended in between */
        { true, CLD_KILLED, SIGTERM, false, "timeout", COMMAND_TIMED_OUT, -1, SIGTERM, "timeout" },
        { true, CLD_KILLED, SIGKILL, false, "timeout", COMMAND_TIMED_OUT, -1, SIGKILL, "timeout" },
        { true, CLD_EXITED, 0, false, "timeout", COMMAND_TIMED_OUT, 0, 0, "timeout" },
        { true, CLD_KILLED, SIGKILL, true, "timeout", COMMAND_TIMED_OUT, -1, SIGKILL, "timeout" },
        /* the OOM killer (cgroup v2: memory.events of the command's cgroup) */
        { false, CLD_KILLED, SIGKILL, true, "oom-kill", COMMAND_SIGNALED, -1, SIGKILL, "oom-kill" },
        { false, CLD_EXITED, 1, true, "oom-kill", COMMAND_SIGNALED, 1, SIGKILL, "oom-kill" },
        /* never ran: what a command gets whose unit did not start it ("not-started") */
        { false, 0, 0, false, "success", COMMAND_FAILED, -1, 0, "not-started" },
        { true, 0, 0, false, "timeout", COMMAND_TIMED_OUT, -1, 0, "timeout" },
};

static void test_parity(void) {
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                CommandResult unit, exec;

                ASSERT(command_result_from_unit(table[i].pid1_result, table[i].code, table[i].status, table[i].oom,
                                                &unit) == 0);
                ASSERT(command_result_from_exit(table[i].timed_out, table[i].code, table[i].status, table[i].oom,
                                                &exec) == 0);
                if (unit.status != exec.status || unit.exit_code != exec.exit_code || unit.signal != exec.signal ||
                    strcmp(unit.reason, exec.reason) != 0)
                        fprintf(stderr, "row %zu: unit %d/%d/%d/%s, executor %d/%d/%d/%s\n", i, unit.status,
                                unit.exit_code, unit.signal, unit.reason, exec.status, exec.exit_code, exec.signal,
                                exec.reason);
                ASSERT(unit.status == exec.status);
                ASSERT(unit.exit_code == exec.exit_code);
                ASSERT(unit.signal == exec.signal);
                ASSERT_STREQ(unit.reason, exec.reason);

                ASSERT(exec.status == table[i].status_expected);
                ASSERT(exec.exit_code == table[i].exit_code);
                ASSERT(exec.signal == table[i].signal);
                ASSERT_STREQ(exec.reason, table[i].reason);
        }
}

/* what no process can end with: the executor is not believed, nothing is filled */
static void test_bad_input(void) {
        CommandResult r = { .status = COMMAND_RUNNING };

        ASSERT(command_result_from_exit(false, 4, 0, false, &r) == -EINVAL);
        ASSERT(command_result_from_exit(false, -1, 0, false, &r) == -EINVAL);
        ASSERT(command_result_from_exit(false, CLD_EXITED, 256, false, &r) == -EINVAL);
        ASSERT(command_result_from_exit(false, CLD_EXITED, -1, false, &r) == -EINVAL);
        ASSERT(command_result_from_exit(false, CLD_KILLED, 0, false, &r) == -EINVAL);
        ASSERT(command_result_from_exit(false, CLD_KILLED, _NSIG, false, &r) == -EINVAL);
        ASSERT(command_result_from_exit(false, CLD_DUMPED, -9, false, &r) == -EINVAL);
        ASSERT(command_result_from_exit(false, CLD_TRAPPED, SIGTRAP, false, &r) == -EINVAL);
        ASSERT(command_result_from_exit(false, CLD_EXITED, 0, false, NULL) == -EINVAL);
        ASSERT(r.status == COMMAND_RUNNING);
}

int main(void) {
        test_parity();
        test_bad_input();
        return TESTS_DONE();
}
