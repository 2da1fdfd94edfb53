/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The D-Bus edge: a{sv} options into the same requests the HTTP API parses (request errors
 * into D-Bus error names: test-error-table.c). Messages are built on a bus over a
 * socketpair that nobody answers: no bus daemon is needed. */

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "bus-request.h"
#include "bus-util.h"
#include "tests.h"

static sd_bus *bus;

static sd_bus_message *message(void) {
        sd_bus_message *m = NULL;

        ASSERT(sd_bus_message_new_method_call(bus, &m, "io.sandboxd.sandbox1", "/io/sandboxd/sandbox1",
                                              "io.sandboxd.sandbox1.Manager", "Exec") >= 0);
        return m;
}

static void seal(sd_bus_message *m) {
        ASSERT(sd_bus_message_seal(m, 1, 0) >= 0);
        ASSERT(sd_bus_message_rewind(m, true) >= 0);
}

static int read_command(sd_bus_message *m, CommandRequest *req, RequestError *e) {
        seal(m);
        *req = (CommandRequest) {};
        *e = (RequestError) {};
        return bus_request_read_command_options(m, req, e);
}

static void test_command_options(void) {
        _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        CommandRequest req;
        RequestError e;
        sd_bus_message *m;

        m = message();
        ASSERT(sd_bus_message_append(m, "a{sv}", 6, "cwd", "s", "sub/dir", "env", "as", 2, "A=1", "B=x=y", "timeout_ms",
                                     "t", (uint64_t) 1500, "request_id", "s", "job.1", "stdin_data", "ay", 3, 'a', 'b', 'c',
                                     "stdout", "h", null) >= 0);
        ASSERT(read_command(m, &req, &e) == 0);
        ASSERT_STREQ(req.cwd, "sub/dir");
        ASSERT(req.env && strv_length(req.env) == 2);
        ASSERT_STREQ(req.env[1], "B=x=y");
        ASSERT(req.has_timeout && req.timeout_ms == 1500);
        ASSERT_STREQ(req.request_id, "job.1");
        ASSERT(req.stdin_mode == STDIN_DATA && req.stdin_size == 3 && memcmp(req.stdin_data, "abc", 3) == 0);
        /* a copy of the caller's fd, owned by the request */
        ASSERT(req.has_stdout_fd && req.stdout_fd >= 0 && req.stdout_fd != null);
        ASSERT(!req.has_stderr_fd);
        command_request_done(&req);
        sd_bus_message_unref(m);

        m = message();
        ASSERT(sd_bus_message_append(m, "a{sv}", 1, "stdin", "h", null) >= 0);
        ASSERT(read_command(m, &req, &e) == 0);
        ASSERT(req.stdin_mode == STDIN_FD && req.stdin_fd >= 0);
        command_request_done(&req);
        sd_bus_message_unref(m);

#define EXPECT(expected, ...)                                                        \
        do {                                                                     \
                m = message();                                                   \
                ASSERT(sd_bus_message_append(m, "a{sv}", __VA_ARGS__) >= 0);     \
                ASSERT(read_command(m, &req, &e) == -EINVAL);                    \
                ASSERT_STREQ(e.code, expected);                                    \
                ASSERT(e.message[0] != 0);                                       \
                command_request_done(&req);                                      \
                sd_bus_message_unref(m);                                         \
        } while (0)

        EXPECT("unknown_field", 1, "bogus", "s", "x");
        EXPECT("invalid_type", 1, "timeout_ms", "s", "100");
        EXPECT("invalid_type", 1, "timeout_ms", "u", (uint32_t) 100);
        EXPECT("invalid_type", 1, "env", "s", "A=b");
        EXPECT("invalid_type", 1, "stdout", "s", "/dev/null");
        EXPECT("invalid_value", 1, "timeout_ms", "t", (uint64_t) 0);
        EXPECT("invalid_name", 1, "request_id", "s", "no spaces");
        EXPECT("invalid_path", 1, "cwd", "s", "");
        EXPECT("reserved_env", 1, "env", "as", 1, "HOME=/root");
        EXPECT("reserved_env", 1, "env", "as", 1, "XDG_CONFIG_HOME=/x");
        EXPECT("invalid_value", 1, "env", "as", 1, "NOVALUE");
        EXPECT("invalid_value", 1, "env", "as", 1, "1A=b");
        EXPECT("invalid_value", 2, "stdin_data", "ay", 1, 'a', "stdin", "h", null);
        EXPECT("invalid_value", 2, "stdout", "h", null, "stdout", "h", null);
#undef EXPECT

        /* a terminal is never handed to a command, as any of the three */
        static const char *const streams[] = { "stdin", "stdout", "stderr" };
        _cleanup_close_ int tty = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        ASSERT(tty >= 0);
        for (size_t i = 0; i < ELEMENTSOF(streams); i++) {
                m = message();
                ASSERT(sd_bus_message_append(m, "a{sv}", 1, streams[i], "h", tty) >= 0);
                ASSERT(read_command(m, &req, &e) == -EINVAL);
                ASSERT_STREQ(e.code, "invalid_value");
                ASSERT(strstr(e.message, "terminal") && strstr(e.message, "'tty' option"));
                command_request_done(&req);
                sd_bus_message_unref(m);
        }

        /* with the 'tty' option a pty slave is the command's terminal; its master is not */
        ASSERT(unlockpt(tty) >= 0);
        _cleanup_close_ int slave = ioctl(tty, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        ASSERT(slave >= 0);
        m = message();
        ASSERT(sd_bus_message_append(m, "a{sv}", 2, "tty", "(qq)", 24, 80, "stdin", "h", slave) >= 0);
        ASSERT(read_command(m, &req, &e) >= 0);
        ASSERT(req.has_tty && req.tty_rows == 24 && req.tty_cols == 80 && req.stdin_mode == STDIN_FD);
        command_request_done(&req);
        sd_bus_message_unref(m);
        m = message();
        ASSERT(sd_bus_message_append(m, "a{sv}", 2, "tty", "(qq)", 24, 80, "stdin", "h", tty) >= 0);
        ASSERT(read_command(m, &req, &e) == -EINVAL);
        ASSERT(strstr(e.message, "pty slave"));
        command_request_done(&req);
        sd_bus_message_unref(m);
        /* and the size is checked */
        m = message();
        ASSERT(sd_bus_message_append(m, "a{sv}", 1, "tty", "(qq)", 0, 80) >= 0);
        ASSERT(read_command(m, &req, &e) == -EINVAL);
        command_request_done(&req);
        sd_bus_message_unref(m);
}

static int read_session(sd_bus_message *m, SessionRequest *req, RequestError *e) {
        seal(m);
        *req = (SessionRequest) {};
        *e = (RequestError) {};
        return bus_request_read_session_options(m, req, e);
}

static void test_session_options(void) {
        SessionRequest req;
        RequestError e;
        sd_bus_message *m;

        m = message();
        ASSERT(sd_bus_message_append(m, "a{sv}", 5, "memory_max", "s", "512M", "cpu_quota", "t", (uint64_t) 50,
                                     "tasks_max", "t", (uint64_t) 64, "ttl_s", "t", (uint64_t) 60, "network", "s",
                                     "none") >= 0);
        ASSERT(read_session(m, &req, &e) == 0);
        ASSERT(req.has_memory_max && req.memory_max == 512ULL << 20);
        ASSERT(req.has_cpu_quota && req.cpu_quota_percent == 50);
        ASSERT(req.has_tasks_max && req.tasks_max == 64);
        ASSERT(req.has_ttl && req.ttl_s == 60);
        ASSERT(req.network == NETWORK_NONE && req.has_network_mode);
        sd_bus_message_unref(m);

        m = message();
        ASSERT(sd_bus_message_append(m, "a{sv}", 3, "network", "s", "proxy", "network_deny", "as", 2, "*.Evil.test",
                                     "b.test", "network_allow", "as", 0) >= 0);
        ASSERT(read_session(m, &req, &e) == 0);
        ASSERT(req.network == NETWORK_PROXY);
        ASSERT(strv_length(req.network_deny) == 2);
        ASSERT_STREQ(req.network_deny[0], "*.evil.test");
        ASSERT(req.network_allow && strv_length(req.network_allow) == 0);
        session_request_done(&req);
        sd_bus_message_unref(m);

        m = message();
        ASSERT(sd_bus_message_append(m, "a{sv}", 1, "memory_max", "t", (uint64_t) 1 << 30) >= 0);
        ASSERT(read_session(m, &req, &e) == 0);
        ASSERT(req.has_memory_max && req.memory_max == 1ULL << 30);
        sd_bus_message_unref(m);

#define EXPECT(expected, ...)                                                        \
        do {                                                                     \
                m = message();                                                   \
                ASSERT(sd_bus_message_append(m, "a{sv}", __VA_ARGS__) >= 0);     \
                ASSERT(read_session(m, &req, &e) == -EINVAL);                    \
                ASSERT_STREQ(e.code, expected);                                    \
                session_request_done(&req);                                      \
                sd_bus_message_unref(m);                                         \
        } while (0)

        EXPECT("unknown_field", 1, "limits", "s", "x");
        EXPECT("invalid_type", 1, "memory_max", "b", 1);
        EXPECT("invalid_type", 1, "tasks_max", "i", (int32_t) 5);
        EXPECT("invalid_value", 1, "memory_max", "s", "much");
        EXPECT("invalid_value", 1, "cpu_quota", "t", (uint64_t) 0);
        EXPECT("invalid_value", 1, "tasks_max", "t", (uint64_t) 2000000);
        EXPECT("invalid_value", 1, "network", "s", "mars");
        EXPECT("invalid_value", 1, "network_deny", "as", 1, "bad name!");
        EXPECT("invalid_type", 1, "network_allow", "s", "example.com");
#undef EXPECT
}

int main(void) {
        int pair[2];

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
        ASSERT(sd_bus_new(&bus) >= 0);
        ASSERT(sd_bus_set_fd(bus, pair[0], pair[0]) >= 0);
        ASSERT(sd_bus_start(bus) >= 0);

        test_command_options();
        test_session_options();

        sd_bus_close_unref(bus);
        close(pair[1]);
        return TESTS_DONE();
}
