/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "json-util.h"
#include "macro.h"

/* Records that outlive the process: sessions and commands, one JSON file each, below
 * $STATE_DIRECTORY (/var/lib/sandboxd): sessions/<sid>/session.json, sessions/<sid>/<n>.json.
 * Writes are atomic and durable: a temporary file, fsync()ed, renamed over the old one,
 * then the directory fsync()ed. The daemon writes them from a thread (store-writer.h). */

int store_write(const char *path, json_object *o);
/* The same for text already formatted (a newline is added if it has none). */
int store_write_text(const char *path, const char *text, size_t n);
/* The same two, the file with MODE instead of 0600. */
int store_write_mode(const char *path, json_object *o, mode_t mode);
int store_write_text_mode(const char *path, const char *text, size_t n, mode_t mode);
/* A record's JSON object; -EBADMSG if the file holds anything else, and then, with
 * ret_reason, what is wrong with it ("truncated JSON", "empty", ...: a static string). */
int store_read(const char *path, json_object **ret);
int store_read_full(const char *path, json_object **ret, const char **ret_reason);
/* The same from text: one JSON object (strict JSON, UTF-8, no NUL), whitespace around it. */
int store_parse(const char *text, size_t size, json_object **ret);
int store_parse_full(const char *text, size_t size, json_object **ret, const char **ret_reason);

/* A record (file or directory) that cannot be read is set aside, not deleted: renamed to
 * <path>.corrupt-<UTC time stamp>Z beside it, for a human to look at. Of those in one
 * directory only the newest STORE_QUARANTINE_MAX stay. *ret_aside: the new name. */
#define STORE_QUARANTINE_INFIX ".corrupt-"
#define STORE_QUARANTINE_MAX 8
int store_quarantine(const char *path, uint64_t realtime_usec, char **ret_aside);
int store_mkdir_p(const char *path, mode_t mode);
int store_rm_rf(const char *path);

/* Typed getters that tolerate missing fields (records written by older versions). A
 * string with a NUL character in it counts as missing. */
const char *store_get_string(json_object *o, const char *key);
uint64_t store_get_u64(json_object *o, const char *key, uint64_t dflt);
int64_t store_get_i64(json_object *o, const char *key, int64_t dflt);
bool store_get_bool(json_object *o, const char *key, bool dflt);
