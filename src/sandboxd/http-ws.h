/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"

/* GET .../commands/{rid}/tty: a WebSocket (RFC 6455, framed by wslay) on a Terminal
 * (terminal.h). Binary messages from the client are input, binary messages to it output; a
 * text message {"type":"resize",..} resizes; the end is a text message with the exit event,
 * then close 1000. */

/* The longest message a client may send (wslay closes with 1009 past it): a frame's bytes
 * are appended to stdin whole, so this is also what one client holds at most. */
#define WS_MSG_MAX (64U * 1024)
/* The longest text (control) message. */
#define WS_CONTROL_MAX 1024U
/* Output is taken from the log while less than this is queued for the client. */
#define WS_SEND_QUEUE_MAX (64U * 1024)
/* Messages queued for the client (pongs, output) past which it is not read: a ping flood
 * answered by a client that reads nothing stops being read. */
#define WS_QUEUED_MSGS_MAX 8U
/* After our close frame, the client has this long to answer with its own. */
#define WS_CLOSE_TIMEOUT_USEC (5U * 1000 * 1000)

/* Answers the request: 101 and the WebSocket, or the refusal (426 not a WebSocket request,
 * 429 too many terminals, 400 bad offset). */
int http_ws_upgrade(HttpRequest *r, Command *c, uint64_t offset, bool readonly);

/* What a client's message asks for (the frame glue's one decision, fuzzed). */
typedef enum WsAction {
        WS_ACTION_NONE,   /* a control frame wslay answered itself */
        WS_ACTION_INPUT,  /* its bytes to stdin */
        WS_ACTION_RESIZE,
        WS_ACTION_CLOSE,  /* refused: close with code and reason */
} WsAction;

typedef struct WsMessage {
        WsAction action;
        unsigned rows, cols;
        uint16_t close_code;
        const char *close_reason;
} WsMessage;

/* A server context of wslay as sandboxd's WebSockets have it (messages up to WS_MSG_MAX). */
struct wslay_event_callbacks;
int http_ws_context_new(const struct wslay_event_callbacks *callbacks, void *userdata, void **ret);

void http_ws_classify(uint8_t opcode, const uint8_t *p, size_t n, bool readonly, WsMessage *ret);
