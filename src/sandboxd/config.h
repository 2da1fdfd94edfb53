/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "validate.h"

#include "macro.h"
#include "net-policy.h"
#include "parse-util.h"
#include "request.h"

#define SANDBOXD_CONFIG_FILE SYSCONFDIR "/sandboxd/sandboxd.conf"

typedef struct Limits {
        uint64_t memory_max;        /* bytes */
        uint64_t cpu_quota_percent; /* 100 = one CPU */
        uint64_t tasks_max;
} Limits;

typedef enum PoolProfile {
        POOL_SHARED, /* slices prepared ahead: sessions start without waiting for PID 1 */
        POOL_LOCAL,  /* everything on demand: nothing idles */
        _POOL_PROFILE_MAX,
        _POOL_PROFILE_INVALID = -EINVAL,
} PoolProfile;

const char *pool_profile_to_string(PoolProfile p);

typedef struct Config {
        /* [Node] */
        char node_name[NODE_NAME_MAX + 1]; /* Name=; "" until set: config_default_node_name() */

        /* [Daemon] */
        uint64_t idle_exit_usec; /* 0: never exit when idle */

        /* [HTTP] */
        uint64_t max_body_bytes;
        unsigned max_connections;        /* on each listening socket */
        unsigned max_connections_per_ip; /* on TCP; 0: no limit */
        unsigned connection_timeout_sec;
        unsigned max_unauthenticated;    /* TCP connections without an authenticated request yet */
        uint64_t authentication_timeout_usec; /* to send one, from the connection's start */
        char *admin_tenants; /* space-separated tenant names */
        char *admin_group;   /* [Daemon] AdminGroup=: its members manage every session; NULL: none */

        /* [Session]: defaults and the ceiling a request may ask for */
        Limits session_limits;
        Limits session_limits_max;
        uint64_t idle_timeout_usec;     /* pushed back by activity and running commands */
        uint64_t max_idle_timeout_usec; /* the most a request's ttl_s may ask for */
        uint64_t max_lifetime_usec;     /* hard limit from creation */
        uint64_t retain_closed_usec;    /* how long results of a closed session stay */
        unsigned max_sessions_per_tenant; /* not closed, of one API tenant */
        unsigned max_sessions_per_user;   /* not closed, created by one local uid other than root */
        ExecMode default_exec_mode;       /* ExecMode=: of sessions that do not ask */

        /* [Pool] */
        PoolProfile pool_profile;
        unsigned pool_size;
        unsigned pool_min_ready;

        /* [Command] */
        uint64_t default_timeout_usec;
        uint64_t max_timeout_usec;
        uint64_t kill_grace_usec; /* SIGTERM to SIGKILL on timeout or stop */
        uint64_t output_max_bytes; /* per stream, kept for replay */
        unsigned max_commands_per_session;  /* kept: past it the oldest finished one goes */
        unsigned max_running_per_session;   /* running or starting */
        uint64_t spool_max_per_session;     /* bytes of a session's spool files */
        uint64_t spool_max;                 /* bytes of every spool file together */
        char *path;                /* PATH inside commands and for resolving argv[0] */

        /* [Files] */
        uint64_t max_file_bytes; /* one upload; UINT64_MAX: no limit */

        /* [Network] */
        NetworkMode default_network_mode; /* none or proxy */
        char **host_mode_tenants;         /* who may ask for mode host */
        char **denied_domains;            /* DefaultDeniedDomains=: the baseline every session gets */
        char **allowed_domains;           /* AllowedDomains=: non-empty switches on allow-list mode */
        AddressRange *proxy_allowed;      /* exceptions to the ranges the proxy refuses */
        size_t n_proxy_allowed;
        AddressRange *proxy_denied;       /* more ranges the proxy refuses */
        size_t n_proxy_denied;
        AddressRange *ip_allow;           /* IPAddressAllow= of commands in mode host */
        size_t n_ip_allow;
        AddressRange *ip_deny;            /* IPAddressDeny= of commands in mode host */
        size_t n_ip_deny;
        unsigned proxy_max_connections;             /* in total */
        unsigned proxy_max_connections_per_session;
        unsigned proxy_max_lookups;                 /* name lookups in flight, in total */
        unsigned proxy_max_lookups_per_session;
        uint64_t proxy_connect_timeout_usec;
        uint64_t proxy_idle_timeout_usec;

        /* [Ports]: exposing TCP ports of a session (port.h) */
        uint16_t port_min, port_max;           /* Range=: what a session may expose */
        uint16_t host_port_min, host_port_max; /* HostRange=: where sandboxd picks host ports from */
        unsigned max_ports_per_session;        /* MaxPerSession= */
        unsigned port_max_connections;         /* MaxConnections=: of each exposed port */

        /* [Sandbox]: the file system commands see */
        char **allow_read;   /* ReadOnlyPaths= */
        char **allow_write;  /* ReadWritePaths=, beyond the workspace, home and TMPDIR */
        char **deny_read;    /* InaccessiblePaths=, beyond the built-in ones */
        char **deny_write;   /* ReadOnlyPaths= */
        char *tools_directory; /* bound read-only at /.tools */
        char *images_directory; /* [Images] Directory=: where images live (images.h) */
        char *default_image;    /* [Images] Default=: of sessions that do not ask; NULL: the host's root */
        uint64_t image_max_bytes; /* [Images] MaxSize=: the regular file bytes of an import */
        uint64_t limit_fsize;  /* LimitFSIZE=; UINT64_MAX: none */
} Config;

/* The paths no command may see, whatever the config says: credentials of the host,
 * sandboxd's own sockets and records, the system bus. NULL-terminated. */
extern const char *const config_builtin_inaccessible[];

bool config_tenant_may_use_host_network(const Config *c, const char *tenant);

/* The name of a node whose [Node] Name= is not set: "n" and the first 8 hex digits of the
 * machine id hashed for sandboxd (sd_id128_get_machine_app_specific()), the same on every
 * start on this machine, and not the machine id itself. */
int config_default_node_name(char ret[static NODE_NAME_MAX + 1]);

void config_init(Config *c);
void config_done(Config *c);

/* Loads `path` (missing is fine) and then `path`.d/ *.conf in lexical order, later files
 * overriding earlier ones, then config_check(). Invalid values are errors: *ret_error says
 * where and why. Unknown keys are reported through `warn` and otherwise ignored. */
int config_load(Config *c, const char *path, void (*warn)(const char *msg), char **ret_error);

/* The text of one file, `name` in messages, on top of *c. Lines longer than inih reads at
 * once, NUL bytes and invalid values are errors (-EINVAL, *ret_error says where and why).
 * Pure: tests/fuzz/fuzz-config.c fuzzes it. */
int config_parse(Config *c, const char *name, const char *text, size_t size, void (*warn)(const char *msg),
                 char **ret_error);
/* After the last file: the defaults within the ceilings, and the like. */
int config_check(const Config *c, char **ret_error);

/* A config file larger than this is refused. */
#define CONFIG_FILE_MAX (1024 * 1024)
