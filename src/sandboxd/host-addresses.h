/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

#include "net-policy.h"

/* This host's own addresses, as the kernel's local routing table says them: every route of
 * type local, broadcast, anycast or multicast in table local, of both families, prefixes
 * included ("ip route add local 10.99.0.0/16 dev lo" makes that whole /16 this host's).
 * Read over rtnetlink once at start, then again whenever the kernel announces a change of
 * routes or addresses; a new local route counts from its announcement on. */

typedef struct HostAddresses HostAddresses;

int host_addresses_new(sd_event *e, HostAddresses **ret);
HostAddresses *host_addresses_free(HostAddresses *h);

/* The ranges, or -ENODATA while they are not known (no complete read yet; h may be NULL). */
int host_addresses_get(HostAddresses *h, const AddressRange **ret, size_t *ret_n);
