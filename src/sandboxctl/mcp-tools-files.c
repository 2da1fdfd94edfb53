/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: the tools of the files of a session's workspace. */

#include "encoding.h"
#include "json-util.h"
#include "mcp.h"
#include "validate.h"

static int tool_read_file(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "max_bytes", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *path;
        _cleanup_free_ char *data = NULL;
        uint64_t max = 1024 * 1024;
        bool oom = false;
        size_t n = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_string(args, "path", true, &path, e);
        if (r >= 0)
                r = arg_uint(args, "max_bytes", &max, e);
        if (r < 0)
                return r;
        r = sandboxd_file_read(c->client, session, path, (size_t) MAX(max, 1u), &data, &n);
        if (r == -EFBIG)
                return tool_fail(e, "payload_too_large", "%s is larger than max_bytes (%llu); read it in parts with sandbox_exec "
                                                 "(head -c, tail -c) or raise max_bytes.",
                                 path, (unsigned long long) max);
        if (r < 0)
                return tool_fail_client(c, e, r, "Reading the file failed");
        o = json_object_new_object();
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "size", json_object_new_int64((int64_t) n), &oom);
        add_bytes(o, "content", data, n, &oom);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int tool_write_file(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", "content", "encoding", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *session, *path, *content, *encoding;
        bool oom = false;
        Buf b = {};
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_string(args, "path", true, &path, e);
        if (r >= 0)
                r = arg_string(args, "content", true, &content, e);
        if (r >= 0)
                r = arg_string(args, "encoding", false, &encoding, e);
        if (r < 0)
                return r;
        if (encoding && streq(encoding, "base64")) {
                if (base64_decode(content, strlen(content), &b) < 0)
                        return tool_fail(e, "invalid_value", "content is not valid base64.");
        } else if (encoding && !streq(encoding, "utf8"))
                return tool_fail(e, "invalid_value", "encoding must be utf8 or base64.");
        else if (buf_puts(&b, content) < 0)
                return -ENOMEM;
        {
                /* Agents write to paths like "src/main.py" without making "src" first:
                 * create the parent directories, as the tool's description promises. */
                const char *slash = strrchr(path, '/');

                if (slash && slash != path) {
                        _cleanup_free_ char *parent = strndup(path, (size_t) (slash - path));

                        if (!parent) {
                                buf_done(&b);
                                return -ENOMEM;
                        }
                        r = sandboxd_file_mkdir(c->client, session, parent);
                        if (r < 0) {
                                buf_done(&b);
                                return tool_fail_client(c, e, r, "Creating the parent directory failed");
                        }
                }
        }
        r = sandboxd_file_write(c->client, session, path, b.data ?: "", b.len);
        if (r < 0) {
                buf_done(&b);
                return tool_fail_client(c, e, r, "Writing the file failed");
        }
        o = json_object_new_object();
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "bytes", json_object_new_int64((int64_t) b.len), &oom);
        buf_done(&b);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static const char *file_type_name(sandboxd_file_type t) {
        return t == SANDBOXD_FILE_REGULAR     ? "file"
               : t == SANDBOXD_FILE_DIRECTORY ? "dir"
               : t == SANDBOXD_FILE_SYMLINK   ? "symlink"
                                              : "other";
}

static int tool_list_files(McpCall *c, json_object *args, json_object **ret, ToolError *e) {
        static const char *const allowed[] = { "session_id", "path", NULL };
        _cleanup_(json_object_putp) json_object *o = NULL;
        sandboxd_file_info **list = NULL;
        const char *session, *path;
        bool truncated = false, oom = false;
        json_object *arr;
        size_t n = 0;
        int r;

        r = session_args(args, allowed, &session, e);
        if (r >= 0)
                r = arg_string(args, "path", false, &path, e);
        if (r < 0)
                return r;
        path = path ?: "";
        r = sandboxd_file_list(c->client, session, path, &list, &n, &truncated);
        if (r < 0)
                return tool_fail_client(c, e, r, "Listing the directory failed");
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = 0; i < n && !oom; i++) {
                json_object *f = json_object_new_object();
                char mode[8];

                snprintf(mode, sizeof(mode), "%04o", list[i]->mode);
                add_bytes(f, "name", list[i]->name ?: "", strlen(list[i]->name ?: ""), &oom);
                json_put(f, "type", json_object_new_string(file_type_name(list[i]->type)), &oom);
                json_put(f, "size", json_object_new_int64((int64_t) list[i]->size), &oom);
                json_put(f, "mode", json_object_new_string(mode), &oom);
                json_put(f, "mtime_usec", json_object_new_int64((int64_t) list[i]->mtime_usec), &oom);
                json_push(arr, f, &oom);
        }
        json_put(o, "path", json_object_new_string(path), &oom);
        json_put(o, "entries", arr, &oom);
        json_put(o, "truncated", json_object_new_boolean(truncated), &oom);
        sandboxd_file_info_list_free(list);
        if (oom)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

const McpTool mcp_file_tools[] = {
        { "sandbox_read_file",
          "\"description\":" "\"Read a file of a session's workspace. Text comes as content, other bytes as content_b64.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"path\":{\"type\":\"string\"},\"max_bytes\":{\"type\":\"integer\",\"minimum\":1}},\"required\":[\"session_id\",\"path\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_read_file },
        { "sandbox_write_file",
          "\"description\":" "\"Write (create or replace) a file in a session's workspace; missing parent directories are created.\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"]}},\"required\":[\"session_id\",\"path\",\"content\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_write_file },
        { "sandbox_list_files",
          "\"description\":" "\"List a directory of a session's workspace (default: its top).\""
        ",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"session_id\":" MCP_SESSION_ID ",\"path\":{\"type\":\"string\"}},\"required\":[\"session_id\"],\"additionalProperties\":false}"
        "," MCP_OUTPUT("{\"type\":\"object\"}"),
          tool_list_files },
        {},
};
