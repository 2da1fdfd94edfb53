/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "json-util.h"
#include "macro.h"

/* Records that outlive the process: sessions and commands, one JSON file each, below
 * $STATE_DIRECTORY (/var/lib/sandboxd): sessions/<sid>/session.json, sessions/<sid>/<n>.json.
 * Writes are atomic (a temporary file renamed over the old one). */

int store_write(const char *path, json_object *o);
/* The same, the file with MODE instead of 0600. */
int store_write_mode(const char *path, json_object *o, mode_t mode);
/* A record's JSON object; -EBADMSG if the file holds anything else. */
int store_read(const char *path, json_object **ret);
/* The same from text: one JSON object (strict JSON, UTF-8, no NUL), whitespace around it. */
int store_parse(const char *text, size_t size, json_object **ret);
int store_mkdir_p(const char *path, mode_t mode);
int store_rm_rf(const char *path);

/* Typed getters that tolerate missing fields (records written by older versions). A
 * string with a NUL character in it counts as missing. */
const char *store_get_string(json_object *o, const char *key);
uint64_t store_get_u64(json_object *o, const char *key, uint64_t dflt);
int64_t store_get_i64(json_object *o, const char *key, int64_t dflt);
bool store_get_bool(json_object *o, const char *key, bool dflt);
