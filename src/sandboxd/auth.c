/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <grp.h>
#include <pwd.h>

#include "auth.h"
#include "buf.h"
#include "encoding.h"
#include "log.h"
#include "scope.h"
#include "time-util.h"
#include "validate.h"

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

/* The whitespace sscanf("%s") stops at, but for the line's end. */
static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

int auth_parse_keys(const char *text, size_t size, ApiKey **ret, size_t *ret_n, char **ret_error) {
        _cleanup_free_ ApiKey *keys = NULL;
        size_t n = 0, lineno = 0;
        const char *p = text, *end = text + size;

        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t) (end - p)) ?: end;
                const char *field[3];
                size_t len[3], f = 0;
                char tenant[sizeof(keys->tenant)];
                ApiKey *k;

                lineno++;
                if (memchr(p, 0, (size_t) (eol - p))) {
                        if (ret_error)
                                (void) asprintf(ret_error, "line %zu: contains a NUL byte", lineno);
                        return -EINVAL;
                }
                /* up to three fields before a '#': the third is one too many */
                for (const char *q = p; q < eol && *q != '#' && f < 3;) {
                        if (is_blank(*q)) {
                                q++;
                                continue;
                        }
                        field[f] = q;
                        while (q < eol && *q != '#' && !is_blank(*q))
                                q++;
                        len[f] = (size_t) (q - field[f]);
                        f++;
                }
                p = eol < end ? eol + 1 : end;
                if (f == 0)
                        continue;

                if (f == 2 && len[0] < sizeof(tenant)) {
                        memcpy(tenant, field[0], len[0]);
                        tenant[len[0]] = 0;
                }
                if (f != 2 || len[0] >= sizeof(tenant) || !user_name_is_valid(tenant) || len[1] != 7 + 64 ||
                    !startswith(field[1], "sha256:")) {
                        if (ret_error)
                                (void) asprintf(ret_error, "line %zu: expected 'TENANT sha256:<64 hex digits>'", lineno);
                        return -EINVAL;
                }
                if (streq(tenant, SCOPE_TENANT_LOCAL)) {
                        if (ret_error)
                                (void) asprintf(ret_error, "line %zu: tenant '%s' is reserved (the local callers' scopes)",
                                                lineno, SCOPE_TENANT_LOCAL);
                        return -EINVAL;
                }

                k = realloc(keys, (n + 1) * sizeof(ApiKey));
                if (!k)
                        return -ENOMEM;
                keys = k;
                k = &keys[n];
                strcpy(k->tenant, tenant); /* validated: at most 32 */
                for (int i = 0; i < 32; i++) {
                        int hi = unhex(field[1][7 + 2 * i]), lo = unhex(field[1][7 + 2 * i + 1]);
                        if (hi < 0 || lo < 0) {
                                if (ret_error)
                                        (void) asprintf(ret_error, "line %zu: the hash must be lowercase hex", lineno);
                                return -EINVAL;
                        }
                        k->hash[i] = (uint8_t) (hi << 4 | lo);
                }
                n++;
        }

        *ret = TAKE_PTR(keys);
        *ret_n = n;
        return 0;
}

/* Adds the keys of one file; a missing file adds none (-ENOENT). */
static int load_keys_file(Manager *m, const char *path) {
        _cleanup_free_ char *error = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ ApiKey *keys = NULL;
        ApiKey *all;
        Buf b = {};
        char chunk[4096];
        size_t n, n_keys = 0;
        int r;

        f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT)
                        return -ENOENT;
                return log_error_errno(-errno, "Failed to open %s: %m", path);
        }
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                if (buf_append(&b, chunk, n) < 0) {
                        buf_done(&b);
                        return log_oom();
                }

        r = auth_parse_keys(b.data ?: "", b.len, &keys, &n_keys, &error);
        buf_done(&b);
        if (r < 0)
                return log_error_errno(r, "Failed to parse %s: %s", path, error ?: strerror(-r));

        all = realloc(m->keys, (m->n_keys + n_keys + 1) * sizeof(ApiKey));
        if (!all)
                return log_oom();
        if (n_keys > 0)
                memcpy(all + m->n_keys, keys, n_keys * sizeof(ApiKey));
        m->keys = all;
        m->n_keys += n_keys;
        log_info("Loaded %zu API key(s) from %s.", n_keys, path);
        return 0;
}

int auth_load_keys(Manager *m, const char *path) {
        const char *creds = getenv("CREDENTIALS_DIRECTORY");
        bool found = false;
        int r;

        r = load_keys_file(m, path);
        if (r < 0 && r != -ENOENT)
                return r;
        found = r >= 0;

        /* The credential "api-keys" (LoadCredential=api-keys:PATH, SetCredentialEncrypted=...): its keys
         * count as well as the file's. */
        if (creds) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s/" SANDBOXD_API_KEYS_CREDENTIAL, creds) < 0)
                        return log_oom();
                r = load_keys_file(m, p);
                if (r < 0 && r != -ENOENT)
                        return r;
                found = found || r >= 0;
        }

        if (!found)
                log_info("No %s and no credential " SANDBOXD_API_KEYS_CREDENTIAL
                         ": TCP requests will be refused until keys are added.", path);
        return 0;
}

int auth_check_key(Manager *m, const char *key, char **ret_tenant) {
        uint8_t h[32];
        const ApiKey *match = NULL;

        sha256(key, strlen(key), h);
        /* Look at every key, so the time taken does not tell which one matched. */
        for (size_t i = 0; i < m->n_keys; i++)
                if (memeq_secure(h, m->keys[i].hash, sizeof(h)) && !match)
                        match = &m->keys[i];
        if (!match)
                return -EACCES;
        *ret_tenant = strdup(match->tenant);
        return *ret_tenant ? 0 : -ENOMEM;
}

bool auth_tenant_is_admin(Manager *m, const char *tenant) {
        const char *p = m->config.admin_tenants;
        size_t l;

        if (!tenant || !p)
                return false;
        l = strlen(tenant);
        while (*p) {
                const char *e = strchrnul(p, ' ');
                if ((size_t) (e - p) == l && strncmp(p, tenant, l) == 0)
                        return true;
                p = *e ? e + 1 : e;
        }
        return false;
}

/* Is the user of pw in group `name` (primary or supplementary)? */
static bool user_in_group(const struct passwd *pw, const char *name) {
        struct group *gr;
        gid_t groups[256];
        int n = (int) ELEMENTSOF(groups);

        if (!name)
                return false;
        gr = getgrnam(name);
        if (!gr)
                return false;
        if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0)
                return false;
        for (int i = 0; i < n; i++)
                if (groups[i] == gr->gr_gid)
                        return true;
        return false;
}

void auth_cache_flush(Manager *m) {
        for (size_t i = 0; i < UID_CACHE_MAX; i++) {
                free(m->uid_cache[i].name);
                m->uid_cache[i] = (UidCacheEntry) {};
        }
        for (size_t i = 0; i < SENDER_CACHE_MAX; i++) {
                free(m->sender_cache[i].sender);
                m->sender_cache[i] = (SenderCacheEntry) {};
        }
}

static bool same_file(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* useradd, usermod and userdel replace these files: what NSS said before may be wrong now
 * (a uid given to a new user, a member taken out of a group). Two stat()s, no NSS. */
static void uid_cache_check(Manager *m) {
        struct stat p = {}, g = {};

        (void) stat("/etc/passwd", &p);
        (void) stat("/etc/group", &g);
        if (same_file(&p, &m->uid_cache_passwd) && same_file(&g, &m->uid_cache_group))
                return;
        for (size_t i = 0; i < UID_CACHE_MAX; i++) {
                free(m->uid_cache[i].name);
                m->uid_cache[i] = (UidCacheEntry) {};
        }
        m->uid_cache_passwd = p;
        m->uid_cache_group = g;
}

int auth_uid_caller(Manager *m, uid_t uid, AuthzCaller *ret, char **ret_name) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        _cleanup_free_ char *name = NULL;
        UidCacheEntry *e = NULL, *oldest = &m->uid_cache[0];
        struct passwd *pw;

        uid_cache_check(m);
        /* At most UID_CACHE_MAX entries: a scan is cheaper than one question to NSS. */
        for (size_t i = 0; i < UID_CACHE_MAX; i++) {
                UidCacheEntry *c = &m->uid_cache[i];

                if (c->until > now && c->uid == uid) {
                        e = c;
                        break;
                }
                if (c->until < oldest->until)
                        oldest = c;
        }
        if (!e) {
                pw = getpwuid(uid);
                if (pw && pw->pw_name && !(name = strdup(pw->pw_name)))
                        return -ENOMEM;
                e = oldest;
                free(e->name);
                *e = (UidCacheEntry) {
                        .uid = uid,
                        .name = TAKE_PTR(name),
                        .member = pw && user_in_group(pw, SANDBOXD_GROUP),
                        .admin = uid == 0 || (pw && user_in_group(pw, m->config.admin_group)),
                        .until = now + UID_CACHE_USEC,
                };
        }
        if (e->name && !(name = strdup(e->name)))
                return -ENOMEM;
        *ret = (AuthzCaller) {
                .uid = uid,
                .member = e->member,
                .admin = e->admin,
                .name = name,
        };
        *ret_name = TAKE_PTR(name);
        return 0;
}

void auth_tenant_caller(Manager *m, const char *tenant, AuthzCaller *ret) {
        *ret = (AuthzCaller) {
                .is_tenant = true,
                .name = tenant,
                .admin = auth_tenant_is_admin(m, tenant),
        };
}

int auth_hash_key(const char *key, char **ret) {
        uint8_t h[32];
        char hex[65];

        if (strlen(key) < 16)
                return -EINVAL;
        sha256(key, strlen(key), h);
        hex_encode(h, sizeof(h), hex);
        return asprintf(ret, "sha256:%s", hex) < 0 ? -ENOMEM : 0;
}
