/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>

#include "bus-request.h"
#include "files.h"

/* Enters the variant of option `key` of an a{sv} if it holds `type`; -EINVAL with *e
 * ("invalid_type") otherwise. */
static int enter_option(sd_bus_message *m, const char *key, const char *type, RequestError *e) {
        const char *contents;
        int r;

        r = sd_bus_message_peek_type(m, NULL, &contents);
        if (r < 0)
                return r;
        if (!streq_ptr(contents, type))
                return request_error(e, "invalid_type", "Option '%s' must be of type '%s', not '%s'.", key, type,
                                     strempty(contents));
        return sd_bus_message_enter_container(m, 'v', type);
}

/* The string of option key: entered, read and left. */
static int read_string_option(sd_bus_message *m, const char *key, const char **ret, RequestError *e) {
        int r;

        r = enter_option(m, key, "s", e);
        if (r >= 0)
                r = sd_bus_message_read(m, "s", ret);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        return r;
}

/* Reads the variant of one option of an a{sv} (key is its name), entering and leaving it. */
typedef int (*OptionFn)(sd_bus_message *m, const char *key, void *userdata, RequestError *e);

/* Walks an a{sv}: each entry's key, then fn for its variant. */
static int read_options(sd_bus_message *m, OptionFn fn, void *userdata, RequestError *e) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read(m, "s", &key);
                if (r >= 0)
                        r = fn(m, key, userdata, e);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m); /* the entry */
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        return r < 0 ? r : 0;
}

/* --- CreateSession ---------------------------------------------------------------------- */

static int session_option(sd_bus_message *m, const char *key, void *userdata, RequestError *e) {
        SessionRequest *req = userdata;
        const char *contents;
        uint64_t v;
        int r;

        if (streq(key, "memory_max")) {
                r = sd_bus_message_peek_type(m, NULL, &contents);
                if (r < 0)
                        return r;
                if (streq_ptr(contents, "s")) {
                        const char *size;

                        r = sd_bus_message_read(m, "v", "s", &size);
                        if (r >= 0)
                                r = request_parse_memory_max(size, &v, e);
                } else {
                        r = enter_option(m, key, "t", e);
                        if (r >= 0)
                                r = sd_bus_message_read(m, "t", &v);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(m);
                }
                if (r >= 0)
                        r = request_check_uint("limits.memory_max", v, 1, REQUEST_MEMORY_MAX_MAX, e);
                if (r >= 0) {
                        req->memory_max = v;
                        req->has_memory_max = true;
                }
        } else if (streq(key, "network")) {
                const char *mode;

                r = read_string_option(m, key, &mode, e);
                if (r >= 0)
                        r = request_parse_network_mode(mode, &req->network, e);
                req->has_network_mode = r >= 0;
        } else if (streq(key, "exec_mode")) {
                const char *mode;

                r = read_string_option(m, key, &mode, e);
                if (r >= 0)
                        r = request_parse_exec_mode(mode, &req->exec_mode, e);
                req->has_exec_mode = r >= 0;
        } else if (streq(key, "image")) {
                const char *name;

                r = read_string_option(m, key, &name, e);
                if (r >= 0)
                        r = request_check_image_name(name, e);
                if (r >= 0 && !req->image && !(req->image = strdup(name)))
                        r = -ENOMEM;
        } else if (streq(key, "network_deny") || streq(key, "network_allow")) {
                const char *field = streq(key, "network_deny") ? "network.deny" : "network.allow";
                char ***list = streq(key, "network_deny") ? &req->network_deny : &req->network_allow;
                const char *d;

                r = enter_option(m, key, "as", e);
                if (r >= 0)
                        r = sd_bus_message_enter_container(m, 'a', "s");
                if (r >= 0) {
                        strv_free(*list);
                        *list = calloc(1, sizeof(char *));
                        if (!*list)
                                r = -ENOMEM;
                }
                while (r >= 0 && (r = sd_bus_message_read(m, "s", &d)) > 0)
                        r = request_add_domain_pattern(field, d, list, e);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
        } else if (streq(key, "cpu_quota") || streq(key, "tasks_max") || streq(key, "ttl_s")) {
                r = enter_option(m, key, "t", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "t", &v);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
                if (streq(key, "cpu_quota")) {
                        r = request_check_uint("limits.cpu_quota", v, 1, REQUEST_CPU_QUOTA_MAX, e);
                        req->cpu_quota_percent = v;
                        req->has_cpu_quota = true;
                } else if (streq(key, "tasks_max")) {
                        r = request_check_uint("limits.tasks_max", v, 1, REQUEST_TASKS_MAX_MAX, e);
                        req->tasks_max = v;
                        req->has_tasks_max = true;
                } else {
                        r = request_check_uint("ttl_s", v, 1, REQUEST_TTL_S_MAX, e);
                        req->ttl_s = v;
                        req->has_ttl = true;
                }
        } else
                r = request_error(e, "unknown_field", "Unknown option '%s'.", key);
        return r;
}

int bus_request_read_session_options(sd_bus_message *m, SessionRequest *req, RequestError *e) {
        return read_options(m, session_option, req, e);
}

int bus_request_read_session(sd_bus_message *m, SessionRequest *ret, RequestError *e) {
        _cleanup_(session_request_done) SessionRequest req = { .network = NETWORK_NONE };
        const char *user, *workspace;
        int r;

        r = sd_bus_message_read(m, "ss", &user, &workspace);
        if (r < 0)
                return r;
        req.user = strdup(user);
        req.workspace = strdup(workspace);
        if (!req.user || !req.workspace)
                return -ENOMEM;
        r = session_request_check_scope(&req, e);
        if (r < 0)
                return r;
        r = bus_request_read_session_options(m, &req, e);
        if (r < 0)
                return r;

        *ret = req;
        req = (SessionRequest) {};
        return 0;
}

/* --- Exec and Run ------------------------------------------------------------------------- */

static int read_fd(sd_bus_message *m, const char *key, int *ret, RequestError *e) {
        int fd, r;

        r = sd_bus_message_read(m, "h", &fd);
        if (r < 0)
                return r;
        /* A terminal is checked with the rest (request_check_tty()): only a pty slave, and
         * only with the 'tty' option. The message owns its fd: a copy of our own, which the request then owns. */
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

static int read_env(sd_bus_message *m, CommandRequest *req, RequestError *e) {
        _cleanup_strv_free_ char **env = NULL;
        int r;

        r = sd_bus_message_read_strv(m, &env);
        if (r < 0)
                return r;
        if (strv_length(env) > REQUEST_ENV_MAX)
                return request_error(e, "invalid_value", "Option 'env' has more than %d entries.", REQUEST_ENV_MAX);
        for (char **i = env; i && *i; i++) {
                _cleanup_free_ char *name = NULL;
                const char *eq = strchr(*i, '=');

                if (!eq)
                        return request_error(e, "invalid_value", "Option 'env': '%.64s' is not NAME=value.", *i);
                name = strndup(*i, (size_t) (eq - *i));
                if (!name)
                        return -ENOMEM;
                r = request_check_env_name(name, e);
                if (r < 0)
                        return r;
        }
        strv_free(req->env);
        req->env = TAKE_PTR(env);
        return 0;
}

typedef struct CommandOptions {
        CommandRequest *req;
        bool seen_stdin;
} CommandOptions;

static int command_option(sd_bus_message *m, const char *key, void *userdata, RequestError *e) {
        CommandOptions *o = userdata;
        CommandRequest *req = o->req;
        const char *s;
        const void *data;
        size_t size;
        int r;

        if (streq(key, "cwd")) {
                r = enter_option(m, key, "s", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "s", &s);
                if (r >= 0)
                        r = request_check_cwd(s, e);
                if (r >= 0) {
                        free(req->cwd);
                        req->cwd = strdup(s);
                        r = req->cwd ? 0 : -ENOMEM;
                }
        } else if (streq(key, "env")) {
                r = enter_option(m, key, "as", e);
                if (r >= 0)
                        r = read_env(m, req, e);
        } else if (streq(key, "timeout_ms")) {
                r = enter_option(m, key, "t", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "t", &req->timeout_ms);
                if (r >= 0)
                        r = request_check_uint("timeout_ms", req->timeout_ms, 1, REQUEST_TIMEOUT_MS_MAX, e);
                req->has_timeout = r >= 0;
        } else if (streq(key, "request_id")) {
                r = enter_option(m, key, "s", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "s", &s);
                if (r >= 0)
                        r = request_check_request_id(s, e);
                if (r >= 0) {
                        free(req->request_id);
                        req->request_id = strdup(s);
                        r = req->request_id ? 0 : -ENOMEM;
                }
        } else if (streq(key, "stdin") || streq(key, "stdin_data")) {
                bool fd = streq(key, "stdin");

                if (o->seen_stdin)
                        return request_error(e, "invalid_value", "Give at most one of 'stdin' and 'stdin_data', once.");
                o->seen_stdin = true;
                if (fd && sd_bus_message_peek_type(m, NULL, &s) >= 0 && streq_ptr(s, "s")) {
                        /* "stream": fed later by WriteStdin(), as "stdin":"stream" over HTTP */
                        r = enter_option(m, key, "s", e);
                        if (r >= 0)
                                r = sd_bus_message_read(m, "s", &s);
                        if (r >= 0 && !streq(s, "stream"))
                                r = request_error(e, "invalid_value",
                                                  "Option 'stdin' is a file descriptor or \"stream\", not '%.64s'.", s);
                        if (r >= 0)
                                req->stdin_mode = STDIN_STREAM;
                } else {
                        r = enter_option(m, key, fd ? "h" : "ay", e);
                        if (r >= 0 && fd) {
                                r = read_fd(m, key, &req->stdin_fd, e);
                                if (r >= 0)
                                        req->stdin_mode = STDIN_FD;
                        } else if (r >= 0) {
                                r = sd_bus_message_read_array(m, 'y', &data, &size);
                                if (r >= 0) {
                                        req->stdin_data = memdup(data, size);
                                        req->stdin_size = size;
                                        r = req->stdin_data ? 0 : -ENOMEM;
                                }
                                if (r >= 0)
                                        req->stdin_mode = STDIN_DATA;
                        }
                }
        } else if (streq(key, "stdout") || streq(key, "stderr")) {
                bool out = streq(key, "stdout");

                if (out ? req->has_stdout_fd : req->has_stderr_fd)
                        return request_error(e, "invalid_value", "Option '%s' is given twice.", key);
                r = enter_option(m, key, "h", e);
                if (r >= 0)
                        r = read_fd(m, key, out ? &req->stdout_fd : &req->stderr_fd, e);
                if (r >= 0) {
                        if (out)
                                req->has_stdout_fd = true;
                        else
                                req->has_stderr_fd = true;
                }
        } else if (streq(key, "tty")) {
                uint16_t rows, cols;

                r = enter_option(m, key, "(qq)", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "(qq)", &rows, &cols);
                if (r >= 0) {
                        req->has_tty = true;
                        req->tty_rows = rows;
                        req->tty_cols = cols;
                }
        } else
                r = request_error(e, "unknown_field", "Unknown option '%s'.", key);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m); /* the variant */
}

int bus_request_read_command_options(sd_bus_message *m, CommandRequest *req, RequestError *e) {
        CommandOptions o = { .req = req };
        int r;

        r = read_options(m, command_option, &o, e);
        if (r < 0)
                return r;
        return request_check_tty(req, e);
}

int bus_request_read_command(sd_bus_message *m, CommandRequest *ret, RequestError *e) {
        _cleanup_(command_request_done) CommandRequest req = { .wait = true };
        int r;

        r = sd_bus_message_read_strv(m, &req.argv);
        if (r < 0)
                return r;
        r = request_check_argv(req.argv, e);
        if (r < 0)
                return r;
        r = bus_request_read_command_options(m, &req, e);
        if (r < 0)
                return r;

        *ret = req;
        req = (CommandRequest) {};
        return 0;
}

/* --- Files.Write ------------------------------------------------------------------------ */

typedef struct WriteOptions {
        mode_t mode;
        uint64_t size;
} WriteOptions;

static int write_option(sd_bus_message *m, const char *key, void *userdata, RequestError *e) {
        WriteOptions *o = userdata;
        uint32_t u = 0;
        int r;

        if (streq(key, "size")) {
                r = enter_option(m, key, "t", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "t", &o->size);
        } else if (streq(key, "mode")) {
                r = enter_option(m, key, "u", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "u", &u);
                if (r >= 0 && u > 0777)
                        return request_error(e, "invalid_value", "Option 'mode' must be permission bits, at most 0777.");
                o->mode = (mode_t) u;
        } else
                return request_error(e, "unknown_field", "Unknown option '%.64s': Write() knows mode and size.", key);
        return r < 0 ? r : sd_bus_message_exit_container(m); /* the variant */
}

int bus_request_read_write_options(sd_bus_message *m, mode_t *ret_mode, uint64_t *ret_size, RequestError *e) {
        WriteOptions o = { .mode = MODE_INVALID, .size = UINT64_MAX };
        int r;

        r = read_options(m, write_option, &o, e);
        if (r < 0)
                return r;
        *ret_mode = o.mode;
        *ret_size = o.size;
        return 0;
}

typedef struct TerminalOptions {
        int readonly;
        uint64_t offset;
} TerminalOptions;

static int terminal_option(sd_bus_message *m, const char *key, void *userdata, RequestError *e) {
        TerminalOptions *o = userdata;
        int r;

        if (streq(key, "readonly")) {
                r = enter_option(m, key, "b", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "b", &o->readonly);
        } else if (streq(key, "offset")) {
                r = enter_option(m, key, "t", e);
                if (r >= 0)
                        r = sd_bus_message_read(m, "t", &o->offset);
        } else
                return request_error(e, "unknown_field", "Unknown option '%.64s': OpenTerminal() knows readonly and offset.", key);
        return r < 0 ? r : sd_bus_message_exit_container(m); /* the variant */
}

int bus_request_read_terminal_options(sd_bus_message *m, bool *ret_readonly, uint64_t *ret_offset, RequestError *e) {
        TerminalOptions o = {};
        int r;

        r = read_options(m, terminal_option, &o, e);
        if (r < 0)
                return r;
        *ret_readonly = o.readonly;
        *ret_offset = o.offset;
        return 0;
}

/* --- Session.ExposePort ----------------------------------------------------------------- */

static int port_option(sd_bus_message *m, const char *key, void *userdata, RequestError *e) {
        PortRequest *req = userdata;
        int b = 0, r;

        if (!streq(key, "host"))
                return request_error(e, "unknown_field", "Unknown option '%.64s': ExposePort() knows host.", key);
        r = enter_option(m, key, "b", e);
        if (r >= 0)
                r = sd_bus_message_read(m, "b", &b);
        req->host = b;
        return r < 0 ? r : sd_bus_message_exit_container(m); /* the variant */
}

int bus_request_read_port_options(sd_bus_message *m, PortRequest *req, RequestError *e) {
        PortRequest o = *req;
        int r;

        r = read_options(m, port_option, &o, e);
        if (r < 0)
                return r;
        *req = o;
        return 0;
}
