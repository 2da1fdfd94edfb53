/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The head of sandboxd's answer to a WebSocket upgrade request, as the client reads it. */

#include <assert.h>
#include <strings.h>

#include "internal.h"

static bool token_in_list(const char *v, size_t n, const char *token) {
        size_t tl = strlen(token);

        /* a comma-separated list of tokens, any case, with optional white space */
        for (size_t i = 0; i < n;) {
                while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
                        i++;
                size_t s = i;
                while (i < n && v[i] != ',')
                        i++;
                size_t e = i;
                while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
                        e--;
                if (e - s == tl && strncasecmp(v + s, token, tl) == 0)
                        return true;
        }
        return false;
}

int ws_parse_head(const char *p, size_t n, const char *accept, WsHead *ret) {
        WsHead h = { .content_length = UINT64_MAX };
        const char *end = NULL;
        bool first = true, upgrade = false, connection = false, accepted = false;

        assert(p || n == 0);
        assert(ret);

        for (size_t i = 0; i + 3 < n; i++)
                if (memcmp(p + i, "\r\n\r\n", 4) == 0) {
                        end = p + i + 2; /* the last line's CRLF included */
                        break;
                }
        if (!end)
                return n >= WS_HEAD_MAX ? -EMSGSIZE : 0;
        if ((size_t) (end + 2 - p) > WS_HEAD_MAX)
                return -EMSGSIZE;

        for (const char *l = p; l < end;) {
                const char *eol = memchr(l, '\r', end - l);
                if (!eol || eol + 1 >= end || eol[1] != '\n')
                        return -EBADMSG;
                size_t len = eol - l;

                if (memchr(l, 0, len))
                        return -EBADMSG;
                if (first) {
                        /* "HTTP/1.1 101 Switching Protocols" */
                        if (len < 12 || strncmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ')
                                return -EBADMSG;
                        if (l[9] < '1' || l[9] > '5' || l[10] < '0' || l[10] > '9' || l[11] < '0' || l[11] > '9' ||
                            (len > 12 && l[12] != ' '))
                                return -EBADMSG;
                        h.status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
                        first = false;
                } else {
                        const char *colon = memchr(l, ':', len);
                        if (!colon || colon == l)
                                return -EBADMSG;
                        size_t nl = colon - l;
                        const char *v = colon + 1;
                        size_t vl = eol - v;
                        while (vl > 0 && (*v == ' ' || *v == '\t'))
                                v++, vl--;
                        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                                vl--;

                        if (nl == 7 && strncasecmp(l, "Upgrade", 7) == 0)
                                upgrade = token_in_list(v, vl, "websocket");
                        else if (nl == 10 && strncasecmp(l, "Connection", 10) == 0)
                                connection = connection || token_in_list(v, vl, "upgrade");
                        else if (nl == 20 && strncasecmp(l, "Sec-WebSocket-Accept", 20) == 0)
                                accepted = accept && vl == strlen(accept) && memcmp(v, accept, vl) == 0;
                        else if (nl == 14 && strncasecmp(l, "Content-Length", 14) == 0) {
                                uint64_t x = 0;
                                if (vl == 0 || vl > 12)
                                        return -EBADMSG;
                                for (size_t k = 0; k < vl; k++) {
                                        if (v[k] < '0' || v[k] > '9')
                                                return -EBADMSG;
                                        x = x * 10 + (v[k] - '0');
                                }
                                h.content_length = x;
                        }
                }
                l = eol + 2;
        }
        if (first)
                return -EBADMSG;

        h.head_size = end + 2 - p;
        h.upgraded = h.status == 101 && upgrade && connection && accepted;
        if (h.status == 101 && !h.upgraded)
                return -EPROTO; /* a 101 without the handshake's proof: not sandboxd */
        *ret = h;
        return 1;
}
