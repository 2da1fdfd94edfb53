/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <microhttpd.h>
#include <sys/types.h>

#include "buf.h"
#include "command.h"
#include "files.h"
#include "manager.h"

struct HttpServer {
        Manager *manager;
        struct MHD_Daemon *daemon;
        sd_event_source *io;
        sd_event_source *timer;
        bool is_unix; /* peer credentials instead of bearer keys */
};

/* One HTTP request, from its first header to the response being done. */
typedef struct HttpRequest {
        HttpServer *server;
        struct MHD_Connection *connection;
        const char *method;
        char *url;
        const char *route;         /* the matched route, for metrics */
        Buf body;
        bool body_too_large;
        bool suspended;
        bool authorized;
        bool url_has_nul;          /* %00 in the path or the query: refused */
        char *tenant;              /* which key, or "unix:<uid>" */

        /* A file upload (PUT .../files/...): the body goes straight to the file, not to `body`. */
        bool streaming;
        FileUpload *upload;
        char *upload_path;
        char upload_session[17];

        /* Set by an asynchronous handler before it resumes the connection. */
        struct MHD_Response *response;
        unsigned status;

        Session *session;          /* waited for */
        Command *command;          /* being started */
} HttpRequest;

int http_server_new(Manager *m, int fd, bool is_unix, HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);

/* Responses. All errors carry {"error":{"code":..,"message":..}}. */
struct MHD_Response *http_json_response(const char *json, size_t n);
struct MHD_Response *http_error_response(const char *code, const char *message);
int http_queue(HttpRequest *r, unsigned status, struct MHD_Response *resp);
int http_queue_error(HttpRequest *r, unsigned status, const char *code, const char *message);
int http_queue_json(HttpRequest *r, unsigned status, Buf *json);

/* For asynchronous handlers: park the request, then complete it later. */
void http_suspend(HttpRequest *r);
void http_complete(HttpRequest *r, unsigned status, struct MHD_Response *resp);

/* Serves the NDJSON event log of a command from `offset`, following it until exit. */
struct MHD_Response *http_command_stream_response(HttpRequest *r, Command *c, uint64_t offset);

/* Refuses a streamed upload before its body was read: at once when the client waits for
 * "100 Continue" or the body is too large (413), else once the body was read and dropped. */
int http_refuse_upload(HttpRequest *r, unsigned status, struct MHD_Response *resp);

/* The route table, in http-routes.c. */
int http_route(HttpRequest *r);

/* Streamed uploads, in http-routes.c: whether the request is one (decided from its headers),
 * then the headers, each piece of the body, the end of the body. */
bool http_route_is_upload(HttpRequest *r);
int http_route_upload_begin(HttpRequest *r);
int http_route_upload_data(HttpRequest *r, const char *data, size_t n);
int http_route_upload_finish(HttpRequest *r);
