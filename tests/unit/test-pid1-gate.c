/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The gate in front of PID 1: at most max calls in flight, the rest sent in the order
 * made as answers come back, cancellation of waiting and flying calls, the owner's
 * pointer cleared before the callback, waiting calls still sent at exit. A stand-in for
 * PID 1 answers over a socketpair, when the test says so: no bus daemon is needed. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pid1-gate.h"
#include "bus-pair.h"
#include "tests.h"

#define N_MAX 64

static sd_bus *client, *server;

/* what the stand-in received, not yet answered, in order */
static sd_bus_message *received[N_MAX];
static unsigned n_received, n_answered;
static int seen[N_MAX]; /* argument of each call received, in order of arrival */

/* what the callbacks saw */
static int called[N_MAX];
static unsigned n_called;
static bool last_was_error;
static Pid1Call **owner_to_check;
static bool owner_was_null;

static int on_call(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        int32_t i = -1;

        if (!sd_bus_message_is_method_call(m, NULL, NULL))
                return 0;
        ASSERT(sd_bus_message_read(m, "i", &i) >= 0);
        if (n_received < N_MAX) {
                seen[n_received] = i;
                received[n_received++] = sd_bus_message_ref(m);
        }
        return 1;
}

static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        if (owner_to_check)
                owner_was_null = *owner_to_check == NULL;
        last_was_error = sd_bus_message_is_method_error(reply, NULL);
        if (n_called < N_MAX)
                called[n_called++] = (int) (intptr_t) userdata;
        return 0;
}

static void run(void) {
        bus_pair_process(client, server);
}

static int submit(Pid1Gate *g, Pid1Call **ret, int i) {
        sd_bus_message *m = NULL;
        int r;

        ASSERT(sd_bus_message_new_method_call(client, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                              "org.freedesktop.systemd1.Manager", "Test") >= 0);
        ASSERT(sd_bus_message_append(m, "i", (int32_t) i) >= 0);
        r = pid1_call(g, ret, m, on_reply, (void *) (intptr_t) i);
        sd_bus_message_unref(m);
        return r;
}

/* the stand-in answers the oldest call it has not answered yet */
static void answer(bool error) {
        sd_bus_message *m;

        ASSERT(n_answered < n_received);
        if (n_answered >= n_received)
                return;
        m = received[n_answered++];
        if (error)
                ASSERT(sd_bus_reply_method_errorf(m, "org.freedesktop.systemd1.NoSuchUnit", "no") >= 0);
        else
                ASSERT(sd_bus_reply_method_return(m, NULL) >= 0);
        sd_bus_message_unref(m);
        run();
}

static void reset(void) {
        while (n_answered < n_received)
                sd_bus_message_unref(received[n_answered++]);
        n_received = n_answered = n_called = 0;
        owner_to_check = NULL;
}

static void setup(void) {
        bus_pair_new(&server, &client, on_call);
}

static void test_order_and_bound(void) {
        Pid1Gate *g = NULL;
        Pid1Call *five = NULL;

        ASSERT(pid1_gate_new(client, 3, &g) >= 0);
        for (int i = 0; i < 8; i++)
                ASSERT(submit(g, i == 5 ? &five : NULL, i) >= 0);
        run();
        ASSERT(pid1_gate_in_flight(g) == 3);
        ASSERT(pid1_gate_waiting(g) == 5);
        ASSERT(n_received == 3);

        /* a call that waits can be taken back: it is never sent */
        ASSERT(five != NULL);
        ASSERT(pid1_call_cancel(five) == NULL);
        five = NULL;
        ASSERT(pid1_gate_waiting(g) == 4);

        /* each answer lets the next one go, still at most 3 at PID 1 */
        answer(false);
        ASSERT(n_called == 1 && called[0] == 0);
        ASSERT(n_received == 4 && seen[3] == 3);
        ASSERT(pid1_gate_in_flight(g) == 3);
        answer(true);
        ASSERT(last_was_error);
        while (n_answered < n_received)
                answer(false);
        ASSERT(pid1_gate_in_flight(g) == 0 && pid1_gate_waiting(g) == 0);

        /* sent and answered in the order made, without the cancelled one */
        ASSERT(n_received == 7 && n_called == 7);
        for (unsigned i = 0; i < 7; i++) {
                int want = i < 5 ? (int) i : (int) i + 1;
                ASSERT(seen[i] == want);
                ASSERT(called[i] == want);
        }
        pid1_gate_free(g);
        reset();
}

static void test_cancel_in_flight(void) {
        Pid1Gate *g = NULL;
        Pid1Call *a = NULL, *b = NULL;

        ASSERT(pid1_gate_new(client, 1, &g) >= 0);
        ASSERT(submit(g, &a, 10) >= 0);
        ASSERT(submit(g, &b, 11) >= 0);
        run();
        ASSERT(n_received == 1 && pid1_gate_waiting(g) == 1);
        /* the first was sent: cancelling frees its place at once, its answer is ignored */
        ASSERT(pid1_call_cancel(a) == NULL);
        run();
        ASSERT(n_received == 2 && seen[1] == 11);
        owner_to_check = &b;
        answer(false);
        ASSERT(n_called == 0);
        answer(false);
        ASSERT(n_called == 1 && called[0] == 11);
        ASSERT(owner_was_null); /* the owner's pointer is cleared before its callback */
        ASSERT(b == NULL);
        pid1_gate_free(g);
        reset();
}

static void test_free_sends_what_waits(void) {
        Pid1Gate *g = NULL;
        Pid1Call *owned = NULL;

        ASSERT(pid1_gate_new(client, 1, &g) >= 0);
        for (int i = 20; i < 23; i++)
                ASSERT(submit(g, i == 22 ? &owned : NULL, i) >= 0);
        run();
        ASSERT(n_received == 1);
        pid1_gate_free(g);
        ASSERT(owned == NULL);
        ASSERT(sd_bus_flush(client) >= 0);
        run();
        ASSERT(n_received == 3 && seen[1] == 21 && seen[2] == 22);
        ASSERT(n_called == 0);
        reset();
}

static void test_bad_arguments(void) {
        Pid1Gate *g = NULL;

        ASSERT(pid1_gate_new(NULL, 1, &g) == -EINVAL);
        ASSERT(pid1_gate_new(client, 0, &g) == -EINVAL);
        ASSERT(pid1_call_cancel(NULL) == NULL);
        ASSERT(pid1_gate_free(NULL) == NULL);
}

int main(void) {
        setup();
        test_order_and_bound();
        test_cancel_in_flight();
        test_free_sends_what_waits();
        test_bad_arguments();
        sd_bus_flush_close_unref(client);
        sd_bus_flush_close_unref(server);
        return TESTS_DONE();
}
