/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <stdarg.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include "exec-env.h"
#include "validate.h"
#include "executor-proto.h"
#include "log.h"
#include "systemd.h"

#define SYSTEMD_DEST "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"

/* A method call of PID 1 through the gate; types and the arguments as sd_bus_message_append(). */
static int call_method(Pid1Gate *g, Pid1Call **ret_call, const char *path, const char *interface,
                       const char *member, sd_bus_message_handler_t cb, void *userdata, const char *types, ...) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(pid1_gate_bus(g), &m, SYSTEMD_DEST, path, interface, member);
        if (r < 0)
                return r;
        if (types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
                if (r < 0)
                        return r;
        }
        return pid1_call(g, ret_call, m, cb, userdata);
}

int systemd_subscribe(sd_bus *bus) {
        /* PID 1 only sends PropertiesChanged to clients that subscribed. */
        return sd_bus_call_method_async(bus, NULL, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "Subscribe",
                                        NULL, NULL, NULL);
}

int systemd_get_manager_cgroup(sd_bus *bus, char **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        char *cg = NULL;
        int r;

        r = sd_bus_get_property_string(bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "ControlGroup", &error, &cg);
        if (r < 0)
                return r;
        /* "/" would double the slash in "<root>/sandboxd.slice" */
        if (streq(cg, "/"))
                cg[0] = 0;
        *ret = cg;
        return 0;
}

int systemd_unit_path(const char *unit, char **ret) {
        return sd_bus_path_encode(SYSTEMD_PATH "/unit", unit, ret);
}

static int append_bool(sd_bus_message *m, const char *name, int b) {
        return sd_bus_message_append(m, "(sv)", name, "b", b);
}

static int append_string(sd_bus_message *m, const char *name, const char *s) {
        return sd_bus_message_append(m, "(sv)", name, "s", s);
}

static int append_u64(sd_bus_message *m, const char *name, uint64_t v) {
        return sd_bus_message_append(m, "(sv)", name, "t", v);
}

static int append_strv(sd_bus_message *m, const char *name, const char * const *l, size_t n) {
        int r;

        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", name);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'v', "as");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'a', "s");
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && l[i]; i++) {
                r = sd_bus_message_append(m, "s", l[i]);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

static int new_start_transient(sd_bus *bus, const char *unit, sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                           "StartTransientUnit");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

static int finish_start_transient(Pid1Gate *g, sd_bus_message *m, Pid1Call **ret_call,
                                  sd_bus_message_handler_t cb, void *userdata) {
        int r;

        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "a(sa(sv))", 0); /* no auxiliary units */
        if (r < 0)
                return r;
        return pid1_call(g, ret_call, m, cb, userdata);
}

int systemd_start_slice_async(Pid1Gate *g, Pid1Call **ret_call, const char *slice, const char *description,
                              const Limits *limits, sd_bus_message_handler_t cb, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = new_start_transient(pid1_gate_bus(g), slice, &m);
        if (r < 0)
                return r;

        if ((r = append_string(m, "Description", description)) < 0 ||
            (r = append_string(m, "CollectMode", "inactive-or-failed")) < 0 ||
            (r = append_bool(m, "MemoryAccounting", true)) < 0 ||
            (r = append_bool(m, "CPUAccounting", true)) < 0 ||
            (r = append_bool(m, "TasksAccounting", true)) < 0 ||
            (r = append_bool(m, "IOAccounting", true)) < 0 ||
            (r = append_u64(m, "MemoryMax", limits->memory_max)) < 0 ||
            (r = append_u64(m, "MemorySwapMax", 0)) < 0 ||
            (r = append_u64(m, "CPUQuotaPerSecUSec", limits->cpu_quota_percent * USEC_PER_SEC / 100)) < 0 ||
            (r = append_u64(m, "TasksMax", limits->tasks_max)) < 0)
                return r;

        return finish_start_transient(g, m, ret_call, cb, userdata);
}

/* ExecStart= is sandboxd-exec alone: the command line is in the environment file, out of
 * the world-readable unit file, and nothing in it for PID 1 to expand ($VAR) or, after a
 * daemon-reload, to misread (systemd 252 cannot read ExecStartEx= or "$" back). */
static int append_exec_start(sd_bus_message *m) {
        return sd_bus_message_append(m, "(sv)", "ExecStart", "a(sasb)", 1, SANDBOXD_EXEC_PATH, 1, "sandboxd-exec",
                                     false);
}

static int append_syscall_filter(sd_bus_message *m) {
        int r;

        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "SystemCallFilter");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "(bas)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'r', "bas");
        if (r >= 0)
                r = sd_bus_message_append(m, "b", 1); /* an allow list */
        if (r >= 0)
                r = sd_bus_message_append(m, "as", 1, "@system-service");
        for (int i = 0; i < 3 && r >= 0; i++)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;

        /* Deny the privileged part of @system-service (chown, setuid, ...), and io_uring: its
         * operations (socket, openat, ...) run in the kernel where no seccomp filter sees them,
         * so they would get around RestrictAddressFamilies= and RestrictSUIDSGID=. EPERM rather
         * than SIGSYS: programs that try io_uring fall back to plain system calls. */
        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "SystemCallFilter");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "(bas)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'r', "bas");
        if (r >= 0)
                r = sd_bus_message_append(m, "b", 0);
        if (r >= 0)
                r = sd_bus_message_append(m, "as", 4, "@privileged", "io_uring_setup", "io_uring_enter",
                                          "io_uring_register");
        for (int i = 0; i < 3 && r >= 0; i++)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "(sv)", "SystemCallErrorNumber", "i", (int32_t) EPERM);
        return r;
}

static int append_address_families(sd_bus_message *m) {
        int r;

        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "RestrictAddressFamilies");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "(bas)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'r', "bas");
        if (r >= 0)
                r = sd_bus_message_append(m, "b", 1);
        if (r >= 0)
                r = sd_bus_message_append(m, "as", 3, "AF_UNIX", "AF_INET", "AF_INET6");
        for (int i = 0; i < 3 && r >= 0; i++)
                r = sd_bus_message_close_container(m);
        return r;
}

/* IPAddressAllow=/IPAddressDeny=: enforced by PID 1 with a BPF program on the unit's cgroup. */
static int append_ip_ranges(sd_bus_message *m, const char *name, const AddressRange *l, size_t n) {
        int r;

        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", name);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "a(iayu)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(iayu)");
        for (size_t i = 0; i < n && r >= 0; i++) {
                r = sd_bus_message_open_container(m, 'r', "iayu");
                if (r >= 0)
                        r = sd_bus_message_append(m, "i", (int32_t) l[i].family);
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', l[i].addr, l[i].family == AF_INET ? 4 : 16);
                if (r >= 0)
                        r = sd_bus_message_append(m, "u", (uint32_t) l[i].prefixlen);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        for (int i = 0; i < 3 && r >= 0; i++)
                r = sd_bus_message_close_container(m);
        return r;
}

static int append_ip_keyword(sd_bus_message *m, const char *name, const char *keywords) {
        _cleanup_free_ AddressRange *l = NULL;
        size_t n = 0;
        int r;

        r = address_ranges_parse(keywords, &l, &n);
        if (r < 0)
                return r;
        return append_ip_ranges(m, name, l, n);
}

static int append_network(sd_bus_message *m, const SandboxSpec *s) {
        int r;

        switch (s->network) {
        case NETWORK_HOST:
                if ((r = append_bool(m, "PrivateNetwork", false)) < 0 ||
                    (r = append_ip_ranges(m, "IPAddressDeny", s->ip_deny, s->n_ip_deny)) < 0 ||
                    (r = append_ip_ranges(m, "IPAddressAllow", s->ip_allow, s->n_ip_allow)) < 0)
                        return r;
                return 0;
        case NETWORK_PROXY:
                /* The proxy socket's namespace: loopback only, where systemd-socket-proxyd
                 * listens; After= and Requires= make sure it exists before we join it. */
                if ((r = append_bool(m, "PrivateNetwork", true)) < 0 ||
                    (r = append_strv(m, "JoinsNamespaceOf", (const char *[]) { s->proxy_socket_unit }, 1)) < 0 ||
                    (r = append_strv(m, "Requires", (const char *[]) { s->proxy_socket_unit }, 1)) < 0 ||
                    (r = append_strv(m, "After", (const char *[]) { s->proxy_socket_unit }, 1)) < 0 ||
                    (r = append_ip_keyword(m, "IPAddressDeny", "any")) < 0 ||
                    (r = append_ip_keyword(m, "IPAddressAllow", "localhost")) < 0)
                        return r;
                return 0;
        default:
                if ((r = append_bool(m, "PrivateNetwork", true)) < 0 ||
                    (r = append_ip_keyword(m, "IPAddressDeny", "any")) < 0)
                        return r;
                return 0;
        }
}

/* a(ss): TemporaryFileSystem= */
static int append_tmpfs(sd_bus_message *m, const char *path, const char *options) {
        return sd_bus_message_append(m, "(sv)", "TemporaryFileSystem", "a(ss)", 1, path, options);
}

/* a(ssbt): BindPaths=, BindReadOnlyPaths= */
static int append_bind(sd_bus_message *m, const char *name, const char *source, const char *dest, bool ignore_missing) {
        return sd_bus_message_append(m, "(sv)", name, "a(ssbt)", 1, source, dest, ignore_missing, (uint64_t) MS_REC);
}

/* A session's image: its root, read-only (ProtectSystem=strict applies inside it as it does to
 * the host's), with sandboxd's own programs bound in at the paths ExecStart= names (they need
 * only libc). Every directory that gets a mount point below it is a tmpfs of the unit's own
 * first: PID 1 creates missing mount points in the image's tree, and the names of workspaces
 * (tenant, user, workspace) must not stay behind in an image that other sessions share. */
static int append_root(sd_bus_message *m, const SandboxSpec *s) {
        int r;

        if (!s->root_directory)
                return 0;
        if ((r = append_string(m, "RootDirectory", s->root_directory)) < 0 ||
            (r = append_bool(m, "MountAPIVFS", true)) < 0 ||
            (r = append_tmpfs(m, "/var/lib/sandboxd", "mode=0755,nosuid,nodev")) < 0 ||
            (r = append_tmpfs(m, "/run", "mode=0755,nosuid,nodev")) < 0 ||
            (r = append_bind(m, "BindReadOnlyPaths", SANDBOXD_EXEC_PATH, SANDBOXD_EXEC_PATH, false)) < 0 ||
            (r = append_bind(m, "BindReadOnlyPaths", SANDBOXD_EXECUTOR_PATH, SANDBOXD_EXECUTOR_PATH, true)) < 0)
                return r;
        /* mode host resolves names itself: the host's resolver configuration */
        if (s->network == NETWORK_HOST &&
            (r = append_bind(m, "BindReadOnlyPaths", "/etc/resolv.conf", "/etc/resolv.conf", true)) < 0)
                return r;
        return 0;
}

static int append_filesystem(sd_bus_message *m, const SandboxSpec *s) {
        int r;

        if ((r = append_root(m, s)) < 0)
                return r;

        if ((r = append_strv(m, "InaccessiblePaths", (const char * const *) s->inaccessible_paths, SIZE_MAX)) < 0 ||
            (r = append_strv(m, "ReadOnlyPaths", (const char * const *) s->read_only_paths, SIZE_MAX)) < 0 ||
            (r = append_strv(m, "ReadWritePaths", (const char * const *) s->read_write_paths, SIZE_MAX)) < 0)
                return r;
        /* /dev/shm and /run/lock are the host's, world-writable, even with PrivateDevices=:
         * one of the command's own, and an empty read-only one. */
        if ((r = append_tmpfs(m, "/dev/shm", "mode=1777,nosuid,nodev")) < 0 ||
            (r = append_tmpfs(m, "/run/lock", "ro")) < 0)
                return r;
        if (s->tools_directory && (r = append_bind(m, "BindReadOnlyPaths", s->tools_directory, "/.tools", true)) < 0)
                return r;
        /* PID 1's userdb socket would list every scope's user: an empty directory instead,
         * and the scope's own records as drop-ins (scope_userdb_write()). */
        if (s->userdb_dir && ((r = append_tmpfs(m, "/run/systemd/userdb", "ro,mode=0755")) < 0 ||
                              (r = append_bind(m, "BindReadOnlyPaths", s->userdb_dir, EXEC_USERDB_DIR, false)) < 0))
                return r;
        for (size_t i = 0; s->cgroup_tmpfs && s->cgroup_tmpfs[i]; i++)
                if ((r = append_tmpfs(m, s->cgroup_tmpfs[i], "ro,mode=0755")) < 0)
                        return r;
        for (size_t i = 0; s->cgroup_binds && s->cgroup_binds[i]; i++)
                if ((r = append_bind(m, "BindReadOnlyPaths", s->cgroup_binds[i], s->cgroup_binds[i], true)) < 0)
                        return r;
        if (s->limit_fsize != UINT64_MAX &&
            ((r = append_u64(m, "LimitFSIZE", s->limit_fsize)) < 0 || (r = append_u64(m, "LimitFSIZESoft", s->limit_fsize)) < 0))
                return r;
        return 0;
}

/* The hardening every unit sandboxd makes to run untrusted code shares (the brief's list). */
static int append_hardening(sd_bus_message *m) {
        int r;

        if ((r = append_string(m, "ProtectSystem", "strict")) < 0 ||
            (r = append_string(m, "ProtectHome", "yes")) < 0 ||
            (r = append_bool(m, "PrivateTmp", true)) < 0 ||
            (r = append_bool(m, "PrivateDevices", true)) < 0 ||
            (r = append_bool(m, "PrivateIPC", true)) < 0 ||
            (r = append_bool(m, "NoNewPrivileges", true)) < 0 ||
            (r = append_u64(m, "CapabilityBoundingSet", 0)) < 0 ||
            (r = append_syscall_filter(m)) < 0 ||
            (r = append_strv(m, "SystemCallArchitectures", (const char *[]) { "native" }, 1)) < 0 ||
            (r = append_u64(m, "RestrictNamespaces", 0)) < 0 ||
            (r = append_bool(m, "RestrictSUIDSGID", true)) < 0 ||
            (r = append_bool(m, "RestrictRealtime", true)) < 0 ||
            (r = append_bool(m, "LockPersonality", true)) < 0 ||
            (r = append_bool(m, "ProtectKernelTunables", true)) < 0 ||
            (r = append_bool(m, "ProtectKernelModules", true)) < 0 ||
            (r = append_bool(m, "ProtectKernelLogs", true)) < 0 ||
            (r = append_bool(m, "ProtectControlGroups", true)) < 0 ||
            (r = append_bool(m, "ProtectClock", true)) < 0 ||
            (r = append_bool(m, "ProtectHostname", true)) < 0 ||
            (r = append_string(m, "ProtectProc", "invisible")) < 0 ||
            (r = append_string(m, "ProcSubset", "pid")) < 0)
                return r;
        return append_string(m, "DevicePolicy", "closed");
}

/* Everything that defines a session's sandbox, for its command units and its executor
 * alike: whatever is added here reaches both. */
static int append_sandbox(sd_bus_message *m, const SandboxSpec *s) {
        size_t n_state = 0;
        int r;

        while (n_state < ELEMENTSOF(s->state_directories) && s->state_directories[n_state])
                n_state++;

        if ((r = append_string(m, "Slice", s->slice)) < 0 ||
            (r = append_bool(m, "DynamicUser", true)) < 0 ||
            (r = append_string(m, "User", s->user)) < 0 ||
            (r = append_strv(m, "StateDirectory", s->state_directories, n_state)) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "StateDirectoryMode", "u", (uint32_t) 0700)) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "UMask", "u", (uint32_t) 0077)) < 0 ||
            (r = append_bool(m, "CPUAccounting", true)) < 0 ||
            (r = append_bool(m, "MemoryAccounting", true)) < 0 ||
            (r = append_bool(m, "TasksAccounting", true)) < 0 ||
            (r = append_bool(m, "IOAccounting", true)) < 0)
                return r;

        /* The default hardening of the architecture brief. */
        if ((r = append_hardening(m)) < 0 ||
            (r = append_u64(m, "AmbientCapabilities", 0)) < 0 ||
            (r = append_string(m, "KeyringMode", "private")) < 0 ||
            (r = append_bool(m, "RemoveIPC", true)) < 0 ||
            (r = append_address_families(m)) < 0 ||
            (r = append_network(m, s)) < 0 ||
            (r = append_filesystem(m, s)) < 0)
                return r;
        return 0;
}

int systemd_start_command_async(Pid1Gate *g, Pid1Call **ret_call, const CommandUnitSpec *s,
                                sd_bus_message_handler_t cb, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = new_start_transient(pid1_gate_bus(g), s->unit, &m);
        if (r < 0)
                return r;

        if ((r = append_string(m, "Description", s->description)) < 0 ||
            (r = append_string(m, "Type", "exec")) < 0 ||
            (r = append_bool(m, "AddRef", true)) < 0 ||
            (r = append_bool(m, "RemainAfterExit", true)) < 0 ||
            (r = append_exec_start(m)) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "EnvironmentFiles", "a(sb)", 1, s->environment_file, false)) < 0 ||
            (r = append_string(m, "WorkingDirectory", s->working_directory)) < 0 ||
            (r = append_u64(m, "RuntimeMaxUSec", s->runtime_max_usec)) < 0 ||
            /* setting up the sandbox counts against the command's time, not the host's
             * DefaultTimeoutStartSec= (on a loaded host it can take longer) */
            (r = append_u64(m, "TimeoutStartUSec", s->runtime_max_usec)) < 0 ||
            (r = append_u64(m, "TimeoutStopUSec", s->timeout_stop_usec)) < 0 ||
            (r = append_string(m, "KillMode", "control-group")) < 0)
                return r;

        /* stdio: the other ends stay with sandboxd */
        if ((r = sd_bus_message_append(m, "(sv)", "StandardInputFileDescriptor", "h", s->stdin_fd)) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "StandardOutputFileDescriptor", "h", s->stdout_fd)) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "StandardErrorFileDescriptor", "h", s->stderr_fd)) < 0)
                return r;

        r = append_sandbox(m, &s->sandbox);
        if (r < 0)
                return r;

        return finish_start_transient(g, m, ret_call, cb, userdata);
}

int systemd_executor_unit_name(const char *session_id, char **ret) {
        if (!session_id || !ret)
                return -EINVAL;
        return asprintf(ret, "sandboxd-%s-exec.service", session_id) < 0 ? -ENOMEM : 0;
}

int systemd_start_executor_async(Pid1Gate *g, Pid1Call **ret_call, const ExecutorUnitSpec *s,
                                 sd_bus_message_handler_t cb, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        if (!s->unit || !s->working_directory || !s->listener_dir || !s->cgroup_bind)
                return -EINVAL;

        r = new_start_transient(pid1_gate_bus(g), s->unit, &m);
        if (r < 0)
                return r;

        /* No RuntimeMaxSec=: it lives as long as its session. No AddRef=: PID 1 tracks each
         * reference with a match rule of its own on the bus, and a host has many more
         * sessions than the 512 rules dbus-daemon allows a connection; sandboxd learns of
         * the executor's end from its process (a pidfd) instead. Commands get their own stdio
         * from sandboxd with each request; the executor's stdout has nothing to say, and its
         * stderr goes to the journal so that its errors can be seen. */
        if ((r = append_string(m, "Description", s->description)) < 0 ||
            (r = append_string(m, "Type", "exec")) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "ExecStart", "a(sasb)", 1, SANDBOXD_EXECUTOR_PATH, 1,
                                       "sandboxd-executor", false)) < 0 ||
            (r = append_string(m, "WorkingDirectory", s->working_directory)) < 0 ||
            (r = append_u64(m, "TimeoutStopUSec", s->timeout_stop_usec)) < 0 ||
            (r = append_string(m, "KillMode", "control-group")) < 0 ||
            /* It makes a cgroup per command below its own; it is the dynamic user's to write. */
            (r = append_bool(m, "Delegate", true)) < 0 ||
            /* An OOM kill of one command must not stop the unit, and with it the session
             * (cgroup v2 counts OOM kills of the whole subtree). */
            (r = append_string(m, "OOMPolicy", "continue")) < 0 ||
            /* The kernel's OOM killer takes a command before the executor; commands start at 0
             * again and cannot go below -500 without CAP_SYS_RESOURCE. */
            (r = sd_bus_message_append(m, "(sv)", "OOMScoreAdjust", "i", (int32_t) -500)) < 0 ||
            (r = append_string(m, "StandardInput", "null")) < 0 ||
            (r = append_string(m, "StandardOutput", "null")) < 0 ||
            (r = append_string(m, "StandardError", "journal")) < 0)
                return r;

        r = append_sandbox(m, &s->sandbox);
        if (r < 0)
                return r;

        /* After append_sandbox(): the writable bind of its own cgroup lies below the read-only
         * view of the session's cgroups, and a missing one must fail the start. */
        if ((r = append_bind(m, "BindReadOnlyPaths", s->listener_dir, EXECUTOR_SOCKET_DIR, false)) < 0 ||
            (r = append_bind(m, "BindPaths", s->cgroup_bind, s->cgroup_bind, false)) < 0)
                return r;

        return finish_start_transient(g, m, ret_call, cb, userdata);
}

int systemd_proxy_unit_names(const char *session_id, char **ret_socket, char **ret_service) {
        _cleanup_free_ char *sock = NULL, *svc = NULL;

        if (asprintf(&sock, "sandboxd-%s-proxy.socket", session_id) < 0 ||
            asprintf(&svc, "sandboxd-%s-proxy.service", session_id) < 0)
                return -ENOMEM;
        if (ret_socket)
                *ret_socket = TAKE_PTR(sock);
        if (ret_service)
                *ret_service = TAKE_PTR(svc);
        return 0;
}

#define PROXY_SOCKET_MOUNT "/run/sandboxd-proxy"

/* systemd-socket-proxyd, activated by a socket of sandboxd's, as the aux unit of that socket:
 * the egress relay (to sandboxd's proxy socket, bound in) and an exposed port's relay (in
 * the session's network namespace, to a port there). Both copy bytes between the accepted
 * socket and their target, and need nothing else. */
typedef struct ProxydSpec {
        const char *service, *description, *slice;
        const char *target;          /* ADDRESS:PORT or a socket path */
        unsigned max_connections;
        const char *user;            /* with DynamicUser=: its name; NULL: systemd picks one */
        const char *join_unit;       /* JoinsNamespaceOf=, or NULL: a network of its own */
        const char *bind_dir;        /* bound at PROXY_SOCKET_MOUNT, or NULL */
        bool inet;                   /* it connects over AF_INET (else AF_UNIX only) */
} ProxydSpec;

static int append_proxyd_service(sd_bus_message *m, const ProxydSpec *p) {
        char conns[64];
        const char *argv[] = { SOCKET_PROXYD_PATH, "--exit-idle-time=60s", conns, p->target, NULL };
        int r;

        snprintf(conns, sizeof(conns), "--connections-max=%u", p->max_connections);

        r = sd_bus_message_open_container(m, 'r', "sa(sv)");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", p->service);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r < 0)
                return r;

        if ((r = append_string(m, "Description", p->description)) < 0 ||
            (r = append_string(m, "Slice", p->slice)) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "ExecStart", "a(sasb)", 1, argv[0], 4, argv[0], argv[1], argv[2],
                                       argv[3], false)) < 0 ||
            (r = append_bool(m, "DynamicUser", true)) < 0 ||
            (p->user && (r = append_string(m, "User", p->user)) < 0) ||
            /* a network of its own, or the session's, and nothing but its loopback there */
            (r = append_bool(m, "PrivateNetwork", true)) < 0 ||
            (p->join_unit && (r = append_strv(m, "JoinsNamespaceOf", (const char *[]) { p->join_unit }, 1)) < 0) ||
            (r = append_ip_keyword(m, "IPAddressDeny", "any")) < 0 ||
            (r = append_ip_keyword(m, "IPAddressAllow", "localhost")) < 0 ||
            (r = append_tmpfs(m, "/run", "ro")) < 0 ||
            (p->bind_dir && (r = append_bind(m, "BindPaths", p->bind_dir, PROXY_SOCKET_MOUNT, false)) < 0) ||
            (r = append_hardening(m)) < 0 ||
            (r = append_bool(m, "MemoryDenyWriteExecute", true)) < 0 ||
            (r = append_u64(m, "AmbientCapabilities", 0)) < 0 ||
            (r = append_bool(m, "RemoveIPC", true)) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "UMask", "u", (uint32_t) 0077)) < 0)
                return r;
        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "RestrictAddressFamilies");
        if (r >= 0)
                r = p->inet ? sd_bus_message_append(m, "v", "(bas)", 1, 2, "AF_UNIX", "AF_INET")
                            : sd_bus_message_append(m, "v", "(bas)", 1, 1, "AF_UNIX");
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

int systemd_start_proxy_async(Pid1Gate *g, Pid1Call **ret_call, const char *session_id, const char *slice,
                              const char *socket_dir, unsigned max_connections, sd_bus_message_handler_t cb,
                              void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_free_ char *sock = NULL, *svc = NULL;
        char listen[64];
        int r;

        r = systemd_proxy_unit_names(session_id, &sock, &svc);
        if (r < 0)
                return r;
        r = new_start_transient(pid1_gate_bus(g), sock, &m);
        if (r < 0)
                return r;

        snprintf(listen, sizeof(listen), "127.0.0.1:%u", PROXY_PORT);
        /* Not in the session's slice: systemd freezes a slice only when every unit in it can be
         * frozen, and a socket cannot. PartOf= stops it with the slice all the same. */
        if ((r = append_string(m, "Description", "sandboxd egress proxy of a session")) < 0 ||
            (r = append_string(m, "Slice", SANDBOXD_SLICE)) < 0 ||
            (r = append_strv(m, "PartOf", (const char *[]) { slice }, 1)) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "Listen", "a(ss)", 1, "Stream", listen)) < 0 ||
            /* The namespaces its commands join (JoinsNamespaceOf=): the network, where only
             * this socket listens, and /tmp and IPC, which they would otherwise share with
             * the host (a joined namespace brings only what this unit asked for). */
            (r = append_bool(m, "PrivateNetwork", true)) < 0 ||
            (r = append_bool(m, "PrivateTmp", true)) < 0 ||
            (r = append_bool(m, "PrivateIPC", true)) < 0)
                return r;

        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        char target[sizeof(PROXY_SOCKET_MOUNT) + sizeof(PROXY_SOCKET_NAME) + 1];
        snprintf(target, sizeof(target), "%s/%s", PROXY_SOCKET_MOUNT, PROXY_SOCKET_NAME);
        r = sd_bus_message_open_container(m, 'a', "(sa(sv))");
        if (r >= 0)
                r = append_proxyd_service(m, &(ProxydSpec) {
                        .service = svc,
                        .description = "sandboxd egress proxy relay",
                        .slice = slice,
                        .target = target,
                        .max_connections = max_connections,
                        .bind_dir = socket_dir,
                });
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return pid1_call(g, ret_call, m, cb, userdata);
}

int systemd_port_unit_names(const char *session_id, uint16_t port, char **ret_socket, char **ret_service) {
        _cleanup_free_ char *sock = NULL, *svc = NULL;

        if (asprintf(&sock, "sandboxd-%s-port-%u.socket", session_id, port) < 0 ||
            asprintf(&svc, "sandboxd-%s-port-%u.service", session_id, port) < 0)
                return -ENOMEM;
        if (ret_socket)
                *ret_socket = TAKE_PTR(sock);
        if (ret_service)
                *ret_service = TAKE_PTR(svc);
        return 0;
}

int systemd_start_port_async(Pid1Gate *g, Pid1Call **ret_call, const PortUnitSpec *p, sd_bus_message_handler_t cb,
                             void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_free_ char *sock = NULL, *svc = NULL;
        char host[64];
        int r;

        if (!p->session_id || !p->slice || !p->join_unit || !p->socket_path || p->port == 0)
                return -EINVAL;
        r = systemd_port_unit_names(p->session_id, p->port, &sock, &svc);
        if (r < 0)
                return r;
        r = new_start_transient(pid1_gate_bus(g), sock, &m);
        if (r < 0)
                return r;

        snprintf(host, sizeof(host), "127.0.0.1:%u", p->host_port);
        /* Not in the session's slice, as the proxy socket: a socket cannot be frozen. PartOf=
         * stops it with the slice. It listens in the host's namespace; only the relay it
         * activates is in the session's. */
        if ((r = append_string(m, "Description", "sandboxd exposed port of a session")) < 0 ||
            (r = append_string(m, "Slice", SANDBOXD_SLICE)) < 0 ||
            (r = append_strv(m, "PartOf", (const char *[]) { p->slice }, 1)) < 0)
                return r;
        if (p->host_port > 0)
                r = sd_bus_message_append(m, "(sv)", "Listen", "a(ss)", 2, "Stream", p->socket_path, "Stream", host);
        else
                r = sd_bus_message_append(m, "(sv)", "Listen", "a(ss)", 1, "Stream", p->socket_path);
        if (r < 0 ||
            /* as sandboxd's own http.sock: root and group sandboxd */
            (r = sd_bus_message_append(m, "(sv)", "SocketMode", "u", (uint32_t) 0660)) < 0 ||
            (r = append_string(m, "SocketGroup", "sandboxd")) < 0 ||
            (r = sd_bus_message_append(m, "(sv)", "MaxConnections", "u", (uint32_t) p->max_connections)) < 0 ||
            (r = append_bool(m, "RemoveOnStop", true)) < 0)
                return r;

        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        char target[64], user[32];
        snprintf(target, sizeof(target), "127.0.0.1:%u", p->port);
        /* one dynamic user for the relays of a session, none of its commands': the id's 16 hex
         * digits, without the node's name (a user name has at most 31 characters) */
        assert(strlen(p->session_id) >= SESSION_ID_HEX);
        snprintf(user, sizeof(user), "sbxp-%s", p->session_id + strlen(p->session_id) - SESSION_ID_HEX);
        r = sd_bus_message_open_container(m, 'a', "(sa(sv))");
        if (r >= 0)
                r = append_proxyd_service(m, &(ProxydSpec) {
                        .service = svc,
                        .description = "sandboxd exposed port relay",
                        .slice = p->slice,
                        .target = target,
                        .max_connections = p->max_connections,
                        .user = user,
                        .join_unit = p->join_unit,
                        .inet = true,
                });
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return pid1_call(g, ret_call, m, cb, userdata);
}

int systemd_match_unit_async(sd_bus *bus, sd_bus_slot **ret_slot, const char *unit_path,
                             sd_bus_message_handler_t cb, void *userdata) {
        return sd_bus_match_signal_async(bus, ret_slot, SYSTEMD_DEST, unit_path, "org.freedesktop.DBus.Properties",
                                         "PropertiesChanged", cb, NULL, userdata);
}

int systemd_get_unit_state_async(Pid1Gate *g, Pid1Call **ret_call, const char *unit_path, const char *interface,
                                 sd_bus_message_handler_t cb, void *userdata) {
        return call_method(g, ret_call, unit_path, "org.freedesktop.DBus.Properties",
                                        "GetAll", cb, userdata, "s", interface);
}

static void copy_string(char *dst, size_t n, const char *src) {
        snprintf(dst, n, "%s", src ? src : "");
}

int systemd_read_unit_state(sd_bus_message *reply, UnitState *st) {
        int r;

        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;

        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *name, *contents, *s;
                char type;

                r = sd_bus_message_read(reply, "s", &name);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(reply, &type, &contents);
                if (r < 0)
                        return r;

#define READ_STRING(prop, field)                                                        \
        if (streq(name, prop) && streq(contents, "s")) {                                \
                r = sd_bus_message_read(reply, "v", "s", &s);                           \
                if (r < 0)                                                              \
                        return r;                                                       \
                copy_string(st->field, sizeof(st->field), s);                           \
        } else
#define READ_SCALAR(prop, sig, field)                                                   \
        if (streq(name, prop) && streq(contents, sig)) {                                \
                r = sd_bus_message_read(reply, "v", sig, &st->field);                   \
                if (r < 0)                                                              \
                        return r;                                                       \
        } else

                READ_STRING("LoadState", load_state)
                READ_STRING("ActiveState", active_state)
                READ_STRING("SubState", sub_state)
                READ_STRING("Result", result)
                READ_STRING("ControlGroup", control_group)
                READ_SCALAR("ExecMainCode", "i", exec_main_code)
                READ_SCALAR("ExecMainStatus", "i", exec_main_status)
                READ_SCALAR("ExecMainStartTimestampMonotonic", "t", exec_main_start_usec)
                READ_SCALAR("ExecMainExitTimestampMonotonic", "t", exec_main_exit_usec)
                READ_SCALAR("CPUUsageNSec", "t", cpu_usage_nsec)
                READ_SCALAR("MemoryCurrent", "t", memory_current)
                READ_SCALAR("TasksCurrent", "t", tasks_current)
                READ_SCALAR("MainPID", "u", main_pid)
                if (streq(name, "Job") && streq(contents, "(uo)")) {
                        const char *path;
                        r = sd_bus_message_read(reply, "v", "(uo)", &st->job_id, &path);
                        if (r < 0)
                                return r;
                } else {
                        r = sd_bus_message_skip(reply, "v");
                        if (r < 0)
                                return r;
                }
#undef READ_STRING
#undef READ_SCALAR

                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;

        return sd_bus_message_exit_container(reply);
}

int systemd_unit_call_async(Pid1Gate *g, const char *unit_path, const char *method, sd_bus_message_handler_t cb,
                            void *userdata) {
        return call_method(g, NULL, unit_path, "org.freedesktop.systemd1.Unit", method,
                                        cb, userdata, NULL);
}

int systemd_stop_unit_async(Pid1Gate *g, const char *unit, sd_bus_message_handler_t cb, void *userdata) {
        return call_method(g, NULL, SYSTEMD_PATH, SYSTEMD_MANAGER, "StopUnit", cb,
                                        userdata, "ss", unit, "replace");
}

int systemd_reset_failed_unit_async(Pid1Gate *g, const char *unit, sd_bus_message_handler_t cb, void *userdata) {
        return call_method(g, NULL, SYSTEMD_PATH, SYSTEMD_MANAGER, "ResetFailedUnit", cb,
                                        userdata, "s", unit);
}

int systemd_freeze_unit_async(Pid1Gate *g, Pid1Call **ret_call, const char *unit, bool freeze,
                              sd_bus_message_handler_t cb, void *userdata) {
        return call_method(g, ret_call, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                        freeze ? "FreezeUnit" : "ThawUnit", cb, userdata, "s", unit);
}

int systemd_get_freezer_state_async(Pid1Gate *g, Pid1Call **ret_call, const char *unit, sd_bus_message_handler_t cb,
                                    void *userdata) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = systemd_unit_path(unit, &path);
        if (r < 0)
                return r;
        return call_method(g, ret_call, path, "org.freedesktop.DBus.Properties", "Get",
                                        cb, userdata, "ss", "org.freedesktop.systemd1.Unit", "FreezerState");
}

int systemd_set_slice_limits_async(Pid1Gate *g, const char *slice, const Limits *limits, sd_bus_message_handler_t cb,
                                   void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(pid1_gate_bus(g), &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                           "SetUnitProperties");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "sb", slice, 1 /* runtime only */);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r < 0)
                return r;
        if ((r = append_u64(m, "MemoryMax", limits->memory_max)) < 0 ||
            (r = append_u64(m, "CPUQuotaPerSecUSec", limits->cpu_quota_percent * USEC_PER_SEC / 100)) < 0 ||
            (r = append_u64(m, "TasksMax", limits->tasks_max)) < 0)
                return r;
        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return pid1_call(g, NULL, m, cb, userdata);
}

int systemd_list_units(sd_bus *bus, const char *pattern, char ***ret_names, char ***ret_active_states) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_strv_free_ char **names = NULL, **states = NULL;
        const char *name, *active;
        size_t n = 0;
        int r;

        /* Once, at start-up: a synchronous call keeps the recovery code straight. */
        r = sd_bus_call_method(bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "ListUnitsByPatterns", &error,
                               &reply, "asas", 0, 1, pattern);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(ssssssouso)", &name, NULL, NULL, &active, NULL, NULL, NULL, NULL,
                                        NULL, NULL)) > 0) {
                char **a = realloc(names, (n + 2) * sizeof(char *)), **b;

                if (!a)
                        return -ENOMEM;
                names = a;
                names[n] = names[n + 1] = NULL;
                b = realloc(states, (n + 2) * sizeof(char *));
                if (!b)
                        return -ENOMEM;
                states = b;
                states[n] = states[n + 1] = NULL;
                names[n] = strdup(name);
                states[n] = strdup(active);
                if (!names[n] || !states[n])
                        return -ENOMEM;
                n++;
        }
        if (r < 0)
                return r;
        if (!names && !(names = calloc(1, sizeof(char *))))
                return -ENOMEM;
        if (!states && !(states = calloc(1, sizeof(char *))))
                return -ENOMEM;
        *ret_names = TAKE_PTR(names);
        if (ret_active_states)
                *ret_active_states = TAKE_PTR(states);
        return 0;
}

int systemd_count_unit_processes(sd_bus *bus, const char *unit, unsigned *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        unsigned n = 0;
        int r;

        r = sd_bus_call_method(bus, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "GetUnitProcesses", &error, &reply,
                               "s", unit);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "(sus)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(sus)", NULL, NULL, NULL)) > 0)
                n++;
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

int systemd_kill_unit_async(Pid1Gate *g, const char *unit, const char *whom, int sig, sd_bus_message_handler_t cb,
                            void *userdata) {
        return call_method(g, NULL, SYSTEMD_PATH, SYSTEMD_MANAGER, "KillUnit", cb,
                                        userdata, "ssi", unit, whom, (int32_t) sig);
}

const char *systemd_error_message(sd_bus_message *reply) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (!e)
                return "unknown error";
        return e->message ?: e->name;
}
