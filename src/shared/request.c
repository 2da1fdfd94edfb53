/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <json-c/json.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "buf.h"
#include "json-util.h"
#include "encoding.h"
#include "net-policy.h"
#include "parse-util.h"
#include "request.h"
#include "validate.h"


int request_error(RequestError *e, const char *code, const char *fmt, ...) {
        va_list ap;

        e->code = code;
        va_start(ap, fmt);
        (void) vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* --- the rules, shared by every front end ------------------------------------ */

int request_check_uint(const char *field, uint64_t v, uint64_t min, uint64_t max, RequestError *e) {
        if (v < min || v > max)
                return request_error(e, "invalid_value", "Field '%s' must be between %" PRIu64 " and %" PRIu64 ".", field, min,
                            max);
        return 0;
}

int request_parse_memory_max(const char *s, uint64_t *ret, RequestError *e) {
        uint64_t v;

        if (parse_size(s, &v) < 0)
                return request_error(e, "invalid_value", "Field 'limits.memory_max' must be bytes or a size like \"512M\".");
        *ret = v;
        return 0;
}

static const char *const network_mode_table[_NETWORK_MODE_MAX] = {
        [NETWORK_NONE] = "none",
        [NETWORK_PROXY] = "proxy",
        [NETWORK_HOST] = "host",
};

const char *network_mode_to_string(NetworkMode m) {
        if (m < 0 || m >= _NETWORK_MODE_MAX)
                return NULL;
        return network_mode_table[m];
}

NetworkMode network_mode_from_string(const char *s) {
        for (int i = 0; s && i < _NETWORK_MODE_MAX; i++)
                if (streq(s, network_mode_table[i]))
                        return (NetworkMode) i;
        return _NETWORK_MODE_INVALID;
}

int request_parse_network_mode(const char *mode, NetworkMode *ret, RequestError *e) {
        NetworkMode m = network_mode_from_string(mode);

        if (m < 0)
                return request_error(e, "invalid_value", "Field 'network.mode' must be one of: none, proxy, host.");
        *ret = m;
        return 0;
}

static const char *const exec_mode_table[_EXEC_MODE_MAX] = {
        [EXEC_MODE_UNIT] = "unit",
        [EXEC_MODE_SESSION] = "session",
};

const char *exec_mode_to_string(ExecMode m) {
        if (m < 0 || m >= _EXEC_MODE_MAX)
                return NULL;
        return exec_mode_table[m];
}

ExecMode exec_mode_from_string(const char *s) {
        for (int i = 0; s && i < _EXEC_MODE_MAX; i++)
                if (streq(s, exec_mode_table[i]))
                        return (ExecMode) i;
        return _EXEC_MODE_INVALID;
}

int request_parse_exec_mode(const char *mode, ExecMode *ret, RequestError *e) {
        ExecMode m = exec_mode_from_string(mode);

        if (m < 0)
                return request_error(e, "invalid_value", "Field 'exec_mode' must be one of: unit, session.");
        *ret = m;
        return 0;
}

int request_add_domain_pattern(const char *field, const char *pattern, char ***list, RequestError *e) {
        char buf[HOST_NAME_MAX_LEN + 3], **l;
        size_t n = strv_length(*list);

        if (n >= REQUEST_DOMAINS_MAX)
                return request_error(e, "invalid_value", "Field '%s' has more than %d entries.", field, REQUEST_DOMAINS_MAX);
        if (domain_pattern_normalize(pattern, buf) < 0)
                return request_error(e, "invalid_value",
                                     "Field '%s' has an invalid domain '%.64s': use a name like \"example.com\" or \"*.example.com\".",
                                     field, pattern);
        l = realloc(*list, (n + 2) * sizeof(char *));
        if (!l)
                return -ENOMEM;
        *list = l;
        l[n] = strdup(buf);
        l[n + 1] = NULL;
        return l[n] ? 0 : -ENOMEM;
}

int session_request_check_scope(const SessionRequest *s, RequestError *e) {
        if (!s->user)
                return request_error(e, "missing_field", "Field 'user' is required.");
        if (!user_name_is_valid(s->user))
                return request_error(e, "invalid_name", "Invalid user name: must match ^[a-z_][a-z0-9_-]{0,31}$.");
        if (!s->workspace)
                return request_error(e, "missing_field", "Field 'workspace' is required.");
        if (!workspace_name_is_valid(s->workspace))
                return request_error(e, "invalid_name", "Invalid workspace name: must match ^[a-z0-9_-]{1,64}$.");
        return 0;
}

int request_check_argv(char * const *argv, RequestError *e) {
        size_t n = strv_length(argv);

        if (n == 0)
                return request_error(e, "invalid_value", "Field 'argv' must not be empty.");
        if (n > REQUEST_ARGV_MAX)
                return request_error(e, "invalid_value", "Field 'argv' has more than %d entries.", REQUEST_ARGV_MAX);
        if (argv[0][0] == 0)
                return request_error(e, "invalid_value", "Field 'argv[0]' must not be empty.");
        return 0;
}

int request_check_env_name(const char *name, RequestError *e) {
        if (!env_name_is_valid(name))
                return request_error(e, "invalid_value", "Invalid environment variable name '%.64s'.", name);
        if (env_name_is_reserved(name))
                return request_error(e, "reserved_env", "Environment variable '%s' is set by sandboxd and cannot be overridden.", name);
        return 0;
}

int request_check_cwd(const char *cwd, RequestError *e) {
        if (cwd[0] == 0 || strlen(cwd) > REQUEST_CWD_MAX)
                return request_error(e, "invalid_path", "Field 'cwd' must be a non-empty path of at most %d bytes.", REQUEST_CWD_MAX);
        return 0;
}

int request_check_request_id(const char *id, RequestError *e) {
        if (!request_id_is_valid(id))
                return request_error(e, "invalid_name", "Invalid request_id: must match ^[A-Za-z0-9._-]{1,64}$.");
        if (request_id_is_reserved(id))
                return request_error(e, "invalid_name", "Request ids starting with 'sandboxd.' are sandboxd's own.");
        return 0;
}

/* --- JSON ------------------------------------------------------------------------ */

static int parse_object(const char *body, size_t n, json_object **ret, RequestError *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_tokener *tok;
        enum json_tokener_error jerr;
        size_t consumed;
        bool valid;

        if (n > INT32_MAX)
                return request_error(e, "payload_too_large", "Request body is too large.");
        if (n == 0)
                return request_error(e, "invalid_json", "Request body is empty; expected a JSON object.");
        if (memchr(body, 0, n))
                return request_error(e, "invalid_json", "Request body contains a NUL byte.");
        /* json-c's own check lets overlong forms, surrogates and code points above U+10FFFF
         * through, which D-Bus then refuses: systemd would never see the command. */
        if (utf8_valid_prefix(body, n, &valid) != n || !valid)
                return request_error(e, "invalid_json", "Request body is not valid UTF-8.");

        tok = json_tokener_new_ex(32);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, body, (int) n);
        jerr = json_tokener_get_error(tok);
        consumed = json_tokener_get_parse_end(tok);
        if (!o && jerr == json_tokener_continue) {
                /* A top-level scalar (null, 123) is only complete once the input ends. */
                o = json_tokener_parse_ex(tok, "", 1);
                jerr = json_tokener_get_error(tok);
        }
        json_tokener_free(tok);

        if (jerr == json_tokener_success && !o)
                return request_error(e, "invalid_type", "Request body must be a JSON object, not null.");
        if (jerr != json_tokener_success || !o) {
                return request_error(e, "invalid_json", "Request body is not valid JSON: %s.",
                            jerr == json_tokener_continue ? "unexpected end of input"
                                                          : json_tokener_error_desc(jerr));
        }
        for (; consumed < n; consumed++)
                if (!strchr(" \t\r\n", body[consumed]))
                        return request_error(e, "invalid_json", "Request body has trailing data after the JSON object.");
        if (!json_object_is_type(o, json_type_object))
                return request_error(e, "invalid_type", "Request body must be a JSON object.");

        *ret = TAKE_PTR(o);
        return 0;
}

/* A JSON string without embedded NUL bytes. */
static int get_string(json_object *v, const char *field, char **ret, RequestError *e) {
        const char *s;
        char *copy;
        int len;

        if (!json_object_is_type(v, json_type_string))
                return request_error(e, "invalid_type", "Field '%s' must be a string.", field);
        s = json_object_get_string(v);
        len = json_object_get_string_len(v);
        if (memchr(s, 0, (size_t) len))
                return request_error(e, "invalid_value", "Field '%s' must not contain NUL characters.", field);
        copy = strdup(s);
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        return 0;
}

static int get_uint(json_object *v, const char *field, uint64_t min, uint64_t max, uint64_t *ret, RequestError *e) {
        int64_t i;

        if (!json_object_is_type(v, json_type_int))
                return request_error(e, "invalid_type", "Field '%s' must be an integer.", field);
        errno = 0;
        i = json_object_get_int64(v);
        if (errno != 0 || i < 0)
                return request_check_uint(field, UINT64_MAX, min, max, e); /* out of range either way */
        if (request_check_uint(field, (uint64_t) i, min, max, e) < 0)
                return -EINVAL;
        *ret = (uint64_t) i;
        return 0;
}

static int parse_limits(json_object *o, SessionRequest *s, RequestError *e) {
        if (!json_object_is_type(o, json_type_object))
                return request_error(e, "invalid_type", "Field 'limits' must be an object.");

        json_object_object_foreach(o, key, v) {
                int r;

                if (streq(key, "memory_max")) {
                        if (json_object_is_type(v, json_type_string)) {
                                r = request_parse_memory_max(json_object_get_string(v), &s->memory_max, e);
                                if (r < 0)
                                        return r;
                        } else {
                                r = get_uint(v, "limits.memory_max", 1, REQUEST_MEMORY_MAX_MAX, &s->memory_max, e);
                                if (r < 0)
                                        return r;
                        }
                        s->has_memory_max = true;
                } else if (streq(key, "cpu_quota")) {
                        r = get_uint(v, "limits.cpu_quota", 1, REQUEST_CPU_QUOTA_MAX, &s->cpu_quota_percent, e);
                        if (r < 0)
                                return r;
                        s->has_cpu_quota = true;
                } else if (streq(key, "tasks_max")) {
                        r = get_uint(v, "limits.tasks_max", 1, REQUEST_TASKS_MAX_MAX, &s->tasks_max, e);
                        if (r < 0)
                                return r;
                        s->has_tasks_max = true;
                } else
                        return request_error(e, "unknown_field", "Unknown field 'limits.%s'.", key);
        }
        return 0;
}

static int parse_domains(json_object *v, const char *field, char ***list, RequestError *e) {
        size_t n;
        int r;

        if (!json_object_is_type(v, json_type_array))
                return request_error(e, "invalid_type", "Field '%s' must be an array of domain names.", field);
        strv_free(*list);
        *list = calloc(1, sizeof(char *)); /* an empty list is a list: allow nothing */
        if (!*list)
                return -ENOMEM;
        n = json_object_array_length(v);
        for (size_t i = 0; i < n; i++) {
                json_object *d = json_object_array_get_idx(v, i);

                if (!json_object_is_type(d, json_type_string) ||
                    memchr(json_object_get_string(d), 0, (size_t) json_object_get_string_len(d)))
                        return request_error(e, "invalid_type", "Field '%s' must be an array of domain names.", field);
                r = request_add_domain_pattern(field, json_object_get_string(d), list, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_network(json_object *o, SessionRequest *s, RequestError *e) {
        int r;

        if (!json_object_is_type(o, json_type_object))
                return request_error(e, "invalid_type", "Field 'network' must be an object.");

        json_object_object_foreach(o, key, v) {
                if (streq(key, "mode")) {
                        if (!json_object_is_type(v, json_type_string))
                                return request_error(e, "invalid_type", "Field 'network.mode' must be a string.");
                        if (request_parse_network_mode(json_object_get_string(v), &s->network, e) < 0)
                                return -EINVAL;
                        s->has_network_mode = true;
                } else if (streq(key, "deny")) {
                        r = parse_domains(v, "network.deny", &s->network_deny, e);
                        if (r < 0)
                                return r;
                } else if (streq(key, "allow")) {
                        r = parse_domains(v, "network.allow", &s->network_allow, e);
                        if (r < 0)
                                return r;
                } else
                        return request_error(e, "unknown_field", "Unknown field 'network.%s'.", key);
        }
        return 0;
}

void session_request_done(SessionRequest *r) {
        free(r->user);
        free(r->workspace);
        free(r->image);
        strv_free(r->network_deny);
        strv_free(r->network_allow);
        *r = (SessionRequest) {};
}

int request_check_image_name(const char *name, RequestError *e) {
        if (!image_name_is_valid(name))
                return request_error(e, "invalid_name",
                                     "Field 'image' must be an image name: 1 to 64 of a-z, 0-9, '_' and '-', "
                                     "starting with a letter or digit.");
        return 0;
}

int session_request_parse(const char *body, size_t n, SessionRequest *ret, RequestError *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        SessionRequest s = { .network = NETWORK_NONE };
        int r;

        r = parse_object(body, n, &o, e);
        if (r < 0)
                return r;

        json_object_object_foreach(o, key, v) {
                if (streq(key, "user"))
                        r = s.user ? 0 : get_string(v, "user", &s.user, e);
                else if (streq(key, "workspace"))
                        r = s.workspace ? 0 : get_string(v, "workspace", &s.workspace, e);
                else if (streq(key, "limits"))
                        r = parse_limits(v, &s, e);
                else if (streq(key, "network"))
                        r = parse_network(v, &s, e);
                else if (streq(key, "ttl_s")) {
                        r = get_uint(v, "ttl_s", 1, REQUEST_TTL_S_MAX, &s.ttl_s, e);
                        s.has_ttl = r >= 0;
                } else if (streq(key, "exec_mode")) {
                        if (!json_object_is_type(v, json_type_string))
                                r = request_error(e, "invalid_type", "Field 'exec_mode' must be a string.");
                        else if (memchr(json_object_get_string(v), 0, (size_t) json_object_get_string_len(v)))
                                r = request_parse_exec_mode(NULL, &s.exec_mode, e); /* "unit\u0000..." is no mode */
                        else
                                r = request_parse_exec_mode(json_object_get_string(v), &s.exec_mode, e);
                        s.has_exec_mode = r >= 0;
                } else if (streq(key, "image")) {
                        r = s.image ? 0 : get_string(v, "image", &s.image, e);
                        if (r >= 0)
                                r = request_check_image_name(s.image, e);
                } else
                        r = request_error(e, "unknown_field", "Unknown field '%s'.", key);
                if (r < 0)
                        goto fail;
        }

        r = session_request_check_scope(&s, e);
        if (r < 0)
                goto fail;

        *ret = s;
        return 0;
fail:
        session_request_done(&s);
        return r;
}

static const char *const stdin_mode_table[_STDIN_MODE_MAX] = {
        [STDIN_NULL] = "null",
        [STDIN_DATA] = "data",
        [STDIN_STREAM] = "stream",
        [STDIN_FD] = "fd",
};

const char *stdin_mode_to_string(StdinMode m) {
        if (m < 0 || m >= _STDIN_MODE_MAX)
                return NULL;
        return stdin_mode_table[m];
}

StdinMode stdin_mode_from_string(const char *s) {
        for (int i = 0; s && i < _STDIN_MODE_MAX; i++)
                if (streq(s, stdin_mode_table[i]))
                        return (StdinMode) i;
        return _STDIN_MODE_INVALID;
}

/* "stdin": "stream", or {"text": "..."} or {"base64": "..."} */
static int parse_stdin(json_object *v, CommandRequest *c, RequestError *e) {
        const char *key = NULL;
        json_object *val = NULL;

        if (json_object_is_type(v, json_type_string)) {
                if (!streq(json_object_get_string(v), "stream"))
                        return request_error(e, "invalid_value",
                                    "Field 'stdin' must be \"stream\", or an object {\"text\": ...} or {\"base64\": ...}.");
                c->stdin_mode = STDIN_STREAM;
                return 0;
        }
        if (!json_object_is_type(v, json_type_object) || json_object_object_length(v) != 1)
                return request_error(e, "invalid_type",
                            "Field 'stdin' must be \"stream\", or an object {\"text\": ...} or {\"base64\": ...}.");

        json_object_object_foreach(v, k, x) {
                key = k;
                val = x;
        }
        if (!json_object_is_type(val, json_type_string))
                return request_error(e, "invalid_type", "Field 'stdin.%s' must be a string.", key);

        free(c->stdin_data);
        c->stdin_data = NULL;
        if (streq(key, "text")) {
                c->stdin_size = (size_t) json_object_get_string_len(val);
                c->stdin_data = memdup(json_object_get_string(val), c->stdin_size);
                if (!c->stdin_data)
                        return -ENOMEM;
        } else if (streq(key, "base64")) {
                Buf b = {};
                const char *s = json_object_get_string(val);
                int r = base64_decode(s, strlen(s), &b);

                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        buf_done(&b);
                        return request_error(e, "invalid_value", "Field 'stdin.base64' is not valid base64.");
                }
                c->stdin_size = b.len;
                c->stdin_data = b.data ? buf_steal(&b) : strdup("");
                if (!c->stdin_data)
                        return -ENOMEM;
        } else
                return request_error(e, "unknown_field", "Unknown field 'stdin.%s'; use 'text' or 'base64'.", key);

        c->stdin_mode = STDIN_DATA;
        return 0;
}

/* "tty": {"rows": R, "cols": C}, both required */
static int parse_tty(json_object *v, CommandRequest *c, RequestError *e) {
        bool rows = false, cols = false;
        uint64_t x;
        int r;

        if (!json_object_is_type(v, json_type_object))
                return request_error(e, "invalid_type", "Field 'tty' must be an object {\"rows\": ..., \"cols\": ...}.");
        json_object_object_foreach(v, key, val) {
                if (streq(key, "rows") || streq(key, "cols")) {
                        bool is_rows = streq(key, "rows");

                        r = get_uint(val, is_rows ? "tty.rows" : "tty.cols", 1, REQUEST_TTY_SIZE_MAX, &x, e);
                        if (r < 0)
                                return r;
                        if (is_rows) {
                                c->tty_rows = (unsigned) x;
                                rows = true;
                        } else {
                                c->tty_cols = (unsigned) x;
                                cols = true;
                        }
                } else
                        return request_error(e, "unknown_field", "Unknown field 'tty.%.64s'; use 'rows' and 'cols'.", key);
        }
        if (!rows || !cols)
                return request_error(e, "missing_field", "Field 'tty' needs both 'rows' and 'cols'.");
        c->has_tty = true;
        return 0;
}

bool fd_is_pty_slave(int fd, dev_t *ret_rdev) {
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) < 136 ||
            major(st.st_rdev) > 143 || !isatty(fd))
                return false;
        if (ret_rdev)
                *ret_rdev = st.st_rdev;
        return true;
}

int request_check_tty(CommandRequest *c, RequestError *e) {
        dev_t rdev = 0, other;

        if (!c->has_tty) {
                /* Untrusted code never gets a caller's terminal it does not lead: on one it
                 * could turn echo off, push input (TIOCSTI) and read what is typed after the
                 * call returns. Either end of a pseudo-terminal answers isatty(). */
                if ((c->stdin_mode == STDIN_FD && isatty(c->stdin_fd)) || (c->has_stdout_fd && isatty(c->stdout_fd)) ||
                    (c->has_stderr_fd && isatty(c->stderr_fd)))
                        return request_error(e, "invalid_value",
                                             "A file descriptor is a terminal: pass a pipe, or a pty slave with the 'tty' option.");
                return 0;
        }
        if (request_check_uint("tty.rows", c->tty_rows, 1, REQUEST_TTY_SIZE_MAX, e) < 0 ||
            request_check_uint("tty.cols", c->tty_cols, 1, REQUEST_TTY_SIZE_MAX, e) < 0)
                return -EINVAL;
        if (c->stdin_mode == STDIN_NULL)
                c->stdin_mode = STDIN_STREAM;
        switch (c->stdin_mode) {
        case STDIN_STREAM:
                if (c->has_stdout_fd || c->has_stderr_fd)
                        return request_error(e, "invalid_value",
                                             "With 'tty', stdout and stderr are the terminal's: give them only with a pty slave as stdin.");
                return 0;
        case STDIN_FD:
                if (!fd_is_pty_slave(c->stdin_fd, &rdev))
                        return request_error(e, "invalid_value", "With 'tty', a stdin file descriptor must be a pty slave.");
                /* a terminal among the others must be that one */
                if ((c->has_stdout_fd && isatty(c->stdout_fd) && (!fd_is_pty_slave(c->stdout_fd, &other) || other != rdev)) ||
                    (c->has_stderr_fd && isatty(c->stderr_fd) && (!fd_is_pty_slave(c->stderr_fd, &other) || other != rdev)))
                        return request_error(e, "invalid_value", "With 'tty', stdout and stderr may be no terminal but stdin's.");
                return 0;
        default:
                return request_error(e, "invalid_value", "With 'tty', 'stdin' must be absent or \"stream\".");
        }
}

void command_request_done(CommandRequest *r) {
        strv_free(r->argv);
        strv_free(r->env);
        free(r->cwd);
        free(r->request_id);
        free(r->stdin_data);
        if (r->stdin_mode == STDIN_FD)
                safe_close(r->stdin_fd);
        if (r->has_stdout_fd)
                safe_close(r->stdout_fd);
        if (r->has_stderr_fd)
                safe_close(r->stderr_fd);
        *r = (CommandRequest) {};
}

static int parse_argv(json_object *v, CommandRequest *c, RequestError *e) {
        size_t n;
        int r;

        if (!json_object_is_type(v, json_type_array))
                return request_error(e, "invalid_type", "Field 'argv' must be an array of strings.");
        /* One more than allowed is enough for the check below to refuse it. */
        n = MIN(json_object_array_length(v), (size_t) REQUEST_ARGV_MAX + 1);

        strv_free(c->argv);
        c->argv = calloc(n + 1, sizeof(char *));
        if (!c->argv)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                char field[32];

                snprintf(field, sizeof(field), "argv[%zu]", i);
                r = get_string(json_object_array_get_idx(v, i), field, &c->argv[i], e);
                if (r < 0)
                        return r;
        }
        return request_check_argv(c->argv, e);
}

static int parse_env(json_object *v, CommandRequest *c, RequestError *e) {
        size_t n = 0;

        if (!json_object_is_type(v, json_type_object))
                return request_error(e, "invalid_type", "Field 'env' must be an object of strings.");
        if (json_object_object_length(v) > REQUEST_ENV_MAX)
                return request_error(e, "invalid_value", "Field 'env' has more than %d entries.", REQUEST_ENV_MAX);

        strv_free(c->env);
        c->env = calloc((size_t) json_object_object_length(v) + 1, sizeof(char *));
        if (!c->env)
                return -ENOMEM;

        json_object_object_foreach(v, key, val) {
                const char *s;

                if (request_check_env_name(key, e) < 0)
                        return -EINVAL;
                if (!json_object_is_type(val, json_type_string))
                        return request_error(e, "invalid_type", "Environment variable '%s' must be a string.", key);
                s = json_object_get_string(val);
                if (memchr(s, 0, (size_t) json_object_get_string_len(val)))
                        return request_error(e, "invalid_value", "Environment variable '%s' must not contain NUL characters.", key);
                if (asprintf(&c->env[n], "%s=%s", key, s) < 0) {
                        c->env[n] = NULL;
                        return -ENOMEM;
                }
                n++;
        }
        return 0;
}

int command_request_parse(const char *body, size_t n, CommandRequest *ret, RequestError *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        CommandRequest c = { .wait = true };
        int r;

        r = parse_object(body, n, &o, e);
        if (r < 0)
                return r;

        json_object_object_foreach(o, key, v) {
                if (streq(key, "argv"))
                        r = parse_argv(v, &c, e);
                else if (streq(key, "env"))
                        r = parse_env(v, &c, e);
                else if (streq(key, "cwd")) {
                        free(c.cwd);
                        c.cwd = NULL;
                        r = get_string(v, "cwd", &c.cwd, e);
                        if (r >= 0)
                                r = request_check_cwd(c.cwd, e);
                } else if (streq(key, "timeout_ms")) {
                        r = get_uint(v, "timeout_ms", 1, REQUEST_TIMEOUT_MS_MAX, &c.timeout_ms, e);
                        c.has_timeout = r >= 0;
                } else if (streq(key, "request_id")) {
                        free(c.request_id);
                        c.request_id = NULL;
                        r = get_string(v, "request_id", &c.request_id, e);
                        if (r >= 0)
                                r = request_check_request_id(c.request_id, e);
                } else if (streq(key, "stdin"))
                        r = parse_stdin(v, &c, e);
                else if (streq(key, "tty"))
                        r = parse_tty(v, &c, e);
                else
                        r = request_error(e, "unknown_field", "Unknown field '%s'.", key);
                if (r < 0)
                        goto fail;
        }

        if (!c.argv) {
                r = request_error(e, "missing_field", "Field 'argv' is required.");
                goto fail;
        }
        r = request_check_tty(&c, e);
        if (r < 0)
                goto fail;

        *ret = c;
        return 0;
fail:
        command_request_done(&c);
        return r;
}

int port_request_parse(const char *body, size_t n, PortRequest *ret, RequestError *e) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        PortRequest p = {};
        bool has_port = false;
        uint64_t v;
        int r;

        r = parse_object(body, n, &o, e);
        if (r < 0)
                return r;

        json_object_object_foreach(o, key, val) {
                if (streq(key, "port")) {
                        r = get_uint(val, "port", 1, UINT16_MAX, &v, e);
                        if (r < 0)
                                return r;
                        p.port = (uint16_t) v;
                        has_port = true;
                } else if (streq(key, "host")) {
                        if (!json_object_is_type(val, json_type_boolean))
                                return request_error(e, "invalid_type", "Field 'host' must be a boolean.");
                        p.host = json_object_get_boolean(val);
                } else
                        return request_error(e, "unknown_field", "Unknown field '%s'.", key);
        }
        if (!has_port)
                return request_error(e, "missing_field", "Field 'port' is required.");
        *ret = p;
        return 0;
}
