/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes what libsandboxd reads from a server: NDJSON event streams (cut into two chunks
 * at a place the input chooses), snapshots, sessions, file entries, exposed ports and error
 * bodies. */

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int touch_event(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        size_t *sum = userdata;

        /* read everything the callback may read */
        for (size_t i = 0; i < ev->size; i++)
                *sum += (unsigned char) ev->data[i];
        *sum += ev->line_size + (ev->type_name ? strlen(ev->type_name) : 0) + (size_t) ev->offset;
        if (ev->request_id)
                *sum += strlen(ev->request_id);
        if (ev->result)
                *sum += (size_t) sandboxd_result_exit_status(ev->result);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *p = (const char *) data;
        size_t sum = 0, cut = size > 0 ? data[0] % (size + 1) : 0;
        EventReader er = { .fn = touch_event, .userdata = &sum };
        json_object *o = NULL;
        sandboxd_error e;

        if (event_reader_feed(&er, p, cut) >= 0 && event_reader_feed(&er, p + cut, size - cut) >= 0)
                (void) line_splitter_finish(&er.lines);
        event_reader_done(&er);

        if (json_parse_text(p, size, &o) >= 0) {
                sandboxd_result *r = NULL;
                sandboxd_session *s = NULL;
                sandboxd_file_info *fi = NULL;
                sandboxd_port *pt = NULL;

                if (result_from_json(o, &r) >= 0)
                        sandboxd_result_free(r);
                if (session_from_json(o, &s) >= 0)
                        sandboxd_session_free(s);
                if (file_info_from_json(o, "x", &fi) >= 0)
                        sandboxd_file_info_free(fi);
                if (port_from_json(o, &pt) >= 0)
                        sandboxd_port_free(pt);
                json_object_put(o);
        }
        (void) error_from_http(&e, 400, p, size);
        return (int) (sum & 0);
}
