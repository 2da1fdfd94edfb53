/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put);

/* JSON built where every allocation may fail: json_put() adds v under key, json_push() appends
 * it; each takes v, and on a NULL object or value, or a failed insertion, drops v and sets
 * *oom, instead of storing a null (a record that reads back wrong) or passing NULL to json-c
 * (which asserts). The caller checks *oom once at the end. */
static inline void json_put(json_object *o, const char *key, json_object *v, bool *oom) {
        if (!o || !v || json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                *oom = true;
        }
}

/* key with the value null, on purpose */
static inline void json_put_null(json_object *o, const char *key, bool *oom) {
        if (!o || json_object_object_add(o, key, NULL) < 0)
                *oom = true;
}

static inline void json_push(json_object *a, json_object *v, bool *oom) {
        if (!a || !v || json_object_array_add(a, v) < 0) {
                json_object_put(v);
                *oom = true;
        }
}
