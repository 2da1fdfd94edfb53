/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

#include "host-addresses.h"
#include "net-policy.h"

/* Name resolution and the address policy of the egress proxy: names are looked up in
 * threads (getaddrinfo() blocks), as absolute names only; every address is checked against
 * the policy and this host's own addresses (host-addresses.h) before sandboxd connects. */

#define PROXY_ADDRESSES_MAX 8U

typedef struct NetAddress {
        int family;
        uint8_t addr[16];
} NetAddress;

typedef struct ProxyResolver ProxyResolver;
typedef struct ProxyLookup ProxyLookup;
/* Whose lookups these are (a session's): a lookup counts against its group until its thread
 * is done, even once cancelled, since the thread is still there. */
typedef struct ProxyLookupGroup ProxyLookupGroup;

/* error: 0, -ENXIO (no such name, or no address), -EAGAIN (try later), ... */
typedef void (*ProxyLookupFn)(int error, const NetAddress *addrs, size_t n, void *userdata);

/* At most max_running lookups in flight, max_per_group of them for one group. */
int proxy_resolver_new(sd_event *e, unsigned max_running, unsigned max_per_group, ProxyResolver **ret);
ProxyResolver *proxy_resolver_free(ProxyResolver *r);
/* This host's own addresses, as the resolver keeps them (NULL: none yet). */
HostAddresses *proxy_resolver_host_addresses(ProxyResolver *r);

int proxy_lookup_group_new(ProxyLookupGroup **ret);
ProxyLookupGroup *proxy_lookup_group_unref(ProxyLookupGroup *g);
unsigned proxy_lookup_group_running(const ProxyLookupGroup *g);

/* Looks up a name (NetHost.text of a name, never an address literal), without the search
 * domains of resolv.conf: "intranet" is not tried as "intranet.example.com", nor
 * "a.b" as "a.b.example.com", on behalf of group g. fn is called from the event loop,
 * unless the lookup was cancelled. -EDQUOT when the group has its share of lookups
 * running, -EBUSY when the resolver has all it may. */
int proxy_resolver_lookup(ProxyResolver *r, ProxyLookupGroup *g, const char *name, ProxyLookupFn fn, void *userdata,
                          ProxyLookup **ret);
/* fn will not be called. Returns NULL. */
ProxyLookup *proxy_lookup_cancel(ProxyLookup *l);

/* NULL when sandboxd may connect to the address, else the reason (proxy_policy_check_address(),
 * with this host's addresses; while those are not known, every address counts as one). */
const char *proxy_resolver_check_address(ProxyResolver *r, const ProxyPolicy *p, int family,
                                         const uint8_t addr[static 16]);
