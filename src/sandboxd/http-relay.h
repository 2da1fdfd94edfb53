/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "time-util.h"

/* The relay of ANY /v1/sessions/{sid}/ports/{port}/<path> to the exposed port's unix
 * socket: an HTTP front-end thing. libcurl's multi interface on the one sd-event loop
 * carries ordinary requests, both ways streamed with bounded buffers and backpressure
 * (CURLOPT_PAUSE up and down, the client's connection suspended); a WebSocket upgrade is
 * its own connection, the upstream's answer read by http-head.c, then bytes copied both
 * ways. The core only says which socket (port.c); who may ask is http-routes.c's. */

typedef struct HttpRequest HttpRequest;
typedef struct Manager Manager;
typedef struct HttpRelay HttpRelay;
typedef struct HttpRelayEngine HttpRelayEngine;

/* Relays at a time of one session, and in all (each holds a connection to the upstream
 * and up to two RELAY_BUFFER_MAX buffers): past them 429 too_many_relays. */
#define RELAYS_PER_SESSION_MAX 64U
#define RELAYS_MAX 512U
/* Bytes held per direction of a relay: past it the side that writes is paused (curl) or
 * suspended (the client) until the other side took some. */
#define RELAY_BUFFER_MAX (256U * 1024U)
/* What libcurl hands over at once (CURLOPT_BUFFERSIZE): larger than its 16 KiB default, so
 * that a download costs fewer suspends and resumes of the client's connection; at most half
 * of RELAY_BUFFER_MAX, so that a paused chunk always fits once the client read half. */
#define RELAY_CURL_CHUNK (128U * 1024U)
/* No byte moved either way for this long: the relay ends (504 upstream_timeout before the
 * upstream's head, the connection closed after it). */
#define RELAY_IDLE_USEC (60 * USEC_PER_SEC)
/* The upstream's response head, its headers together: more is 502 upstream_unavailable. */
#define RELAY_HEAD_MAX (16U * 1024U)

/* The relay of one request (http_relay_begin() and the rest) is declared in http.h, for
 * http.c, which calls it as it calls the file uploads. */

/* Relays of a session now (and in all), for the bounds. */
unsigned http_relay_count(Manager *m, const char *session_id);

/* Before the HTTP servers stop: upgraded connections are closed (MHD would not). */
void http_relay_close_tunnels(Manager *m);
/* After them: every relay went with its request. */
HttpRelayEngine *http_relay_engine_free(HttpRelayEngine *e);
