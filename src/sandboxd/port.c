/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Exposed ports of a session (port.h): the choice of the unit whose network namespace the
 * relay joins, the bounds, the host ports, the units' start and stop, the records. */

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "port.h"
#include "session.h"
#include "store.h"
#include "systemd.h"
#include "time-util.h"

static bool host_port_used(Manager *m, uint16_t p) {
        return m->host_ports_used[p / 8] & (1u << (p % 8));
}

static void host_port_set(Manager *m, uint16_t p, bool used) {
        if (p == 0)
                return;
        if (used)
                m->host_ports_used[p / 8] |= (uint8_t) (1u << (p % 8));
        else
                m->host_ports_used[p / 8] &= (uint8_t) ~(1u << (p % 8));
}

/* Whether something else on the host holds 127.0.0.1:p already: a bind that fails says so at
 * once, without a round trip to PID 1. Non-blocking, one socket. */
static bool host_port_free_on_host(uint16_t p) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(p), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd, r;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return true; /* PID 1 will say */
        r = bind(fd, (struct sockaddr *) &sa, sizeof(sa));
        close(fd);
        return r == 0;
}

/* The lowest port of HostRange= that no exposed port and nothing else on the host holds.
 * At most the range's size in bit tests, and a bind for each port the bitmap calls free
 * until one is: bounded by HostRange=. */
static int host_port_pick(Manager *m, uint16_t *ret) {
        const Config *c = &m->config;

        for (unsigned p = c->host_port_min; p <= c->host_port_max; p++) {
                if (host_port_used(m, (uint16_t) p) || !host_port_free_on_host((uint16_t) p))
                        continue;
                *ret = (uint16_t) p;
                return 0;
        }
        return -EADDRNOTAVAIL;
}

int port_socket_path(const Port *p, char **ret) {
        return asprintf(ret, "%s/ports/%s/%u.sock", p->session->manager->runtime_dir, p->session->id, p->port) < 0
                       ? -ENOMEM
                       : 0;
}

static int port_dir(Session *s, char **ret) {
        return asprintf(ret, "%s/ports/%s", s->manager->runtime_dir, s->id) < 0 ? -ENOMEM : 0;
}

unsigned port_count(const Session *s) {
        unsigned n = 0;
        Port *p;

        LIST_FOREACH(ports, p, s->ports)
                n++;
        return n;
}

Port *port_find(Session *s, uint16_t port) {
        Port *p;

        LIST_FOREACH(ports, p, s->ports)
                if (p->port == port)
                        return p;
        return NULL;
}

/* The unit whose network namespace the session's commands share, or NULL and why not. */
static const char *port_namespace_unit(Session *s, char **ret_unit, RequestError *e) {
        int r;

        /* Mode none in exec mode session shares the executor's namespace, but a relay that
         * joins the executor's unit did not reach its servers in the tests: refused until it does. */
        if (s->network == NETWORK_PROXY)
                r = systemd_proxy_unit_names(s->id, ret_unit, NULL);
        else if (s->network == NETWORK_NONE) {
                request_error(e, "port_exposure_unavailable",
                              "Session %s is in network mode 'none': its commands have no network namespace that a "
                              "relay can join (in exec mode 'unit' each has one of its own). Use network mode 'proxy'.",
                              s->id);
                return NULL;
        } else {
                request_error(e, "port_exposure_unavailable",
                              "Session %s is in network mode 'host': a server its commands start listens on the "
                              "host's network already; there is nothing to relay.", s->id);
                return NULL;
        }
        return r < 0 ? NULL : *ret_unit;
}

static Port *port_free(Port *p) {
        if (!p)
                return NULL;
        op_complete_all(&p->start_ops, -ECANCELED, p->session->manager->stopping ? OP_STOPPING : OP_GONE);
        pid1_call_cancel(p->call);
        sd_event_source_disable_unref(p->poll_timer);
        host_port_set(p->session->manager, p->host_port, false);
        LIST_REMOVE(ports, p->session->ports, p);
        free(p);
        return NULL;
}

static void port_failed(Port *p, const char *fmt, ...) _printf_(2, 3);
static void port_failed(Port *p, const char *fmt, ...) {
        char message[512];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(message, sizeof(message), fmt, ap);
        va_end(ap);
        log_warning("Failed to expose port %u of session %s: %s", p->port, p->session->id, message);
        p->call = pid1_call_cancel(p->call);
        op_complete_all(&p->start_ops, -EREMOTEIO, message);
        port_remove(p); /* whatever PID 1 made of it goes too */
}

static int port_ask_state(Port *p);

static int on_poll_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Port *p = userdata;

        if (port_ask_state(p) < 0)
                port_failed(p, "cannot ask systemd about its socket.");
        return 0;
}

static int on_port_state(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Port *p = userdata;
        UnitState st = {};
        Session *s = p->session;
        int r;

        p->call = NULL;
        if (sd_bus_message_is_method_error(reply, NULL)) {
                port_failed(p, "systemd cannot say whether its socket listens: %s", systemd_error_message(reply));
                return 0;
        }
        r = systemd_read_unit_state(reply, &st);
        if (r >= 0 && !streq(st.active_state, "failed") && !(streq(st.active_state, "active") && st.job_id == 0) &&
            now_usec(CLOCK_MONOTONIC) < p->poll_deadline) {
                /* its start job has not run yet: look again */
                r = sd_event_source_set_time_relative(p->poll_timer, PORT_POLL_USEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(p->poll_timer, SD_EVENT_ONESHOT);
                if (r < 0)
                        port_failed(p, "cannot wait for its socket: %s", strerror(-r));
                return 0;
        }
        if (!streq(st.active_state, "active") || st.job_id != 0) {
                if (p->host_port > 0)
                        port_failed(p, "its socket does not listen (%s, %s): is port %u of the host taken?",
                                    st.active_state, st.result, p->host_port);
                else
                        port_failed(p, "its socket does not listen (%s, %s).", st.active_state, st.result);
                return 0;
        }
        p->active = true;
        p->poll_timer = sd_event_source_disable_unref(p->poll_timer);
        log_info("Exposed port %u of session %s%s.", p->port, s->id, p->host_port ? " (and on the host)" : "");
        (void) session_save(s);
        op_complete_all(&p->start_ops, 0, NULL);
        return 0;
}

static int on_port_started(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Port *p = userdata;
        int r;

        p->call = NULL;
        /* UnitExists: PID 1 kept it while sandboxd restarted */
        if (sd_bus_message_is_method_error(reply, NULL) &&
            !sd_bus_message_is_method_error(reply, "org.freedesktop.systemd1.UnitExists")) {
                port_failed(p, "systemd refused its units: %s", systemd_error_message(reply));
                return 0;
        }
        /* The start job runs after the answer: its state says when it is done, and how. */
        p->poll_deadline = now_usec(CLOCK_MONOTONIC) + PORT_START_TIMEOUT_USEC;
        r = port_ask_state(p);
        if (r < 0)
                port_failed(p, "cannot ask systemd about its socket: %s", strerror(-r));
        return 0;
}

static int port_ask_state(Port *p) {
        _cleanup_free_ char *sock = NULL, *path = NULL;
        int r;

        if (!p->poll_timer) {
                r = sd_event_add_time_relative(p->session->manager->event, &p->poll_timer, CLOCK_MONOTONIC, PORT_POLL_USEC, 0,
                                               on_poll_timer, p);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_enabled(p->poll_timer, SD_EVENT_OFF);
                (void) sd_event_source_set_description(p->poll_timer, "port-start-poll");
        }
        r = systemd_port_unit_names(p->session->id, p->port, &sock, NULL);
        if (r >= 0)
                r = systemd_unit_path(sock, &path);
        if (r >= 0)
                r = systemd_get_unit_state_async(p->session->manager->pid1, &p->call, path, "org.freedesktop.systemd1.Unit",
                                                 on_port_state, p);
        return r;
}

static int port_start_units(Port *p, const char *join_unit) {
        _cleanup_free_ char *path = NULL, *dir = NULL;
        Session *s = p->session;
        Manager *m = s->manager;
        int r;

        r = port_dir(s, &dir);
        if (r >= 0)
                r = port_socket_path(p, &path);
        if (r < 0)
                return r;
        /* group sandboxd reaches the sockets as it reaches http.sock (their mode says the rest) */
        r = store_mkdir_p(dir, 0755);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", dir);

        PortUnitSpec spec = {
                .session_id = s->id,
                .slice = s->slice,
                .join_unit = join_unit,
                .port = p->port,
                .host_port = p->host_port,
                .socket_path = path,
                .max_connections = m->config.port_max_connections,
        };
        return systemd_start_port_async(m->pid1, &p->call, &spec, on_port_started, p);
}

static int port_wait(Port *p, OpFn fn, void *userdata, Op **ret) {
        Op *op = op_new(OP_PORT_START, p->session, NULL, fn, userdata);

        if (!op)
                return -ENOMEM;
        op->port = p->port;
        op_queue(&p->start_ops, op);
        *ret = op;
        return 1;
}

int port_expose(Session *s, const PortRequest *req, OpFn fn, void *userdata, Port **ret_port, Op **ret_op,
                RequestError *e) {
        _cleanup_free_ char *join = NULL;
        const Config *c = &s->manager->config;
        Port *p;
        int r;

        r = session_check_active(s, e);
        if (r < 0)
                return r;
        if (!port_namespace_unit(s, &join, e))
                return e->code ? -EINVAL : -ENOMEM;
        if (req->port < c->port_min || req->port > c->port_max)
                return request_error(e, "invalid_value", "Port %u is outside the range sandboxd exposes ([Ports] Range=%u-%u).",
                                     req->port, c->port_min, c->port_max);
        if (req->port == PROXY_PORT)
                return request_error(e, "invalid_value",
                                     "Port %u is where sandboxd's egress proxy listens inside the session; it cannot be exposed.",
                                     req->port);

        p = port_find(s, req->port);
        if (p) {
                if ((p->host_port > 0) != req->host)
                        return request_error(e, "busy", "Port %u is exposed already, %s the host; remove it first to change that.",
                                             req->port, p->host_port > 0 ? "also on" : "not on");
                *ret_port = p;
                if (p->active) {
                        *ret_op = NULL;
                        return 0;
                }
                return port_wait(p, fn, userdata, ret_op);
        }

        if (port_count(s) >= c->max_ports_per_session)
                return request_error(e, "too_many_ports", "Session %s has %u exposed ports, the most it may have ([Ports] MaxPerSession=).",
                                     s->id, c->max_ports_per_session);

        p = calloc(1, sizeof(Port));
        if (!p)
                return -ENOMEM;
        p->session = s;
        p->port = req->port;
        if (req->host) {
                r = host_port_pick(s->manager, &p->host_port);
                if (r < 0) {
                        free(p);
                        return request_error(e, "host_ports_exhausted",
                                             "No port of [Ports] HostRange=%u-%u is free on the host.", c->host_port_min,
                                             c->host_port_max);
                }
                host_port_set(s->manager, p->host_port, true);
        }
        LIST_PREPEND(ports, s->ports, p);

        r = port_start_units(p, join);
        if (r >= 0)
                r = port_wait(p, fn, userdata, ret_op);
        if (r < 0) {
                port_free(p);
                return r;
        }
        *ret_port = p;
        session_touch(s);
        return 1;
}

static int on_port_stopped(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        if (sd_bus_message_is_method_error(reply, NULL) &&
            !sd_bus_message_is_method_error(reply, "org.freedesktop.systemd1.NoSuchUnit"))
                log_warning("Failed to stop the units of an exposed port, ignoring: %s", systemd_error_message(reply));
        return 0;
}

static void port_stop_units(Session *s, uint16_t port) {
        _cleanup_free_ char *sock = NULL, *svc = NULL;
        Manager *m = s->manager;

        if (systemd_port_unit_names(s->id, port, &sock, &svc) < 0) {
                log_oom();
                return;
        }
        /* the socket first: no new connection activates the relay again */
        (void) systemd_stop_unit_async(m->pid1, sock, on_port_stopped, NULL);
        (void) systemd_stop_unit_async(m->pid1, svc, on_port_stopped, NULL);
}

void port_remove(Port *p) {
        _cleanup_free_ char *path = NULL;
        Session *s;

        if (!p)
                return;
        s = p->session;
        port_stop_units(s, p->port);
        /* RemoveOnStop= does it too, later: the path is gone as the answer says */
        if (port_socket_path(p, &path) >= 0)
                (void) unlink(path);
        op_complete_all(&p->start_ops, -ESTALE, "the port was removed");
        port_free(p);
        (void) session_save(s);
}

void port_remove_all(Session *s) {
        _cleanup_free_ char *dir = NULL;

        while (s->ports)
                port_remove(s->ports);
        if (port_dir(s, &dir) >= 0)
                (void) rmdir(dir);
}

void port_free_all(Session *s) {
        while (s->ports)
                port_free(s->ports);
}

json_object *port_list_to_json(const Session *s) {
        json_object *a = json_object_new_array();
        Port *p;

        if (!a)
                return NULL;
        LIST_FOREACH(ports, p, s->ports) {
                json_object *o;

                if (!p->active)
                        continue; /* not exposed yet: a restart forgets it, as its client is told */
                o = json_object_new_object();
                if (!o || json_object_object_add(o, "port", json_object_new_int(p->port)) < 0 ||
                    json_object_object_add(o, "host_port", json_object_new_int(p->host_port)) < 0 ||
                    json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        json_object_put(a);
                        return NULL;
                }
        }
        return a;
}

int port_list_from_json(Session *s, json_object *a) {
        size_t n;

        if (!json_object_is_type(a, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(a);
        if (n > PORTS_PER_SESSION_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_array_get_idx(a, i), *v;
                int64_t port, host_port = 0;
                Port *p;

                if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "port", &v) ||
                    !json_object_is_type(v, json_type_int))
                        return -EBADMSG;
                port = json_object_get_int64(v);
                if (json_object_object_get_ex(o, "host_port", &v)) {
                        if (!json_object_is_type(v, json_type_int))
                                return -EBADMSG;
                        host_port = json_object_get_int64(v);
                }
                if (port < 1 || port > UINT16_MAX || host_port < 0 || host_port > UINT16_MAX ||
                    port_find(s, (uint16_t) port))
                        return -EBADMSG;
                p = calloc(1, sizeof(Port));
                if (!p)
                        return -ENOMEM;
                *p = (Port) { .session = s, .port = (uint16_t) port, .host_port = (uint16_t) host_port, .active = true };
                LIST_PREPEND(ports, s->ports, p);
        }
        return 0;
}

void port_recover(Session *s) {
        _cleanup_free_ char *join = NULL;
        RequestError e = {};
        Port *p;

        if (s->state != SESSION_ACTIVE) {
                port_remove_all(s); /* closed while sandboxd was away: what is left of them goes */
                return;
        }
        LIST_FOREACH(ports, p, s->ports) {
                if (p->host_port > 0 && host_port_used(s->manager, p->host_port)) {
                        log_warning("Port %u of session %s held host port %u, which another holds now: not on the host any more.",
                                    p->port, s->id, p->host_port);
                        p->host_port = 0;
                }
                host_port_set(s->manager, p->host_port, true);
        }
        if (!s->ports)
                return;
        if (!port_namespace_unit(s, &join, &e))
                return;
        LIST_FOREACH(ports, p, s->ports)
                if (port_start_units(p, join) < 0)
                        log_warning("Failed to ask systemd for the units of port %u of session %s, ignoring.", p->port,
                                    s->id);
}
