/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The state machines of sessions and commands (session.c, command.c, pool.c), driven
 * through the real systemd.c and pid1-gate.c against a stand-in for PID 1 on the other end
 * of a socketpair: it records every call (method and unit) and answers when the test says
 * so, with success, an error, or never (then the daemon tears down with the call pending).
 * A recording observer sees what the manager is told. Every asynchronous operation (op.h:
 * a session's start, its close, a freeze, a command's start, stdin) is a handle the test
 * holds, and its function is counted: exactly once in every path, never once the handle
 * was freed.
 *
 * The scope's directories are under /var/lib/sandboxd, a fixed path: the test runs in a
 * mount namespace of its own with a tmpfs over /var/lib, and is skipped where it cannot
 * make one. On a host without cgroup v2, where sandboxd refuses to freeze, the namespace
 * also gets a tmpfs over /sys/fs/cgroup with the file that marks a v2 root, so that the
 * freezes (which go to the stand-in for PID 1 alone) are tested everywhere. */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "command.h"
#include "manager.h"
#include "pool.h"
#include "session.h"
#include "store.h"
#include "bus-pair.h"
#include "tests.h"
#include "validate.h"

#define N_MAX 64

/* --- the stand-in for PID 1 ------------------------------------------------------- */

static sd_bus *client, *server;

typedef struct Call {
        sd_bus_message *m;
        char member[64];
        char unit[128]; /* the first string argument, if any */
        bool answered;
} Call;

static Call calls[N_MAX];
static unsigned n_calls;

static int on_call(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        const char *s = NULL;
        char type = 0;
        Call *c;

        if (!sd_bus_message_is_method_call(m, NULL, NULL))
                return 0;
        ASSERT(n_calls < N_MAX);
        if (n_calls >= N_MAX)
                return 1;
        c = &calls[n_calls++];
        *c = (Call) { .m = sd_bus_message_ref(m) };
        snprintf(c->member, sizeof(c->member), "%s", sd_bus_message_get_member(m));
        if (sd_bus_message_peek_type(m, &type, NULL) > 0 && type == 's' && sd_bus_message_read(m, "s", &s) >= 0)
                snprintf(c->unit, sizeof(c->unit), "%s", s);
        return 1;
}

static void run(void) {
        bus_pair_process(client, server);
}

/* The oldest unanswered call of this method (and unit, when given), or NULL. */
static Call *find_call(const char *member, const char *unit) {
        run();
        for (unsigned i = 0; i < n_calls; i++)
                if (!calls[i].answered && strcmp(calls[i].member, member) == 0 &&
                    (!unit || strcmp(calls[i].unit, unit) == 0))
                        return &calls[i];
        return NULL;
}

static unsigned count_calls(const char *member, const char *unit) {
        unsigned n = 0;

        run();
        for (unsigned i = 0; i < n_calls; i++)
                if (strcmp(calls[i].member, member) == 0 && (!unit || strcmp(calls[i].unit, unit) == 0))
                        n++;
        return n;
}

static void answer_job(Call *c) {
        ASSERT(c && !c->answered);
        if (!c || c->answered)
                return;
        c->answered = true;
        ASSERT(sd_bus_reply_method_return(c->m, "o", "/org/freedesktop/systemd1/job/1") >= 0);
        run();
}

static void answer_error(Call *c, const char *message) {
        ASSERT(c && !c->answered);
        if (!c || c->answered)
                return;
        c->answered = true;
        ASSERT(sd_bus_reply_method_errorf(c->m, "org.freedesktop.systemd1.UnitExists", "%s", message) >= 0);
        run();
}

/* Properties.Get of FreezerState */
static void answer_freezer_state(Call *c, const char *state) {
        ASSERT(c && !c->answered);
        if (!c || c->answered)
                return;
        c->answered = true;
        ASSERT(sd_bus_reply_method_return(c->m, "v", "s", state) >= 0);
        run();
}

/* Properties.GetAll of a unit: its state */
static void answer_unit_state(Call *c, const char *active, const char *sub, const char *result) {
        sd_bus_message *reply = NULL;

        ASSERT(c && !c->answered);
        if (!c || c->answered)
                return;
        c->answered = true;
        ASSERT(sd_bus_message_new_method_return(c->m, &reply) >= 0);
        ASSERT(sd_bus_message_append(reply, "a{sv}", 5, "LoadState", "s", "loaded", "ActiveState", "s", active,
                                     "SubState", "s", sub, "Result", "s", result, "ExecMainStatus", "i",
                                     (int32_t) 15) >= 0);
        ASSERT(sd_bus_send(server, reply, NULL) >= 0);
        sd_bus_message_unref(reply);
        run();
}

static void forget_calls(void) {
        for (unsigned i = 0; i < n_calls; i++)
                sd_bus_message_unref(calls[i].m);
        n_calls = 0;
}

static void setup_bus(void) {
        bus_pair_new(&server, &client, on_call);
}

/* --- the recording observer ---------------------------------------------------------- */

static unsigned n_added, n_removed, n_state_changes, n_frozen_changes, n_command_changed, n_command_finished;
static Session *last_removed;

static void obs_session_added(Session *s, void *userdata) {
        n_added++;
}

static void obs_session_changed(Session *s, unsigned what, void *userdata) {
        if (what & SESSION_CHANGED_STATE)
                n_state_changes++;
        if (what & SESSION_CHANGED_FROZEN)
                n_frozen_changes++;
}

static void obs_session_removed(Session *s, void *userdata) {
        n_removed++;
        last_removed = s;
}

static void obs_command_changed(Command *c, void *userdata) {
        n_command_changed++;
}

static void obs_command_finished(Command *c, void *userdata) {
        n_command_finished++;
}

static const Observer recorder = {
        .session_added = obs_session_added,
        .session_changed = obs_session_changed,
        .session_removed = obs_session_removed,
        .command_changed = obs_command_changed,
        .command_finished = obs_command_finished,
};

/* --- the operations, counted ---------------------------------------------------------- */

/* One Op (op.h) the test holds, and what its function was told. The function frees the
 * handle, as a front end does; a test that lets go first frees it itself. Under ASan (or
 * valgrind) a handle left over is a leak. */
typedef struct Seen {
        Op *op;
        unsigned n;
        int r;
        void *object; /* the Session or Command the Op names, when its function ran */
        char message[128];
} Seen;

static void on_done(Op *op, int r, const char *message, void *userdata) {
        Seen *seen = userdata;

        ASSERT(op == seen->op);
        ASSERT(!op_pending(op)); /* completed before its function runs */
        ASSERT(op->list == NULL);
        seen->n++;
        seen->r = r;
        seen->object = op->kind == OP_COMMAND_START || op->kind == OP_COMMAND_STDIN ? (void *) op->command
                                                                                   : (void *) op->session;
        snprintf(seen->message, sizeof(seen->message), "%s", message ?: "");
        seen->op = op_free(op);
}

/* --- the daemon's side --------------------------------------------------------------- */

static Manager *m;

static void setup_manager(void) {
        n_added = n_removed = n_state_changes = n_frozen_changes = n_command_changed = n_command_finished = 0;
        setup_bus();
        ASSERT(manager_new(&m) >= 0);
        m->bus = sd_bus_ref(client);
        ASSERT(pid1_gate_new(client, PID1_CALLS_MAX, &m->pid1) >= 0);
        ASSERT(store_writer_new(&m->writer) >= 0);
        m->config.pool_profile = POOL_LOCAL;
        strcpy(m->config.node_name, "n1");
        ASSERT(manager_add_observer(m, &recorder, NULL) >= 0);
}

/* As daemon_free() does: the sessions first, then the manager. */
static void teardown_manager(void) {
        Session *s;

        while ((s = m->sessions))
                session_free(s);
        while (m->releases)
                unit_release_free(m->releases);
        pool_free(m);
        m->writer = store_writer_free(m->writer);
        m = manager_free(m); /* closes the bus */
        forget_calls();
        client = sd_bus_unref(client);
        server = sd_bus_flush_close_unref(server);
}

static Session *create(const char *workspace, RequestError *e) {
        SessionRequest req = { .user = (char *) "alice", .workspace = (char *) workspace,
                               .has_network_mode = true, .network = NETWORK_NONE };
        Session *s = NULL;
        int r;

        r = session_create(m, &req, NULL, &s, e);
        ASSERT(r >= 0);
        /* a new session's id names this node */
        ASSERT(r < 0 || (session_id_is_valid(s->id) && startswith(s->id, "n1_") && strlen(s->id) == 3 + 16));
        return r >= 0 ? s : NULL;
}

static Command *exec_argv(Session *s, char **argv, StdinMode stdin_mode, Seen *seen) {
        CommandRequest req = { .argv = argv, .stdin_mode = stdin_mode };
        RequestError e = {};
        Command *c = NULL;
        int r;

        r = session_exec(s, &req, on_done, seen, &c, &seen->op, &e);
        if (r < 0)
                fprintf(stderr, "session_exec: %s: %s\n", strerror(-r), e.message);
        ASSERT(r == 1 && c && seen->op && seen->op->command == c && op_pending(seen->op));
        return r == 1 ? c : NULL;
}

static Command *exec_true(Session *s, Seen *seen) {
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", (char *) "true", NULL };

        return exec_argv(s, argv, STDIN_NULL, seen);
}

/* --- the tests ------------------------------------------------------------------------ */

/* The handles themselves: completed once, in the order they were queued, never after they
 * were freed. */
static void test_op(void) {
        Seen a = {}, b = {}, c = {};
        Op *list = NULL;

        a.op = op_new(OP_SESSION_READY, NULL, NULL, on_done, &a);
        b.op = op_new(OP_SESSION_READY, NULL, NULL, on_done, &b);
        c.op = op_new(OP_SESSION_READY, NULL, NULL, on_done, &c);
        if (!a.op || !b.op || !c.op)
                return;
        op_queue(&list, a.op);
        op_queue(&list, b.op);
        op_queue(&list, c.op);
        ASSERT(list == a.op && op_pending(b.op));

        /* b's caller lets go: off the list, never called */
        b.op = op_free(b.op);
        ASSERT(list == a.op && a.op->ops_next == c.op);

        op_complete(a.op, 7, "done");
        ASSERT(a.n == 1 && a.r == 7 && strcmp(a.message, "done") == 0 && a.op == NULL);
        ASSERT(list == c.op);
        op_complete_all(&list, -ECANCELED, OP_STOPPING);
        ASSERT(list == NULL);
        ASSERT(c.n == 1 && c.r == -ECANCELED && strcmp(c.message, OP_STOPPING) == 0);
        ASSERT(b.n == 0);
        op_free(NULL);
}

static void test_session_becomes_active(void) {
        RequestError e = {};
        Seen ready = {}, again = {};
        Session *s;
        Call *start;

        setup_manager();
        s = create("ws1", &e);
        if (!s)
                goto out;
        ASSERT(s->state == SESSION_STARTING);
        ASSERT(n_added == 1 && n_state_changes == 0);
        ASSERT(session_wait_ready(s, on_done, &ready, &ready.op) == 1);
        ASSERT(op_pending(ready.op) && ready.op->session == s);
        ASSERT(ready.n == 0);

        /* asking again for the same scope gives the same session, starting */
        {
                Session *t = NULL;
                SessionRequest req = { .user = (char *) "alice", .workspace = (char *) "ws1",
                                       .has_network_mode = true, .network = NETWORK_NONE };
                ASSERT(session_create(m, &req, NULL, &t, &e) == 0 && t == s);
        }
        ASSERT(count_calls("StartTransientUnit", s->slice) == 1);

        start = find_call("StartTransientUnit", s->slice);
        answer_job(start);
        ASSERT(s->state == SESSION_ACTIVE);
        ASSERT(n_state_changes == 1 && n_removed == 0);
        ASSERT(ready.n == 1 && ready.r == 0 && ready.object == s && ready.op == NULL);

        /* once active, nothing to wait for: 0, no handle, the function is not called */
        again.op = (Op *) &again; /* overwritten */
        ASSERT(session_wait_ready(s, on_done, &again, &again.op) == 0);
        ASSERT(again.op == NULL && again.n == 0);
out:
        teardown_manager();
        ASSERT(ready.n == 1 && again.n == 0); /* not told again at the teardown */
}

/* The exec mode: the request's, else the configured default; asking again for a scope
 * answers its session as it is, whatever mode the second request names. */
static void test_exec_mode(void) {
        RequestError e = {};
        Session *s = NULL, *t = NULL, *u = NULL;
        SessionRequest req = { .user = (char *) "alice", .workspace = (char *) "em1",
                               .has_network_mode = true, .network = NETWORK_NONE };

        setup_manager();
        ASSERT(m->config.default_exec_mode == EXEC_MODE_UNIT);
        m->config.default_exec_mode = EXEC_MODE_SESSION;
        ASSERT(session_create(m, &req, NULL, &s, &e) == 1 && s->exec_mode == EXEC_MODE_SESSION);

        req.has_exec_mode = true;
        req.exec_mode = EXEC_MODE_UNIT;
        ASSERT(session_create(m, &req, NULL, &t, &e) == 0 && t == s && s->exec_mode == EXEC_MODE_SESSION);

        req.workspace = (char *) "em2";
        ASSERT(session_create(m, &req, NULL, &u, &e) == 1 && u != s && u->exec_mode == EXEC_MODE_UNIT);
        teardown_manager();
}

/* A record keeps the mode; one from before modes is a unit session; a mode that cannot be
 * read makes the record unreadable rather than a guess. */
static void test_exec_mode_record(void) {
        static const struct {
                const char *extra;
                int r;
                ExecMode mode;
        } cases[] = {
                { "", 0, EXEC_MODE_UNIT },
                { ",\"exec_mode\":\"unit\"", 0, EXEC_MODE_UNIT },
                { ",\"exec_mode\":\"session\"", 0, EXEC_MODE_SESSION },
                { ",\"exec_mode\":\"thread\"", -EBADMSG, 0 },
                { ",\"exec_mode\":1", -EBADMSG, 0 },
                { ",\"exec_mode\":null", -EBADMSG, 0 },
        };

        setup_manager();
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(json_object_putp) json_object *o = NULL;
                char text[256];
                Session *s = calloc(1, sizeof(Session));

                ASSERT(s);
                if (!s)
                        break;
                s->manager = m;
                snprintf(text, sizeof(text),
                         "{\"id\":\"0123456789abcdef\",\"user\":\"alice\",\"workspace\":\"rec\","
                         "\"state\":\"closed\"%s}", cases[i].extra);
                ASSERT(store_parse(text, strlen(text), &o) >= 0);
                ASSERT(session_record_decode(s, o, &m->config) == cases[i].r);
                if (cases[i].r >= 0)
                        ASSERT(s->exec_mode == cases[i].mode);
                session_free(s);
        }
        teardown_manager();
}

static void test_session_start_fails(void) {
        RequestError e = {};
        Seen a = {}, b = {};
        Session *s;
        char slice[64];

        setup_manager();
        s = create("ws2", &e);
        if (!s)
                goto out;
        snprintf(slice, sizeof(slice), "%s", s->slice);
        ASSERT(session_wait_ready(s, on_done, &a, &a.op) == 1);
        ASSERT(session_wait_ready(s, on_done, &b, &b.op) == 1);
        answer_error(find_call("StartTransientUnit", slice), "no slice for you");
        /* both waiters told -EIO once, with systemd's reason; the observer saw it go; the session is gone */
        ASSERT(a.n == 1 && a.r == -EIO && strcmp(a.message, "no slice for you") == 0);
        ASSERT(b.n == 1 && b.r == -EIO);
        ASSERT(n_added == 1 && n_removed == 1 && last_removed == a.object);
        ASSERT(m->sessions == NULL);
        ASSERT(m->n_live_sessions == 0);
out:
        teardown_manager();
        ASSERT(a.n == 1 && b.n == 1);
}

static void test_teardown_while_starting(void) {
        RequestError e = {};
        Seen ready = {}, closed = {}, gone = {};
        Session *s;

        setup_manager();
        s = create("ws3", &e);
        if (!s)
                goto out;
        ASSERT(session_wait_ready(s, on_done, &ready, &ready.op) == 1);
        ASSERT(session_wait_ready(s, on_done, &gone, &gone.op) == 1);
        ASSERT(find_call("StartTransientUnit", s->slice) != NULL);
        /* a session that is not yet active refuses a close (the caller waits first): no handle */
        ASSERT(session_close(s, "client", false, on_done, &closed, &closed.op) == -EBUSY);
        ASSERT(closed.op == NULL);
        ASSERT(ready.n == 0);
        /* sandboxd stops (daemon_stop()): told now, -ECANCELED, once */
        m->stopping = true;
        session_cancel_ops(s, OP_STOPPING);
        ASSERT(ready.n == 1 && ready.r == -ECANCELED && strcmp(ready.message, OP_STOPPING) == 0);
        ASSERT(gone.n == 1 && gone.r == -ECANCELED);
        ASSERT(s->ready_ops == NULL);
out:
        /* PID 1 never answers: sandboxd goes with the call pending, and nobody is told again */
        teardown_manager();
        ASSERT(ready.n == 1 && gone.n == 1 && closed.n == 0);
}

/* The session goes (session_free()) with a waiter: -ECANCELED, "the session is gone". */
static void test_session_freed_while_starting(void) {
        RequestError e = {};
        Seen ready = {};
        Session *s;

        setup_manager();
        s = create("ws10", &e);
        if (s)
                ASSERT(session_wait_ready(s, on_done, &ready, &ready.op) == 1);
        teardown_manager();
        ASSERT(ready.n == 1 && ready.r == -ECANCELED && strcmp(ready.message, OP_GONE) == 0);
}

static Session *active_session(const char *workspace) {
        RequestError e = {};
        Session *s = create(workspace, &e);

        if (!s)
                return NULL;
        answer_job(find_call("StartTransientUnit", s->slice));
        ASSERT(s->state == SESSION_ACTIVE);
        return s;
}

static void test_command_start_answers(void) {
        Seen ok = {}, failed = {}, pending = {}, again = {};
        Session *s;
        Command *c1, *c2, *c3;
        char unit1[128], unit2[128], unit3[128];

        setup_manager();
        s = active_session("ws4");
        if (!s)
                goto out;

        c1 = exec_true(s, &ok);
        c2 = exec_true(s, &failed);
        c3 = exec_true(s, &pending);
        if (!c1 || !c2 || !c3)
                goto out;
        snprintf(unit1, sizeof(unit1), "%s", c1->unit);
        snprintf(unit2, sizeof(unit2), "%s", c2->unit);
        snprintf(unit3, sizeof(unit3), "%s", c3->unit);
        ASSERT(m->n_starting == 3);
        ASSERT(ok.n == 0 && failed.n == 0 && pending.n == 0);

        answer_job(find_call("StartTransientUnit", unit1));
        ASSERT(ok.n == 1 && ok.r == 0 && ok.object == c1);
        ASSERT(c1->result.status == COMMAND_RUNNING);
        ASSERT(n_command_changed == 1);
        ASSERT(m->n_running == 1 && m->n_starting == 2);

        /* refused: told once, the command already forgotten */
        answer_error(find_call("StartTransientUnit", unit2), "no unit for you");
        ASSERT(failed.n == 1 && failed.r == -EIO && failed.object == NULL);
        ASSERT(strcmp(failed.message, "no unit for you") == 0);
        ASSERT(m->n_starting == 1);

        /* the same request id again: the command there is, no handle */
        {
                char *argv[] = { (char *) "/bin/true", NULL };
                CommandRequest req = { .argv = argv, .request_id = c1->request_id };
                RequestError e = {};
                Command *c = NULL;

                ASSERT(session_exec(s, &req, on_done, &again, &c, &again.op, &e) == 0);
                ASSERT(c == c1 && again.op == NULL);
        }

        /* the first one's state, once: done, so it finishes */
        answer_unit_state(find_call("GetAll", NULL), "active", "exited", "success");
        answer_unit_state(find_call("GetAll", NULL), "active", "exited", "success");
        ASSERT(n_command_finished == 1);
        ASSERT(m->n_running == 0);

        /* the third's caller stops the daemon: told once, with the command (which goes on) */
        m->stopping = true;
        session_cancel_ops(s, OP_STOPPING);
        ASSERT(pending.n == 1 && pending.r == -ECANCELED && pending.object == c3);
        ASSERT(c3->start_ops == NULL && !command_status_is_terminal(c3->result.status));
        (void) unit3;
out:
        teardown_manager();
        /* not told again at the teardown */
        ASSERT(pending.n == 1 && ok.n == 1 && failed.n == 1 && again.n == 0);
}

static void test_close_with_commands_running(void) {
        Seen started = {}, closed = {}, closed2 = {}, after = {};
        Session *s;
        Command *c;
        char unit[128];

        setup_manager();
        s = active_session("ws5");
        if (!s)
                goto out;
        c = exec_true(s, &started);
        if (!c)
                goto out;
        snprintf(unit, sizeof(unit), "%s", c->unit);
        answer_job(find_call("StartTransientUnit", unit));
        ASSERT(started.n == 1 && started.r == 0);
        ASSERT(c->result.status == COMMAND_RUNNING);

        ASSERT(m->n_live_sessions == 1 && session_find_by_scope(m, "local", "alice", "ws5") == s);
        ASSERT(session_close(s, "client", false, on_done, &closed, &closed.op) == 1);
        ASSERT(s->state == SESSION_CLOSING);
        /* closing: still live, but no longer the scope's session (a create makes a new one) */
        ASSERT(m->n_live_sessions == 1 && !session_find_by_scope(m, "local", "alice", "ws5"));
        ASSERT(count_calls("StopUnit", unit) == 1);
        ASSERT(count_calls("StopUnit", s->slice) == 0); /* not before its commands are over */
        /* a second close while closing waits for the same end; this one asks for the purge,
         * too late once the commands are stopped? not yet: they are still being stopped */
        ASSERT(session_close(s, "client", false, on_done, &closed2, &closed2.op) == 1);
        ASSERT(closed.n == 0 && closed2.n == 0);

        /* the command's end: the state read after the start says it was stopped */
        answer_unit_state(find_call("GetAll", NULL), "failed", "failed", "signal");
        answer_unit_state(find_call("GetAll", NULL), "failed", "failed", "signal");
        ASSERT(command_status_is_terminal(c->result.status));
        ASSERT(n_command_finished == 1);
        ASSERT(s->state == SESSION_CLOSED);
        ASSERT(count_calls("StopUnit", s->slice) == 1);
        ASSERT(closed.n == 1 && closed.r == 0 && closed.object == s && closed2.n == 1 && closed2.r == 0);
        ASSERT(m->n_live_sessions == 0 && session_find(m, s->id) == s);
        {
                /* the scope is free: a new session, counted, found by its scope */
                RequestError e = {};
                Session *t = create("ws5", &e);

                ASSERT(t && t != s && t->state == SESSION_STARTING);
                ASSERT(m->n_live_sessions == 1 && session_find_by_scope(m, "local", "alice", "ws5") == t);
                ASSERT(!session_find_by_scope(m, "local", "alice", "ws6") && !session_find_by_scope(m, "other", "alice", "ws5"));
        }

        /* a close of a closed session is over at once: 0, no handle, the result from the session */
        ASSERT(session_close(s, "client", false, on_done, &after, &after.op) == 0);
        ASSERT(after.op == NULL && after.n == 0);
        ASSERT(session_close_result(s, false) == 0);
        ASSERT(session_close_result(s, true) == -ESTALE); /* closed without the purge */
out:
        teardown_manager();
        ASSERT(started.n == 1 && closed.n == 1 && closed2.n == 1 && after.n == 0);
}

/* A session with nothing running closes at once: 0 and no handle, never a function called
 * before the caller has its handle. */
static void test_close_at_once(void) {
        Seen closed = {};
        Session *s;

        setup_manager();
        s = active_session("ws11");
        if (!s)
                goto out;
        ASSERT(session_close(s, "client", false, on_done, &closed, &closed.op) == 0);
        ASSERT(closed.op == NULL && closed.n == 0);
        ASSERT(s->state == SESSION_CLOSED && s->close_ops == NULL);
        ASSERT(count_calls("StopUnit", s->slice) == 1);
        /* nobody waits (the expiry's close) */
        ASSERT(session_close(s, "idle", false, NULL, NULL, NULL) == 0);
out:
        teardown_manager();
        ASSERT(closed.n == 0);
}

/* A close while a command's start is not yet answered: the close waits for it; when PID 1
 * refuses the start, the session closes all the same. */
static void test_close_while_command_starting(void) {
        Seen started = {}, closed = {};
        Session *s;
        Command *c;
        char unit[128];

        setup_manager();
        s = active_session("ws9");
        if (!s)
                goto out;
        c = exec_true(s, &started);
        if (!c)
                goto out;
        snprintf(unit, sizeof(unit), "%s", c->unit);
        ASSERT(m->n_live_sessions == 1 && session_find_by_scope(m, "local", "alice", "ws9") == s);
        ASSERT(session_close(s, "client", false, on_done, &closed, &closed.op) == 1);
        ASSERT(s->state == SESSION_CLOSING);
        /* closing: still live, but no longer the scope's session (a create makes a new one) */
        ASSERT(m->n_live_sessions == 1 && !session_find_by_scope(m, "local", "alice", "ws9"));
        ASSERT(count_calls("StopUnit", unit) == 1); /* queued behind the start */
        ASSERT(closed.n == 0);
        answer_error(find_call("StartTransientUnit", unit), "no unit for you");
        ASSERT(started.n == 1 && started.r == -EIO);
        ASSERT(s->state == SESSION_CLOSED);
        ASSERT(count_calls("StopUnit", s->slice) == 1);
        ASSERT(closed.n == 1 && closed.r == 0);
out:
        teardown_manager();
        ASSERT(started.n == 1 && closed.n == 1);
}

/* The caller lets go of each kind of handle before it completes: its function is never
 * called, the operation goes on, nothing leaks. */
static void test_free_before_completion(void) {
        RequestError e = {};
        Seen ready = {}, started = {}, frozen = {}, closed = {};
        Session *s;
        Command *c;
        char unit[128];

        setup_manager();
        s = create("ws12", &e);
        if (!s)
                goto out;
        ASSERT(session_wait_ready(s, on_done, &ready, &ready.op) == 1);
        ready.op = op_free(ready.op);
        ASSERT(s->ready_ops == NULL);
        answer_job(find_call("StartTransientUnit", s->slice));
        ASSERT(s->state == SESSION_ACTIVE && ready.n == 0);

        c = exec_true(s, &started);
        if (!c)
                goto out;
        snprintf(unit, sizeof(unit), "%s", c->unit);
        started.op = op_free(started.op);
        ASSERT(c->start_ops == NULL);
        answer_job(find_call("StartTransientUnit", unit));
        ASSERT(c->result.status == COMMAND_RUNNING && started.n == 0);

        ASSERT(session_freeze(s, true, on_done, &frozen, &frozen.op) == 1);
        frozen.op = op_free(frozen.op);
        answer_job(find_call("FreezeUnit", s->slice));
        answer_freezer_state(find_call("Get", NULL), "frozen");
        ASSERT(s->frozen && frozen.n == 0);
        ASSERT(session_freeze(s, false, on_done, &frozen, &frozen.op) == 1); /* the next one may go */
        answer_job(find_call("ThawUnit", s->slice));
        answer_freezer_state(find_call("Get", NULL), "running");
        ASSERT(!s->frozen && frozen.n == 1 && frozen.r == 0);

        ASSERT(session_close(s, "client", false, on_done, &closed, &closed.op) == 1);
        closed.op = op_free(closed.op);
        ASSERT(s->close_ops == NULL);
        answer_unit_state(find_call("GetAll", NULL), "failed", "failed", "signal");
        answer_unit_state(find_call("GetAll", NULL), "failed", "failed", "signal");
        ASSERT(s->state == SESSION_CLOSED && closed.n == 0);
out:
        teardown_manager();
        ASSERT(ready.n == 0 && started.n == 0 && closed.n == 0 && frozen.n == 1);
}

static void test_freeze(void) {
        Seen f = {}, g = {}, h = {}, closed = {};
        Session *s;

        setup_manager();
        s = active_session("ws6");
        if (!s)
                goto out;

        /* frozen, as the freezer state says */
        ASSERT(session_freeze(s, true, on_done, &f, &f.op) == 1);
        ASSERT(session_freeze(s, true, on_done, &g, &g.op) == -EBUSY);
        ASSERT(g.op == NULL);
        answer_job(find_call("FreezeUnit", s->slice));
        ASSERT(f.n == 0);
        answer_freezer_state(find_call("Get", NULL), "frozen");
        ASSERT(f.n == 1 && f.r == 0 && f.object == s && s->frozen);
        ASSERT(n_frozen_changes == 1);
        ASSERT(g.n == 0);

        /* a thaw that systemd answered but did not do */
        ASSERT(session_freeze(s, false, on_done, &g, &g.op) == 1);
        answer_job(find_call("ThawUnit", s->slice));
        answer_freezer_state(find_call("Get", NULL), "frozen");
        ASSERT(g.n == 1 && g.r == -EIO && s->frozen);

        /* a thaw under way when the session closes: told once, -ESTALE, and thawed anyway */
        ASSERT(session_freeze(s, false, on_done, &h, &h.op) == 1);
        ASSERT(session_close(s, "client", false, on_done, &closed, &closed.op) == 0);
        ASSERT(h.n == 1 && h.r == -ESTALE);
        ASSERT(!s->frozen);
        ASSERT(s->state == SESSION_CLOSED);
        /* the answer to the cancelled thaw changes nothing */
        answer_job(find_call("ThawUnit", s->slice));
        ASSERT(h.n == 1);
        /* a closed session is not frozen */
        ASSERT(session_freeze(s, true, on_done, &f, &f.op) == -ESTALE && f.op == NULL);
out:
        teardown_manager();
        ASSERT(f.n == 1 && g.n == 1 && h.n == 1 && closed.n == 0);
}

static void test_teardown_while_freezing(void) {
        Seen f = {};
        Session *s;

        setup_manager();
        s = active_session("ws7");
        if (s) {
                ASSERT(session_freeze(s, true, on_done, &f, &f.op) == 1);
                ASSERT(find_call("FreezeUnit", s->slice) != NULL);
                m->stopping = true;
                session_cancel_ops(s, OP_STOPPING);
                ASSERT(f.n == 1 && f.r == -ECANCELED && strcmp(f.message, OP_STOPPING) == 0);
                ASSERT(s->freeze_ops == NULL && s->freeze_call == NULL);
        }
        teardown_manager();
        ASSERT(f.n == 1);
}

/* Runs what the loop has to do now (stdin's pipe is an event source of it). */
static void run_loop(void) {
        for (int i = 0; i < 100 && sd_event_run(m->event, 0) > 0; i++)
                ;
}

/* A command started with stdin "stream": each write is told once its bytes are in the
 * pipe, in order; a handle freed first is never called; the teardown cancels the rest. */
static void test_stdin(void) {
        char *argv[] = { (char *) "/bin/cat", NULL };
        Seen started = {}, w1 = {}, w2 = {}, w3 = {}, w4 = {};
        static char big[4 * 1024 * 1024]; /* more than a pipe holds (1 MiB, PIPE_SIZE): stays pending */
        Session *s;
        Command *c;

        setup_manager();
        s = active_session("ws13");
        if (!s)
                goto out;
        c = exec_argv(s, argv, STDIN_STREAM, &started);
        if (!c)
                goto out;
        ASSERT(c->stdin_fd >= 0);
        /* not running yet: its stdin takes nothing */
        ASSERT(command_write_stdin(c, "x", 1, false, on_done, &w1, &w1.op) == -EPIPE && w1.op == NULL);
        answer_job(find_call("StartTransientUnit", c->unit));
        ASSERT(started.n == 1 && started.r == 0 && c->result.status == COMMAND_RUNNING);

        ASSERT(command_write_stdin(c, "hello\n", 6, false, on_done, &w1, &w1.op) == 1);
        ASSERT(command_write_stdin(c, "again\n", 6, false, on_done, &w2, &w2.op) == 1);
        ASSERT(w1.op->kind == OP_COMMAND_STDIN && w1.op->command == c);
        ASSERT(w1.n == 0 && w2.n == 0); /* written from the loop, not before */
        w2.op = op_free(w2.op);
        run_loop();
        ASSERT(w1.n == 1 && w1.r == 0 && w1.object == c);
        ASSERT(w2.n == 0 && c->stdin_ops == NULL);

        /* the pipe is full (nobody reads the stand-in's end): pending until sandboxd goes */
        ASSERT(command_write_stdin(c, big, sizeof(big), false, on_done, &w3, &w3.op) == 1);
        ASSERT(command_write_stdin(c, "end\n", 4, true, on_done, &w4, &w4.op) == 1);
        run_loop();
        ASSERT(w3.n == 0 && w4.n == 0);
        /* after an eof, nothing more */
        ASSERT(command_write_stdin(c, "x", 1, false, on_done, &w1, &w1.op) == -EPIPE && w1.op == NULL);
out:
        teardown_manager();
        ASSERT(w3.n == 1 && w3.r == -ECANCELED && strcmp(w3.message, OP_GONE) == 0);
        ASSERT(w4.n == 1 && w4.r == -ECANCELED);
        ASSERT(w1.n == 1 && w2.n == 0 && started.n == 1);
}

static void test_pool(void) {
        RequestError e = {};
        Session *s;
        Call *start;
        unsigned before;

        setup_manager();
        m->config.pool_profile = POOL_SHARED;
        m->config.pool_size = 2;
        m->config.pool_min_ready = 1;
        pool_fill(m);
        ASSERT(count_calls("StartTransientUnit", NULL) == 1); /* one slice prepared */
        start = find_call("StartTransientUnit", NULL);
        if (!start)
                goto out;
        answer_job(start);
        before = n_calls;

        /* the session takes the prepared slice: active at once, no start of its own */
        s = create("ws8", &e);
        if (!s)
                goto out;
        ASSERT(s->state == SESSION_ACTIVE && s->from_pool);
        ASSERT(n_added == 1 && n_state_changes == 1);
        ASSERT(strcmp(s->slice, calls[0].unit) == 0);
        ASSERT(count_calls("StartTransientUnit", s->slice) == 1);
        ASSERT(m->n_pool_in_use == 1);
        (void) before;
out:
        teardown_manager();
}

int main(void) {
        if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", "/var/lib", "tmpfs", 0, "mode=0755") < 0) {
                fprintf(stderr, "cannot put a tmpfs over /var/lib in a mount namespace of our own: skipped\n");
                return 77;
        }
        (void) mkdir("/var/lib/sandboxd", 0755);
        (void) mkdir("/var/lib/private", 0700);
        (void) mkdir("/var/lib/test-run", 0755);
        setenv("STATE_DIRECTORY", "/var/lib/sandboxd", 1);
        setenv("RUNTIME_DIRECTORY", "/var/lib/test-run", 1);
        /* a v2 root as cgroup_layout() sees it, in this namespace only (see the top) */
        if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) < 0) {
                ASSERT(mount("tmpfs", "/sys/fs/cgroup", "tmpfs", 0, "mode=0755") >= 0);
                ASSERT(close(open("/sys/fs/cgroup/cgroup.controllers", O_CREAT | O_WRONLY | O_CLOEXEC, 0644)) >= 0);
        }
        test_op();
        test_session_becomes_active();
        test_session_start_fails();
        test_exec_mode();
        test_exec_mode_record();
        test_teardown_while_starting();
        test_session_freed_while_starting();
        test_command_start_answers();
        test_close_with_commands_running();
        test_close_at_once();
        test_close_while_command_starting();
        test_free_before_completion();
        test_freeze();
        test_teardown_while_freezing();
        test_stdin();
        test_pool();

        return TESTS_DONE();
}
