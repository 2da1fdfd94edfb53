/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <time.h>

#include "json-util.h"
#include "log.h"
#include "parse-util.h"
#include "request.h"
#include "sandboxctl.h"
#include "validate.h"

bool arg_json = false;
const char *arg_url = NULL;
const char *arg_key = NULL;
const char *arg_transport = NULL;
bool arg_quiet = false;
char **arg_env = NULL;
const char *arg_cwd = NULL;
uint64_t arg_timeout_ms = 0;
const char *arg_request_id = NULL;
bool arg_stdin = false;
const char *arg_user = NULL;
const char *arg_workspace = NULL;
bool arg_purge = false;
bool arg_rm = false;
bool arg_host = false;
uint64_t arg_offset = 0;
bool arg_recursive = false;
int arg_progress = -1;
const char *arg_memory_max = NULL;
const char *arg_cpu_quota = NULL;
const char *arg_tasks_max = NULL;
uint64_t arg_ttl_s = 0;
const char *arg_exec_mode = NULL;
const char *arg_image = NULL;
int arg_drain = 1;
size_t arg_max_output = 64 * 1024;
bool arg_tty = false;
unsigned arg_jobs = 0;
uint64_t arg_kill_grace_ms = 0;
char **arg_host_paths = NULL;

static char *arg_key_buf = NULL;

static void help(void) {
        printf("sandboxctl [OPTIONS...] COMMAND ...\n\n"
               "Control sandboxd: sessions, commands and files in sandboxes that are systemd units.\n\n"
               "Sessions:\n"
               "  create USER WORKSPACE     Create the session of a scope (or show the active one);\n"
               "                            prints its id\n"
               "  ls                        List sessions\n"
               "  show SESSION [REQUEST]    Show a session and its commands, or one command's result\n"
               "  rm SESSION...             Close sessions (running commands are stopped)\n"
               "  freeze SESSION            Pause every process of a session\n"
               "  thaw SESSION              Resume it\n\n"
               "Commands:\n"
               "  exec SESSION CMD [ARG...] Run a command in a session, stream its output, exit\n"
               "                            with its exit status\n"
               "  run CMD [ARG...]          The same in the session of --user/--workspace, created\n"
               "                            if needed\n"
               "  attach SESSION REQUEST    Re-attach to a command: replay its output, follow it\n"
               "  shell SESSION [CMD...]    An interactive shell (or CMD) on a terminal; ~. detaches\n"
               "  signal SESSION REQUEST [SIGNAL]\n"
               "                            Send SIGTERM (or SIGNAL) to a command\n\n"
               "Files:\n"
               "  cp SRC... DST             Copy files to or from a session: SESSION:PATH names a\n"
               "                            path in its workspace, - is stdin or stdout\n\n"
               "Ports:\n"
               "  port expose SESSION PORT  Make TCP PORT of a session reachable on a unix socket\n"
               "                            (--host: and on 127.0.0.1 of the host); prints both\n"
               "  port ls SESSION           List a session's exposed ports\n"
               "  port rm SESSION PORT      Stop exposing it\n\n"
               "Images:\n"
               "  image ls                  List the images sessions may run in\n"
               "  image show NAME           Show one\n"
               "  image import NAME PATH|-  Import a directory, a tar (or .tar.gz, ...) or stdin's tar\n"
               "  image rm NAME             Remove an image no open session uses\n\n"
               "Daemon:\n"
               "  health                    Show sandboxd's health\n"
               "  drain                     Refuse new work, let running commands finish\n"
               "  mcp                       Serve the Model Context Protocol on stdin/stdout\n\n"
               "Options:\n"
               "  -h --help                 Show this help\n"
               "     --version              Show the version\n"
               "     --url=URL              Talk HTTP to a remote sandboxd (http://HOST:PORT) or another\n"
               "                            socket (unix:PATH); default: $SANDBOXD_URL, else the local\n"
               "                            sandboxd over D-Bus\n"
               "     --transport=dbus|http  For the local sandboxd: D-Bus (default), or HTTP on\n"
               "                            %s (default: $SANDBOXD_TRANSPORT)\n"
               "     --key=KEY              API key for --url (default: $SANDBOXD_KEY)\n"
               "     --key-file=PATH        Read the API key from a file\n"
               "     --json                 Print JSON for scripts (exec: the NDJSON events)\n"
               "  -q --quiet                Print less\n\n"
               "  create: --memory-max=SIZE --cpu-quota=PERCENT --tasks-max=N --ttl=DURATION\n"
               "          --exec-mode=unit|session (how its commands run) --image=NAME (the root\n"
               "          file system its commands run in)\n"
               "  ls:     --user=USER\n"
               "  rm:     --purge           Also empty the workspace\n"
               "  exec, run:\n"
               "     --cwd=DIR              Working directory, inside the workspace\n"
               "  -e --env=NAME=VALUE       Set an environment variable\n"
               "     --timeout=DURATION     Stop the command after this long (e.g. 30s, 5min)\n"
               "     --request-id=ID        Idempotency key (default: a random one)\n"
               "  -i --stdin                Send all of standard input to the command\n"
               "  -t --tty                  exec, attach: on a terminal, with ours (as shell)\n"
               "  run:    --user=USER --workspace=NAME --rm (close the session afterwards)\n"
               "          --exec-mode=unit|session --image=NAME (of the session, if it is created)\n"
               "  attach: --offset=BYTES    Replay from this offset of the event log\n"
               "  cp:     -r --recursive    Copy directories; --progress, --no-progress\n"
               "  drain:  --cancel          Stop draining;  --status  Only show the state\n"
               "  port expose: --host       Also on a free port of 127.0.0.1 of the host\n"
               "  mcp:    --user=USER --workspace=NAME (defaults for new sessions)\n"
               "          --max-output=BYTES (output returned per stream, default 64K)\n"
               "          --timeout=DURATION (a command's default timeout, default 50s)\n"
               "          --jobs=N (tool calls at once, default 4)  --kill-grace=DURATION\n"
               "          (SIGTERM to SIGKILL on cancel, default 5s)  --host-path=DIR[:ro|:rw]\n"
               "          (a host directory that files may be copied from, and with :rw to)\n\n"
               "exec, run and attach exit with the command's status: its exit code, 128+N when\n"
               "signal N killed it, 124 when it timed out, 1 when it could not start, 125 when\n"
               "sandboxctl or sandboxd failed. Ctrl-C sends SIGINT to the command, a second one\n"
               "SIGKILL, a third detaches. On a terminal (shell, -t) every key goes to the\n"
               "command; ~. first on a line detaches, ~? lists the escapes. See sandboxctl(1).\n",
               SANDBOXD_DEFAULT_SOCKET);
}

typedef struct Verb {
        const char *name;
        unsigned min_args, max_args; /* positional arguments after the verb */
        bool stop_at_first;          /* options end at the first positional argument */
        int (*run)(int argc, char *argv[]);
} Verb;

#define ANY UINT_MAX

static const Verb verbs[] = {
        { "create", 2, 2, false, verb_create },   { "ls", 0, 0, false, verb_list },
        { "port", 2, 3, false, verb_port },
        { "list", 0, 0, false, verb_list },       { "show", 1, 2, false, verb_show },
        { "rm", 1, ANY, false, verb_remove },     { "freeze", 1, 1, false, verb_freeze },
        { "thaw", 1, 1, false, verb_thaw },       { "exec", 2, ANY, true, verb_exec },
        { "run", 1, ANY, true, verb_run },        { "attach", 2, 2, false, verb_attach },
        { "signal", 2, 3, false, verb_signal },   { "cp", 2, ANY, false, verb_cp },
        { "health", 0, 0, false, verb_health },   { "drain", 0, 0, false, verb_drain },
        { "image", 1, 3, false, verb_image },
        { "mcp", 0, 0, false, verb_mcp },         { "shell", 1, ANY, true, verb_shell },
};

static int read_key_file(const char *path) {
        _cleanup_fclose_ FILE *f = NULL;
        char buf[4096];

        f = fopen(path, "re");
        if (!f)
                return log_error_errno(-errno, "Failed to open the key file %s: %m", path);
        if (!fgets(buf, sizeof(buf), f))
                return log_error_errno(-EINVAL, "The key file %s is empty.", path);
        buf[strcspn(buf, "\r\n")] = 0;
        free(arg_key_buf);
        arg_key_buf = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
        if (!arg_key_buf)
                return log_oom();
        arg_key = arg_key_buf;
        return 0;
}

static int parse_options(int argc, char *argv[], bool stop_at_first) {
        enum {
                ARG_VERSION = 0x100, ARG_URL, ARG_KEY, ARG_KEY_FILE, ARG_JSON, ARG_CWD, ARG_TIMEOUT,
                ARG_REQUEST_ID, ARG_USER, ARG_WORKSPACE, ARG_PURGE, ARG_RM, ARG_OFFSET, ARG_PROGRESS,
                ARG_NO_PROGRESS, ARG_MEMORY_MAX, ARG_CPU_QUOTA, ARG_TASKS_MAX, ARG_TTL, ARG_CANCEL, ARG_STATUS,
                ARG_MAX_OUTPUT, ARG_TRANSPORT, ARG_EXEC_MODE, ARG_IMAGE, ARG_HOST, ARG_JOBS, ARG_KILL_GRACE, ARG_HOST_PATH,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "url", required_argument, NULL, ARG_URL },
                { "transport", required_argument, NULL, ARG_TRANSPORT },
                { "key", required_argument, NULL, ARG_KEY },
                { "key-file", required_argument, NULL, ARG_KEY_FILE },
                { "json", no_argument, NULL, ARG_JSON },
                { "quiet", no_argument, NULL, 'q' },
                { "env", required_argument, NULL, 'e' },
                { "cwd", required_argument, NULL, ARG_CWD },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "request-id", required_argument, NULL, ARG_REQUEST_ID },
                { "stdin", no_argument, NULL, 'i' },
                { "user", required_argument, NULL, ARG_USER },
                { "workspace", required_argument, NULL, ARG_WORKSPACE },
                { "purge", no_argument, NULL, ARG_PURGE },
                { "host", no_argument, NULL, ARG_HOST },
                { "rm", no_argument, NULL, ARG_RM },
                { "offset", required_argument, NULL, ARG_OFFSET },
                { "recursive", no_argument, NULL, 'r' },
                { "progress", no_argument, NULL, ARG_PROGRESS },
                { "no-progress", no_argument, NULL, ARG_NO_PROGRESS },
                { "memory-max", required_argument, NULL, ARG_MEMORY_MAX },
                { "cpu-quota", required_argument, NULL, ARG_CPU_QUOTA },
                { "tasks-max", required_argument, NULL, ARG_TASKS_MAX },
                { "ttl", required_argument, NULL, ARG_TTL },
                { "exec-mode", required_argument, NULL, ARG_EXEC_MODE },
                { "image", required_argument, NULL, ARG_IMAGE },
                { "cancel", no_argument, NULL, ARG_CANCEL },
                { "status", no_argument, NULL, ARG_STATUS },
                { "max-output", required_argument, NULL, ARG_MAX_OUTPUT },
                { "tty", no_argument, NULL, 't' },
                { "jobs", required_argument, NULL, ARG_JOBS },
                { "kill-grace", required_argument, NULL, ARG_KILL_GRACE },
                { "host-path", required_argument, NULL, ARG_HOST_PATH },
                {},
        };
        uint64_t u;
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, stop_at_first ? "+hqe:irt" : "hqe:irt", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("sandboxctl %s\n", PROJECT_VERSION);
                        return 0;
                case ARG_URL:
                        arg_url = optarg;
                        break;
                case ARG_KEY:
                        arg_key = optarg;
                        break;
                case ARG_TRANSPORT:
                        if (!streq(optarg, "dbus") && !streq(optarg, "http"))
                                return log_error_errno(-EINVAL, "--transport= takes dbus or http, not '%s'.", optarg);
                        arg_transport = optarg;
                        break;
                case ARG_KEY_FILE:
                        r = read_key_file(optarg);
                        if (r < 0)
                                return r;
                        break;
                case ARG_JSON:
                        arg_json = true;
                        break;
                case 'q':
                        arg_quiet = true;
                        break;
                case 'e': {
                        size_t n = strv_length(arg_env);
                        char **l;

                        if (!strchr(optarg, '=') || optarg[0] == '=')
                                return log_error_errno(-EINVAL, "--env= takes NAME=VALUE, not '%s'.", optarg);
                        l = realloc(arg_env, (n + 2) * sizeof(char *));
                        if (!l)
                                return log_oom();
                        arg_env = l;
                        if (!(arg_env[n] = strdup(optarg)))
                                return log_oom();
                        arg_env[n + 1] = NULL;
                        break;
                }
                case ARG_CWD:
                        arg_cwd = optarg;
                        break;
                case ARG_TIMEOUT:
                        if (parse_duration(optarg, &u) < 0 || u < USEC_PER_MSEC)
                                return log_error_errno(-EINVAL, "Invalid --timeout= '%s' (say 30s, 500ms, 5min).", optarg);
                        arg_timeout_ms = u / USEC_PER_MSEC;
                        break;
                case ARG_REQUEST_ID:
                        arg_request_id = optarg;
                        break;
                case 'i':
                        arg_stdin = true;
                        break;
                case 't':
                        arg_tty = true;
                        break;
                case ARG_USER:
                        arg_user = optarg;
                        break;
                case ARG_WORKSPACE:
                        arg_workspace = optarg;
                        break;
                case ARG_PURGE:
                        arg_purge = true;
                        break;
                case ARG_HOST:
                        arg_host = true;
                        break;
                case ARG_RM:
                        arg_rm = true;
                        break;
                case ARG_OFFSET:
                        if (parse_uint64(optarg, &arg_offset) < 0)
                                return log_error_errno(-EINVAL, "Invalid --offset= '%s'.", optarg);
                        break;
                case 'r':
                        arg_recursive = true;
                        break;
                case ARG_PROGRESS:
                        arg_progress = 1;
                        break;
                case ARG_NO_PROGRESS:
                        arg_progress = 0;
                        break;
                case ARG_MEMORY_MAX:
                        if (parse_size(optarg, &u) < 0)
                                return log_error_errno(-EINVAL, "Invalid --memory-max= '%s' (say 512M, 2G).", optarg);
                        arg_memory_max = optarg;
                        break;
                case ARG_CPU_QUOTA:
                        if (parse_percent(optarg, &u) < 0 && parse_uint64(optarg, &u) < 0)
                                return log_error_errno(-EINVAL, "Invalid --cpu-quota= '%s' (say 50%%, 200%%).", optarg);
                        arg_cpu_quota = optarg;
                        break;
                case ARG_TASKS_MAX:
                        if (parse_uint64(optarg, &u) < 0 || u == 0)
                                return log_error_errno(-EINVAL, "Invalid --tasks-max= '%s'.", optarg);
                        arg_tasks_max = optarg;
                        break;
                case ARG_TTL:
                        if (parse_duration(optarg, &u) < 0 || u < USEC_PER_SEC)
                                return log_error_errno(-EINVAL, "Invalid --ttl= '%s' (say 10min, 1h).", optarg);
                        arg_ttl_s = u / USEC_PER_SEC;
                        break;
                case ARG_EXEC_MODE:
                        if (exec_mode_from_string(optarg) < 0)
                                return log_error_errno(-EINVAL, "--exec-mode= takes unit or session, not '%s'.", optarg);
                        arg_exec_mode = optarg;
                        break;
                case ARG_IMAGE:
                        if (!image_name_is_valid(optarg))
                                return log_error_errno(-EINVAL, "Invalid --image= '%s': an image name is 1 to 64 of "
                                                       "a-z, 0-9, '_' and '-', starting with a letter or digit.", optarg);
                        arg_image = optarg;
                        break;
                case ARG_CANCEL:
                        arg_drain = 0;
                        break;
                case ARG_STATUS:
                        arg_drain = -1;
                        break;
                case ARG_MAX_OUTPUT:
                        if (parse_size(optarg, &u) < 0 || u > SIZE_MAX / 2)
                                return log_error_errno(-EINVAL, "Invalid --max-output= '%s'.", optarg);
                        arg_max_output = (size_t) u;
                        break;
                case ARG_JOBS:
                        if (parse_uint64(optarg, &u) < 0 || u < 1 || u > 64)
                                return log_error_errno(-EINVAL, "Invalid --jobs= '%s' (1 to 64).", optarg);
                        arg_jobs = (unsigned) u;
                        break;
                case ARG_KILL_GRACE:
                        if (parse_duration(optarg, &u) < 0 || u > 600 * USEC_PER_SEC)
                                return log_error_errno(-EINVAL, "Invalid --kill-grace= '%s' (say 5s; at most 10min).",
                                                       optarg);
                        arg_kill_grace_ms = u / USEC_PER_MSEC;
                        break;
                case ARG_HOST_PATH: {
                        size_t n = strv_length(arg_host_paths);
                        char **l;

                        if (n >= 64)
                                return log_error_errno(-E2BIG, "At most 64 --host-path= options.");
                        l = realloc(arg_host_paths, (n + 2) * sizeof(char *));
                        if (!l)
                                return log_oom();
                        arg_host_paths = l;
                        if (!(arg_host_paths[n] = strdup(optarg)))
                                return log_oom();
                        arg_host_paths[n + 1] = NULL;
                        break;
                }
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }
        return 1;
}

/* "the system bus (io.sandboxd.sandbox1)", "the unix socket ...", "http://...": for messages */
static char *client_description = NULL;
static pthread_mutex_t client_description_lock = PTHREAD_MUTEX_INITIALIZER;

static void free_client_description(void) {
        free(client_description);
}

int connect_client(sandboxd_client **ret) {
        const char *url = arg_url ?: getenv("SANDBOXD_URL");
        const char *key = arg_key ?: getenv("SANDBOXD_KEY");
        const char *transport = arg_transport ?: getenv("SANDBOXD_TRANSPORT");
        sandboxd_client *c = NULL;
        bool bus;
        int r;

        if (transport && *transport && !streq(transport, "dbus") && !streq(transport, "http"))
                return log_error_errno(-EINVAL, "$SANDBOXD_TRANSPORT takes dbus or http, not '%s'.", transport);
        if (url && !*url)
                url = NULL;
        if (key && !*key)
                key = NULL;
        /* a remote sandboxd: HTTP, always; the local one: D-Bus unless told otherwise. If the
         * bus is not there, that is an error, not a reason to try something else behind the
         * caller's back. */
        if (url && transport && streq(transport, "dbus"))
                return log_error_errno(-EPROTONOSUPPORT,
                                       "--url= always talks HTTP; --transport=dbus is for the local sandboxd only.");
        bus = !url && !(transport && streq(transport, "http"));
        if (bus) {
                r = sandboxd_client_new_bus(&c);
                if (r < 0) {
                        log_error_errno(r,
                                        "Cannot connect to the system bus (%s): %m. sandboxctl talks D-Bus to the "
                                        "local sandboxd; use --transport=http for its unix socket instead.",
                                        getenv("DBUS_SYSTEM_BUS_ADDRESS") ?: "unix:path=/run/dbus/system_bus_socket");
                        return -EHOSTUNREACH;
                }
                if (isatty(STDIN_FILENO))
                        (void) sandboxd_client_set_interactive(c, true);
        } else {
                r = sandboxd_client_new(url, key, &c);
                if (r == -EINVAL)
                        return log_error_errno(r, "Invalid --url= '%s' or key: use http://HOST:PORT, https://... or unix:PATH.",
                                               url ?: "");
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the connection to sandboxd: %m");
        }
        /* the MCP server's watcher of subscriptions connects from a thread of its own */
        pthread_mutex_lock(&client_description_lock);
        if (!client_description)
                (void) atexit(free_client_description);
        free(client_description);
        if (bus)
                r = asprintf(&client_description, "the system bus (io.sandboxd.sandbox1)");
        else if (!url || startswith(url, "unix:"))
                r = asprintf(&client_description, "the unix socket %s", url ? url + 5 : SANDBOXD_DEFAULT_SOCKET);
        else
                r = asprintf(&client_description, "%s", url);
        if (r < 0)
                client_description = NULL;
        pthread_mutex_unlock(&client_description_lock);
        if (r < 0) {
                sandboxd_client_free(c);
                return log_oom();
        }
        *ret = c;
        return 0;
}

const char *client_error_message(sandboxd_client *c) {
        const sandboxd_error *e = sandboxd_client_last_error(c);
        return e && e->message[0] ? e->message : "unknown error";
}

void exec_spec_done(ExecSpec *s) {
        strv_free(s->argv);
        strv_free(s->env);
        free(s->cwd);
        free(s->stdin_data);
        free(s->request_id);
        *s = (ExecSpec) {};
}

static int exec_from_spec(sandboxd_client *c, const ExecSpec *s, sandboxd_exec **ret) {
        sandboxd_exec *e = NULL;
        int r;

        r = sandboxd_exec_new(&e);
        if (r < 0)
                return r;
        r = sandboxd_exec_set_argv(e, (const char *const *) s->argv);
        if (r >= 0 && s->cwd)
                r = sandboxd_exec_set_cwd(e, s->cwd);
        for (char **i = s->env; r >= 0 && i && *i; i++) {
                _cleanup_free_ char *name = strndup(*i, strcspn(*i, "="));
                const char *eq = strchr(*i, '=');
                r = !name ? -ENOMEM : !eq ? -EINVAL : sandboxd_exec_set_env(e, name, eq + 1);
        }
        if (r >= 0 && s->timeout_ms > 0)
                r = sandboxd_exec_set_timeout_ms(e, s->timeout_ms);
        if (r >= 0 && s->stdin_stream && s->tty_rows == 0)
                r = sandboxd_exec_set_stdin_stream(e, true);
        else if (r >= 0 && s->has_stdin)
                r = sandboxd_exec_set_stdin(e, s->stdin_data, s->stdin_size);
        if (r >= 0 && s->request_id)
                r = sandboxd_exec_set_request_id(e, s->request_id);
        if (r >= 0 && s->tty_rows > 0)
                r = sandboxd_exec_set_tty(e, s->tty_rows, s->tty_cols);
        if (r >= 0 && s->tty_rows > 0 && s->terminal_fd >= 0)
                r = sandboxd_exec_set_terminal_fd(e, s->terminal_fd);
        /* over D-Bus the command writes straight into our stdout and stderr, unless sandboxd's
         * events are printed (--json). Over HTTP the verbs print the events' output
         * themselves, and learn from each event the offset to attach at should the stream
         * break (output written to fds by the library would not tell them). */
        if (r >= 0 && !s->events && sandboxd_client_is_bus(c) && s->tty_rows == 0)
                r = sandboxd_exec_set_output_fds(e, STDOUT_FILENO, STDERR_FILENO);
        if (r < 0) {
                sandboxd_exec_free(e);
                return r;
        }
        *ret = e;
        return 0;
}

int exec_spec_run(sandboxd_client *c, const char *session, const ExecSpec *spec, sandboxd_event_fn fn, void *userdata,
                  sandboxd_result **ret) {
        sandboxd_exec *e = NULL;
        int r;

        r = exec_from_spec(c, spec, &e);
        if (r < 0)
                return r;
        r = sandboxd_exec_run(c, session, e, fn, userdata, ret);
        sandboxd_exec_free(e);
        return r;
}

int exec_spec_start(sandboxd_client *c, const char *session, const ExecSpec *spec, char **ret_request_id) {
        sandboxd_exec *e = NULL;
        int r;

        r = exec_from_spec(c, spec, &e);
        if (r < 0)
                return r;
        r = sandboxd_exec_start(c, session, e, ret_request_id);
        sandboxd_exec_free(e);
        return r;
}

int log_client_error(sandboxd_client *b, int r, const char *what, ...) {
        const sandboxd_error *e = sandboxd_client_last_error(b);
        char buf[512];
        va_list ap;

        va_start(ap, what);
        (void) vsnprintf(buf, sizeof(buf), what, ap);
        va_end(ap);
        if (e && e->kind == SANDBOXD_ERROR_TRANSPORT)
                return log_error_errno(r, "%s: cannot reach sandboxd on %s: %s", buf, client_description ?: "?", e->message);
        if (e && e->kind == SANDBOXD_ERROR_UNAUTHORIZED)
                return log_error_errno(r, "%s: %s (check --key or $SANDBOXD_KEY)", buf, e->message);
        if (e && e->kind != SANDBOXD_ERROR_NONE && e->message[0])
                return log_error_errno(r, "%s: %s", buf, e->message);
        return log_error_errno(r, "%s: %m", buf);
}

void print_json_text(const char *json) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *pretty = NULL;

        /* pretty when it can be; out of memory, as it came */
        if (isatty(STDOUT_FILENO) && (o = json_tokener_parse(json)))
                pretty = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                   JSON_C_TO_STRING_NOSLASHESCAPE);
        puts(pretty ?: json);
}

bool session_id_looks_valid(const char *s) {
        return session_id_is_valid(s);
}

int check_session_id(const char *id) {
        if (!session_id_looks_valid(id))
                return log_error_errno(-EINVAL, "'%s' is not a session id (NODE_HEX, or 16 hex digits alone; see sandboxctl ls).",
                                       id);
        return 0;
}

char *format_bytes(uint64_t n, char buf[static 32]) {
        static const char units[] = "KMGTPE";
        double v = (double) n;
        int i = -1;

        if (n < 1024) {
                snprintf(buf, 32, "%" PRIu64 "B", n);
                return buf;
        }
        while (v >= 1024 && i < 5) {
                v /= 1024;
                i++;
        }
        snprintf(buf, 32, "%.1f%c", v, units[i]);
        return buf;
}

char *format_timestamp(uint64_t usec, char buf[static 64]) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;

        if (usec == 0 || !localtime_r(&t, &tm)) {
                snprintf(buf, 64, "-");
                return buf;
        }
        strftime(buf, 64, "%Y-%m-%d %H:%M:%S", &tm);
        return buf;
}

static bool verb_is_exec_like(const Verb *v) {
        return v && (v->run == verb_exec || v->run == verb_run || v->run == verb_attach || v->run == verb_shell);
}

int main(int argc, char *argv[]) {
        const Verb *verb = NULL;
        int r, n;

        log_set_prefix(false);

        /* options before the verb, then the verb's own */
        r = parse_options(argc, argv, true);
        if (r <= 0)
                goto finish;
        if (optind >= argc) {
                log_error("Missing command; see sandboxctl --help.");
                r = -EINVAL;
                goto finish;
        }
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(argv[optind], verbs[i].name))
                        verb = &verbs[i];
        if (!verb) {
                log_error("Unknown command '%s'; see sandboxctl --help.", argv[optind]);
                r = -EINVAL;
                goto finish;
        }
        argc -= optind;
        argv += optind;
        r = parse_options(argc, argv, verb->stop_at_first);
        if (r <= 0)
                goto finish;
        /* the verb and its positional arguments, with the options taken out */
        argv[optind - 1] = argv[0];
        argc -= optind - 1;
        argv += optind - 1;
        n = argc - 1;
        if ((unsigned) n < verb->min_args || (verb->max_args != ANY && (unsigned) n > verb->max_args)) {
                bool few = (unsigned) n < verb->min_args;
                unsigned k = few ? verb->min_args : verb->max_args;

                log_error("'%s' takes %s%u argument%s; see sandboxctl --help.", verb->name,
                          verb->min_args == verb->max_args ? ""
                          : few                            ? "at least "
                                                           : "at most ",
                          k, k == 1 ? "" : "s");
                r = -EINVAL;
                goto finish;
        }
        r = verb->run(argc, argv);

finish:
        strv_free(arg_env);
        strv_free(arg_host_paths);
        if (arg_key_buf) {
                explicit_bzero(arg_key_buf, strlen(arg_key_buf));
                free(arg_key_buf);
        }
        if (r >= 0)
                return r;
        return verb_is_exec_like(verb) ? EXIT_SANDBOXCTL_FAILED : EXIT_FAILURE;
}
