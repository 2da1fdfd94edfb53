/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "src/libsandboxd/libsandboxd.h"

/* The errors of sandboxd's APIs, one row per error code: the code HTTP answers in
 * {"error":{"code":...}}, the status it answers with, the D-Bus error of the same failure,
 * the errno both sides map it to, and libsandboxd's kind (the kind of the status). The
 * daemon answers from it on both transports; sandboxctl and libsandboxd read answers back
 * through it. sandboxd-api(7) and sandboxd-dbus(5) list the same rows. */

#define BUS_ERROR_PREFIX "io.sandboxd.sandbox1.Error."
/* WrongNode's message (a D-Bus error has a name and a message only): it begins with the
 * session id, whose node part libsandboxd takes for the error's node, as HTTP's "node".
 * Arguments: the id, the length of its node part, the id, this node's name. */
#define WRONG_NODE_BUS_MESSAGE_START "Session '"
#define WRONG_NODE_BUS_MESSAGE WRONG_NODE_BUS_MESSAGE_START "%s' is on node %.*s, not on this one (%s)."
/* The message of "stopping" that both APIs send for a request sandboxd could not answer. */
#define STOPPING_MESSAGE "sandboxd is stopping; ask again once it is back."

typedef struct ApiError {
        const char *code;
        int errno_value;         /* positive */
        unsigned http_status;
        const char *bus_name;    /* NULL: an error of HTTP only */
        sandboxd_error_kind kind;
} ApiError;

/* Every row; *ret_n the number. */
const ApiError *api_error_table(size_t *ret_n);
/* The row of an error code; NULL if none. */
const ApiError *api_error_from_code(const char *code);
/* The row of a D-Bus error name: its own, or one of the other names D-Bus has for the code
 * (NoSuchCommand is not_found, as NoSuchSession; InvalidArguments
 * is invalid_type; InteractiveAuthorizationRequired is forbidden). NULL if none. */
const ApiError *api_error_from_bus_name(const char *name);
typedef struct ApiErrorAlias {
        const char *bus_name;
        const char *code;
} ApiErrorAlias;

/* Those other names. */
const ApiErrorAlias *api_error_bus_aliases(size_t *ret_n);
/* Every sandboxd D-Bus name with its errno, for sd_bus_error_add_map(); built once. */
const sd_bus_error_map *api_error_bus_map(void);

/* libsandboxd's kind of an HTTP status, and the (negative) errno of a kind, which its
 * functions return (libsandboxd(3)); its D-Bus transport returns the same. */
sandboxd_error_kind api_error_kind_from_http(long status);
int api_error_kind_errno(sandboxd_error_kind kind);
