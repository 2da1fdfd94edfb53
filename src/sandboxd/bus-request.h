/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "request.h"

/* The arguments of D-Bus calls into the requests the HTTP API parses from JSON, with the
 * same rules and error codes (bus_error_set_request() names them). Pure: a message in, a
 * request or an error out; nothing else is looked at. tests/fuzz/fuzz-bus.c fuzzes them. */

/* CreateSession(s user, s workspace, a{sv} options): the remaining arguments of m. On
 * failure: -EINVAL with *e set for bad input, another negative errno otherwise. */
int bus_request_read_session(sd_bus_message *m, SessionRequest *ret, RequestError *e);
/* Exec and Run (as argv, a{sv} options). File descriptors are duplicated: the request owns
 * them. */
int bus_request_read_command(sd_bus_message *m, CommandRequest *ret, RequestError *e);

/* The a{sv} alone, into *req (which the caller frees, also on failure). */
int bus_request_read_session_options(sd_bus_message *m, SessionRequest *req, RequestError *e);
int bus_request_read_command_options(sd_bus_message *m, CommandRequest *req, RequestError *e);

/* Files.Write()'s options (a{sv}): "mode" (u, permission bits, at most 0777) and "size" (t,
 * the bytes the fd must give). *ret_mode is MODE_INVALID and *ret_size UINT64_MAX when not
 * given; both are written only on success. */
/* ExposePort()'s options (a{sv}): "host" (b). Written into *req only on success. */
int bus_request_read_port_options(sd_bus_message *m, PortRequest *req, RequestError *e);
int bus_request_read_write_options(sd_bus_message *m, mode_t *ret_mode, uint64_t *ret_size, RequestError *e);

/* Command.OpenTerminal()'s options (a{sv}): "readonly" (b), "offset" (t, of its stdout). */
int bus_request_read_terminal_options(sd_bus_message *m, bool *ret_readonly, uint64_t *ret_offset, RequestError *e);
