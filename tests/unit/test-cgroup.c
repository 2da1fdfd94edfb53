/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* cgroup.c's paths of a session's executor and of its commands' cgroups, and what it reads
 * and does with a cgroup directory: any directory will do for that, so the tests lay out
 * the files themselves. cgroup_kill_as() signals real children of the test; as root, the
 * children run as another uid, which is what makes the uid switch necessary and visible. */

#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "tests.h"

static char tmp[] = "/tmp/test-cgroup-XXXXXX";

static void write_file(const char *dir, const char *name, const char *content) {
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        ASSERT(f);
        if (!f)
                return;
        fputs(content, f);
        fclose(f);
}

static void sub(const char *name, char *buf, size_t n) {
        snprintf(buf, n, "%s/%s", tmp, name);
        ASSERT(mkdir(buf, 0755) == 0);
}

static const char *v2_root(void) {
        switch (cgroup_layout()) {
        case CGROUP_UNIFIED:
                return "/sys/fs/cgroup";
        case CGROUP_HYBRID:
                return "/sys/fs/cgroup/unified";
        default:
                return NULL;
        }
}

static void test_paths(void) {
        const char *root = v2_root();
        char *p = NULL, expect[512];
        int r;

        r = cgroup_executor_bind("/sandboxd-testbed-x/sandboxd.slice", "sandboxd-s1.slice", "sandboxd-s1-exec.service", &p);
        if (!root) {
                ASSERT(r == -EOPNOTSUPP);
                fprintf(stderr, "no cgroup v2 hierarchy here: only the errors are checked\n");
        } else {
                ASSERT(r == 0);
                snprintf(expect, sizeof(expect),
                         "%s/sandboxd-testbed-x/sandboxd.slice/sandboxd-s1.slice/sandboxd-s1-exec.service", root);
                ASSERT_STREQ(p, expect);
                free(p), p = NULL;

                ASSERT(cgroup_executor_bind("/sandboxd.slice", "sandboxd-s1.slice", "sandboxd-s1-exec.service", &p) == 0);
                snprintf(expect, sizeof(expect), "%s/sandboxd.slice/sandboxd-s1.slice/sandboxd-s1-exec.service", root);
                ASSERT_STREQ(p, expect);
                free(p), p = NULL;

                ASSERT(cgroup_unified_dir("/sandboxd.slice/sandboxd-s1.slice/sandboxd-s1-exec.service",
                                          "c1-0123456789abcdef", &p) == 0);
                snprintf(expect, sizeof(expect),
                         "%s/sandboxd.slice/sandboxd-s1.slice/sandboxd-s1-exec.service/c1-0123456789abcdef", root);
                ASSERT_STREQ(p, expect);
                free(p), p = NULL;

                ASSERT(cgroup_unified_dir("/sandboxd.slice", NULL, &p) == 0);
                snprintf(expect, sizeof(expect), "%s/sandboxd.slice", root);
                ASSERT_STREQ(p, expect);
                free(p), p = NULL;

                ASSERT(cgroup_unified_dir("/", "c1", &p) == 0);
                snprintf(expect, sizeof(expect), "%s/c1", root);
                ASSERT_STREQ(p, expect);
                free(p), p = NULL;
        }

        /* bad input: nothing made */
        ASSERT(cgroup_executor_bind("sandboxd.slice", "s.slice", "u.service", &p) == -EINVAL);
        ASSERT(cgroup_executor_bind("/sandboxd.slice", "a/b.slice", "u.service", &p) == -EINVAL);
        ASSERT(cgroup_executor_bind("/sandboxd.slice", "s.slice", "..", &p) == -EINVAL);
        ASSERT(cgroup_executor_bind("/sandboxd.slice", "s.slice", "", &p) == -EINVAL);
        ASSERT(cgroup_executor_bind("/sandboxd.slice", NULL, "u.service", &p) == -EINVAL);
        ASSERT(cgroup_unified_dir("/a/../b", NULL, &p) == -EINVAL);
        ASSERT(cgroup_unified_dir("/a", "x/y", &p) == -EINVAL);
        ASSERT(cgroup_unified_dir("/a", ".", &p) == -EINVAL);
        ASSERT(!p);
}

/* What sandboxd reads of a command's cgroup in exec mode session: its OOM kills with its
 * usage, from a directory that is the session's uid's, closed to others (the executor makes
 * it under UMask=0077): read as that uid, even without CAP_DAC_*. */
static void test_oom_kills_as_uid(void) {
        CgroupUsage u;
        char d[512];

        sub("events", d, sizeof(d));
        ASSERT(cgroup_read_usage_dir(geteuid(), d, &u) == -ENOENT);
        ASSERT(u.oom_kills == UINT64_MAX);
        write_file(d, "memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 1\n");
        ASSERT(cgroup_read_usage_dir(geteuid(), d, &u) == 0);
        ASSERT(u.oom_kills == 2);
        if (geteuid() != 0 || chown(d, 65534, 65534) < 0)
                fprintf(stderr, "not root with CAP_CHOWN: a closed directory is not checked\n");
        else {
                ASSERT(chmod(d, 0700) == 0);
                ASSERT(cgroup_read_usage_dir(65534, d, &u) == 0 && u.oom_kills == 2);
                ASSERT(cgroup_read_usage_dir(65533, d, &u) < 0 && u.oom_kills == UINT64_MAX); /* closed to it */
                ASSERT(geteuid() == 0);
        }
        ASSERT(cgroup_read_usage_dir(geteuid(), "relative", &u) == -EINVAL);
}

static void test_usage(void) {
        CgroupUsage u;
        char d[512];

        sub("usage", d, sizeof(d));
        ASSERT(cgroup_read_usage_dir(geteuid(), d, &u) == -ENOENT);
        ASSERT(u.cpu_usec == UINT64_MAX && u.memory_peak == UINT64_MAX && u.tasks == UINT64_MAX);

        write_file(d, "cpu.stat", "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n");
        write_file(d, "memory.current", "8192\n");
        write_file(d, "pids.current", "3\n");
        ASSERT(cgroup_read_usage_dir(geteuid(), d, &u) == 0);
        ASSERT(u.cpu_usec == 1234 && u.memory_peak == 8192 && u.tasks == 3);
        /* the peak, where the kernel has it (6.1 and later), before the current value */
        write_file(d, "memory.peak", "65536\n");
        ASSERT(cgroup_read_usage_dir(geteuid(), d, &u) == 0);
        ASSERT(u.memory_peak == 65536);
        ASSERT(cgroup_read_usage_dir(geteuid(), "usage", &u) == -EINVAL);
}

static pid_t child(uid_t uid) {
        pid_t pid = fork();

        ASSERT(pid >= 0);
        if (pid == 0) {
                if (uid != getuid() && setresuid(uid, uid, uid) < 0)
                        _exit(1);
                for (;;)
                        pause();
        }
        return pid;
}

static bool alive(pid_t pid) {
        return waitpid(pid, NULL, WNOHANG) == 0;
}

static bool ended_by(pid_t pid, int sig) {
        int status = 0;

        return waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == sig;
}

static void test_kill(void) {
        bool root = geteuid() == 0;
        uid_t uid = root ? 65534 : getuid();
        char d[512], deep[600], procs[64];
        unsigned n = 99;
        pid_t a, b;

        sub("kill", d, sizeof(d));
        snprintf(deep, sizeof(deep), "%s/sub", d);
        ASSERT(mkdir(deep, 0755) == 0);
        a = child(uid);
        b = child(uid);
        usleep(100 * 1000); /* let them switch their uid */

        /* a process that is gone (or never was) is no error; one nested cgroup down counts */
        snprintf(procs, sizeof(procs), "%d\n4194303\n", (int) a);
        write_file(d, "cgroup.procs", procs);
        snprintf(procs, sizeof(procs), "%d\n", (int) b);
        write_file(deep, "cgroup.procs", procs);

        if (root) {
                /* another uid than the processes': the switch is what decides, not root */
                ASSERT(cgroup_kill_as(65533, d, SIGTERM, &n) == -EPERM);
                ASSERT(n == 0);
                ASSERT(geteuid() == 0);
                ASSERT(alive(a) && alive(b));
                /* the session's cgroups are closed to other uids: read as the session's */
                if (chown(d, uid, uid) < 0)
                        fprintf(stderr, "no CAP_CHOWN: a closed directory is not checked\n");
                else {
                        ASSERT(chmod(d, 0700) == 0);
                        ASSERT(cgroup_kill_as(65533, d, SIGTERM, &n) == -EACCES);
                        ASSERT(n == 0);
                        ASSERT(alive(a) && alive(b));
                }
        } else
                fprintf(stderr, "not root: the uid switch to another uid is not checked\n");

        ASSERT(cgroup_kill_as(uid, d, SIGTERM, &n) == 0);
        ASSERT(n == 2);
        ASSERT(ended_by(a, SIGTERM));
        ASSERT(ended_by(b, SIGTERM));
        /* back to our own uid; as root, with CAP_SETUID effective again: the second call
         * switched to a uid none of ours is, which needs it */
        ASSERT(geteuid() == (root ? 0 : getuid()));

        /* bad content or input: an error, nothing signalled */
        write_file(d, "cgroup.procs", "12abc\n");
        write_file(deep, "cgroup.procs", "");
        ASSERT(cgroup_kill_as(uid, d, SIGTERM, &n) == -EBADMSG);
        ASSERT(n == 0);
        write_file(d, "cgroup.procs", "-1\n");
        ASSERT(cgroup_kill_as(uid, d, SIGTERM, &n) == -EBADMSG);
        write_file(d, "cgroup.procs", "0\n");
        ASSERT(cgroup_kill_as(uid, d, SIGTERM, &n) == -EBADMSG);
        ASSERT(cgroup_kill_as(uid, "kill", SIGTERM, &n) == -EINVAL);
        ASSERT(cgroup_kill_as(uid, d, 0, &n) == -EINVAL);
        ASSERT(cgroup_kill_as(uid, d, 1000, &n) == -EINVAL);
        ASSERT(cgroup_kill_as(uid, "/nonexistent-cgroup", SIGTERM, &n) == -ENOENT);
}

static void test_kill_bounds(void) {
        uid_t uid = geteuid() == 0 ? 65534 : getuid();
        char d[512], path[600], procs[32];
        unsigned n = 99;
        size_t l;
        FILE *f;
        pid_t a, b;

        /* more pids than the bound (these do not exist): -E2BIG */
        sub("many", d, sizeof(d));
        snprintf(path, sizeof(path), "%s/cgroup.procs", d);
        f = fopen(path, "we");
        ASSERT(f);
        if (f) {
                for (unsigned i = 0; i <= CGROUP_KILL_PIDS_MAX; i++)
                        fprintf(f, "%u\n", 4194303u - i);
                fclose(f);
        }
        ASSERT(cgroup_kill_as(uid, d, SIGTERM, &n) == -E2BIG);
        ASSERT(n == 0);

        /* deeper than the bound: -ELOOP, the process down there is left alone, the ones
         * above are signalled */
        sub("deep", d, sizeof(d));
        a = child(uid);
        usleep(100 * 1000);
        snprintf(path, sizeof(path), "%d\n", (int) a);
        write_file(d, "cgroup.procs", path);
        l = strlen(d);
        snprintf(path, sizeof(path), "%s", d);
        for (unsigned i = 0; i <= CGROUP_KILL_DEPTH_MAX; i++) {
                l += (size_t) snprintf(path + l, sizeof(path) - l, "/d");
                ASSERT(mkdir(path, 0755) == 0);
        }
        /* and one in the deepest */
        b = child(uid);
        usleep(100 * 1000);
        snprintf(procs, sizeof(procs), "%d\n", (int) b);
        write_file(path, "cgroup.procs", procs);
        ASSERT(cgroup_kill_as(uid, d, SIGKILL, &n) == -ELOOP);
        ASSERT(n == 1);
        ASSERT(ended_by(a, SIGKILL));
        ASSERT(alive(b));
        write_file(d, "cgroup.procs", procs);
        ASSERT(cgroup_kill_as(uid, d, SIGKILL, &n) == -ELOOP);
        ASSERT(n == 1);
        ASSERT(ended_by(b, SIGKILL));
}

int main(void) {
        char cmd[128];

        ASSERT(mkdtemp(tmp));
        ASSERT(chmod(tmp, 0755) == 0); /* the uids the tests switch to look into it */
        test_paths();
        test_oom_kills_as_uid();
        test_usage();
        test_kill();
        test_kill_bounds();

        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
        ASSERT(system(cmd) == 0);
        return TESTS_DONE();
}
