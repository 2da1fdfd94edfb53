/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "result.h"

static const char *const status_table[_COMMAND_STATUS_MAX] = {
        [COMMAND_PENDING] = "pending",     [COMMAND_RUNNING] = "running",
        [COMMAND_SUCCEEDED] = "succeeded", [COMMAND_FAILED] = "failed",
        [COMMAND_TIMED_OUT] = "timed_out", [COMMAND_SIGNALED] = "signaled",
        [COMMAND_LOST] = "lost",
};

const char *command_status_to_string(CommandStatus s) {
        if (s < 0 || s >= _COMMAND_STATUS_MAX)
                return NULL;
        return status_table[s];
}

CommandStatus command_status_from_string(const char *s) {
        if (!s)
                return _COMMAND_STATUS_INVALID;
        for (int i = 0; i < _COMMAND_STATUS_MAX; i++)
                if (streq(s, status_table[i]))
                        return (CommandStatus) i;
        return _COMMAND_STATUS_INVALID;
}

/* systemd's exit codes, src/basic/exit-status.h */
static const char *const setup_table[] = {
        [200] = "chdir",          [201] = "nice",           [202] = "fds",
        [203] = "exec",           [204] = "memory",         [205] = "limits",
        [206] = "oom-adjust",     [207] = "signal-mask",    [208] = "stdin",
        [209] = "stdout",         [210] = "chroot",         [211] = "ioprio",
        [212] = "timerslack",     [213] = "secure-bits",    [214] = "setscheduler",
        [215] = "cpu-affinity",   [216] = "group",          [217] = "user",
        [218] = "capabilities",   [219] = "cgroup",         [220] = "setsid",
        [221] = "confirm",        [222] = "stderr",         [224] = "pam",
        [225] = "network",        [226] = "namespace",      [227] = "no-new-privileges",
        [228] = "seccomp",        [229] = "selinux-context", [230] = "personality",
        [231] = "apparmor-profile", [232] = "address-families", [233] = "runtime-directory",
        [235] = "chown",          [236] = "smack-process-label", [237] = "keyring",
        [238] = "state-directory", [239] = "cache-directory", [240] = "logs-directory",
        [241] = "configuration-directory", [242] = "numa-policy", [243] = "credentials",
};

const char *systemd_exit_status_to_string(int status) {
        if (status < 200 || status >= (int) ELEMENTSOF(setup_table))
                return NULL;
        return setup_table[status];
}

static const struct {
        int sig;
        const char *name;
} signal_table[] = {
        { SIGHUP, "SIGHUP" },   { SIGINT, "SIGINT" },   { SIGQUIT, "SIGQUIT" }, { SIGILL, "SIGILL" },
        { SIGTRAP, "SIGTRAP" }, { SIGABRT, "SIGABRT" }, { SIGBUS, "SIGBUS" },   { SIGFPE, "SIGFPE" },
        { SIGKILL, "SIGKILL" }, { SIGUSR1, "SIGUSR1" }, { SIGSEGV, "SIGSEGV" }, { SIGUSR2, "SIGUSR2" },
        { SIGPIPE, "SIGPIPE" }, { SIGALRM, "SIGALRM" }, { SIGTERM, "SIGTERM" }, { SIGCHLD, "SIGCHLD" },
        { SIGCONT, "SIGCONT" }, { SIGSTOP, "SIGSTOP" }, { SIGTSTP, "SIGTSTP" }, { SIGTTIN, "SIGTTIN" },
        { SIGTTOU, "SIGTTOU" }, { SIGURG, "SIGURG" },   { SIGXCPU, "SIGXCPU" }, { SIGXFSZ, "SIGXFSZ" },
        { SIGVTALRM, "SIGVTALRM" }, { SIGPROF, "SIGPROF" }, { SIGWINCH, "SIGWINCH" }, { SIGIO, "SIGIO" },
        { SIGPWR, "SIGPWR" },   { SIGSYS, "SIGSYS" },
};

const char *signal_to_string(int sig) {
        for (size_t i = 0; i < ELEMENTSOF(signal_table); i++)
                if (signal_table[i].sig == sig)
                        return signal_table[i].name;
        return NULL;
}

int signal_from_string(const char *s) {
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(signal_table); i++)
                if (streq(s, signal_table[i].name))
                        return signal_table[i].sig;
        return -EINVAL;
}

int command_result_from_unit(const char *unit_result, int exec_code, int exec_status, bool oom_killed,
                             CommandResult *ret) {
        CommandResult r = { .exit_code = -1 };
        const char *setup;

        if (!unit_result || !ret)
                return -EINVAL;

        if (exec_code == CLD_EXITED) {
                r.exit_code = exec_status;
        } else if (exec_code == CLD_KILLED || exec_code == CLD_DUMPED) {
                r.signal = exec_status;
        }

        if (streq(unit_result, "timeout")) {
                r.status = COMMAND_TIMED_OUT;
                snprintf(r.reason, sizeof(r.reason), "timeout");
        } else if (streq(unit_result, "oom-kill") || (oom_killed && r.signal == SIGKILL)) {
                r.status = COMMAND_SIGNALED;
                if (r.signal == 0)
                        r.signal = SIGKILL;
                snprintf(r.reason, sizeof(r.reason), "oom-kill");
        } else if (exec_code == CLD_KILLED || exec_code == CLD_DUMPED) {
                r.status = COMMAND_SIGNALED;
                snprintf(r.reason, sizeof(r.reason), "%s", exec_code == CLD_DUMPED ? "core-dump" : "signal");
        } else if (exec_code == CLD_EXITED && exec_status == 0 && streq(unit_result, "success")) {
                r.status = COMMAND_SUCCEEDED;
                snprintf(r.reason, sizeof(r.reason), "success");
        } else if (exec_code == CLD_EXITED && (setup = systemd_exit_status_to_string(exec_status))) {
                /* systemd's own setup failure before the command ran (203 = could not exec, ...) */
                r.status = COMMAND_FAILED;
                snprintf(r.reason, sizeof(r.reason), "setup-%s", setup);
        } else if (exec_code == CLD_EXITED) {
                r.status = COMMAND_FAILED;
                snprintf(r.reason, sizeof(r.reason), "%s",
                         streq(unit_result, "success") ? "exit-code" : unit_result);
        } else {
                /* The main process never ran: the unit failed before (resources, start-limit-hit, ...) */
                r.status = COMMAND_FAILED;
                snprintf(r.reason, sizeof(r.reason), "%s",
                         streq(unit_result, "success") ? "not-started" : unit_result);
        }

        *ret = r;
        return 0;
}

int command_result_from_exit(bool timed_out, int code, int status, bool oom_killed, CommandResult *ret) {
        const char *unit_result;

        if (!ret)
                return -EINVAL;
        switch (code) {
        case 0:
                break;
        case CLD_EXITED:
                if (status < 0 || status > 255)
                        return -EINVAL;
                break;
        case CLD_KILLED:
        case CLD_DUMPED:
                if (status <= 0 || status >= _NSIG)
                        return -EINVAL;
                break;
        default:
                return -EINVAL;
        }

        /* in the order PID 1 decides a service's Result */
        if (timed_out)
                unit_result = "timeout";
        else if (code == 0)
                unit_result = "success"; /* never ran: "not-started" */
        else if (oom_killed)
                unit_result = "oom-kill";
        else if (code == CLD_EXITED)
                unit_result = status == 0 ? "success" : "exit-code";
        else if (code == CLD_KILLED)
                unit_result = "signal";
        else
                unit_result = "core-dump";

        return command_result_from_unit(unit_result, code, code == 0 ? 0 : status, oom_killed, ret);
}
