/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: the tools of sessions, their state and their exposed ports. */

#include "encoding.h"
#include "json-util.h"
#include "mcp.h"
#include "validate.h"

static int tool_create_session(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", "workspace", "memory_max", "cpu_quota", "tasks_max", "ttl_s",
                                               "exec_mode", NULL };
        _cleanup_(json_object_putp) json_object *opts = json_object_new_object(), *limits = json_object_new_object(),
                                                *res = NULL;
        const char *user, *ws, *mem, *mode, *text;
        sandboxd_session *s = NULL;
        bool created = false, oom = false;
        uint64_t u;
        int r;

        if (!opts || !limits)
                return -ENOMEM;
        r = check_args(args, allowed, e);
        if (r >= 0)
                r = scope_of(c, args, &user, &ws, e);
        if (r >= 0)
                r = arg_string(args, "memory_max", false, &mem, e);
        if (r >= 0)
                r = arg_string(args, "exec_mode", false, &mode, e);
        if (r < 0)
                return r;
        if (mem)
                json_put(limits, "memory_max", json_object_new_string(mem), &oom);
        if (mode) /* sandboxd judges it, as it does memory_max */
                json_put(opts, "exec_mode", json_object_new_string(mode), &oom);
        if ((r = arg_uint(args, "cpu_quota", &u, e)) < 0)
                return r;
        if (r > 0)
                json_put(limits, "cpu_quota", json_object_new_int64((int64_t) u), &oom);
        if ((r = arg_uint(args, "tasks_max", &u, e)) < 0)
                return r;
        if (r > 0)
                json_put(limits, "tasks_max", json_object_new_int64((int64_t) u), &oom);
        if ((r = arg_uint(args, "ttl_s", &u, e)) < 0)
                return r;
        if (r > 0)
                json_put(opts, "ttl_s", json_object_new_int64((int64_t) u), &oom);
        if (json_object_object_length(limits) > 0)
                json_put(opts, "limits", json_object_get(limits), &oom);
        if (oom)
                return -ENOMEM;

        /* NULL would be no options at all */
        text = json_object_to_json_string(opts);
        if (!text)
                return -ENOMEM;
        r = sandboxd_session_create(c->client, user, ws, text, &s, &created);
        if (r < 0)
                return tool_fail_client(c, e, r, "Creating the session failed");
        res = json_from_text(s->json);
        sandboxd_session_free(s);
        json_put(res, "created", json_object_new_boolean(created), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(res);
        return 0;
}

static int tool_list_sessions(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "user", NULL };
        sandboxd_session **list = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *user;
        json_object *arr;
        bool oom = false;
        size_t n = 0;
        int r;

        r = check_args(args, allowed, e);
        if (r >= 0)
                r = arg_string(args, "user", false, &user, e);
        if (r < 0)
                return r;
        r = sandboxd_session_list(c->client, user, &list, &n);
        if (r < 0)
                return tool_fail_client(c, e, r, "Listing sessions failed");
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = 0; i < n; i++)
                json_push(arr, json_from_text(list[i]->json), &oom);
        json_put(o, "sessions", arr, &oom);
        sandboxd_session_list_free(list);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_close_session(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "purge", NULL };
        sandboxd_session *s = NULL;
        const char *session;
        bool purge = false;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = arg_bool(args, "purge", false, &purge, e);
        if (r < 0)
                return r;
        r = sandboxd_session_close(c->client, session, purge, &s);
        if (r < 0)
                return tool_fail_client(c, e, r, "Closing the session failed");
        *ret = json_from_text(s->json);
        sandboxd_session_free(s);
        return *ret ? 0 : -ENOMEM;
}

/* "port": required, 1..65535 */
static int arg_port(json_object *args, uint16_t *ret, ToolError *e) {
        uint64_t u = 0;
        int r;

        r = arg_uint(args, "port", &u, e);
        if (r < 0)
                return r;
        if (r == 0)
                return tool_fail(e, "invalid_value", "Argument 'port' is required.");
        if (u < 1 || u > UINT16_MAX)
                return tool_fail(e, "invalid_value", "Argument 'port' must be a TCP port, 1 to 65535.");
        *ret = (uint16_t) u;
        return 0;
}

static int tool_expose_port(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "port", "host", NULL };
        sandboxd_port *p = NULL;
        const char *session;
        bool host = false;
        uint16_t port = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_port(args, &port, e);
        if (r < 0)
                return r;
        r = arg_bool(args, "host", false, &host, e);
        if (r < 0)
                return r;
        r = sandboxd_port_expose(c->client, session, port, host, &p);
        if (r < 0)
                return tool_fail_client(c, e, r, "Exposing the port failed");
        *ret = json_from_text(p->json);
        sandboxd_port_free(p);
        return *ret ? 0 : -ENOMEM;
}

static int tool_list_ports(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_port **list = NULL;
        const char *session;
        bool oom = false;
        json_object *arr;
        size_t n = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r < 0)
                return r;
        r = sandboxd_port_list(c->client, session, &list, &n);
        if (r < 0)
                return tool_fail_client(c, e, r, "Listing the ports failed");
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = 0; i < n && !oom; i++) {
                json_object *p = json_from_text(list[i]->json);

                if (!p)
                        oom = true;
                json_push(arr, p, &oom);
        }
        json_put(o, "ports", arr, &oom);
        sandboxd_port_list_free(list);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_unexpose_port(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "port", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session;
        bool oom = false;
        uint16_t port = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_port(args, &port, e);
        if (r < 0)
                return r;
        r = sandboxd_port_unexpose(c->client, session, port);
        if (r < 0)
                return tool_fail_client(c, e, r, "Unexposing the port failed");
        o = json_object_new_object();
        json_put(o, "port", json_object_new_int(port), &oom);
        json_put(o, "exposed", json_object_new_boolean(false), &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

const McpTool mcp_session_tools[] = {
        { "sandbox_create_session",
          "\"description\":" "\"Create (or get the active) sandbox session of a user and workspace. Files in the workspace persist across sessions of the same scope. Returns the session, whose id the other tools take.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"user\":" MCP_USER ",\"workspace\":" MCP_WORKSPACE ",\"memory_max\":{\"type\":\"string\",\"description\":\"e.g. 512M\"},\"cpu_quota\":{\"type\":\"integer\",\"description\":\"percent of one CPU\"},\"tasks_max\":{\"type\":\"integer\"},\"ttl_s\":{\"type\":\"integer\",\"description\":\"idle time before the session closes\"},\"exec_mode\":{\"type\":\"string\",\"enum\":[\"unit\",\"session\"],\"description\":\"how its commands run: each a transient unit of PID 1, or children of the session's executor; default: sandboxd's ExecMode=\"}},\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_create_session },
        { "sandbox_list_sessions",
          "\"description\":" "\"List sandbox sessions.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"user\":" MCP_USER "},\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_list_sessions },
        { "sandbox_close_session",
          "\"description\":" "\"Close a session: running commands are stopped; the workspace stays unless purge is true.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"purge\":{\"type\":\"boolean\"}},\"required\":[\"session_id\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_close_session },
        { "sandbox_expose_port",
          "\"description\":" "\"Make a TCP port of a session (a server a command started on 127.0.0.1:PORT in it) reachable from the host: on a unix socket, and with host true also on a free port of 127.0.0.1 of the host. Returns port, socket, host_port and url (null without host). The same port again returns it unchanged.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,\"description\":\"within sandboxd's [Ports] Range=\"},\"host\":{\"type\":\"boolean\",\"description\":\"also on a port of 127.0.0.1 of the host; default false\"}},\"required\":[\"session_id\",\"port\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_expose_port },
        { "sandbox_list_ports",
          "\"description\":" "\"List the exposed ports of a session.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID "},\"required\":[\"session_id\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_list_ports },
        { "sandbox_unexpose_port",
          "\"description\":" "\"Stop exposing a port of a session: its socket (and host port) go at once.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535}},\"required\":[\"session_id\",\"port\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_unexpose_port },
        {},
};
