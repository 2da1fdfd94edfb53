/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "authz.h"
#include "manager.h"

#define SANDBOXD_API_KEYS_FILE SYSCONFDIR "/sandboxd/api-keys"
#define SANDBOXD_API_KEYS_CREDENTIAL "api-keys"
#define SANDBOXD_GROUP "sandboxd"

/* An API key as stored: only its SHA-256, bound to a tenant. */
struct ApiKey {
        char tenant[65];
        uint8_t hash[32];
};

/* Parses "tenant sha256:<64 hex>" lines; '#' starts a comment. Anything else on a line,
 * or a NUL byte, is an error (-EINVAL, *ret_error says which line). Pure:
 * tests/fuzz/fuzz-api-keys.c fuzzes it. */
int auth_parse_keys(const char *text, size_t size, ApiKey **ret, size_t *ret_n, char **ret_error);
/* Loads the keys of `path` (missing is fine) and of the systemd credential "api-keys"
 * ($CREDENTIALS_DIRECTORY/api-keys), if there is one. */
int auth_load_keys(Manager *m, const char *path);

/* Compares the key's hash against every stored one in constant time. */
int auth_check_key(Manager *m, const char *key, char **ret_tenant);

/* Tenants named in [HTTP] AdminTenants= may drain and read the metrics (their sessions are
 * still only their own). */
bool auth_tenant_is_admin(Manager *m, const char *tenant);

/* Who uid is, for authz_decide(): its login name (*ret_name, which ret->name points to;
 * NULL if it has none), whether it is in group sandboxd, whether it is root or in
 * AdminGroup=. Asks NSS, or remembers what it said (manager.h: UID_CACHE_*). */
int auth_uid_caller(Manager *m, uid_t uid, AuthzCaller *ret, char **ret_name);
/* Forgets what auth_uid_caller() and bus_caller_identity() remember. */
void auth_cache_flush(Manager *m);
/* An API key's tenant, for authz_decide(); ret->name points to tenant. */
void auth_tenant_caller(Manager *m, const char *tenant, AuthzCaller *ret);

/* What an operator adds to the keys file for `key`. */
int auth_hash_key(const char *key, char **ret_line_part);
