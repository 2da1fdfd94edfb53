/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"
#include "validate.h"

/* SANDBOXD_NODES, where clients find the URL of a node that a 421 wrong_node named
 * (sandboxd-api(7), NODES): NAME=URL entries separated by commas or whitespace, e.g.
 * "n1=http://10.0.0.1:8421,n2=http://10.0.0.2:8421". Pure: libsandboxd follows a 421 with
 * it, sandboxctl ls lists every node of it. */
#define NODES_ENV "SANDBOXD_NODES"
#define NODES_SPEC_MAX (64 * 1024)

typedef struct NodeEntry {
        char name[NODE_NAME_MAX + 1];
        char *url; /* http:// or https://, without a trailing '/' */
} NodeEntry;

/* Every entry of spec, in its order: 0, *ret (NULL when none) and *ret_n; -EINVAL when spec is
 * malformed (an entry without '=', a name no node has, a node named twice, a URL not http://
 * or https://, more than NODES_SPEC_MAX bytes), *ret_why then says what; -ENOMEM. */
int nodes_parse(const char *spec, NodeEntry **ret, size_t *ret_n, const char **ret_why);
void nodes_free(NodeEntry *l, size_t n);

/* The URL of node in spec: 0 and *ret_url; -ENOENT when spec (NULL: none) does not name it;
 * nodes_parse()'s errors. */
int nodes_lookup(const char *spec, const char *node, char **ret_url, const char **ret_why);
