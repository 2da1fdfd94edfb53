/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"
#include "net-policy.h"

/* The egress proxy of sessions in network mode "proxy".
 *
 * A command of such a session runs in the network namespace of its session's
 * sandboxd-<sid>-proxy.socket (JoinsNamespaceOf=), where the only thing to talk to is
 * 127.0.0.1:3128; systemd-socket-proxyd, activated by that socket, relays every
 * connection to <runtime>/proxy/<sid>/proxy.sock, where sandboxd listens. The socket
 * tells the session. Each connection speaks HTTP (a forward request with an absolute
 * URL, or CONNECT) or SOCKS5 (CONNECT); sandboxd resolves the name itself, checks the
 * name and every address against the policy, connects to an allowed address and relays
 * bytes both ways. Refusals are logged, counted, and reported in the event log of the
 * command (named by the proxy user name "c<N>" that its proxy URLs carry) or, when the
 * client sent none, of every running command of the session. */

typedef struct Proxy Proxy;
typedef struct ProxyListener ProxyListener;

int proxy_new(Manager *m, Proxy **ret);
Proxy *proxy_free(Proxy *p);
unsigned proxy_count_connections(Proxy *p);

/* <runtime>/proxy/<sid>: the directory systemd-socket-proxyd gets bound. */
int proxy_session_dir(Manager *m, const char *session_id, char **ret);
/* Listens on <runtime>/proxy/<sid>/proxy.sock for the session's connections. */
int proxy_listen(Proxy *p, Session *s, ProxyListener **ret);
/* Stops listening, ends the session's connections, removes the socket. */
ProxyListener *proxy_listener_free(ProxyListener *l);

/* What a session's proxy lets through; pure, for the tests too. */
typedef struct ProxyPolicy {
        char * const *denied;          /* the host's baseline */
        char * const *session_denied;  /* the session's additions */
        char * const *allowed;         /* the host's allow list (NULL or empty: none) */
        char * const *session_allowed; /* the session's allow list (NULL: none) */
        const AddressRange *allowed_ranges; /* exceptions to the refused classes */
        size_t n_allowed_ranges;
        const AddressRange *denied_ranges;
        size_t n_denied_ranges;
        const AddressRange *host_addresses; /* this host's own */
        size_t n_host_addresses;
} ProxyPolicy;

/* NULL when `host` (normalized) may be asked for, else why not: "denied_domain",
 * "not_allowed". */
const char *proxy_policy_check_name(const ProxyPolicy *p, const char *host);
/* NULL when sandboxd may connect to the address, else why not: "loopback",
 * "link-local", "private", "unspecified", "multicast", "reserved", "host_address",
 * "denied_address". */
const char *proxy_policy_check_address(const ProxyPolicy *p, int family, const uint8_t addr[static 16]);
