/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <microhttpd.h>
#include <sys/types.h>

#include "buf.h"
#include "command.h"
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
        char *tenant;              /* which key, or "unix:<uid>" */

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

/* The route table, in http-routes.c. */
int http_route(HttpRequest *r);
