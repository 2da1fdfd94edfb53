/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the reading of D-Bus calls: CreateSession(s, s, a{sv}), Exec/Run(as, a{sv}) and the
 * options of Files.Write(s, h, a{sv}), as bus_request_read_session(), bus_request_read_command()
 * and bus_request_read_write_options() see them. The input is a little
 * program that builds a real sd_bus_message: which call, its leading arguments, then the
 * entries of the options dictionary, each a key (one of the real option names, or any
 * string) and a variant of a type from a table (basic types, arrays, structs, dictionaries,
 * nested variants, file descriptors, terminals among them), its values taken from the input. The message is
 * sealed and rewound as if it had come off the wire, then both readers go over it. The bus
 * is one end of a socketpair that nobody answers: a bus still authenticating can already
 * make messages, with file descriptors. */

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>

#include "bus-request.h"
#include "bus-util.h"
#include "files.h"
#include "net-policy.h"
#include "validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Program {
        const uint8_t *p;
        size_t n;
        unsigned budget; /* values left to append: nested arrays stay small */
        bool fds;        /* the message carries file descriptors */
} Program;

static const char *const option_names[] = {
        /* CreateSession */
        "memory_max", "cpu_quota", "tasks_max", "ttl_s", "network", "network_deny", "network_allow",
        "exec_mode",
        /* Exec, Run */
        "cwd", "env", "timeout_ms", "request_id", "stdin", "stdin_data", "stdout", "stderr",
        /* Files.Write */
        "mode", "size",
        /* near misses */
        "limits", "user", "argv", "", "stdin ",
};

static const char *const strings[] = {
        "", "512M", "1G", "64K", "0", "18446744073709551615", "9223372036854775807K", "1.5G", "none", "proxy",
        "host", "unit", "session", "example.com", "*.example.com", "*.", "EXAMPLE.COM.", "a..b", "-a.b", "xn--d1acufc.xn--p1ai",
        "A=1", "HOME=/root", "PATH=/x", "NO_VALUE", "=x", "1A=b", "XDG_RUNTIME_DIR=/x", "job-1", "..", ".",
        "sub/dir", "/abs", "alice", "demo", "root", "_a-b", "Alice", "a b", "0123456789abcdef",
};

/* Types of the variants: what the options hold, what they do not, and containers; the
 * first FLAT_TYPES hold no variant, so that nesting ends. */
static const char *const variant_types[] = {
        "s", "t", "as", "h", "ay", "b", "i", "u", "x", "y", "n", "q", "d", "o", "g",
        "v", "a{sv}", "(st)", "a(ss)", "aas", "a{ss}", "ah", "(h)", "av", "aay", "a{st}", "(sv)",
};
#define FLAT_TYPES 15

static uint8_t next_byte(Program *pr) {
        if (pr->n == 0)
                return 0;
        pr->n--;
        return *pr->p++;
}

static uint64_t next_uint(Program *pr, unsigned bytes) {
        uint64_t v = 0;

        for (unsigned i = 0; i < bytes; i++)
                v = v << 8 | next_byte(pr);
        return v;
}

/* How many elements an array gets: mostly a few, sometimes more than any limit allows. */
static unsigned next_count(Program *pr) {
        uint8_t b = next_byte(pr);
        unsigned n = b == 0xff ? 300 : b == 0xfe ? 1100 : b % 6;

        return MIN(n, pr->budget);
}

/* A valid UTF-8 string without NUL (what a D-Bus string can be): one of the table, or
 * bytes of the input, those above 0x7f as U+0080..U+00FF. */
static char *next_string(Program *pr, char *buf, size_t size) {
        uint8_t b = next_byte(pr);
        size_t len, k = 0;

        if (b & 0x80)
                return strcpy(buf, strings[(b & 0x7f) % ELEMENTSOF(strings)]);
        len = b == 0x7f ? 300 : b % 40;
        for (size_t i = 0; i < len && k + 3 < size; i++) {
                uint8_t c = next_byte(pr);

                if (c == 0)
                        buf[k++] = '.';
                else if (c < 0x80)
                        buf[k++] = (char) c;
                else {
                        buf[k++] = (char) (0xc0 | c >> 6);
                        buf[k++] = (char) (0x80 | (c & 0x3f));
                }
        }
        buf[k] = 0;
        return buf;
}

/* An object path: "/" and segments of [A-Za-z0-9_]. */
static char *next_path(Program *pr, char *buf, size_t size) {
        static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
        unsigned segments = next_byte(pr) % 4;
        size_t k = 0;

        buf[k++] = '/';
        for (unsigned s = 0; s < segments && k + 10 < size; s++) {
                unsigned len = 1 + next_byte(pr) % 8;

                if (s > 0)
                        buf[k++] = '/';
                for (unsigned i = 0; i < len; i++)
                        buf[k++] = chars[next_byte(pr) % (sizeof(chars) - 1)];
        }
        buf[k] = 0;
        return buf;
}

/* The length of the first complete type of a signature. */
static size_t type_length(const char *sig) {
        size_t n;

        switch (sig[0]) {
        case 'a':
                return 1 + type_length(sig + 1);
        case '(':
        case '{':
                n = 1;
                while (sig[n] != ')' && sig[n] != '}')
                        n += type_length(sig + n);
                return n + 1;
        default:
                return 1;
        }
}

static int append_value(sd_bus_message *m, Program *pr, const char *sig, unsigned depth);

/* The values of a container's contents, one complete type after the other. */
static int append_values(sd_bus_message *m, Program *pr, const char *contents, unsigned depth) {
        for (size_t i = 0; contents[i]; i += type_length(contents + i)) {
                char t[64];
                size_t l = type_length(contents + i);
                int r;

                assert(l < sizeof(t));
                memcpy(t, contents + i, l);
                t[l] = 0;
                r = append_value(m, pr, t, depth);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int append_value(sd_bus_message *m, Program *pr, const char *sig, unsigned depth) {
        char buf[1024], contents[64];
        int r;

        if (pr->budget > 0)
                pr->budget--;

        switch (sig[0]) {
        case 'y':
                return sd_bus_message_append_basic(m, 'y', &(uint8_t) { next_byte(pr) });
        case 'b':
                return sd_bus_message_append_basic(m, 'b', &(int) { next_byte(pr) & 1 });
        case 'n':
        case 'q':
                return sd_bus_message_append_basic(m, sig[0], &(uint16_t) { (uint16_t) next_uint(pr, 2) });
        case 'i':
        case 'u':
                return sd_bus_message_append_basic(m, sig[0], &(uint32_t) { (uint32_t) next_uint(pr, 4) });
        case 'x':
        case 't': {
                /* small numbers, the edges, or any */
                uint8_t b = next_byte(pr);
                uint64_t v = b < 0x80 ? b : b < 0xa0 ? UINT64_MAX - (b - 0x80) : next_uint(pr, 8);

                return sd_bus_message_append_basic(m, sig[0], &v);
        }
        case 'd':
                return sd_bus_message_append_basic(m, 'd', &(double) { (double) (int64_t) next_uint(pr, 8) / 7 });
        case 's':
                return sd_bus_message_append_basic(m, 's', next_string(pr, buf, sizeof(buf)));
        case 'o':
                return sd_bus_message_append_basic(m, 'o', next_path(pr, buf, sizeof(buf)));
        case 'g':
                return sd_bus_message_append_basic(
                                m, 'g', variant_types[next_byte(pr) % ELEMENTSOF(variant_types)]);
        case 'h': {
                /* /dev/null, or a terminal (the master of a pseudo-terminal), which is refused */
                static int fds[2] = { -EBADF, -EBADF };
                int k = next_byte(pr) & 1;

                if (fds[k] < 0)
                        fds[k] = k == 0 ? open("/dev/null", O_RDWR | O_CLOEXEC)
                                        : posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
                assert(fds[k] >= 0);
                pr->fds = true;
                return sd_bus_message_append_basic(m, 'h', &fds[k]); /* sd-bus keeps a copy */
        }
        case 'v': {
                const char *t;

                /* deep enough: no more variants */
                if (depth >= 4)
                        t = variant_types[next_byte(pr) % FLAT_TYPES];
                else
                        t = variant_types[next_byte(pr) % ELEMENTSOF(variant_types)];
                r = sd_bus_message_open_container(m, 'v', t);
                if (r >= 0)
                        r = append_value(m, pr, t, depth + 1);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                return r;
        }
        case 'a': {
                unsigned n = next_count(pr);

                if (streq(sig, "ay")) {
                        size_t len = MIN((size_t) n * 16, pr->n);

                        r = sd_bus_message_append_array(m, 'y', pr->p, len);
                        pr->p += len;
                        pr->n -= len;
                        return r;
                }
                r = sd_bus_message_open_container(m, 'a', sig + 1);
                for (unsigned i = 0; r >= 0 && i < n; i++)
                        r = append_value(m, pr, sig + 1, depth + 1);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                return r;
        }
        case '(':
        case '{': {
                size_t l = type_length(sig);

                assert(l - 2 < sizeof(contents));
                memcpy(contents, sig + 1, l - 2);
                contents[l - 2] = 0;
                r = sd_bus_message_open_container(m, sig[0] == '(' ? 'r' : 'e', contents);
                if (r >= 0)
                        r = append_values(m, pr, contents, depth + 1);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                return r;
        }
        default:
                assert(!"a type the table does not have");
                return -EINVAL;
        }
}

static int append_options(sd_bus_message *m, Program *pr) {
        unsigned n = next_byte(pr) % 12;
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        for (unsigned i = 0; r >= 0 && i < n; i++) {
                uint8_t k = next_byte(pr);
                const char *key, *type;
                char buf[1024];

                key = k < 0xc0 ? option_names[k % ELEMENTSOF(option_names)] : next_string(pr, buf, sizeof(buf));
                type = variant_types[next_byte(pr) % ELEMENTSOF(variant_types)];
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append_basic(m, 's', key);
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', type);
                if (r >= 0)
                        r = append_value(m, pr, type, 1);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* The call's arguments: the leading ones of CreateSession or Exec, then the options;
 * now and then something else (the readers must refuse it, not trip over it). */
static int append_call(sd_bus_message *m, Program *pr) {
        uint8_t shape = next_byte(pr);
        int r = 0;

        switch (shape % 8) {
        case 0 ... 2: /* CreateSession */
                r = append_value(m, pr, "s", 0);
                if (r >= 0)
                        r = append_value(m, pr, "s", 0);
                break;
        case 3 ... 5: /* Exec, Run */
                r = append_value(m, pr, "as", 0);
                break;
        case 6: /* anything */
                r = append_value(m, pr, variant_types[next_byte(pr) % ELEMENTSOF(variant_types)], 0);
                break;
        case 7: /* no leading arguments */
                break;
        }
        if (r >= 0 && !(shape & 0x80))
                r = append_options(m, pr);
        return r;
}

static unsigned count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        unsigned n = 0;

        assert(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

/* an fd of the request's own, and never a terminal */
static bool fd_is_valid(int fd) {
        return fd >= 3 && fcntl(fd, F_GETFD) >= 0 && !isatty(fd);
}

static void check_error(int r, const RequestError *e) {
        sd_bus_error error = SD_BUS_ERROR_NULL;

        assert(r < 0);
        if (e->code) {
                assert(r == -EINVAL);
                assert(e->message[0] != 0);
        }
        assert(bus_error_set_request(&error, r, e) < 0);
        assert(sd_bus_error_is_set(&error));
        sd_bus_error_free(&error);
}

static void read_session(sd_bus_message *m) {
        SessionRequest req = {};
        RequestError e = {};
        int r;

        assert(sd_bus_message_rewind(m, true) >= 0);
        r = bus_request_read_session(m, &req, &e);
        if (r < 0) {
                check_error(r, &e);
                /* written only on success */
                assert(!req.user && !req.network_deny && !req.network_allow);
                return;
        }
        assert(user_name_is_valid(req.user) && workspace_name_is_valid(req.workspace));
        assert(!req.has_memory_max || (req.memory_max >= 1 && req.memory_max <= REQUEST_MEMORY_MAX_MAX));
        assert(!req.has_cpu_quota || (req.cpu_quota_percent >= 1 && req.cpu_quota_percent <= REQUEST_CPU_QUOTA_MAX));
        assert(!req.has_tasks_max || (req.tasks_max >= 1 && req.tasks_max <= REQUEST_TASKS_MAX_MAX));
        assert(!req.has_ttl || (req.ttl_s >= 1 && req.ttl_s <= REQUEST_TTL_S_MAX));
        assert(network_mode_to_string(req.network));
        assert(exec_mode_to_string(req.exec_mode));
        assert(strv_length(req.network_deny) <= REQUEST_DOMAINS_MAX);
        assert(strv_length(req.network_allow) <= REQUEST_DOMAINS_MAX);
        for (char **d = req.network_deny; d && *d; d++)
                assert(domain_pattern_is_valid(*d));
        for (char **d = req.network_allow; d && *d; d++)
                assert(domain_pattern_is_valid(*d));
        session_request_done(&req);
}

static void read_command(sd_bus_message *m) {
        CommandRequest req = {};
        RequestError e = {};
        int r;

        assert(sd_bus_message_rewind(m, true) >= 0);
        r = bus_request_read_command(m, &req, &e);
        if (r < 0) {
                check_error(r, &e);
                assert(!req.argv && !req.env && !req.stdin_data);
                return;
        }
        assert(req.argv && req.argv[0] && req.argv[0][0] && strv_length(req.argv) <= REQUEST_ARGV_MAX);
        assert(strv_length(req.env) <= REQUEST_ENV_MAX);
        for (char **i = req.env; i && *i; i++) {
                char *name = strndup(*i, strcspn(*i, "="));

                assert(name && (*i)[strlen(name)] == '=');
                assert(env_name_is_valid(name) && !env_name_is_reserved(name));
                free(name);
        }
        assert(!req.cwd || (req.cwd[0] && strlen(req.cwd) <= REQUEST_CWD_MAX));
        assert(!req.request_id || (request_id_is_valid(req.request_id) && !request_id_is_reserved(req.request_id)));
        assert(!req.has_timeout || (req.timeout_ms >= 1 && req.timeout_ms <= REQUEST_TIMEOUT_MS_MAX));
        assert(req.stdin_mode != STDIN_FD || fd_is_valid(req.stdin_fd));
        assert(req.stdin_mode != STDIN_DATA || req.stdin_data);
        assert(!req.has_stdout_fd || fd_is_valid(req.stdout_fd));
        assert(!req.has_stderr_fd || fd_is_valid(req.stderr_fd));
        assert(req.wait);
        command_request_done(&req);
}

/* Files.Write()'s options: where the dictionary comes first (the shapes without leading
 * arguments), and anywhere else, where it must be refused. */
static void read_write_options(sd_bus_message *m) {
        mode_t mode = 01234;
        uint64_t size = 42;
        RequestError e = {};
        int r;

        assert(sd_bus_message_rewind(m, true) >= 0);
        r = bus_request_read_write_options(m, &mode, &size, &e);
        if (r < 0) {
                check_error(r, &e);
                assert(mode == 01234 && size == 42); /* written only on success */
                return;
        }
        assert(mode == MODE_INVALID || mode <= 0777);
}

/* ExposePort()'s options. */
static void read_port_options(sd_bus_message *m) {
        PortRequest req = { .port = 8000, .host = false };
        RequestError e = {};
        int r;

        assert(sd_bus_message_rewind(m, true) >= 0);
        r = bus_request_read_port_options(m, &req, &e);
        if (r < 0) {
                check_error(r, &e);
                assert(req.port == 8000 && !req.host); /* written only on success */
                return;
        }
        assert(req.port == 8000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static sd_bus *bus = NULL;
        sd_bus_message *m = NULL;
        Program pr = { .p = data, .n = size, .budget = 4096 };

        if (!bus) {
                int pair[2];

                /* The other end stays open, and unread, for the life of the process. */
                assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
                assert(sd_bus_new(&bus) >= 0);
                assert(sd_bus_set_fd(bus, pair[0], pair[0]) >= 0);
                assert(sd_bus_start(bus) >= 0);
        }

        assert(sd_bus_message_new_method_call(bus, &m, "io.sandboxd.sandbox1", "/io/sandboxd/sandbox1",
                                              "io.sandboxd.sandbox1.Manager", "Exec") >= 0);
        if (append_call(m, &pr) >= 0 && sd_bus_message_seal(m, 1, 0) >= 0) {
                unsigned fds = pr.fds ? count_fds() : 0;

                read_session(m);
                read_command(m);
                read_write_options(m);
                read_port_options(m);
                /* What the readers duplicated, the requests' destructors closed again. */
                assert(!pr.fds || count_fds() == fds);
        }
        sd_bus_message_unref(m);
        return 0;
}
