/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "list.h"
#include "op.h"
#include "pid1-gate.h"
#include "request.h"

/* A TCP port inside a session's network namespace, made reachable from outside it the way
 * systemd does it: sandboxd-<sid>-port-<P>.socket listens on <runtime>/ports/<sid>/<P>.sock
 * (and, if asked, on 127.0.0.1:<H> of the host, H from [Ports] HostRange=) and activates
 * sandboxd-<sid>-port-<P>.service, systemd-socket-proxyd as a dynamic user in the
 * session's slice that joins the session's network namespace (JoinsNamespaceOf= the unit
 * that holds it) and connects to 127.0.0.1:<P> there. PID 1 owns both units: they outlive
 * a restart of sandboxd, which finds them again from the session's record. No JSON and no
 * HTTP here: the front ends ask, http-json.c and session-dbus.c answer. */

typedef struct Session Session;
typedef struct Manager Manager;

/* The ceiling of [Ports] MaxPerSession= (config.c checks it): what one session may hold. */
#define PORTS_PER_SESSION_MAX 64U
/* The ceiling of [Ports] MaxConnections=: connections of one exposed port at a time. */
#define PORT_CONNECTIONS_MAX 65536U
/* While the socket's start job runs, its state is looked at every PORT_POLL_USEC, for at
 * most PORT_START_TIMEOUT_USEC: one GetAll to PID 1 at a time per starting port. */
#define PORT_POLL_USEC (50 * USEC_PER_MSEC)
#define PORT_START_TIMEOUT_USEC (30 * USEC_PER_SEC)
/* The ports of one host port bitmap: every TCP port number. */
#define HOST_PORTS_BITS 65536U

typedef struct Port Port;
struct Port {
        Session *session;
        uint16_t port;
        uint16_t host_port;   /* 0: none */
        bool active;          /* PID 1 said its socket listens */
        Pid1Call *call;       /* the start, then the look at the socket's state */
        Op *start_ops;        /* port_expose() calls waiting for it */
        sd_event_source *poll_timer; /* the next look at the socket's state while its start job runs */
        uint64_t poll_deadline;      /* CLOCK_MONOTONIC: past it the start failed */
        LIST_FIELDS(Port, ports);
};

/* Exposes req->port of s (which must be active): 1 and *ret_op pending until the socket
 * listens (r < 0 and why in the message when it could not: -EREMOTEIO systemd failed,
 * -ESTALE the session began to close or the port was removed first); 0 and *ret_op NULL
 * when the port is exposed already (*ret_port is it, nothing changed). -EINVAL with *e
 * for a refusal (mode, range, the proxy's port, the per-session limit, no host port
 * free, exposed already with the other "host"). *ret_port: the port, valid until the
 * session is freed or it is removed. */
int port_expose(Session *s, const PortRequest *req, OpFn fn, void *userdata, Port **ret_port, Op **ret_op,
                RequestError *e);
/* The exposed port of that number, or NULL. */
Port *port_find(Session *s, uint16_t port);
/* Stops both units, removes the socket file, forgets it. */
void port_remove(Port *p);
/* The session closes: every port goes as port_remove(). */
void port_remove_all(Session *s);
/* sandboxd exits (or the session is forgotten): the objects go, the units stay with PID 1. */
void port_free_all(Session *s);
/* The unix socket's path ("<runtime>/ports/<sid>/<P>.sock"). */
int port_socket_path(const Port *p, char **ret);
unsigned port_count(const Session *s);

/* Records: the ports of a session as a JSON array for its session.json, and back. Decoding
 * is pure (tests/fuzz/fuzz-records.c): -EBADMSG for an array that is not one of ports. */
json_object *port_list_to_json(const Session *s);
int port_list_from_json(Session *s, json_object *a);
/* After a restart: the host ports of the session's ports taken again, and their units
 * started where PID 1 has them no more (one that exists is fine). */
void port_recover(Session *s);
