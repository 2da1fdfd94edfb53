/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "encoding.h"
#include "log.h"
#include "scope.h"
#include "store.h"
#include "validate.h"

const char *const scope_kinds[3] = { "ws", "home", "tmp" };

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

const char *scope_tenant(const char *creator) {
        /* API tenants are user names; local callers are "unix:<uid>" or "dbus:<uid>" */
        if (!creator || !user_name_is_valid(creator))
                return SCOPE_TENANT_LOCAL;
        return creator;
}

int scope_dynamic_user(const char *tenant, const char *user, const char *workspace, char **ret) {
        uint8_t digest[SHA256_DIGEST_SIZE];
        _cleanup_free_ char *scope = NULL;
        char hex[2 * SHA256_DIGEST_SIZE + 1];

        if (asprintf(&scope, "%s/%s/%s", tenant, user, workspace) < 0)
                return -ENOMEM;
        sha256(scope, strlen(scope), digest);
        hex_encode(digest, 8, hex);
        return asprintf(ret, "sbx-%s", hex) < 0 ? -ENOMEM : 0;
}

/* mkdir, or an existing directory: either way root's, with exactly this mode (sandboxd's
 * umask would take bits away; PID 1 makes parents 0755). */
static int mkdir_mode(const char *path, mode_t mode) {
        struct stat st;

        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return -errno;
        if (lstat(path, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if ((st.st_mode & 07777) != mode && chmod(path, mode) < 0)
                return -errno;
        return 0;
}

int scope_prepare(const char *public_root, const char *tenant, const char *user) {
        char path[PATH_MAX];
        int r;

        for (size_t k = 0; k < ELEMENTSOF(scope_kinds); k++) {
                snprintf(path, sizeof(path), "%s/%s", public_root, scope_kinds[k]);
                r = mkdir_mode(path, 0711);
                if (r >= 0) {
                        snprintf(path, sizeof(path), "%s/%s/%s", public_root, scope_kinds[k], tenant);
                        r = mkdir_mode(path, 0711);
                }
                if (r >= 0) {
                        snprintf(path, sizeof(path), "%s/%s/%s/%s", public_root, scope_kinds[k], tenant, user);
                        r = mkdir_mode(path, 0711);
                }
                if (r < 0)
                        return log_error_errno(r, "Failed to prepare %s: %m", path);
        }
        return 0;
}

/* --- layout 1 to 2 ------------------------------------------------------------------- */

typedef struct UserTenant {
        char user[33];
        char tenant[33]; /* the one API tenant named for this user; "" when none yet */
        bool local;      /* a local caller's record names this user too */
} UserTenant;

/* Who the session records say used each user name. */
static int read_record_tenants(const char *state_dir, UserTenant **ret, size_t *ret_n) {
        _cleanup_(closedirp) DIR *d = NULL;
        char path[PATH_MAX];
        UserTenant *l = NULL;
        size_t n = 0;
        struct dirent *de;

        snprintf(path, sizeof(path), "%s/sessions", state_dir);
        d = opendir(path);
        while (d && (de = readdir(d))) {
                _cleanup_(json_object_putp) json_object *o = NULL;
                const char *user, *creator, *t;
                UserTenant *u = NULL;

                if (!session_id_is_valid(de->d_name))
                        continue;
                snprintf(path, sizeof(path), "%s/sessions/%s/session.json", state_dir, de->d_name);
                if (store_read(path, &o) < 0)
                        continue;
                user = store_get_string(o, "user");
                creator = store_get_string(o, "tenant");
                if (!user_name_is_valid(user))
                        continue;
                for (size_t i = 0; i < n && !u; i++)
                        if (streq(l[i].user, user))
                                u = &l[i];
                if (!u) {
                        UserTenant *nl = realloc(l, (n + 1) * sizeof(UserTenant));

                        if (!nl) {
                                free(l);
                                return -ENOMEM;
                        }
                        l = nl;
                        u = &l[n++];
                        *u = (UserTenant) {};
                        snprintf(u->user, sizeof(u->user), "%s", user);
                }
                t = scope_tenant(creator);
                if (streq(t, SCOPE_TENANT_LOCAL))
                        u->local = true;
                else if (!u->tenant[0])
                        snprintf(u->tenant, sizeof(u->tenant), "%s", t);
                else if (!streq(u->tenant, t))
                        u->local = true; /* two API tenants: neither gets it */
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

static int write_layout(const char *private_root) {
        char path[PATH_MAX];
        _cleanup_close_ int fd = -EBADF;
        char text[16];

        snprintf(path, sizeof(path), "%s/layout", private_root);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        snprintf(text, sizeof(text), "%d\n", SCOPE_LAYOUT_VERSION);
        if (write(fd, text, strlen(text)) != (ssize_t) strlen(text))
                return -EIO;
        return fsync(fd) < 0 ? -errno : 0;
}

static int read_layout(const char *private_root) {
        char path[PATH_MAX], text[16] = {};
        _cleanup_close_ int fd = -EBADF;

        snprintf(path, sizeof(path), "%s/layout", private_root);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return errno == ENOENT ? 1 : -errno;
        if (read(fd, text, sizeof(text) - 1) < 0)
                return -errno;
        return atoi(text);
}

/* <private>/<kind>.v1/<user> -> <private>/<kind>/<tenant>/<user>. Directories of users
 * only: they are root's, so root may move them (a workspace itself belongs to its dynamic
 * user, and moving a directory needs write access to it). */
static int migrate_kind(const char *private_root, const char *kind, const UserTenant *users, size_t n_users) {
        char cur[1024], old[1024], from[PATH_MAX], to[PATH_MAX];
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r = 0;

        if (snprintf(cur, sizeof(cur), "%s/%s", private_root, kind) >= (int) sizeof(cur) ||
            snprintf(old, sizeof(old), "%s/%s.v1", private_root, kind) >= (int) sizeof(old))
                return -ENAMETOOLONG;
        if (access(old, F_OK) < 0) {
                if (access(cur, F_OK) < 0)
                        return 0; /* nothing of layout 1 */
                if (rename(cur, old) < 0)
                        return -errno;
        }
        r = mkdir_mode(cur, 0755);
        if (r < 0)
                return r;

        d = opendir(old);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                const char *tenant = SCOPE_TENANT_LOCAL;

                if (!user_name_is_valid(de->d_name))
                        continue;
                for (size_t i = 0; i < n_users; i++)
                        if (streq(users[i].user, de->d_name) && !users[i].local && users[i].tenant[0])
                                tenant = users[i].tenant;
                snprintf(to, sizeof(to), "%s/%s", cur, tenant);
                r = mkdir_mode(to, 0755);
                if (r < 0)
                        return r;
                snprintf(from, sizeof(from), "%s/%s", old, de->d_name);
                snprintf(to, sizeof(to), "%s/%s/%s", cur, tenant, de->d_name);
                if (rename(from, to) < 0) {
                        r = log_warning_errno(-errno, "Failed to move %s to %s, leaving it: %m", from, to);
                        continue;
                }
                log_notice("Moved %s to %s: scopes are per tenant now (tenant '%s').", from, to, tenant);
        }
        if (rmdir(old) < 0 && r >= 0)
                r = log_warning_errno(-errno, "Failed to remove %s, leaving it: %m", old);
        return r;
}

int scope_migrate(const char *state_dir, const char *public_root, const char *private_root) {
        _cleanup_free_ UserTenant *users = NULL;
        char path[PATH_MAX];
        size_t n_users = 0;
        int r, layout;

        layout = read_layout(private_root);
        if (layout == SCOPE_LAYOUT_VERSION)
                return 0;
        if (layout < 0)
                return log_error_errno(layout, "Failed to read %s/layout: %m", private_root);
        if (layout > SCOPE_LAYOUT_VERSION)
                return log_error_errno(-EPROTO, "%s has layout %d, newer than this sandboxd knows (%d): refusing to touch it.",
                                       private_root, layout, SCOPE_LAYOUT_VERSION);

        r = store_mkdir_p(private_root, 0700);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", private_root);
        r = read_record_tenants(state_dir, &users, &n_users);
        if (r < 0)
                return r;
        for (size_t k = 0; k < ELEMENTSOF(scope_kinds); k++) {
                r = migrate_kind(private_root, scope_kinds[k], users, n_users);
                if (r < 0)
                        return log_error_errno(r, "Failed to move %s/%s to per-tenant scopes: %m", private_root,
                                               scope_kinds[k]);
                /* PID 1's symlinks to the old places: it makes new ones as commands start */
                snprintf(path, sizeof(path), "%s/%s", public_root, scope_kinds[k]);
                r = store_rm_rf(path);
                if (r < 0)
                        log_warning_errno(r, "Failed to remove %s, ignoring: %m", path);
        }
        r = write_layout(private_root);
        if (r < 0)
                return log_error_errno(r, "Failed to write %s/layout: %m", private_root);
        log_info("Workspaces, homes and temporary directories are in layout %d (per tenant).", SCOPE_LAYOUT_VERSION);
        return 0;
}

/* --- userdb records -------------------------------------------------------------------- */

static int symlink_atomic(const char *dir, const char *target, const char *name) {
        char tmp[PATH_MAX], path[PATH_MAX];

        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        (void) unlink(tmp);
        if (symlink(target, tmp) < 0)
                return -errno;
        return rename(tmp, path) < 0 ? -errno : 0;
}

int scope_userdb_write(const char *dir, const char *name, uid_t uid, const char *home) {
        _cleanup_(json_object_putp) json_object *u = json_object_new_object(), *g = json_object_new_object();
        _cleanup_(closedirp) DIR *d = NULL;
        char file[128], path[PATH_MAX], link[64], mine_u[64], mine_g[64];
        struct dirent *de;
        bool oom = !u || !g;
        int r;

        json_put(u, "userName", json_object_new_string(name), &oom);
        json_put(u, "uid", json_object_new_uint64(uid), &oom);
        json_put(u, "gid", json_object_new_uint64(uid), &oom);
        json_put(u, "realName", json_object_new_string("Dynamic User"), &oom);
        json_put(u, "homeDirectory", json_object_new_string(home), &oom);
        json_put(u, "shell", json_object_new_string("/usr/sbin/nologin"), &oom);
        json_put(u, "disposition", json_object_new_string("dynamic"), &oom);
        json_put(g, "groupName", json_object_new_string(name), &oom);
        json_put(g, "gid", json_object_new_uint64(uid), &oom);
        json_put(g, "disposition", json_object_new_string("dynamic"), &oom);

        if (oom)
                return -ENOMEM;

        /* readable by the scope's user: nss-systemd reads them in its own process */
        snprintf(file, sizeof(file), "%s.user", name);
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        r = store_write_mode(path, u, 0644);
        if (r >= 0) {
                snprintf(link, sizeof(link), "%u.user", (unsigned) uid);
                r = symlink_atomic(dir, file, link);
        }
        if (r >= 0) {
                snprintf(file, sizeof(file), "%s.group", name);
                snprintf(path, sizeof(path), "%s/%s", dir, file);
                r = store_write_mode(path, g, 0644);
        }
        if (r >= 0) {
                snprintf(link, sizeof(link), "%u.group", (unsigned) uid);
                r = symlink_atomic(dir, file, link);
        }
        if (r < 0)
                return r;

        /* the links of the uid it had before */
        snprintf(mine_u, sizeof(mine_u), "%u.user", (unsigned) uid);
        snprintf(mine_g, sizeof(mine_g), "%u.group", (unsigned) uid);
        d = opendir(dir);
        while (d && (de = readdir(d))) {
                if (de->d_name[0] >= '0' && de->d_name[0] <= '9' && !streq(de->d_name, mine_u) &&
                    !streq(de->d_name, mine_g))
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        }
        return 0;
}

int scope_dynamic_uid(const char *name, uid_t *ret) {
        char path[PATH_MAX], target[32];
        unsigned long v;
        char *end = NULL;
        ssize_t n;

        /* PID 1 keeps direct:<name> -> <uid> while the user is in use */
        snprintf(path, sizeof(path), "/run/systemd/dynamic-uid/direct:%s", name);
        n = readlink(path, target, sizeof(target) - 1);
        if (n < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        target[n] = 0;
        errno = 0;
        v = strtoul(target, &end, 10);
        if (errno != 0 || !end || *end || v == 0 || v >= UINT32_MAX)
                return -EBADMSG;
        *ret = (uid_t) v;
        return 0;
}
