/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "io-util.h"
#include "tests.h"

/* More than a pipe holds at once: a reader drains it while loop_write() goes on. */
static void test_loop_write_all(void) {
        static char data[1 << 20], back[sizeof(data)];
        int p[2];
        pid_t pid;
        size_t got = 0;

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (char) (i * 7);
        ASSERT(pipe(p) == 0);
        pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
                close(p[0]);
                _exit(loop_write(p[1], data, sizeof(data)) == 0 ? 0 : 1);
        }
        close(p[1]);
        while (got < sizeof(back)) {
                ssize_t k = read(p[0], back + got, sizeof(back) - got);
                if (k <= 0)
                        break;
                got += (size_t) k;
        }
        close(p[0]);
        ASSERT(got == sizeof(data));
        ASSERT(memcmp(back, data, sizeof(data)) == 0);
}

static void test_loop_write_errors(void) {
        int p[2], fd;

        ASSERT(loop_write(-1, "x", 1) == -EBADF);
        ASSERT(loop_write(-1, "", 0) == 0); /* nothing to write: no call at all */
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ASSERT(fd >= 0);
        ASSERT(loop_write(fd, "x", 1) == -EBADF);
        close(fd);
        ASSERT(pipe(p) == 0);
        close(p[0]);
        signal(SIGPIPE, SIG_IGN);
        ASSERT(loop_write(p[1], "x", 1) == -EPIPE);
        close(p[1]);
}

int main(void) {
        test_loop_write_all();
        test_loop_write_errors();
        return TESTS_DONE();
}
