/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "cgroup.h"
#include "log.h"

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

/* The raw system call changes the calling thread's credentials alone; glibc's setresuid()
 * would change every thread's (the store writer's too). Only the effective uid moves, and
 * the file-system uid with it: the real and saved ones stay, which is what allows the way
 * back, and the effective capabilities, cleared on the way out, return on the way back. */
static int thread_set_euid(uid_t uid) {
#ifdef SYS_setresuid32
        long r = syscall(SYS_setresuid32, (uid_t) -1, uid, (uid_t) -1);
#else
        long r = syscall(SYS_setresuid, (uid_t) -1, uid, (uid_t) -1);
#endif
        return r < 0 ? -errno : 0;
}

static int euid_enter(uid_t uid, uid_t *ret_saved) {
        *ret_saved = geteuid();
        return *ret_saved == uid ? 0 : thread_set_euid(uid);
}

static void euid_leave(uid_t uid, uid_t saved) {
        if (saved != uid && thread_set_euid(saved) < 0) {
                /* never go on with another uid than ours */
                log_error_errno(errno, "Failed to switch back to uid %u: %m", (unsigned) saved);
                abort();
        }
}

static int read_usage_dir(const char *dir, CgroupUsage *ret) {
        CgroupUsage u = { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX };
        uint64_t v;
        int r = -ENOENT;

        if (read_keyed_file(dir, "", "memory.events", "oom_kill", &v) >= 0)
                u.oom_kills = v, r = 0;
        if (read_keyed_file(dir, "", "cpu.stat", "usage_usec", &v) >= 0)
                u.cpu_usec = v, r = 0;
        if (read_u64_file(dir, "", "memory.peak", &v) >= 0 || read_u64_file(dir, "", "memory.current", &v) >= 0)
                u.memory_peak = v, r = 0;
        if (read_u64_file(dir, "", "pids.current", &v) >= 0)
                u.tasks = v, r = 0;
        *ret = u;
        return r;
}

int cgroup_read_usage_dir(uid_t uid, const char *dir, CgroupUsage *ret) {
        uid_t saved;
        int r;

        if (!dir || dir[0] != '/' || uid == (uid_t) -1)
                return -EINVAL;
        r = euid_enter(uid, &saved);
        if (r < 0)
                return r;
        r = read_usage_dir(dir, ret);
        euid_leave(uid, saved);
        return r;
}

int cgroup_read_usage(const char *cgroup, CgroupUsage *ret) {
        CgroupUsage u = { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX };
        uint64_t v;
        int r = -ENOENT;

        if (!cgroup || cgroup[0] != '/')
                return -EINVAL;

        switch (cgroup_layout()) {
        case CGROUP_UNIFIED: {
                char dir[1024];

                snprintf(dir, sizeof(dir), CGROUP_ROOT "%s", cgroup);
                return read_usage_dir(dir, ret);
        }
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

static bool cgroup_name_valid(const char *name) {
        return name && name[0] && !strchr(name, '/') && !streq(name, ".") && !streq(name, "..");
}

int cgroup_unified_dir(const char *cgroup, const char *child, char **ret) {
        const char *root;

        if (!cgroup || cgroup[0] != '/' || strstr(cgroup, "/..") || (child && !cgroup_name_valid(child)) || !ret)
                return -EINVAL;
        switch (cgroup_layout()) {
        case CGROUP_UNIFIED:
                root = CGROUP_ROOT;
                break;
        case CGROUP_HYBRID:
                root = CGROUP_ROOT "/unified";
                break;
        default:
                return -EOPNOTSUPP;
        }
        /* "/" is the root cgroup: no double slash */
        if (asprintf(ret, "%s%s%s%s", root, streq(cgroup, "/") ? "" : cgroup, child ? "/" : "", child ?: "") < 0)
                return -ENOMEM;
        return 0;
}

int cgroup_executor_bind(const char *cgroup_parent, const char *slice, const char *unit, char **ret) {
        _cleanup_free_ char *cg = NULL;

        if (!cgroup_parent || cgroup_parent[0] != '/' || !cgroup_name_valid(slice) || !cgroup_name_valid(unit))
                return -EINVAL;
        if (asprintf(&cg, "%s/%s", cgroup_parent, slice) < 0)
                return -ENOMEM;
        return cgroup_unified_dir(cg, unit, ret);
}

/* At most `max` pids of the cgroup.procs file in `dfd`; -E2BIG when there are more. */
static int read_procs(int dfd, pid_t *pids, size_t max, size_t *ret_n) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[32];
        size_t n = 0;
        int fd;

        fd = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        f = fdopen(fd, "re");
        if (!f) {
                safe_close(fd);
                return -errno;
        }
        while (fgets(line, sizeof(line), f)) {
                char *end;
                unsigned long v;

                errno = 0;
                v = strtoul(line, &end, 10);
                if (errno != 0 || end == line || (*end != '\n' && *end != 0) || line[0] < '1' || line[0] > '9' ||
                    v > INT32_MAX)
                        return -EBADMSG;
                if (n >= max) {
                        *ret_n = n;
                        return -E2BIG;
                }
                pids[n++] = (pid_t) v;
        }
        if (ferror(f))
                return -EIO;
        *ret_n = n;
        return 0;
}

static bool pid_listed(const pid_t *pids, size_t n, pid_t pid) {
        for (size_t i = 0; i < n; i++)
                if (pids[i] == pid)
                        return true;
        return false;
}

typedef struct KillState {
        int sig;
        size_t budget;   /* pids left to look at */
        unsigned n_signalled;
        int error;       /* the first */
        pid_t pids[CGROUP_KILL_PIDS_MAX];
        int pidfds[CGROUP_KILL_PIDS_MAX];
        pid_t again[CGROUP_KILL_PIDS_MAX];
} KillState;

static void kill_error(KillState *k, int r) {
        if (k->error == 0)
                k->error = r;
}

static void kill_one_dir(KillState *k, int dfd) {
        size_t n = 0, n_again = 0;
        int r;

        r = read_procs(dfd, k->pids, k->budget, &n);
        if (r == -ENOENT)
                return; /* removed meanwhile */
        if (r < 0) {
                kill_error(k, r);
                if (r != -E2BIG)
                        return;
        }
        k->budget -= n;

        for (size_t i = 0; i < n; i++) {
                k->pidfds[i] = (int) syscall(SYS_pidfd_open, k->pids[i], 0);
                if (k->pidfds[i] < 0 && errno != ESRCH)
                        kill_error(k, -errno);
        }
        /* Listed still, now that the pidfd pins it: the same process, not a reused pid. */
        r = read_procs(dfd, k->again, ELEMENTSOF(k->again), &n_again);
        if (r < 0 && r != -E2BIG) {
                n_again = 0;
                if (r != -ENOENT)
                        kill_error(k, r);
        }

        for (size_t i = 0; i < n; i++) {
                if (k->pidfds[i] < 0 || !pid_listed(k->again, n_again, k->pids[i]))
                        continue;
                if (syscall(SYS_pidfd_send_signal, k->pidfds[i], k->sig, NULL, 0) >= 0)
                        k->n_signalled++;
                else if (errno != ESRCH)
                        kill_error(k, -errno);
        }
        for (size_t i = 0; i < n; i++)
                safe_close(k->pidfds[i]);
}

static void kill_tree(KillState *k, int dfd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int fd;

        kill_one_dir(k, dfd);

        fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                kill_error(k, -errno);
                return;
        }
        d = fdopendir(fd);
        if (!d) {
                kill_error(k, -errno);
                safe_close(fd);
                return;
        }
        while ((de = readdir(d))) {
                int sub;

                if (de->d_type != DT_DIR || streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (depth >= CGROUP_KILL_DEPTH_MAX) {
                        kill_error(k, -ELOOP);
                        return;
                }
                sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0) {
                        if (errno != ENOENT)
                                kill_error(k, -errno);
                        continue;
                }
                kill_tree(k, sub, depth + 1);
                safe_close(sub);
        }
}

int pidfd_kill_as(uid_t uid, int pidfd, int sig) {
        uid_t saved = geteuid();
        int r;

        if (pidfd < 0 || sig <= 0 || sig >= _NSIG || uid == (uid_t) -1)
                return -EINVAL;
        r = saved == uid ? 0 : thread_set_euid(uid);
        if (r < 0)
                return r;
        r = syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ? -errno : 0;
        if (saved != uid && thread_set_euid(saved) < 0) {
                log_error_errno(errno, "Failed to switch back to uid %u: %m", (unsigned) saved);
                abort();
        }
        return r;
}

int cgroup_kill_as(uid_t uid, const char *dir, int sig, unsigned *ret_n_signalled) {
        _cleanup_free_ KillState *k = NULL;
        uid_t saved;
        int dfd, r;

        if (!dir || dir[0] != '/' || sig <= 0 || sig >= _NSIG || uid == (uid_t) -1)
                return -EINVAL;
        k = calloc(1, sizeof(KillState));
        if (!k)
                return -ENOMEM;
        k->sig = sig;
        k->budget = CGROUP_KILL_PIDS_MAX;

        /* The whole walk as the uid: the cgroups below a delegated one are its to read (made
         * with the sandbox's UMask=0077, and a command can chmod its own), sandboxd has no
         * CAP_DAC_READ_SEARCH, and it opens nothing there the uid could not. */
        r = euid_enter(uid, &saved);
        if (r < 0)
                return r;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                r = -errno;
        else {
                kill_tree(k, dfd, 0);
                safe_close(dfd);
                r = k->error;
        }
        euid_leave(uid, saved);

        if (ret_n_signalled)
                *ret_n_signalled = k->n_signalled;
        return r;
}
