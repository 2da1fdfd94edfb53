/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <sys/stat.h>

#include "cgroup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

#define CGROUP_ROOT "/sys/fs/cgroup"

CgroupLayout cgroup_layout(void) {
        static CgroupLayout cached = _CGROUP_LAYOUT_INVALID;

        if (cached < 0) {
                if (access(CGROUP_ROOT "/cgroup.controllers", F_OK) >= 0)
                        cached = CGROUP_UNIFIED;
                else if (access(CGROUP_ROOT "/unified/cgroup.controllers", F_OK) >= 0)
                        cached = CGROUP_HYBRID;
                else
                        cached = CGROUP_LEGACY;
        }
        return cached;
}

static int read_u64_file(const char *dir, const char *cgroup, const char *file, uint64_t *ret) {
        char path[1024], buf[64];
        _cleanup_fclose_ FILE *f = NULL;

        snprintf(path, sizeof(path), "%s%s/%s", dir, cgroup, file);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        if (!fgets(buf, sizeof(buf), f))
                return -EIO;
        if (strncmp(buf, "max", 3) == 0)
                return -ERANGE;
        *ret = strtoull(buf, NULL, 10);
        return 0;
}

/* "key value" lines, as in cpu.stat and memory.events. */
static int read_keyed_file(const char *dir, const char *cgroup, const char *file, const char *key, uint64_t *ret) {
        char path[1024], line[256];
        _cleanup_fclose_ FILE *f = NULL;
        size_t l = strlen(key);

        snprintf(path, sizeof(path), "%s%s/%s", dir, cgroup, file);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, key, l) == 0 && line[l] == ' ') {
                        *ret = strtoull(line + l + 1, NULL, 10);
                        return 0;
                }
        return -ENODATA;
}

int cgroup_read_usage(const char *cgroup, CgroupUsage *ret) {
        CgroupUsage u = { UINT64_MAX, UINT64_MAX, UINT64_MAX };
        uint64_t v;
        int r = -ENOENT;

        if (!cgroup || cgroup[0] != '/')
                return -EINVAL;

        switch (cgroup_layout()) {
        case CGROUP_UNIFIED:
                if (read_keyed_file(CGROUP_ROOT, cgroup, "cpu.stat", "usage_usec", &v) >= 0)
                        u.cpu_usec = v, r = 0;
                if (read_u64_file(CGROUP_ROOT, cgroup, "memory.peak", &v) >= 0 ||
                    read_u64_file(CGROUP_ROOT, cgroup, "memory.current", &v) >= 0)
                        u.memory_peak = v, r = 0;
                if (read_u64_file(CGROUP_ROOT, cgroup, "pids.current", &v) >= 0)
                        u.tasks = v, r = 0;
                break;
        case CGROUP_HYBRID:
        case CGROUP_LEGACY:
                /* cgroup v2 keeps core CPU stats in every cgroup, controllers or not */
                if (read_keyed_file(CGROUP_ROOT "/unified", cgroup, "cpu.stat", "usage_usec", &v) >= 0)
                        u.cpu_usec = v, r = 0;
                else if (read_u64_file(CGROUP_ROOT "/cpuacct", cgroup, "cpuacct.usage", &v) >= 0)
                        u.cpu_usec = v / NSEC_PER_USEC, r = 0;
                if (read_u64_file(CGROUP_ROOT "/memory", cgroup, "memory.max_usage_in_bytes", &v) >= 0)
                        u.memory_peak = v, r = 0;
                if (read_u64_file(CGROUP_ROOT "/pids", cgroup, "pids.current", &v) >= 0)
                        u.tasks = v, r = 0;
                break;
        default:
                break;
        }

        *ret = u;
        return r;
}

int cgroup_read_oom_counter(const char *cgroup, uint64_t *ret) {
        if (!cgroup || cgroup[0] != '/')
                return -EINVAL;
        if (cgroup_layout() == CGROUP_UNIFIED)
                return read_keyed_file(CGROUP_ROOT, cgroup, "memory.events", "oom_kill", ret);
        return read_u64_file(CGROUP_ROOT "/memory", cgroup, "memory.failcnt", ret);
}

static int strv_push(char ***l, size_t *n, char *s) {
        char **nl;

        if (!s)
                return -ENOMEM;
        nl = realloc(*l, (*n + 2) * sizeof(char *));
        if (!nl) {
                free(s);
                return -ENOMEM;
        }
        nl[(*n)++] = s;
        nl[*n] = NULL;
        *l = nl;
        return 0;
}

static int view_add(const char *hierarchy, const char *parent, const char *child, char ***tmpfs, size_t *n_tmpfs,
                    char ***binds, size_t *n_binds) {
        char *p = NULL, *c = NULL;
        struct stat st;
        int r;

        if (asprintf(&p, "%s%s", hierarchy, parent) < 0)
                return -ENOMEM;
        if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
                free(p);
                return 0; /* not realised in this hierarchy: nothing of any session there */
        }
        if (asprintf(&c, "%s/%s", p, child) < 0) {
                free(p);
                return -ENOMEM;
        }
        r = strv_push(tmpfs, n_tmpfs, p);
        if (r < 0) {
                free(c);
                return r;
        }
        return strv_push(binds, n_binds, c);
}

int cgroup_session_view(const char *parent, const char *child, char ***ret_tmpfs, char ***ret_binds) {
        _cleanup_strv_free_ char **tmpfs = NULL, **binds = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        size_t n_tmpfs = 0, n_binds = 0;
        struct dirent *de;
        int r = 0;

        if (!parent || parent[0] != '/' || !child || strchr(child, '/'))
                return -EINVAL;

        if (cgroup_layout() == CGROUP_UNIFIED)
                r = view_add(CGROUP_ROOT, parent, child, &tmpfs, &n_tmpfs, &binds, &n_binds);
        else {
                d = opendir(CGROUP_ROOT);
                if (!d)
                        return -errno;
                /* Each mounted hierarchy is a directory; "cpu" -> "cpu,cpuacct" links are not. */
                while (r >= 0 && (de = readdir(d))) {
                        char h[sizeof(CGROUP_ROOT) + 256];

                        if (de->d_type != DT_DIR || de->d_name[0] == '.')
                                continue;
                        snprintf(h, sizeof(h), CGROUP_ROOT "/%s", de->d_name);
                        r = view_add(h, parent, child, &tmpfs, &n_tmpfs, &binds, &n_binds);
                }
        }
        if (r < 0)
                return r;
        if ((!tmpfs && !(tmpfs = calloc(1, sizeof(char *)))) || (!binds && !(binds = calloc(1, sizeof(char *)))))
                return -ENOMEM;
        *ret_tmpfs = TAKE_PTR(tmpfs);
        *ret_binds = TAKE_PTR(binds);
        return 0;
}
