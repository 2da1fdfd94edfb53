/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxd-exec: the first program of every command unit, already inside the sandbox.
 *
 * PID 1 starts it with the command's environment, read (as root) from an EnvironmentFile=
 * only root can read, and that file also carries the command line:
 *
 *     SANDBOXD_EXEC_PATH=/usr/bin/python3
 *     SANDBOXD_EXEC_ARGC=3
 *     SANDBOXD_EXEC_ARGV_0=python3  SANDBOXD_EXEC_ARGV_1=-c  SANDBOXD_EXEC_ARGV_2=...
 *     SANDBOXD_EXEC_USERDB=/run/userdb  (where sandboxd puts our user's record: wait for it)
 *     SANDBOXD_EXEC_TTY=1  (stdin is a pty slave: lead a session and make it our terminal)
 *
 * Why not ExecStart= and Environment=: unit files under /run/systemd/transient are
 * world-readable (a command's secrets would be too), and systemd 252 cannot read a
 * command line back from them after a daemon-reload (ExecStartEx= is an unknown key there,
 * and "$" comes back as "\$"). It takes the SANDBOXD_EXEC_* variables out of the
 * environment and execs the command; on failure it exits with systemd's own 203 (EXEC). */

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_EXEC 203
#define EXIT_STDIN 208
#define PREFIX "SANDBOXD_EXEC_"
#define ARGC_MAX 4096 /* REQUEST_ARGV_MAX */

static int fail(const char *what, const char *arg) {
        fprintf(stderr, "sandboxd-exec: %s%s%s\n", what, arg ? ": " : "", arg ?: "");
        return EXIT_EXEC;
}

#define USERDB_WAIT_MSEC 5000

static long long now_msec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* sandboxd writes the record of our user into dir (seen as /run/userdb) once PID 1 has
 * given the user its uid, which happens as this unit starts: wait for it (briefly), so
 * that the command can look up its own name from its first instruction on. */
static void wait_for_user_record(const char *dir) {
        char path[PATH_MAX];
        long long deadline = now_msec() + USERDB_WAIT_MSEC;
        int fd;

        snprintf(path, sizeof(path), "%s/%u.user", dir, (unsigned) getuid());
        fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (fd >= 0 && inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO) < 0) {
                close(fd);
                fd = -1;
        }
        while (access(path, F_OK) < 0) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                long long left = deadline - now_msec();
                char buf[4096];

                if (left <= 0)
                        break; /* go on without: only the name of our uid is unknown */
                if (fd < 0)
                        (void) poll(NULL, 0, 10);
                else if (poll(&p, 1, (int) (left < 100 ? left : 100)) > 0)
                        while (read(fd, buf, sizeof(buf)) > 0)
                                ;
        }
        if (fd >= 0)
                close(fd);
}

/* On a pseudo-terminal: the command leads a session of its own whose controlling terminal
 * is its stdin, so that ^C reaches its foreground group, and it can push input (TIOCSTI)
 * into no terminal but that one. PID 1 made us a session leader and may have made the
 * terminal ours already (then TIOCSCTTY is a no-op); it fails if the terminal is another
 * session's. */
static int take_terminal(void) {
        if (getsid(0) != getpid() && setsid() < 0) {
                fprintf(stderr, "sandboxd-exec: cannot lead a session: %s\n", strerror(errno));
                return -1;
        }
        if (ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0) {
                fprintf(stderr, "sandboxd-exec: cannot make stdin the controlling terminal: %s\n", strerror(errno));
                return -1;
        }
        return 0;
}

/* Drops every SANDBOXD_EXEC_* variable: the command sees only its own environment. */
static void strip_environment(void) {
        size_t k = 0;

        for (size_t i = 0; environ && environ[i]; i++)
                if (strncmp(environ[i], PREFIX, strlen(PREFIX)) != 0)
                        environ[k++] = environ[i];
        if (environ)
                environ[k] = NULL;
}

int main(int argc, char *argv[]) {
        const char *path = getenv(PREFIX "PATH"), *n_s = getenv(PREFIX "ARGC"), *userdb = getenv(PREFIX "USERDB"),
                   *tty = getenv(PREFIX "TTY");
        char **args, *end = NULL;
        unsigned long n;

        if (!path || path[0] != '/')
                return fail("no absolute " PREFIX "PATH in the environment", NULL);
        if (!n_s)
                return fail("no " PREFIX "ARGC in the environment", NULL);
        errno = 0;
        n = strtoul(n_s, &end, 10);
        if (errno != 0 || !end || *end != 0 || n == 0 || n > ARGC_MAX)
                return fail("invalid " PREFIX "ARGC", n_s);

        args = calloc(n + 1, sizeof(char *));
        if (!args)
                return fail("out of memory", NULL);
        for (unsigned long i = 0; i < n; i++) {
                char name[sizeof(PREFIX "ARGV_") + 20];
                const char *v;

                snprintf(name, sizeof(name), PREFIX "ARGV_%lu", i);
                v = getenv(name);
                if (!v)
                        return fail("missing", name);
                args[i] = (char *) v; /* the strings stay where they are; only environ changes */
        }

        if (tty && strcmp(tty, "1") == 0 && take_terminal() < 0)
                return EXIT_STDIN;
        if (userdb && userdb[0] == '/')
                wait_for_user_record(userdb);
        strip_environment();
        execv(path, args);
        fprintf(stderr, "sandboxd-exec: cannot execute %s: %s\n", path, strerror(errno));
        return EXIT_EXEC;
}
