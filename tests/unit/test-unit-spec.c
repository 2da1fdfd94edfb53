/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The units sandboxd asks PID 1 for, read back from the StartTransientUnit message as a
 * stand-in for PID 1 receives it: a session's executor unit has every property of its
 * command units' sandbox with the same value, in the same order, and its own few on top. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus-pair.h"
#include "executor-proto.h"
#include "systemd.h"
#include "tests.h"

#define N_PROPS 256

static sd_bus *client, *server;
static sd_bus_message *received;

static int on_call(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        if (!sd_bus_message_is_method_call(m, "org.freedesktop.systemd1.Manager", "StartTransientUnit"))
                return 0;
        ASSERT(!received);
        received = sd_bus_message_ref(m);
        return 1;
}

/* One property: its name and its value written out ("b:1", "a[s:x s:y]", ...). */
typedef struct Prop {
        char name[64];
        char *value;
} Prop;

typedef struct Unit {
        char name[128];
        Prop props[N_PROPS];
        size_t n;
} Unit;

static void dump(sd_bus_message *m, FILE *f) {
        for (;;) {
                const char *contents;
                char type;
                int r = sd_bus_message_peek_type(m, &type, &contents);

                ASSERT(r >= 0);
                if (r <= 0)
                        return;
                if (type == 'a' || type == 'v' || type == 'r' || type == 'e') {
                        fprintf(f, "%c[", type);
                        ASSERT(sd_bus_message_enter_container(m, type, contents) >= 0);
                        dump(m, f);
                        ASSERT(sd_bus_message_exit_container(m) >= 0);
                        fputs("] ", f);
                        continue;
                }
                union {
                        uint8_t y;
                        int b;
                        int32_t i;
                        uint32_t u;
                        int64_t x;
                        uint64_t t;
                        double d;
                        const char *s;
                        int h;
                } v;
                ASSERT(sd_bus_message_read_basic(m, type, &v) > 0);
                switch (type) {
                case 'y': fprintf(f, "y:%u ", v.y); break;
                case 'b': fprintf(f, "b:%d ", v.b); break;
                case 'i': fprintf(f, "i:%d ", v.i); break;
                case 'u': fprintf(f, "u:%u ", v.u); break;
                case 'x': fprintf(f, "x:%lld ", (long long) v.x); break;
                case 't': fprintf(f, "t:%llu ", (unsigned long long) v.t); break;
                case 's': case 'o': case 'g': fprintf(f, "%c:%s ", type, v.s); break;
                case 'h': fputs("h ", f); break; /* the number differs on each side */
                default: fprintf(f, "?%c ", type);
                }
        }
}

/* StartTransientUnit(name, mode, a(sv) properties, a(sa(sv)) aux) */
static void read_unit(sd_bus_message *m, Unit *u) {
        const char *name, *mode;

        *u = (Unit) {};
        ASSERT(sd_bus_message_rewind(m, true) >= 0);
        ASSERT(sd_bus_message_read(m, "ss", &name, &mode) >= 0);
        snprintf(u->name, sizeof(u->name), "%s", name);
        ASSERT(sd_bus_message_enter_container(m, 'a', "(sv)") >= 0);
        while (sd_bus_message_enter_container(m, 'r', "sv") > 0) {
                const char *p;
                size_t size = 0;
                FILE *f;

                ASSERT(u->n < N_PROPS);
                ASSERT(sd_bus_message_read(m, "s", &p) >= 0);
                snprintf(u->props[u->n].name, sizeof(u->props[u->n].name), "%s", p);
                f = open_memstream(&u->props[u->n].value, &size);
                ASSERT(f);
                dump(m, f);
                fclose(f);
                ASSERT(sd_bus_message_exit_container(m) >= 0);
                u->n++;
        }
        ASSERT(sd_bus_message_exit_container(m) >= 0);
}

static void unit_done(Unit *u) {
        for (size_t i = 0; i < u->n; i++)
                free(u->props[i].value);
        u->n = 0;
}

static const char *prop(const Unit *u, const char *name) {
        for (size_t i = 0; i < u->n; i++)
                if (strcmp(u->props[i].name, name) == 0)
                        return u->props[i].value;
        return NULL;
}

static bool in(const char *name, const char * const *l) {
        for (; *l; l++)
                if (strcmp(*l, name) == 0)
                        return true;
        return false;
}

static int n_replies;

static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        n_replies++;
        return 0;
}

/* Sends what start() queues, and reads it back as the stand-in got it. */
static void capture(Pid1Gate *g, int (*start)(Pid1Gate *g, const void *spec), const void *spec, Unit *u) {
        ASSERT(start(g, spec) >= 0);
        bus_pair_process(client, server);
        ASSERT(received);
        if (!received)
                return;
        read_unit(received, u);
        ASSERT(sd_bus_reply_method_return(received, "o", "/org/freedesktop/systemd1/job/1") >= 0);
        received = sd_bus_message_unref(received);
        bus_pair_process(client, server);
}

static int start_command(Pid1Gate *g, const void *spec) {
        return systemd_start_command_async(g, NULL, spec, on_reply, NULL);
}

static int start_executor(Pid1Gate *g, const void *spec) {
        return systemd_start_executor_async(g, NULL, spec, on_reply, NULL);
}

/* What only a command unit has, and what only the executor has (besides its two binds). */
static const char *const command_own[] = {
        "Description", "Type", "AddRef", "RemainAfterExit", "ExecStart", "EnvironmentFiles", "WorkingDirectory",
        "RuntimeMaxUSec", "TimeoutStartUSec", "TimeoutStopUSec", "KillMode", "StandardInputFileDescriptor",
        "StandardOutputFileDescriptor", "StandardErrorFileDescriptor", NULL,
};
static const char *const executor_own[] = {
        "Description", "Type", "ExecStart", "WorkingDirectory", "TimeoutStopUSec", "KillMode",
        "Delegate", "OOMPolicy", "OOMScoreAdjust", "StandardInput", "StandardOutput", "StandardError", NULL,
};

static void test_same_sandbox(Pid1Gate *g, NetworkMode network) {
        char *inaccessible[] = { (char *) "-/etc/shadow", (char *) "-/root", NULL };
        char *ro[] = { (char *) "-/opt/ro", NULL }, *rw[] = { (char *) "-/opt/rw", NULL };
        char *tmpfs[] = { (char *) "/sys/fs/cgroup/unified/sandboxd.slice", (char *) "/sys/fs/cgroup/memory/sandboxd.slice", NULL };
        char *binds[] = { (char *) "/sys/fs/cgroup/unified/sandboxd.slice/sandboxd-s1.slice",
                          (char *) "/sys/fs/cgroup/memory/sandboxd.slice/sandboxd-s1.slice", NULL };
        const char *cgroup_bind = "/sys/fs/cgroup/unified/sandboxd.slice/sandboxd-s1.slice/sandboxd-s1-exec.service";
        AddressRange allow[1] = { { .family = AF_INET, .addr = { 192, 0, 2, 0 }, .prefixlen = 24 } };
        AddressRange deny[2] = { { .family = AF_INET, .addr = { 10 }, .prefixlen = 8 },
                                 { .family = AF_INET6, .addr = { 0xfd }, .prefixlen = 8 } };
        SandboxSpec sandbox = {
                .slice = "sandboxd-s1.slice",
                .user = "sbx-0123456789abcdef",
                .state_directories = { "sandboxd/ws/t/u/w", "sandboxd/home/t/u/w", "sandboxd/tmp/t/u/w" },
                .network = network,
                .proxy_socket_unit = "sandboxd-s1-proxy.socket",
                .ip_allow = allow,
                .n_ip_allow = 1,
                .ip_deny = deny,
                .n_ip_deny = 2,
                .inaccessible_paths = inaccessible,
                .cgroup_tmpfs = tmpfs,
                .cgroup_binds = binds,
                .userdb_dir = "/run/sandboxd/userdb/s1",
                .read_only_paths = ro,
                .read_write_paths = rw,
                .tools_directory = "/usr/lib/sandboxd/tools",
                .limit_fsize = 1 << 20,
        };
        CommandUnitSpec cmd = {
                .sandbox = sandbox,
                .unit = "sandboxd-s1-c1.service",
                .description = "sandboxd command c1 of session s1",
                .environment_file = "/run/sandboxd/exec/s1-1.env",
                .working_directory = "/var/lib/sandboxd/ws/t/u/w",
                .runtime_max_usec = 5 * USEC_PER_SEC,
                .timeout_stop_usec = 2 * USEC_PER_SEC,
                .stdin_fd = 0,
                .stdout_fd = 1,
                .stderr_fd = 2,
        };
        ExecutorUnitSpec exec = {
                .sandbox = sandbox,
                .unit = "sandboxd-s1-exec.service",
                .description = "sandboxd executor of session s1",
                .working_directory = "/var/lib/sandboxd/ws/t/u/w",
                .timeout_stop_usec = 3 * USEC_PER_SEC,
                .listener_dir = "/run/sandboxd/executor/s1",
                .cgroup_bind = cgroup_bind,
        };
        Unit c, e;
        size_t i = 0, j = 0, n_shared = 0;
        char expect[512];

        capture(g, start_command, &cmd, &c);
        capture(g, start_executor, &exec, &e);
        ASSERT_STREQ(c.name, "sandboxd-s1-c1.service");
        ASSERT_STREQ(e.name, "sandboxd-s1-exec.service");

        /* the sandbox: the same properties, values and order in both, once each kind's own are
         * left out; the executor's two binds come last */
        ASSERT(e.n >= 2);
        while (i < c.n || j + 2 < e.n) {
                if (i < c.n && in(c.props[i].name, command_own)) {
                        i++;
                        continue;
                }
                if (j + 2 < e.n && in(e.props[j].name, executor_own)) {
                        j++;
                        continue;
                }
                ASSERT(i < c.n && j + 2 < e.n);
                if (i >= c.n || j + 2 >= e.n)
                        break;
                ASSERT_STREQ(c.props[i].name, e.props[j].name);
                ASSERT_STREQ(c.props[i].value, e.props[j].value);
                n_shared++;
                i++, j++;
        }
        /* the whole sandbox, not a part of it: spot checks of each group */
        ASSERT(n_shared >= 40);
        ASSERT_STREQ(prop(&e, "Slice"), "v[s:sandboxd-s1.slice ] ");
        ASSERT_STREQ(prop(&e, "DynamicUser"), "v[b:1 ] ");
        ASSERT_STREQ(prop(&e, "User"), "v[s:sbx-0123456789abcdef ] ");
        ASSERT_STREQ(prop(&e, "ProtectSystem"), "v[s:strict ] ");
        ASSERT_STREQ(prop(&e, "ProtectControlGroups"), "v[b:1 ] ");
        ASSERT_STREQ(prop(&e, "PrivateNetwork"), network == NETWORK_HOST ? "v[b:0 ] " : "v[b:1 ] ");
        ASSERT_STREQ(prop(&e, "LimitFSIZE"), "v[t:1048576 ] ");
        ASSERT_STREQ(prop(&e, "StateDirectory"),
                     "v[a[s:sandboxd/ws/t/u/w s:sandboxd/home/t/u/w s:sandboxd/tmp/t/u/w ] ] ");
        ASSERT((prop(&e, "JoinsNamespaceOf") != NULL) == (network == NETWORK_PROXY));

        /* the executor's own */
        ASSERT_STREQ(prop(&e, "Type"), "v[s:exec ] ");
        ASSERT(prop(&e, "AddRef") == NULL); /* a match rule of PID 1 per session: none */
        ASSERT_STREQ(prop(&e, "Delegate"), "v[b:1 ] ");
        ASSERT_STREQ(prop(&e, "OOMPolicy"), "v[s:continue ] ");
        ASSERT_STREQ(prop(&e, "OOMScoreAdjust"), "v[i:-500 ] ");
        ASSERT_STREQ(prop(&e, "KillMode"), "v[s:control-group ] ");
        ASSERT_STREQ(prop(&e, "KillMode"), prop(&c, "KillMode"));
        ASSERT_STREQ(prop(&e, "TimeoutStopUSec"), "v[t:3000000 ] ");
        ASSERT_STREQ(prop(&e, "WorkingDirectory"), "v[s:/var/lib/sandboxd/ws/t/u/w ] ");
        ASSERT_STREQ(prop(&e, "StandardInput"), "v[s:null ] ");
        ASSERT_STREQ(prop(&e, "StandardOutput"), "v[s:null ] ");
        ASSERT_STREQ(prop(&e, "StandardError"), "v[s:journal ] ");
        snprintf(expect, sizeof(expect), "v[a[r[s:%s a[s:sandboxd-executor ] b:0 ] ] ] ", SANDBOXD_EXECUTOR_PATH);
        ASSERT_STREQ(prop(&e, "ExecStart"), expect);
        ASSERT(!prop(&e, "RuntimeMaxUSec"));
        ASSERT(!prop(&e, "RemainAfterExit"));
        ASSERT(!prop(&c, "Delegate"));
        if (e.n >= 2) {
                ASSERT_STREQ(e.props[e.n - 2].name, "BindReadOnlyPaths");
                snprintf(expect, sizeof(expect), "v[a[r[s:/run/sandboxd/executor/s1 s:%s b:0 t:16384 ] ] ] ",
                         EXECUTOR_SOCKET_DIR);
                ASSERT_STREQ(e.props[e.n - 2].value, expect);
                ASSERT_STREQ(e.props[e.n - 1].name, "BindPaths");
                snprintf(expect, sizeof(expect), "v[a[r[s:%s s:%s b:0 t:16384 ] ] ] ", cgroup_bind, cgroup_bind);
                ASSERT_STREQ(e.props[e.n - 1].value, expect);
        }

        /* a spec without its binds is refused, and nothing is sent */
        exec.cgroup_bind = NULL;
        ASSERT(systemd_start_executor_async(g, NULL, &exec, on_reply, NULL) == -EINVAL);
        exec.cgroup_bind = cgroup_bind;
        exec.listener_dir = NULL;
        ASSERT(systemd_start_executor_async(g, NULL, &exec, on_reply, NULL) == -EINVAL);
        bus_pair_process(client, server);
        ASSERT(!received);

        unit_done(&c);
        unit_done(&e);
}

static void test_executor_unit_name(void) {
        char *name = NULL;

        ASSERT(systemd_executor_unit_name("0123456789abcdef", &name) == 0);
        ASSERT_STREQ(name, "sandboxd-0123456789abcdef-exec.service");
        free(name);
        ASSERT(systemd_executor_unit_name(NULL, &name) == -EINVAL);
}

int main(void) {
        Pid1Gate *g = NULL;

        bus_pair_new(&server, &client, on_call);
        ASSERT(pid1_gate_new(client, 4, &g) >= 0);

        test_same_sandbox(g, NETWORK_NONE);
        test_same_sandbox(g, NETWORK_PROXY);
        test_same_sandbox(g, NETWORK_HOST);
        ASSERT(n_replies == 6);
        test_executor_unit_name();

        pid1_gate_free(g);
        sd_bus_flush_close_unref(client);
        sd_bus_flush_close_unref(server);
        return TESTS_DONE();
}
