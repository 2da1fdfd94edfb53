/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the spool with what a sandboxed command writes: any bytes, on either stream, in
 * reads of any size, past a small cap. What a reader replays from the spool (from the
 * start, from inside an event, after a reopen as at a restart of sandboxd) must be, byte
 * for byte, what went out live while the output came; every line one JSON object. */

#include <json-c/json.h>
#include <stdlib.h>
#include <unistd.h>

#include "output.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/fuzz-output-XXXXXX";

static void on_notify(OutputReader *r) {
}

static void remove_dir(void) {
        (void) output_remove(dir, "1");
        (void) rmdir(dir);
}

static void drain(OutputReader *r, Buf *b) {
        char chunk[4093];
        ssize_t n;

        while ((n = output_read(r, chunk, sizeof(chunk))) > 0)
                if (buf_append(b, chunk, (size_t) n) < 0)
                        abort();
}

static void check_replay(Output *o, const Buf *want, uint64_t at) {
        OutputReader r = { .notify = on_notify };
        Buf got = {};

        at = want->len ? at % (want->len + 1) : 0;
        output_attach(o, &r, at);
        drain(&r, &got);
        output_detach(&r);
        if (got.len != want->len - at || (got.len && memcmp(got.data, want->data + at, got.len) != 0))
                abort();
        buf_done(&got);
}

static void check_lines(const Buf *log) {
        for (size_t at = 0; at < log->len;) {
                const char *nl = memchr(log->data + at, '\n', log->len - at);
                json_object *o;

                if (!nl)
                        abort();
                o = json_tokener_parse(log->data + at); /* stops at the newline */
                if (!o || !json_object_is_type(o, json_type_object))
                        abort();
                json_object_put(o);
                at = (size_t) (nl - log->data) + 1;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char exit_ev[] = "{\"type\":\"exit\"}\n", live_mark[] = ",\"live\":true}\n";
        static bool made;
        OutputReader live = { .notify = on_notify };
        Buf want = {};
        Output *o;
        uint64_t cap;

        if (!made) {
                if (!mkdtemp(dir))
                        abort();
                made = true;
                atexit(remove_dir);
        }
        if (size < 2)
                return 0;
        cap = 64 + data[0] * 16; /* up to ~4 KiB kept a stream, the rest live */
        if (output_open(dir, "1", cap, true, &o) < 0)
                abort();
        output_attach(o, &live, 0);
        /* chunks: a byte of header (stream, length), then the bytes */
        for (size_t i = 1; i < size;) {
                OutputStream st = data[i] & 1 ? OUTPUT_STDERR : OUTPUT_STDOUT;
                size_t n = MIN((size_t) (data[i] >> 1) + 1, size - i - 1);

                if (output_add_data(o, st, (const char *) data + i + 1, n, false) < 0)
                        abort();
                drain(&live, &want);
                i += 1 + n;
        }
        for (OutputStream st = 0; st < _OUTPUT_STREAM_MAX; st++)
                if (output_add_data(o, st, "", 0, true) < 0)
                        abort();
        if (output_append_event(o, exit_ev, strlen(exit_ev)) < 0)
                abort();
        output_finish(o);
        drain(&live, &want);
        output_detach(&live);

        /* the live lines ("live":true, past the cap) are not in the log */
        {
                Buf log = {};

                for (size_t at = 0; at < want.len;) {
                        const char *nl = memchr(want.data + at, '\n', want.len - at);
                        size_t n = (size_t) (nl - (want.data + at)) + 1;

                        if (!memmem(want.data + at, n, live_mark, strlen(live_mark)) && buf_append(&log, want.data + at, n) < 0)
                                abort();
                        at += n;
                }
                check_lines(&want);
                if (o->log_size != log.len)
                        abort();
                check_replay(o, &log, 0);
                check_replay(o, &log, data[1] * 31);
                output_free(o);
                if (output_open(dir, "1", cap, false, &o) < 0)
                        abort();
                check_replay(o, &log, data[size - 1] * 7);
                output_free(o);
                buf_done(&log);
        }
        (void) output_remove(dir, "1");
        buf_done(&want);
        return 0;
}
