/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Reads what systemd 252 does not report (or not on every host): peak memory, CPU time
 * where cpuacct is not usable, and OOM evidence on cgroup v1, straight from the cgroup
 * file systems. Paths are systemd's ControlGroup= values. */

typedef enum CgroupLayout {
        CGROUP_UNIFIED, /* pure v2 */
        CGROUP_HYBRID,  /* v1 controllers, v2 at /sys/fs/cgroup/unified */
        CGROUP_LEGACY,  /* v1 only */
        _CGROUP_LAYOUT_MAX,
        _CGROUP_LAYOUT_INVALID = -EINVAL,
} CgroupLayout;

CgroupLayout cgroup_layout(void);

typedef struct CgroupUsage {
        uint64_t cpu_usec;     /* UINT64_MAX: unknown */
        uint64_t memory_peak;  /* UINT64_MAX: unknown */
        uint64_t tasks;        /* UINT64_MAX: unknown */
        uint64_t oom_kills;    /* v2 memory.events oom_kill of a directory (cgroup_read_usage_dir()); UINT64_MAX: unknown */
} CgroupUsage;

/* Fills what can be read now; a gone cgroup gives all UINT64_MAX and returns -ENOENT. */
int cgroup_read_usage(const char *cgroup, CgroupUsage *ret);

/* How often the memory limit of this cgroup was hit (v1 memory.failcnt), or how many OOM
 * kills happened below it (v2 memory.events oom_kill). */
int cgroup_read_oom_counter(const char *cgroup, uint64_t *ret);

/* What a command sees of the cgroup file systems: its session's cgroups and no other
 * session's. For every hierarchy under /sys/fs/cgroup (each v1 controller and the v2
 * one; /sys/fs/cgroup itself on a pure v2 host) in which `parent` exists: an empty
 * tmpfs over <hierarchy><parent> (*ret_tmpfs), and <hierarchy><parent>/<child> bound back
 * read-only at its place (*ret_binds). `parent` is a ControlGroup= value, child one name. */
int cgroup_session_view(const char *parent, const char *child, char ***ret_tmpfs, char ***ret_binds);

/* The cgroups below a session's executor are its dynamic user's, mode 0700 (the sandbox's
 * UMask=0077) or whatever a command makes them, and sandboxd has no CAP_DAC_READ_SEARCH:
 * the functions on them read as `uid`, switched on the calling thread alone (as
 * cgroup_kill_as()). geteuid() for no switch. */

/* The usage of the cgroup v2 directory `dir` (cpu.stat, memory.peak, pids.current): a
 * command's own cgroup below its session's executor. As cgroup_read_usage(). */
int cgroup_read_usage_dir(uid_t uid, const char *dir, CgroupUsage *ret);

/* The directory of `cgroup` (a ControlGroup= value), or of its child `child` when not NULL,
 * in the cgroup v2 hierarchy: /sys/fs/cgroup/... on a pure v2 host, /sys/fs/cgroup/unified/...
 * on a hybrid one; -EOPNOTSUPP on a v1-only host. The executor's per-command cgroups live
 * there only. */
int cgroup_unified_dir(const char *cgroup, const char *child, char **ret);

/* What a session's executor unit binds writable at its place: its own cgroup
 * <cgroup_parent>/<slice>/<unit> in the v2 hierarchy (cgroup_unified_dir()), and nothing of
 * the v1 ones. `cgroup_parent` as for cgroup_session_view(). */
int cgroup_executor_bind(const char *cgroup_parent, const char *slice, const char *unit, char **ret);


#define CGROUP_KILL_PIDS_MAX  4096u
#define CGROUP_KILL_DEPTH_MAX 8u

/* Sends `sig` to every process listed in `dir`/cgroup.procs and in the cgroups below it (at
 * most CGROUP_KILL_DEPTH_MAX levels, CGROUP_KILL_PIDS_MAX processes), with the effective uid
 * `uid` on the calling thread alone, for the reading too: sandboxd holds no CAP_KILL, and the
 * processes and cgroups of a session's executor are its dynamic user's. Each pid is pinned by a pidfd and signalled only
 * if it is still listed after that, so a reused pid is not hit. Returns 0, or the first error:
 * -E2BIG or -ELOOP when the bounds left processes out, -EPERM when one could not be
 * signalled, -EBADMSG for a line that is not a pid; *ret_n_signalled counts those signalled
 * either way. Processes that end meanwhile are no error. */
int cgroup_kill_as(uid_t uid, const char *dir, int sig, unsigned *ret_n_signalled);
/* Sends `sig` to the process of `pidfd` with the effective uid `uid`, as cgroup_kill_as(). */
int pidfd_kill_as(uid_t uid, int pidfd, int sig);
