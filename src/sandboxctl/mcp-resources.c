/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: resources (resources/list, resources/read, subscriptions). */

#include "mcp.h"

const McpMethod mcp_resource_methods[] = {
        {},
};

void mcp_resources_done(void) {
}
