/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

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

/* Tenants named in [HTTP] AdminTenants= may drain and see every session over TCP. */
bool auth_tenant_is_admin(Manager *m, const char *tenant);

/* Root, or a member of group sandboxd. */
bool auth_uid_is_allowed(uid_t uid, pid_t pid);

/* What an operator adds to the keys file for `key`. */
int auth_hash_key(const char *key, char **ret_line_part);
