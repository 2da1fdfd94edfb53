/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <microhttpd.h>
#include <sys/types.h>

#include "validate.h"
#include "authz.h"
#include "buf.h"
#include "command.h"
#include "files.h"
#include "manager.h"
#include "route.h"

typedef struct HttpRequest HttpRequest;
typedef struct HttpRoute HttpRoute;

typedef struct HttpConnection HttpConnection;
typedef struct WsConn WsConn;
typedef struct HttpRelay HttpRelay;

struct HttpServer {
        Manager *manager;
        struct MHD_Daemon *daemon;
        sd_event_source *io;
        sd_event_source *timer;
        sd_event_source *now;   /* MHD has work right away: a defer source, not the timer */
        bool is_unix; /* peer credentials instead of bearer keys */

        /* TCP connections that have not yet sent an authenticated request, newest first: at
         * most MaxUnauthenticatedConnections=, each for AuthenticationTimeoutSec=. */
        HttpConnection *unauthenticated, *unauthenticated_oldest;
        unsigned n_unauthenticated;
        bool unauth_full_logged;
        sd_event_source *auth_timer;

        WsConn *websockets; /* upgraded connections (http-ws.c) */
};

/* One HTTP request, from its first header to the response being done. */
struct HttpRequest {
        HttpServer *server;
        struct MHD_Connection *connection;
        const char *method;
        char *url;

        /* Matched from the headers on: the route (NULL: none), its placeholders' values. */
        RoutePath path;
        const HttpRoute *route;
        const char *params[ROUTE_PARAMS_MAX];
        size_t n_params;
        Session *target;           /* {sid}, once resolved */
        Command *target_command;   /* {rid}, once resolved */

        Buf body;
        bool body_too_large;
        bool suspended;
        bool authorized;
        bool url_has_nul;          /* %00 in the path or the query: refused */
        char *tenant;              /* which key, or "unix:<uid>": the creator of what it creates */
        AuthzCaller caller;        /* who, for authz_decide(), once authorized */
        char *caller_name;         /* the peer's login name, which caller.name points to */

        /* A file upload (PUT .../files/...): the body goes straight to the file, not to `body`. */
        bool streaming;
        FileUpload *upload;
        char *upload_path;
        char upload_session[SESSION_ID_SIZE];

        /* Set by an asynchronous handler before it resumes the connection. */
        struct MHD_Response *response;
        unsigned status;

        /* A relay to an exposed port (http-relay.c): from its headers on, the body streamed up. */
        HttpRelay *relay;
        bool relaying;
        char *raw_uri;             /* the request target as sent, path and query */

        FileOp *file_op;           /* the file API's work, on its threads */
        ImageImport *image_import; /* PUT /v1/images/NAME: the unpacker its body goes to */
        bool image_waiting;        /* suspended until the unpacker's pipe has room */
        WsConn *ws;                /* a WebSocket, until its upgrade (http-ws.c) */
        Op *op;                    /* the core's operation it waits for (op.h): a session's start,
                                    * close, freeze or thaw, a command's start, stdin */
};

int http_server_new(Manager *m, int fd, bool is_unix, HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);

/* Responses. All errors carry {"error":{"code":..,"message":..}}, with the status of the
 * code's row in the error table (error-table.h). */
struct MHD_Response *http_json_response(const char *json, size_t n);
struct MHD_Response *http_error_response(const char *code, const char *message);
/* 421 wrong_node: the error with "node", the node that has session id (its node part). */
struct MHD_Response *http_wrong_node_response(const char *id, const char *this_node);
unsigned http_error_status(const char *code);
int http_queue(HttpRequest *r, unsigned status, struct MHD_Response *resp);
int http_queue_error(HttpRequest *r, const char *code, const char *message);
int http_queue_json(HttpRequest *r, unsigned status, Buf *json);

/* For asynchronous handlers: park the request, then complete it later. */
void http_suspend(HttpRequest *r);
/* Back from http_suspend() without an answer yet (the handler queues one itself). */
void http_resume(HttpRequest *r);
void http_complete(HttpRequest *r, unsigned status, struct MHD_Response *resp);
void http_complete_error(HttpRequest *r, const char *code, const char *message);

/* Serves the NDJSON event log of a command from `offset`, following it until exit. */
struct MHD_Response *http_command_stream_response(HttpRequest *r, Command *c, uint64_t offset);

/* Refuses a streamed upload before its body was read: at once when the client waits for
 * "100 Continue" or the body is too large (413), else once the body was read and dropped. */
int http_refuse_upload(HttpRequest *r, unsigned status, struct MHD_Response *resp);
int http_refuse_upload_error(HttpRequest *r, const char *code, const char *message);

static inline AuthzTransport http_transport(HttpRequest *r) {
        return r->server->is_unix ? AUTHZ_HTTP_UNIX : AUTHZ_HTTP_TCP;
}

/* WebSockets, in http-ws.c (http-ws.h): a request that ended before its upgrade lets go of
 * what http_ws_upgrade() prepared; every WebSocket of a server is closed (1001) before it
 * stops. */
void http_ws_abandon(WsConn *w);
void http_ws_close_all(HttpServer *s);

/* The route table, in http-routes.c: every path and method served, as data. */
typedef int (*HttpHandler)(HttpRequest *r);

typedef enum HttpRouteFlags {
        HTTP_ROUTE_PUBLIC  = 1 << 0, /* no key needed on TCP (the probes) */
        /* 1 << 1 unused: a daemon-wide operation (authz_op_is_daemon_wide()) of a method is
         * authorized before anything else, 403, by http_route() */
        HTTP_ROUTE_SESSION = 1 << 2, /* the first placeholder is a session the caller may see, else 404 */
        HTTP_ROUTE_COMMAND = 1 << 3, /* the second is a command of that session, else 404 */
        HTTP_ROUTE_TAIL    = 1 << 4, /* the last placeholder takes the rest of the path */
        HTTP_ROUTE_FILES   = 1 << 5, /* the file API: a PUT streams its body to a file */
        HTTP_ROUTE_IMAGE   = 1 << 8, /* an image: a PUT streams its body (a tar) to the unpacker */
        HTTP_ROUTE_RELAY   = 1 << 6, /* relayed to an exposed port from its headers on; its tail
                                      * follows a slash ("ports/P/"), "ports/P" is the port */
} HttpRouteFlags;

#define HTTP_METHODS_MAX 7

typedef struct HttpMethod {
        const char *name;     /* GET also serves HEAD */
        HttpHandler handler;
        AuthzOp op;           /* what authz_decide() is asked; _AUTHZ_OP_INVALID: any admitted caller */
} HttpMethod;

struct HttpRoute {
        const char *pattern;  /* "/v1/sessions/{sid}/commands": also its label in the metrics */
        unsigned flags;
        HttpMethod methods[HTTP_METHODS_MAX];
};

extern const HttpRoute http_routes[];
extern const size_t http_routes_n;

/* The first route whose pattern matches the path, and the values of its placeholders. */
const HttpRoute *http_route_find(const RoutePath *path, const char *ret_params[static ROUTE_PARAMS_MAX],
                                 size_t *ret_n_params);
/* "GET, POST": the methods of a route, as the Allow header lists them. */
void http_route_allow(const HttpRoute *route, char *buf, size_t n);
/* Prints "METHOD PATTERN" for every method of every route. */
void http_routes_dump(FILE *f);

/* Matches r->url against the table (when the headers are in), then answers the request
 * once its body is in. */
int http_route_match(HttpRequest *r);
int http_route(HttpRequest *r);

/* Streamed uploads, in http-routes.c: whether the request is one (decided from its headers),
 * then the headers, each piece of the body, the end of the body. */
bool http_route_is_upload(HttpRequest *r);
bool http_route_is_image_import(HttpRequest *r);
int http_route_image_import_begin(HttpRequest *r);
int http_route_image_import_data(HttpRequest *r, const char *data, size_t *n);
int http_route_image_import_finish(HttpRequest *r);
int http_route_upload_begin(HttpRequest *r);
int http_route_upload_data(HttpRequest *r, const char *data, size_t n);
int http_route_upload_finish(HttpRequest *r);

/* The relay of a request to an exposed port, in http-relay.c (the bounds are in http-relay.h). */
/* Starts relaying r (its session, port and method checked) to the unix socket at
 * socket_path, the path and query after prefix ("/v1/sessions/<sid>/ports/<P>") of the
 * raw request URI. Queues a refusal itself (429, 400); returns an MHD result. */
int http_relay_begin(HttpRequest *r, const char *socket_path, const char *prefix);
/* A piece of the request's body: takes what fits (*size left is what did not), suspending
 * the request until the upstream took some. */
int http_relay_data(HttpRequest *r, const char *data, size_t *size);
/* The body is in: answer once the upstream's head came. */
int http_relay_finish(HttpRequest *r);
/* The request is over (on_completed()): the relay ends with it. */
void http_relay_detach(HttpRequest *r);

/* Relays to an exposed port: whether the request is one, then its start from the headers. */
bool http_route_is_relay(HttpRequest *r);
int http_route_relay_begin(HttpRequest *r);
