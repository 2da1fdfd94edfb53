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
