/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "config.h"
#include "macro.h"
#include "pid1-gate.h"

/* Thin, typed wrappers around PID 1's D-Bus API: transient units, their state, and
 * the operations sandboxd needs. No policy lives here. Every asynchronous call goes
 * through the Pid1Gate (pid1-gate.h), in the order made: a stop is never overtaken by
 * the start it follows. With a Pid1Call **, the caller can cancel the call until its
 * callback runs (pid1_call_cancel()); the gate sets it to NULL before that. */

typedef struct UnitState {
        char load_state[32];
        char active_state[32];
        char sub_state[32];
        uint32_t job_id;
        char result[32];
        int32_t exec_main_code;
        int32_t exec_main_status;
        uint64_t exec_main_start_usec; /* CLOCK_MONOTONIC */
        uint64_t exec_main_exit_usec;
        uint64_t cpu_usage_nsec;
        uint64_t memory_current;
        uint64_t tasks_current;
        char control_group[512];
        uint32_t main_pid;
} UnitState;

/* Commands run with RemainAfterExit=yes, so that PID 1 keeps their result until sandboxd
 * has read it: a successful one rests in active/exited, a failed one in failed. */
static inline bool unit_state_is_done(const UnitState *s) {
        if (s->job_id != 0)
                return false;
        return streq(s->active_state, "inactive") || streq(s->active_state, "failed") ||
               (streq(s->active_state, "active") && streq(s->sub_state, "exited"));
}

/* What defines a session's sandbox: the same for its command units and its executor unit
 * (append_sandbox() in systemd.c), so that the two cannot drift apart. */
typedef struct SandboxSpec {
        const char *slice;
        const char *user;           /* DynamicUser= name */
        const char *state_directories[3];

        NetworkMode network;
        const char *proxy_socket_unit;   /* mode proxy: the unit whose network namespace commands join */
        const AddressRange *ip_allow, *ip_deny; /* mode host */
        size_t n_ip_allow, n_ip_deny;

        char * const *inaccessible_paths; /* NULL-terminated, each may start with "-" */
        char * const *cgroup_tmpfs;       /* cgroup_session_view(): hide other sessions' cgroups */
        char * const *cgroup_binds;       /* ... and show this session's, read-only */
        const char *userdb_dir;           /* bound at /run/userdb: the scope's user records */
        char * const *read_only_paths;
        char * const *read_write_paths;
        const char *tools_directory;      /* bound read-only at /.tools */
        const char *root_directory;       /* an image's root (RootDirectory=); NULL: the host's */
        uint64_t limit_fsize;             /* UINT64_MAX: none */
} SandboxSpec;

typedef struct CommandUnitSpec {
        SandboxSpec sandbox;
        const char *unit;
        const char *description;
        const char *environment_file; /* root-only: the environment and the command line
                                       * for sandboxd-exec (exec-env.h) */
        const char *working_directory;
        uint64_t runtime_max_usec;  /* USEC_INFINITY: none */
        uint64_t timeout_stop_usec;
        int stdin_fd, stdout_fd, stderr_fd;
} CommandUnitSpec;

/* A session's executor (exec mode "session"): the session's sandbox around
 * sandboxd-executor, which forks the commands into cgroups of its own below its
 * delegated one. */
typedef struct ExecutorUnitSpec {
        SandboxSpec sandbox;
        const char *unit;              /* systemd_executor_unit_name() */
        const char *description;
        const char *working_directory; /* the workspace, commands' default cwd */
        uint64_t timeout_stop_usec;    /* the kill grace */
        const char *listener_dir;      /* sandboxd's listener, bound read-only at EXECUTOR_SOCKET_DIR */
        const char *cgroup_bind;       /* its own cgroup, bound writable (cgroup_executor_bind()) */
} ExecutorUnitSpec;

/* The port the proxy listens on inside a session's network namespace. */
/* The parent of every session slice (units/sandboxd.slice), and home of the proxy sockets. */
#define SANDBOXD_SLICE "sandboxd.slice"
#define PROXY_PORT 3128
#define PROXY_SOCKET_NAME "proxy.sock"

/* Starts sandboxd-<sid>-proxy.socket, listening on 127.0.0.1:PROXY_PORT in a network
 * namespace of its own (with private /tmp and IPC, which commands joining it share), and
 * the systemd-socket-proxyd service it activates, which passes every connection on to
 * socket_dir/PROXY_SOCKET_NAME, sandboxd's proxy. */
int systemd_start_proxy_async(Pid1Gate *g, Pid1Call **ret_call, const char *session_id, const char *slice,
                              const char *socket_dir, unsigned max_connections, sd_bus_message_handler_t cb,
                              void *userdata);
int systemd_proxy_unit_names(const char *session_id, char **ret_socket, char **ret_service);

/* An exposed port (port.h): sandboxd-<sid>-port-<P>.socket, listening on a unix socket
 * (and maybe on 127.0.0.1:host_port of the host), activates sandboxd-<sid>-port-<P>.service,
 * systemd-socket-proxyd as a dynamic user of its own in the network namespace of
 * join_unit, relaying every connection to 127.0.0.1:port there. */
typedef struct PortUnitSpec {
        const char *session_id;
        const char *slice;            /* the session's: the relay runs in it */
        const char *join_unit;        /* the unit that holds the session's network namespace */
        uint16_t port;
        uint16_t host_port;           /* 0: the unix socket only */
        const char *socket_path;
        unsigned max_connections;
} PortUnitSpec;

int systemd_port_unit_names(const char *session_id, uint16_t port, char **ret_socket, char **ret_service);
int systemd_start_port_async(Pid1Gate *g, Pid1Call **ret_call, const PortUnitSpec *spec, sd_bus_message_handler_t cb,
                             void *userdata);

int systemd_subscribe(sd_bus *bus);
/* PID 1's own cgroup (Manager.ControlGroup): "" on a host, a prefix when it runs in a
 * container. Synchronous: once, at start-up. */
int systemd_get_manager_cgroup(sd_bus *bus, char **ret);

int systemd_start_slice_async(Pid1Gate *g, Pid1Call **ret_call, const char *slice, const char *description,
                              const Limits *limits, sd_bus_message_handler_t cb, void *userdata);
int systemd_start_command_async(Pid1Gate *g, Pid1Call **ret_call, const CommandUnitSpec *spec,
                                sd_bus_message_handler_t cb, void *userdata);
int systemd_start_executor_async(Pid1Gate *g, Pid1Call **ret_call, const ExecutorUnitSpec *spec,
                                 sd_bus_message_handler_t cb, void *userdata);
/* "sandboxd-<sid>-exec.service", in the session's slice */
int systemd_executor_unit_name(const char *session_id, char **ret);

int systemd_unit_path(const char *unit, char **ret);
int systemd_match_unit_async(sd_bus *bus, sd_bus_slot **ret_slot, const char *unit_path,
                             sd_bus_message_handler_t cb, void *userdata);

/* Reads the Unit and Service (or Slice) properties of `unit_path` in one GetAll each. The
 * callback gets a message from which systemd_read_unit_state() fills a UnitState. */
int systemd_get_unit_state_async(Pid1Gate *g, Pid1Call **ret_call, const char *unit_path, const char *interface,
                                 sd_bus_message_handler_t cb, void *userdata);
int systemd_read_unit_state(sd_bus_message *reply, UnitState *state);

int systemd_unit_call_async(Pid1Gate *g, const char *unit_path, const char *method, sd_bus_message_handler_t cb,
                            void *userdata);
int systemd_stop_unit_async(Pid1Gate *g, const char *unit, sd_bus_message_handler_t cb, void *userdata);
int systemd_reset_failed_unit_async(Pid1Gate *g, const char *unit, sd_bus_message_handler_t cb, void *userdata);
int systemd_freeze_unit_async(Pid1Gate *g, Pid1Call **ret_call, const char *unit, bool freeze,
                              sd_bus_message_handler_t cb, void *userdata);
/* The reply to Get of the unit's FreezerState ("running", "freezing", "frozen", "thawing"). */
int systemd_get_freezer_state_async(Pid1Gate *g, Pid1Call **ret_call, const char *unit, sd_bus_message_handler_t cb,
                                    void *userdata);
int systemd_set_slice_limits_async(Pid1Gate *g, const char *slice, const Limits *limits, sd_bus_message_handler_t cb,
                                   void *userdata);
/* Units whose names match `pattern` (ListUnitsByPatterns), as a NULL-terminated list. */
int systemd_list_units(sd_bus *bus, const char *pattern, char ***ret_names, char ***ret_active_states);
/* How many processes the unit's cgroup holds, its children's included (GetUnitProcesses):
 * synchronous, for start-up. */
int systemd_count_unit_processes(sd_bus *bus, const char *unit, unsigned *ret);
int systemd_kill_unit_async(Pid1Gate *g, const char *unit, const char *whom, int sig, sd_bus_message_handler_t cb,
                            void *userdata);

/* A user-facing message for an error reply from PID 1. */
const char *systemd_error_message(sd_bus_message *reply);
