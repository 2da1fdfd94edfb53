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

/* --- back-pressure: a slow reader ------------------------------------------------------ */

static unsigned n_unpaused;

static void on_unpause(void *userdata) {
        n_unpaused++;
}

/* The producer as command.c runs it: a chunk read from the pipe, then a look at whether to
 * stop reading. */
static void produce_until_paused(Output *o, OutputReader *fast, Buf *fast_got, unsigned *ret_chunks) {
        char chunk[65536];
        unsigned n = 0;

        memset(chunk, 'x', sizeof(chunk));
        for (size_t i = 63; i < sizeof(chunk); i += 64)
                chunk[i] = '\n';
        while (!output_should_pause(o) && n < 1000) {
                ASSERT(output_add_data(o, n % 2 ? OUTPUT_STDERR : OUTPUT_STDOUT, chunk, sizeof(chunk), false) == 0);
                n++;
                drain(fast, fast_got);
        }
        *ret_chunks = n;
}

/* Two live readers, one that stops reading: the live buffer grows to OUTPUT_LIVE_PAUSE (what
 * one stalled reader may hold back), the producer is told to pause, and is resumed once,
 * when the slow one has caught up to within OUTPUT_LIVE_RESUME. The slow reader then has,
 * byte for byte, what the fast one had: nothing lost, nothing twice. A reader that attaches
 * from offset 0 meanwhile replays the spool and carries on live, the same bytes again. */
static void test_slow_reader(const char *dir) {
        OutputReader fast = { .notify = on_notify }, slow = { .notify = on_notify }, late = { .notify = on_notify };
        Buf fast_got = {}, slow_got = {}, late_got = {};
        Output *o;
        unsigned chunks;
        size_t pending;

        ASSERT(output_open(dir, "1", 64ULL << 20, true, &o) == 0);
        o->on_unpause = on_unpause;
        output_attach(o, &fast, 0);
        output_attach(o, &slow, 0);
        drain(&fast, &fast_got);
        drain(&slow, &slow_got); /* both caught up: live from here */
        ASSERT(fast.live && slow.live);

        produce_until_paused(o, &fast, &fast_got, &chunks);
        pending = o->live.len - o->live_head;
        ASSERT(chunks > 1 && chunks < 1000);
        ASSERT(output_should_pause(o));
        /* the bound: what the slow reader holds back is at most the threshold and the last read */
        ASSERT(pending >= OUTPUT_LIVE_PAUSE);
        ASSERT(pending < OUTPUT_LIVE_PAUSE + 65536 * 8 + 4096);
        ASSERT(slow.live_pos == o->live_base);
        output_pause(o);
        ASSERT(o->paused && n_unpaused == 0);

        /* a reader from the start: the spool, then live, while the slow one still lags */
        output_attach(o, &late, 0);
        drain(&late, &late_got);
        ASSERT(late.live);
        ASSERT(late_got.len == fast_got.len && memcmp(late_got.data, fast_got.data, late_got.len) == 0);

        /* the slow one reads a little: not yet enough to resume */
        {
                char b[4096];
                ssize_t k = output_read(&slow, b, sizeof(b));

                ASSERT(k == (ssize_t) sizeof(b));
                ASSERT(buf_append(&slow_got, b, (size_t) k) == 0);
        }
        ASSERT(o->paused && n_unpaused == 0);
        drain(&slow, &slow_got);
        ASSERT(!o->paused && n_unpaused == 1);
        ASSERT(o->live.len - o->live_head == 0);
        ASSERT(slow_got.len == fast_got.len && memcmp(slow_got.data, fast_got.data, slow_got.len) == 0);

        /* the producer goes on; everyone follows */
        ASSERT(output_add_data(o, OUTPUT_STDOUT, "more\n", 5, false) == 0);
        drain(&fast, &fast_got);
        drain(&slow, &slow_got);
        drain(&late, &late_got);
        ASSERT(slow_got.len == fast_got.len && memcmp(slow_got.data, fast_got.data, slow_got.len) == 0);
        ASSERT(late_got.len == fast_got.len && memcmp(late_got.data, fast_got.data, late_got.len) == 0);
        ASSERT(n_unpaused == 1);

        /* a stalled reader that goes away: the producer resumes at once */
        produce_until_paused(o, &fast, &fast_got, &chunks);
        drain(&late, &late_got);
        output_pause(o);
        output_detach(&slow);
        ASSERT(!o->paused && n_unpaused == 2);
        ASSERT(!output_should_pause(o));

        output_detach(&fast);
        output_detach(&late);
        output_free(o);
        (void) output_remove(dir, "1");
        buf_done(&fast_got);
        buf_done(&slow_got);
        buf_done(&late_got);
}

/* The session's spool budget reached: a truncated event ("session_spool") is kept, what
 * follows goes only to the live readers ("live":true), which keep getting it; the spool
 * replays what was kept and the marker, and the account never goes past its budget. */
static void test_spool_budget(const char *dir) {
        SpoolAccount host = { .max = 1ULL << 30 }, session = { .max = 16384, .parent = &host };
        OutputReader live = { .notify = on_notify };
        Buf got = {}, replay = {};
        Output *o;
        char chunk[1000];
        const char *marker;

        memset(chunk, 'Q', sizeof(chunk)); /* in no key of an event */
        chunk[sizeof(chunk) - 1] = '\n';
        ASSERT(output_open(dir, "1", 1ULL << 20, true, &o) == 0);
        output_set_account(o, &session);
        output_attach(o, &live, 0);
        drain(&live, &got);
        for (int i = 0; i < 40; i++) {
                ASSERT(output_add_data(o, OUTPUT_STDOUT, chunk, sizeof(chunk), false) == 0);
                drain(&live, &got);
        }
        ASSERT(o->truncated[OUTPUT_STDOUT]);
        ASSERT(session.used <= session.max && spool_account_full(&session));
        ASSERT(host.used == session.used);
        marker = strstr(got.data, "\"type\":\"truncated\"");
        ASSERT(marker && strstr(marker, "\"reason\":\"session_spool\""));
        /* every byte went out to the live reader once, kept or not: the events after the
         * marker are marked live */
        {
                unsigned n_out = 0, n_live = 0;
                size_t n_y = 0;

                for (const char *p = got.data; (p = strstr(p, "\"type\":\"stdout\"")); p++) {
                        const char *eol = strchr(p, '\n');

                        n_out++;
                        if (eol && memmem(p, (size_t) (eol - p), "\"live\":true", 11))
                                n_live++;
                }
                for (size_t i = 0; i < got.len; i++)
                        n_y += got.data[i] == 'Q';
                ASSERT(n_out >= 40);
                ASSERT(n_live > 0 && n_live < n_out);
                ASSERT(n_y == 40 * (sizeof(chunk) - 1));
                ASSERT(o->total[OUTPUT_STDOUT] == 40 * sizeof(chunk));
                ASSERT(o->kept[OUTPUT_STDOUT] < 16384);
        }
        /* the spool: what was kept and the marker, no live line */
        replay_from(o, 0, &replay);
        ASSERT(replay.len == o->log_size && replay.len < got.len);
        ASSERT(replay.len > 0 && memcmp(replay.data, got.data, replay.len) == 0);
        ASSERT(!strstr(replay.data, "\"live\":true"));
        ASSERT(strstr(replay.data, "\"reason\":\"session_spool\""));

        output_detach(&live);
        output_free(o);
        ASSERT(session.used == 0 && host.used == 0); /* given back with the files */
        (void) output_remove(dir, "1");
        buf_done(&got);
        buf_done(&replay);
}

int main(void) {
        char dir[] = "/tmp/test-output-XXXXXX";

        ASSERT(mkdtemp(dir));
        test_replay_matches_live(dir);
        test_damaged_index(dir);
        test_legacy_spool(dir);
        (void) output_remove(dir, "1");
        test_slow_reader(dir);
        test_spool_budget(dir);
        (void) output_remove(dir, "1");
        ASSERT(rmdir(dir) == 0);
        return TESTS_DONE();
}
