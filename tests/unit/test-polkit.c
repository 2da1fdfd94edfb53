/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* polkit.c's checks against a stand-in on the other end of a socketpair, which is both the
 * caller of a method and polkit: it records the CheckAuthorization it gets and answers it
 * when the test says so, or never (then sandboxd stops with the check out, and the caller
 * must get its answer from polkit_free_all(), once). */

#include <errno.h>

#include "bus-pair.h"
#include "manager.h"
#include "polkit.h"
#include "tests.h"

#define ACTION POLKIT_ACTION_MANAGE_SESSIONS

static sd_bus *daemon_bus, *peer;
static sd_bus_message *checks[8];
static unsigned n_checks, n_dispatched, n_replies;
static char reply_error[128];
static Manager *m;
static int verdict;

static void run(void) {
        bus_pair_process(daemon_bus, peer);
}

/* The peer: polkit's side. */
static int on_peer_message(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        if (!sd_bus_message_is_method_call(msg, "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization"))
                return 0;
        ASSERT(n_checks < 8);
        if (n_checks < 8)
                checks[n_checks++] = sd_bus_message_ref(msg);
        return 1;
}

/* The daemon: a method handler that asks polkit first, as bus_authorize() does. */
static int on_daemon_message(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        sd_bus_error error = SD_BUS_ERROR_NULL;

        if (!sd_bus_message_is_method_call(msg, "io.sandboxd.test", "Do"))
                return 0;
        n_dispatched++;
        POLKIT_SCOPE(m, msg);
        verdict = polkit_verify(m, msg, ACTION, NULL, false, &error);
        if (verdict > 0)
                ASSERT(sd_bus_reply_method_return(msg, NULL) >= 0);
        else if (verdict < 0)
                ASSERT(sd_bus_reply_method_error(msg, &error) >= 0);
        sd_bus_error_free(&error);
        return 1;
}

/* The caller's side: what it was answered. */
static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        n_replies++;
        snprintf(reply_error, sizeof(reply_error), "%s", e ? e->name : "");
        return 0;
}

static void call_do(void) {
        sd_bus_message *call = NULL;

        ASSERT(sd_bus_message_new_method_call(peer, &call, NULL, "/io/sandboxd/test", "io.sandboxd.test", "Do") >= 0);
        /* on a direct connection nobody stamps it: the name polkit is told */
        ASSERT(sd_bus_message_set_sender(call, ":1.42") >= 0);
        ASSERT(sd_bus_call_async(peer, NULL, call, on_reply, NULL, 0) >= 0);
        sd_bus_message_unref(call);
        run();
}

static void setup(void) {
        n_checks = n_dispatched = n_replies = 0;
        reply_error[0] = 0;
        bus_pair_new(&peer, &daemon_bus, on_peer_message);
        ASSERT(sd_bus_add_filter(daemon_bus, NULL, on_daemon_message, NULL) >= 0);
        ASSERT(manager_new(&m) >= 0);
        m->bus = sd_bus_ref(daemon_bus);
}

static void teardown(void) {
        polkit_free_all(m);
        run();
        m = manager_free(m);
        for (unsigned i = 0; i < n_checks; i++)
                sd_bus_message_unref(checks[i]);
        daemon_bus = sd_bus_unref(daemon_bus);
        peer = sd_bus_flush_close_unref(peer);
}

/* polkit answers yes: the call is dispatched again and answered by its handler, once. */
static void test_answered(void) {
        setup();
        call_do();
        ASSERT(n_dispatched == 1 && n_checks == 1 && verdict == 0);
        ASSERT(polkit_pending(m) == 1 && n_replies == 0);
        ASSERT(sd_bus_reply_method_return(checks[0], "(bba{ss})", 1, 0, 0) >= 0);
        run();
        ASSERT(n_dispatched == 2 && verdict > 0);
        ASSERT(n_replies == 1 && reply_error[0] == 0);
        ASSERT(polkit_pending(m) == 0 && m->polkit_queries == NULL); /* forgotten with the handler */
        teardown();
        ASSERT(n_replies == 1); /* nothing more at the stop */
}

/* sandboxd stops while polkit has not answered: the caller is told Stopping, once. */
static void test_stop_while_asking(void) {
        setup();
        call_do();
        ASSERT(n_checks == 1 && polkit_pending(m) == 1 && n_replies == 0);
        polkit_free_all(m);
        run();
        ASSERT(n_replies == 1 && strcmp(reply_error, "io.sandboxd.sandbox1.Error.Stopping") == 0);
        ASSERT(polkit_pending(m) == 0 && m->polkit_queries == NULL);
        /* polkit's late answer reaches nobody: no second dispatch, no second reply */
        ASSERT(sd_bus_reply_method_return(checks[0], "(bba{ss})", 1, 0, 0) >= 0);
        run();
        ASSERT(n_dispatched == 1 && n_replies == 1);
        teardown();
        ASSERT(n_replies == 1);
}

int main(void) {
        test_answered();
        test_stop_while_asking();
        return TESTS_DONE();
}
