/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "encoding.h"
#include "internal.h"
#include "io-util.h"

int line_splitter_feed(LineSplitter *s, const char *p, size_t n, line_fn fn, void *userdata) {
        size_t max = s->max_line ?: NDJSON_LINE_MAX;
        int r;

        while (n > 0) {
                const char *nl = memchr(p, '\n', n);
                size_t k = nl ? (size_t) (nl - p) : n;

                if (s->partial.len + k > max)
                        return -EMSGSIZE;
                if (!nl) {
                        /* keep the start of a line for the next chunk */
                        return buf_append(&s->partial, p, n);
                }
                if (s->partial.len > 0) {
                        r = buf_append(&s->partial, p, k);
                        if (r < 0)
                                return r;
                        r = fn(s->partial.data, s->partial.len, userdata);
                        s->partial.len = 0;
                        s->partial.data[0] = 0;
                } else
                        r = fn(p, k, userdata);
                if (r < 0)
                        return r;
                p += k + 1;
                n -= k + 1;
        }
        return 0;
}

int line_splitter_finish(LineSplitter *s) {
        return s->partial.len > 0 ? -EBADMSG : 0;
}

void line_splitter_done(LineSplitter *s) {
        buf_done(&s->partial);
}

static sandboxd_event_type event_type_from_string(const char *s) {
        static const char *const table[_SANDBOXD_EVENT_TYPE_MAX] = {
                [SANDBOXD_EVENT_ACCEPTED] = "accepted", [SANDBOXD_EVENT_STDOUT] = "stdout",
                [SANDBOXD_EVENT_STDERR] = "stderr",     [SANDBOXD_EVENT_TRUNCATED] = "truncated",
                [SANDBOXD_EVENT_EXIT] = "exit",
        };
        for (int i = 0; i < _SANDBOXD_EVENT_TYPE_MAX; i++)
                if (table[i] && streq(s, table[i]))
                        return (sandboxd_event_type) i;
        return SANDBOXD_EVENT_OTHER;
}

int event_decode(const char *line, size_t size, sandboxd_event *ev, json_object **ret_json, Buf *bytes,
                 sandboxd_result **ret_result) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_result *res = NULL;
        const char *type, *s;
        json_object *v;
        int r;

        /* a blank line (say, a keep-alive) is no event */
        if (size == 0 || (size == 1 && line[0] == '\r'))
                return 0;
        r = json_parse_text(line, size, &o);
        if (r < 0 || !json_object_is_type(o, json_type_object))
                return -EBADMSG;
        type = json_get_string(o, "type");
        if (!type)
                return -EBADMSG;

        *ev = (sandboxd_event) {
                .type = event_type_from_string(type),
                .type_name = type,
                .line = line,
                .line_size = size,
                .live = json_get_bool(o, "live"),
        };
        switch (ev->type) {
        case SANDBOXD_EVENT_ACCEPTED:
                ev->request_id = json_get_string(o, "request_id");
                ev->unit = json_get_string(o, "unit");
                if (!ev->request_id)
                        return -EBADMSG;
                break;
        case SANDBOXD_EVENT_STDOUT:
        case SANDBOXD_EVENT_STDERR:
                bytes->len = 0;
                if (json_object_object_get_ex(o, "data", &v) && json_object_is_type(v, json_type_string))
                        r = buf_append(bytes, json_object_get_string(v), (size_t) json_object_get_string_len(v));
                else if ((s = json_get_string(o, "data_b64")))
                        r = base64_decode(s, strlen(s), bytes) < 0 ? -EBADMSG : 0;
                else
                        r = -EBADMSG;
                if (r < 0)
                        return r;
                if (!bytes->data && (r = buf_reserve(bytes, 0)) < 0)
                        return r;
                ev->data = bytes->data;
                ev->size = bytes->len;
                break;
        case SANDBOXD_EVENT_TRUNCATED:
                ev->stream = json_get_string(o, "stream");
                ev->kept_bytes = json_get_u64(o, "kept_bytes");
                break;
        case SANDBOXD_EVENT_EXIT:
                r = result_from_json(o, &res);
                if (r < 0)
                        return r;
                /* an exit event is always terminal, whatever it forgot to say */
                res->terminal = true;
                ev->result = res;
                break;
        default:
                break;
        }

        *ret_json = TAKE_PTR(o);
        *ret_result = res;
        return 1;
}

static int event_reader_line(const char *line, size_t size, void *userdata) {
        EventReader *er = userdata;
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_result *res = NULL;
        sandboxd_event ev;
        Buf bytes = {};
        int r;

        r = event_decode(line, size, &ev, &o, &bytes, &res);
        if (r <= 0) {
                buf_done(&bytes);
                return r;
        }
        if (!ev.live)
                er->offset += size + 1;
        ev.offset = er->offset;

        if (ev.type == SANDBOXD_EVENT_ACCEPTED && !er->request_id) {
                er->request_id = strdup(ev.request_id);
                if (!er->request_id)
                        r = -ENOMEM;
        }
        if (r >= 0 && er->output_fds && (ev.type == SANDBOXD_EVENT_STDOUT || ev.type == SANDBOXD_EVENT_STDERR)) {
                int *fd = &er->output_fd[ev.type == SANDBOXD_EVENT_STDERR];

                /* a reader that went away (| head) is no reason to stop the command: the
                 * rest of that stream is dropped */
                if (*fd >= 0 && loop_write(*fd, ev.data, ev.size) < 0)
                        *fd = -EBADF;
        } else if (r >= 0 && er->fn) {
                r = er->fn(er->client, &ev, er->userdata);
                if (r < 0)
                        r = er->error = r;
        }
        if (ev.type == SANDBOXD_EVENT_EXIT) {
                sandboxd_result_free(er->result);
                er->result = res;
        } else
                sandboxd_result_free(res);
        buf_done(&bytes);
        return r < 0 ? r : 0;
}

int event_reader_feed(EventReader *r, const char *p, size_t n) {
        return line_splitter_feed(&r->lines, p, n, event_reader_line, r);
}

int event_reader_take_result(EventReader *r, const char *session, sandboxd_result **ret) {
        sandboxd_result *res = TAKE_PTR(r->result);

        if (!res->request_id && r->request_id)
                res->request_id = TAKE_PTR(r->request_id);
        if (!res->session && session && !(res->session = strdup(session))) {
                sandboxd_result_free(res);
                return -ENOMEM;
        }
        if (ret)
                *ret = res;
        else
                sandboxd_result_free(res);
        return 0;
}

void event_reader_done(EventReader *r) {
        line_splitter_done(&r->lines);
        sandboxd_result_free(r->result);
        free(r->request_id);
        *r = (EventReader) {};
}
