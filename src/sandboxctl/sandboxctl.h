/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "libsandboxd.h"
#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(sandboxd_client *, sandboxd_client_free);

/* What to run, as the verbs and the MCP server collect it. */
typedef struct ExecSpec {
        char **argv;
        char *cwd;
        char **env;          /* "NAME=VALUE" */
        uint64_t timeout_ms; /* 0: sandboxd's default */
        char *stdin_data;    /* all of stdin at once, when has_stdin */
        size_t stdin_size;
        bool has_stdin;
        bool stdin_stream;   /* stdin stays open for sandboxd_command_write_stdin() (not with has_stdin) */
        char *request_id;    /* always set by the verbs: they need it to send signals */
        bool events;         /* the caller prints sandboxd's events (--json); else, over D-Bus, the
                              * output goes to our stdout and stderr (sandboxd_exec_set_output_fds()) */
        unsigned tty_rows, tty_cols; /* > 0: on a terminal of this size, stdin streamed */
        int terminal_fd;     /* with those, over D-Bus: our pty's slave, for all three (else -1) */
} ExecSpec;

void exec_spec_done(ExecSpec *s);
/* sandboxd_exec_run() and sandboxd_exec_start() of the spec */
int exec_spec_run(sandboxd_client *c, const char *session, const ExecSpec *spec, sandboxd_event_fn fn, void *userdata,
                  sandboxd_result **ret);
int exec_spec_start(sandboxd_client *c, const char *session, const ExecSpec *spec, char **ret_request_id);
/* The spec of exec and run from the words after the session (options from the arg_ globals). */
int exec_spec_from_words(char **argv, ExecSpec *ret);

/* verb-shell.c: runs spec (NULL: attaches to request_id) on a terminal, with ours. */
int shell_run(sandboxd_client *c, const char *session, ExecSpec *spec, const char *request_id);

/* Exit statuses of exec, run and attach besides the command's own (see sandboxctl(1)) */
#define EXIT_SANDBOXCTL_FAILED 125 /* sandboxctl or sandboxd failed: nothing (more) was learnt */

/* Options (the arg_ globals of a one-shot tool). */
extern bool arg_json;
extern const char *arg_url;
extern const char *arg_key;
extern const char *arg_transport;
extern bool arg_quiet;
extern char **arg_env;
extern const char *arg_cwd;
extern uint64_t arg_timeout_ms;
extern const char *arg_request_id;
extern bool arg_stdin;
extern const char *arg_user;
extern const char *arg_workspace;
extern bool arg_purge;
extern bool arg_rm;
extern bool arg_host; /* port expose: also on a port of 127.0.0.1 of the host */
extern uint64_t arg_offset;
extern bool arg_recursive;
extern int arg_progress; /* -1 auto (stderr is a terminal), 0 no, 1 yes */
extern const char *arg_memory_max;
extern const char *arg_cpu_quota;
extern const char *arg_tasks_max;
extern uint64_t arg_ttl_s;
extern const char *arg_exec_mode; /* NULL: sandboxd's default */
extern const char *arg_image;     /* NULL: sandboxd's default */
extern int arg_drain; /* 1 start, 0 cancel, -1 show */
extern size_t arg_max_output;
extern bool arg_tty;
extern unsigned arg_jobs;          /* mcp: tool calls at once; 0: the default */
extern uint64_t arg_kill_grace_ms;  /* mcp: SIGTERM to SIGKILL on cancel; 0: the default */
extern char **arg_host_paths;       /* mcp: --host-path=DIR[:ro|:rw] as given */

/* A libsandboxd client as the options say (--url/--key, SANDBOXD_URL/SANDBOXD_KEY,
 * --transport, SANDBOXD_TRANSPORT): sandboxd_client_new_bus() for the local sandboxd by
 * default, sandboxd_client_new() for --transport=http and --url. Logs why it failed. */
int connect_client(sandboxd_client **ret);

/* Logs "what: why" from the client's last error, returns r. */
int log_client_error(sandboxd_client *c, int r, const char *what, ...) _printf_(3, 4);
/* The last error's message */
const char *client_error_message(sandboxd_client *c);

/* Prints a JSON text followed by a newline (pretty when stdout is a terminal). */
void print_json_text(const char *json);

bool session_id_looks_valid(const char *s);
/* Logs why id is not a session id: -EINVAL, else 0. */
int check_session_id(const char *id);
char *format_bytes(uint64_t n, char buf[static 32]);
char *format_timestamp(uint64_t usec, char buf[static 64]);

/* Verbs: each returns an exit status (>= 0) or a negative errno (exit status 1). */
int verb_create(int argc, char *argv[]);
int verb_list(int argc, char *argv[]);
int verb_show(int argc, char *argv[]);
int verb_remove(int argc, char *argv[]);
int verb_freeze(int argc, char *argv[]);
int verb_thaw(int argc, char *argv[]);
int verb_exec(int argc, char *argv[]);
int verb_run(int argc, char *argv[]);
int verb_attach(int argc, char *argv[]);
int verb_shell(int argc, char *argv[]);
int verb_signal(int argc, char *argv[]);
int verb_cp(int argc, char *argv[]);
int verb_port(int argc, char *argv[]);
int verb_health(int argc, char *argv[]);
int verb_drain(int argc, char *argv[]);
int verb_image(int argc, char *argv[]);
int verb_mcp(int argc, char *argv[]);

/* run's default scope: --user (or the caller's user name), --workspace (or "default") */
int default_scope(const char **ret_user, const char **ret_workspace);
