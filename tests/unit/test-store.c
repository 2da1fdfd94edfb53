/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store-writer.h"
#include "tests.h"

static char top[] = "/tmp/test-store-XXXXXX";

static char *slurp(const char *path) {
        static char buf[4096];
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0)
                return NULL;
        buf[n] = 0;
        return buf;
}

static void spit(const char *path, const char *text, size_t n) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ASSERT(fd >= 0);
        ASSERT(write(fd, text, n) == (ssize_t) n);
        close(fd);
}

static unsigned count_entries(const char *dir, const char *infix) {
        DIR *d = opendir(dir);
        struct dirent *de;
        unsigned n = 0;

        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.' && (!infix || strstr(de->d_name, infix)))
                        n++;
        if (d)
                closedir(d);
        return n;
}

static void test_write_read(void) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *back = NULL;
        char path[PATH_MAX], tmp[PATH_MAX + 8];

        snprintf(path, sizeof(path), "%s/r.json", top);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        json_object_object_add(o, "id", json_object_new_string("a/b"));
        ASSERT(store_write(path, o) == 0);
        ASSERT_STREQ(slurp(path), "{\"id\":\"a/b\"}\n");
        ASSERT(access(tmp, F_OK) < 0 && errno == ENOENT);
        ASSERT(store_read(path, &back) == 0);
        ASSERT_STREQ(store_get_string(back, "id"), "a/b");

        /* text as it is, a newline added once */
        ASSERT(store_write_text(path, "{}\n", 3) == 0);
        ASSERT_STREQ(slurp(path), "{}\n");
        /* a directory that is not there: -ENOENT, for the writer to make it */
        snprintf(path, sizeof(path), "%s/none/r.json", top);
        ASSERT(store_write_text(path, "{}", 2) == -ENOENT);
}

static void test_reasons(void) {
        static const struct {
                const char *text;
                size_t n;
                const char *reason;
        } cases[] = {
                { "", 0, "empty" },
                { "{\"id\":\"0123", 11, "truncated JSON" },
                { "{\"id\":1,", 8, "truncated JSON" },
                { "\x01\x02garbage", 9, NULL },
                { "[1,2]", 5, "not a JSON object" },
                { "{} {}", 5, NULL }, /* json-c or our own check: either says so */
                { "{\"a\":\"\xc0\xaf\"}", 10, "not UTF-8" },
                { "{\"a\":1}\0", 8, "NUL byte" },
        };
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/bad.json", top);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_object *o = NULL;
                const char *reason = NULL;

                spit(path, cases[i].text, cases[i].n);
                ASSERT(store_read_full(path, &o, &reason) == -EBADMSG);
                ASSERT(!o);
                ASSERT(reason);
                if (cases[i].reason)
                        ASSERT_STREQ(reason, cases[i].reason);
        }
        snprintf(path, sizeof(path), "%s/missing.json", top);
        ASSERT(store_read(path, &(json_object *) { NULL }) == -ENOENT);
}

static void test_quarantine(void) {
        char dir[PATH_MAX], path[PATH_MAX + 64], newest[PATH_MAX + 128];
        char *aside = NULL;
        uint64_t t = 1700000000ULL * USEC_PER_SEC;

        snprintf(dir, sizeof(dir), "%s/q", top);
        ASSERT(store_mkdir_p(dir, 0700) == 0);
        snprintf(path, sizeof(path), "%s/1.json", dir);
        spit(path, "x", 1);
        ASSERT(store_quarantine(path, t, &aside) == 0);
        ASSERT(aside && strstr(aside, "/1.json.corrupt-20231114T221320.000000Z"));
        ASSERT(access(path, F_OK) < 0 && access(aside, F_OK) == 0);
        free(aside);

        /* bounded: the oldest go, files and directories alike */
        for (unsigned i = 2; i <= STORE_QUARANTINE_MAX + 3; i++) {
                snprintf(path, sizeof(path), "%s/%u.json", dir, i);
                if (i == 3) {
                        ASSERT(mkdir(path, 0700) == 0);
                        snprintf(newest, sizeof(newest), "%s/inside", path);
                        spit(newest, "y", 1);
                } else
                        spit(path, "x", 1);
                aside = NULL;
                ASSERT(store_quarantine(path, t + i * USEC_PER_SEC, &aside) == 0);
                ASSERT(aside && access(aside, F_OK) == 0);
                snprintf(newest, sizeof(newest), "%s", aside);
                free(aside);
        }
        ASSERT(count_entries(dir, STORE_QUARANTINE_INFIX) == STORE_QUARANTINE_MAX);
        ASSERT(access(newest, F_OK) == 0);
        snprintf(path, sizeof(path), "%s/1.json.corrupt-20231114T221320.000000Z", dir);
        ASSERT(access(path, F_OK) < 0);
        /* a record that is not there */
        snprintf(path, sizeof(path), "%s/nothing.json", dir);
        ASSERT(store_quarantine(path, t, NULL) == -ENOENT);
}

static void test_writer(void) {
        StoreWriter *w = NULL;
        StoreJob *a = NULL, *b = NULL, *c = NULL;
        StoreWriterStats st;
        char pa[PATH_MAX + 32], pb[PATH_MAX + 32], pc[PATH_MAX + 32], dir[PATH_MAX];
        const unsigned N = 2000;

        snprintf(dir, sizeof(dir), "%s/sessions/s1", top);
        snprintf(pa, sizeof(pa), "%s/session.json", dir);
        snprintf(pb, sizeof(pb), "%s/1.json", dir);
        snprintf(pc, sizeof(pc), "%s/2.json", dir);
        ASSERT(store_writer_new(&w) == 0);

        /* many writes of one record: each is written or folded into the next, the last wins */
        for (unsigned i = 0; i < N; i++) {
                char *text;

                ASSERT(asprintf(&text, "{\"i\":%u}", i) > 0);
                ASSERT(store_writer_put(w, &a, pa, text) == 0);
        }
        store_writer_flush(w);
        ASSERT(!a);
        ASSERT_STREQ(slurp(pa), "{\"i\":1999}\n");
        store_writer_stats(w, &st);
        ASSERT(st.writes + st.coalesced == N);
        ASSERT(st.writes >= 1 && st.errors == 0 && st.queued == 0);

        /* a removal comes after the writes queued before it, and drops the record's own */
        ASSERT(store_writer_put(w, &b, pb, strdup("{\"n\":1}")) == 0);
        ASSERT(store_writer_remove(w, &b, pb, false) == 0);
        ASSERT(!b);
        ASSERT(store_writer_put(w, &c, pc, strdup("{\"n\":2}")) == 0);
        store_writer_release(w, &c); /* its owner went: written all the same */
        ASSERT(!c);
        store_writer_flush(w);
        ASSERT(access(pb, F_OK) < 0 && errno == ENOENT);
        ASSERT_STREQ(slurp(pc), "{\"n\":2}\n");

        ASSERT(store_writer_put(w, &a, pa, strdup("{\"last\":true}")) == 0);
        ASSERT(store_writer_remove(w, NULL, dir, true) == 0);
        store_writer_flush(w);
        ASSERT(access(dir, F_OK) < 0);

        /* stopping writes what is queued */
        ASSERT(store_writer_put(w, &a, pa, strdup("{\"at\":\"exit\"}")) == 0);
        store_writer_release(w, &a);
        w = store_writer_free(w);
        ASSERT_STREQ(slurp(pa), "{\"at\":\"exit\"}\n");

        /* without a thread: at once */
        ASSERT(store_writer_put(NULL, &a, pb, strdup("{}")) == 0);
        ASSERT(!a);
        ASSERT_STREQ(slurp(pb), "{}\n");
}

int main(void) {
        ASSERT(mkdtemp(top));
        test_write_read();
        test_reasons();
        test_quarantine();
        test_writer();
        (void) store_rm_rf(top);
        return TESTS_DONE();
}
