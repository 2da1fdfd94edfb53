/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output.h"
#include "tests.h"

/* The spool keeps raw bytes and an index; the log a reader replays must be, byte for byte,
 * what went out live when the events came. A reader attached from the start and following
 * live records that; replays from any offset, after a reopen, and of a spool of the older
 * format must match it. */

static void on_notify(OutputReader *r) {
}

/* Everything the reader can get now, appended to b. */
static void drain(OutputReader *r, Buf *b) {
        char chunk[7919]; /* prime: reads end inside events */
        ssize_t n;

        while ((n = output_read(r, chunk, sizeof(chunk))) > 0)
                ASSERT(buf_append(b, chunk, (size_t) n) == 0);
}

static void replay_from(Output *o, uint64_t offset, Buf *ret) {
        OutputReader r = { .notify = on_notify };

        output_attach(o, &r, offset);
        drain(&r, ret);
        output_detach(&r);
}

static uint64_t spool_size(const char *dir) {
        const char *suffixes[] = { ".idx", ".events", ".stdout", ".stderr", ".ndjson" };
        uint64_t total = 0;

        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
                char path[512];
                struct stat st;

                snprintf(path, sizeof(path), "%s/1%s", dir, suffixes[i]);
                if (stat(path, &st) == 0)
                        total += (uint64_t) st.st_size;
        }
        return total;
}

static void check_replays(Output *o, const Buf *want) {
        ASSERT(o->log_size == want->len);
        for (uint64_t at = 0; at <= want->len; at += 1 + at / 7) {
                Buf got = {};

                replay_from(o, at, &got);
                ASSERT(got.len == want->len - at);
                ASSERT(got.len == want->len - at && memcmp(got.data, want->data + at, got.len) == 0);
                buf_done(&got);
        }
}

static void test_replay_matches_live(const char *dir) {
        static const char accepted[] = "{\"type\":\"accepted\",\"request_id\":\"x\"}\n";
        static const char exit_ev[] = "{\"type\":\"exit\",\"status\":\"succeeded\"}\n";
        OutputReader live = { .notify = on_notify };
        Buf want = {};
        Output *o;
        char ctl[3000];

        for (size_t i = 0; i < sizeof(ctl); i++)
                ctl[i] = (char) (i % 32); /* control bytes: \u00XX */

        ASSERT(output_open(dir, "1", 1 << 20, true, &o) == 0);
        output_attach(o, &live, 0);
        ASSERT(output_append_event(o, accepted, strlen(accepted)) == 0);
        drain(&live, &want);
        ASSERT(output_add_data(o, OUTPUT_STDOUT, "hello \"world\"\n", 14, false) == 0);
        ASSERT(output_add_data(o, OUTPUT_STDERR, "\xe2\x9c", 2, false) == 0); /* a character cut */
        ASSERT(output_add_data(o, OUTPUT_STDERR, "\x93 ok\n", 5, false) == 0);
        ASSERT(output_add_data(o, OUTPUT_STDOUT, ctl, sizeof(ctl), false) == 0);
        ASSERT(output_add_data(o, OUTPUT_STDOUT, "\xff\xfe binary", 9, false) == 0); /* data_b64 */
        drain(&live, &want);
        for (int i = 0; i < 50; i++) {
                char line[32];
                int n = snprintf(line, sizeof(line), "line %d\n", i);

                ASSERT(output_add_data(o, i % 2 ? OUTPUT_STDERR : OUTPUT_STDOUT, line, (size_t) n, false) == 0);
        }
        ASSERT(output_append_event(o, exit_ev, strlen(exit_ev)) == 0);
        output_finish(o);
        drain(&live, &want);
        output_detach(&live);
        ASSERT(strstr(want.data, "\\u001f") && strstr(want.data, "data_b64") && strstr(want.data, "\u2713 ok"));

        check_replays(o, &want);
        /* nothing stored twice, nothing escaped: the raw bytes and an index */
        ASSERT(spool_size(dir) < 14 + 7 + sizeof(ctl) + 9 + 50 * 8 + 200 + 60 * sizeof(SpoolEntry));
        ASSERT(want.len > 5 * sizeof(ctl));
        output_free(o);

        /* as after a restart of sandboxd */
        ASSERT(output_open(dir, "1", 1 << 20, false, &o) == 0);
        check_replays(o, &want);
        ASSERT(o->kept[OUTPUT_STDOUT] > sizeof(ctl));
        output_free(o);
        buf_done(&want);
}

/* An index cut short (in the middle of an entry, or an entry pointing past its file):
 * what is whole stays, the rest is dropped, new events continue the log. */
static void test_damaged_index(const char *dir) {
        static const char ev[] = "{\"type\":\"accepted\"}\n";
        char path[512];
        Buf want = {}, got = {};
        Output *o;
        struct stat st;

        ASSERT(output_open(dir, "1", 1 << 20, true, &o) == 0);
        ASSERT(output_append_event(o, ev, strlen(ev)) == 0);
        ASSERT(output_add_data(o, OUTPUT_STDOUT, "one\n", 4, false) == 0);
        ASSERT(output_add_data(o, OUTPUT_STDOUT, "two\n", 4, false) == 0);
        replay_from(o, 0, &want);
        output_free(o);

        snprintf(path, sizeof(path), "%s/1.idx", dir);
        ASSERT(stat(path, &st) == 0 && st.st_size == 3 * sizeof(SpoolEntry));
        ASSERT(truncate(path, st.st_size - 5) == 0);
        snprintf(path, sizeof(path), "%s/1.stdout", dir);
        ASSERT(truncate(path, 6) == 0); /* "two\n" cut: its entry points past the file */

        ASSERT(output_open(dir, "1", 1 << 20, false, &o) == 0);
        ASSERT(o->n_entries == 2);
        replay_from(o, 0, &got);
        ASSERT(got.len < want.len && memcmp(got.data, want.data, got.len) == 0);
        ASSERT(got.len == strlen(ev) + strlen("{\"type\":\"stdout\",\"data\":\"one\\n\"}\n"));
        output_free(o);

        /* "one\n" cut too: its entry goes; new events continue after what is left */
        ASSERT(truncate(path, 2) == 0);
        ASSERT(output_open(dir, "1", 1 << 20, false, &o) == 0);
        ASSERT(o->n_entries == 1 && o->log_size == strlen(ev));
        ASSERT(output_append_event(o, ev, strlen(ev)) == 0);
        ASSERT(o->log_size == 2 * strlen(ev) && o->n_entries == 1); /* one entry of two events */
        output_free(o);
        buf_done(&want);
        buf_done(&got);
}

/* A spool written by an older sandboxd: the NDJSON log itself, and the raw streams. */
static void test_legacy_spool(const char *dir) {
        static const char old[] = "{\"type\":\"accepted\"}\n{\"type\":\"stdout\",\"data\":\"a\\n\"}\n";
        static const char ev[] = "{\"type\":\"exit\"}\n";
        char path[512];
        Buf got = {};
        Output *o;
        int fd;

        ASSERT(output_remove(dir, "1") == 0);
        snprintf(path, sizeof(path), "%s/1.ndjson", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ASSERT(fd >= 0 && write(fd, old, strlen(old)) == (ssize_t) strlen(old));
        close(fd);
        snprintf(path, sizeof(path), "%s/1.stdout", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ASSERT(fd >= 0 && write(fd, "a\n", 2) == 2);
        close(fd);
        snprintf(path, sizeof(path), "%s/1.stderr", dir);
        ASSERT((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) >= 0);
        close(fd);

        ASSERT(output_open(dir, "1", 1 << 20, false, &o) == 0);
        ASSERT(o->log_size == strlen(old));
        ASSERT(output_append_event(o, ev, strlen(ev)) == 0);
        replay_from(o, 3, &got);
        ASSERT(got.len == strlen(old) + strlen(ev) - 3);
        ASSERT(got.len > 3 && memcmp(got.data, old + 3, strlen(old) - 3) == 0);
        output_free(o);
        snprintf(path, sizeof(path), "%s/1.ndjson", dir);
        ASSERT(access(path, F_OK) < 0);
        ASSERT(output_remove(dir, "1") == 0);
        ASSERT(spool_size(dir) == 0);
        buf_done(&got);
}

int main(void) {
        char dir[] = "/tmp/test-output-XXXXXX";

        ASSERT(mkdtemp(dir));
        test_replay_matches_live(dir);
        test_damaged_index(dir);
        test_legacy_spool(dir);
        (void) output_remove(dir, "1");
        ASSERT(rmdir(dir) == 0);
        return TESTS_DONE();
}
