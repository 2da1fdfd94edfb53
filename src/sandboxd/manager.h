/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "fdstore.h"
#include "file-ops.h"
#include "list.h"
#include "metrics.h"
#include "observer.h"
#include "output.h"
#include "pid1-gate.h"
#include "store-writer.h"

typedef struct Manager Manager;
typedef struct Session Session;
typedef struct Command Command;
typedef struct Executor Executor;
typedef struct UnitRelease UnitRelease;
typedef struct HttpServer HttpServer;
typedef struct HttpRelayEngine HttpRelayEngine;
typedef struct ApiKey ApiKey;
typedef struct PoolSlot PoolSlot;
typedef struct PolkitQuery PolkitQuery;
typedef struct BusPending BusPending;
typedef struct OutputPipe OutputPipe;
typedef struct TerminalSocket TerminalSocket;
typedef struct Proxy Proxy;
typedef struct ProxyListener ProxyListener;
typedef struct ImageImport ImageImport;

/* A pipe end or proxy socket systemd kept for us in the fd store while sandboxd was away. */
typedef struct StoredFd {
        char *name;     /* as systemd has it: out-<sid>-<n>, err-<sid>-<n>, in-<sid>-<n>, proxy-<sid> */
        FdStoreName id; /* what it says */
        int fd;
} StoredFd;

#define HTTP_SERVERS_MAX 8

/* Who a uid is, as NSS said a moment ago (auth_uid_caller()): at most UID_CACHE_MAX, each
 * for UID_CACHE_USEC, all forgotten when /etc/passwd or /etc/group change. */
#define UID_CACHE_MAX 64U
#define UID_CACHE_USEC (10 * USEC_PER_SEC)
typedef struct UidCacheEntry {
        uid_t uid;
        char *name;
        bool member, admin;
        uint64_t until; /* CLOCK_MONOTONIC; 0: unused */
} UidCacheEntry;

/* The uid of a D-Bus sender, as the bus said (bus_caller_identity()): a unique name is
 * never given again on a bus, so it cannot go stale, only be forgotten. */
#define SENDER_CACHE_MAX 128U
#define SENDER_CACHE_USEC (60 * USEC_PER_SEC)
typedef struct SenderCacheEntry {
        char *sender;
        uid_t uid;
        uint64_t until;
} SenderCacheEntry;

struct Manager {
        Config config;
        sd_event *event;
        sd_bus *bus;
        Pid1Gate *pid1;         /* every call to PID 1 that is not at start-up */
        StoreWriter *writer;    /* writes the records, off the loop */
        FileOps *file_ops;      /* the file API's work and the disk usage, off the loop */

        HttpServer *http[HTTP_SERVERS_MAX];
        size_t n_http;
        HttpRelayEngine *relay_engine; /* the relays to exposed ports (http-relay.c), made at the first */
        ApiKey *keys;
        size_t n_keys;
        UidCacheEntry uid_cache[UID_CACHE_MAX];
        struct stat uid_cache_passwd, uid_cache_group; /* what the entries were asked under */
        SenderCacheEntry sender_cache[SENDER_CACHE_MAX];

        uint8_t host_ports_used[65536 / 8]; /* a bit per TCP port that an exposed port holds on the host (port.c) */
        Session *sessions;       /* the list, newest first: session.c adds, removes and finds them */
        Session *sessions_by_id; /* the same in a uthash table by id (hh of Session) */
        Session *sessions_by_scope; /* the starting or active ones by workspace_host_dir (hh_scope) */
        unsigned n_live_sessions; /* those not closed (session_set_state()) */
        unsigned n_pool_in_use;   /* those not closed or failed whose slice came from the pool */
        PoolSlot *pool;
        StoredFd *stored_fds;
        size_t n_stored_fds;
        char *state_dir;   /* $STATE_DIRECTORY, /var/lib/sandboxd */
        char *runtime_dir; /* $RUNTIME_DIRECTORY, /run/sandboxd */
        char *cgroup_root; /* PID 1's cgroup: "" on a host (systemd_get_manager_cgroup()) */
        Metrics metrics;
        bool draining;     /* POST /v1/drain: no new work; exit once the running commands end */
        unsigned n_http_waiting; /* suspended HTTP requests (http_suspend()) */
        bool stopping;     /* SIGTERM: waiting requests answered, the loop ends once they are sent */
        sd_event_source *stop_defer, *stop_timer;
        unsigned n_connections;
        unsigned n_running;
        unsigned n_starting;    /* commands asked of PID 1, not yet answered */
        UnitRelease *releases;  /* units of finished commands, until PID 1 can collect them */
        unsigned n_releases;
        SpoolAccount spool;     /* every command's spool files (SpoolMax=) */

        Proxy *proxy;                /* the egress proxy of sessions in mode proxy */
        ImageImport *image_imports;  /* imports of images under way (image-import.c) */

        struct {
                const Observer *observer;
                void *userdata;
        } observers[OBSERVERS_MAX]; /* who is told of sessions and commands (observer.h) */
        size_t n_observers;

        PolkitQuery *polkit_queries; /* questions to polkit, and their answers */
        BusPending *bus_pending;     /* D-Bus calls answered later */
        unsigned n_bus_waiting;      /* how many (bus-api.c) */
        unsigned n_polkit_waiting;   /* D-Bus calls whose question to polkit is not answered (polkit.c) */
        OutputPipe *output_pipes;    /* commands' events into pipes of D-Bus clients (Attach()) */
        unsigned n_output_pipes;
        unsigned n_terminals;        /* attached terminals (terminal.h), of every session */
        TerminalSocket *terminal_sockets;        /* terminals of D-Bus clients (OpenTerminal()) */
        bool bus_name_releasing;     /* exiting when idle: the name goes first */

        sd_event_source *idle_timer;
        sd_event_source *pool_timer; /* a deferred pool_fill() */
        uint64_t start_realtime_usec, start_monotonic_usec;
        bool foreground;
};

int manager_new(Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

int manager_load_config(Manager *m, const char *path);

/* Re-evaluates whether the daemon is idle and arms or disarms the exit timer. */
void manager_check_idle(Manager *m);
/* Drain: refuse new sessions and commands, let running commands finish, then exit. It lasts
 * across activations (a flag file in /run/sandboxd) until undone. */
int manager_set_draining(Manager *m, bool draining);
/* At start-up: draining again if the flag file of a drain is there. */
void manager_resume_draining(Manager *m);
bool manager_is_idle(Manager *m);

/* Hands over (and forgets) the stored fds of command <sid>-<n>: stdout, stderr, stdin. */
void manager_take_stored_fds(Manager *m, const char *sid, unsigned n, int ret_fds[3]);
/* The stored fd of that name, or -EBADF */
int manager_take_stored_fd(Manager *m, const char *name);

/* Adds an observer (observer.h): told of every change from now on, until sandboxd exits.
 * -ENOSPC past OBSERVERS_MAX. */
int manager_add_observer(Manager *m, const Observer *o, void *userdata);
/* What the core tells the observers. */
void manager_notify_session_added(Manager *m, Session *s);
void manager_notify_session_changed(Manager *m, Session *s, unsigned what);
void manager_notify_session_removed(Manager *m, Session *s);
void manager_notify_command_changed(Manager *m, Command *c);
void manager_notify_command_finished(Manager *m, Command *c);
