/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Every call to PID 1 passes through one gate: at most PID1_CALLS_MAX of them are in
 * flight at once, the others wait here, in order. A burst of session creates or commands
 * then queues in sandboxd instead of piling up at PID 1 and the bus, where it ends in
 * "Method call timed out", dbus-daemon's limit of pending replies per connection, or
 * its limit of match rules for PID 1's connection (one per unfinished job). The gate
 * knows nothing of sessions or commands. */

#include <systemd/sd-bus.h>

#define PID1_CALLS_MAX 16
/* ... and while PID 1 has this many jobs of ours not finished (a start or stop answered
 * but not done), the next call waits too: each job holds one of the 512 match rules
 * dbus-daemon allows PID 1's connection (see pid1-gate.c). */
#define PID1_JOBS_MAX 128
/* New sessions and commands are refused (503 overloaded) while this many calls wait;
 * the calls that end or clean up are never refused. */
#define PID1_WAITING_MAX 1024

typedef struct Pid1Gate Pid1Gate;
typedef struct Pid1Call Pid1Call;

int pid1_gate_new(sd_bus *bus, unsigned max, Pid1Gate **ret);
/* At exit: sends every waiting call without waiting for its answer, and forgets the
 * calls in flight; no callback runs. The caller then flushes the bus. */
Pid1Gate *pid1_gate_free(Pid1Gate *g);

/* Sends m (a method call) now if fewer than max calls are in flight, else once earlier
 * ones are answered. cb gets the reply as sd_bus_call_async()'s callback would, timeouts
 * included. With ret_call, *ret_call names the call until then and is set to NULL just
 * before cb runs, so that its owner can cancel it with pid1_call_cancel(); without, the
 * call belongs to the gate. Takes its own reference on m. */
int pid1_call(Pid1Gate *g, Pid1Call **ret_call, sd_bus_message *m, sd_bus_message_handler_t cb, void *userdata);

/* Forgets a call not yet answered: cb will not run. Returns NULL. */
Pid1Call *pid1_call_cancel(Pid1Call *c);

sd_bus *pid1_gate_bus(const Pid1Gate *g);
unsigned pid1_gate_in_flight(const Pid1Gate *g);
unsigned pid1_gate_jobs(const Pid1Gate *g);
unsigned pid1_gate_waiting(const Pid1Gate *g);
