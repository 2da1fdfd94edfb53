/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes what a WebSocket client of GET .../tty sends: the byte stream goes through wslay as
 * sandboxd configures it (http_ws_context_new()), and every whole message through the one
 * decision of the frame glue (http_ws_classify(): input, a resize's JSON, or a close). The
 * first byte says whether the client is read-only; the second how many bytes each read
 * gives (1 to 256), so that frames are cut anywhere. */

#include <assert.h>
#include <wslay/wslay.h>

#include "http-ws.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Feed {
        const uint8_t *p;
        size_t n, chunk;
        bool readonly, closing;
} Feed;

static ssize_t feed_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *userdata) {
        Feed *f = userdata;
        size_t k = MIN(MIN(len, f->n), f->chunk);

        if (k == 0) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        memcpy(buf, f->p, k);
        f->p += k;
        f->n -= k;
        return (ssize_t) k;
}

static ssize_t feed_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *userdata) {
        return (ssize_t) len; /* the client reads everything */
}

static void feed_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *userdata) {
        Feed *f = userdata;
        WsMessage m;

        assert(arg->msg_length <= WS_MSG_MAX || arg->opcode == WSLAY_CONNECTION_CLOSE);
        http_ws_classify(arg->opcode, arg->msg, arg->msg_length, f->readonly, &m);
        switch (m.action) {
        case WS_ACTION_NONE:
                assert(arg->opcode != WSLAY_BINARY_FRAME && arg->opcode != WSLAY_TEXT_FRAME);
                break;
        case WS_ACTION_INPUT:
                assert(!f->readonly && arg->opcode == WSLAY_BINARY_FRAME);
                break;
        case WS_ACTION_RESIZE:
                assert(!f->readonly && arg->opcode == WSLAY_TEXT_FRAME);
                assert(m.rows >= 1 && m.rows <= REQUEST_TTY_SIZE_MAX && m.cols >= 1 && m.cols <= REQUEST_TTY_SIZE_MAX);
                break;
        case WS_ACTION_CLOSE:
                assert(m.close_reason && strlen(m.close_reason) <= 123);
                assert(m.close_code == 1003 || m.close_code == 1007 || m.close_code == 1008 || m.close_code == 1009 ||
                       m.close_code == 1011);
                if (!f->closing)
                        (void) wslay_event_queue_close(ctx, m.close_code, (const uint8_t *) m.close_reason,
                                                       strlen(m.close_reason));
                f->closing = true;
                break;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const struct wslay_event_callbacks callbacks = {
                .recv_callback = feed_recv,
                .send_callback = feed_send,
                .on_msg_recv_callback = feed_msg,
        };
        wslay_event_context_ptr ctx;
        Feed f;

        if (size < 2)
                return 0;
        f = (Feed) { .p = data + 2, .n = size - 2, .chunk = 1 + data[1], .readonly = data[0] & 1 };
        if (http_ws_context_new(&callbacks, &f, (void **) &ctx) < 0)
                return 0;
        while (f.n > 0 && wslay_event_want_read(ctx)) {
                size_t before = f.n;

                if (wslay_event_recv(ctx) < 0 || wslay_event_send(ctx) < 0 || f.n == before)
                        break;
        }
        wslay_event_context_free(ctx);
        return 0;
}
