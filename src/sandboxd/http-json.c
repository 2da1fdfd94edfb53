/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>

#include "encoding.h"
#include "http-json.h"
#include "ndjson.h"
#include "systemd.h"

static const char *const stream_names[_OUTPUT_STREAM_MAX] = { "stdout", "stderr" };

static int append_domains(Buf *b, const char *key, char * const *l) {
        int r = buf_printf(b, ",\"%s\":[", key);

        for (size_t i = 0; r >= 0 && l && l[i]; i++) {
                if (i > 0)
                        r = buf_puts(b, ",");
                if (r >= 0)
                        r = json_append_string(b, l[i], strlen(l[i]));
        }
        return r < 0 ? r : buf_puts(b, "]");
}

int session_append_json(Session *s, Buf *b) {
        int r;

        r = buf_printf(b, "{\"id\":\"%s\",\"node\":\"%s\",\"user\":\"%s\",\"workspace\":\"%s\",\"state\":\"%s\",\"unit\":\"%s\","
                          "\"dynamic_user\":\"%s\",\"workspace_path\":\"%s\",\"created_at_usec\":%" PRIu64 ","
                          "\"last_activity_usec\":%" PRIu64 ",\"ttl_s\":%" PRIu64 ",\"expires_at_usec\":%" PRIu64 ","
                          "\"frozen\":%s,"
                          "\"limits\":{\"memory_max\":%" PRIu64 ",\"cpu_quota\":%" PRIu64 ",\"tasks_max\":%" PRIu64 "},"
                          "\"commands\":%u,\"running\":%u,\"disk_bytes\":%" PRIu64,
                       s->id, s->manager->config.node_name, s->user, s->workspace, session_state_to_string(s->state), s->slice, s->dynamic_user,
                       s->workspace_dir, s->created_realtime_usec, s->last_activity_realtime_usec,
                       s->ttl_usec / USEC_PER_SEC, session_expiry(s), s->frozen ? "true" : "false", s->limits.memory_max,
                       s->limits.cpu_quota_percent, s->limits.tasks_max, s->n_commands, session_count_running(s),
                       session_disk_bytes(s));
        if (r >= 0)
                r = buf_printf(b, ",\"network\":{\"mode\":\"%s\"", network_mode_to_string(s->network));
        if (r >= 0 && s->network == NETWORK_PROXY) {
                r = append_domains(b, "deny", s->net_deny);
                if (r >= 0 && s->net_allow)
                        r = append_domains(b, "allow", s->net_allow);
        }
        if (r >= 0)
                r = buf_puts(b, "}");
        if (r >= 0)
                r = buf_printf(b, ",\"exec_mode\":\"%s\"", exec_mode_to_string(s->exec_mode));
        /* the image name is validated (image_name_is_valid()): nothing to escape */
        if (r >= 0)
                r = s->image ? buf_printf(b, ",\"image\":\"%s\"", s->image) : buf_puts(b, ",\"image\":null");
        /* null until the session is closed */
        if (r >= 0 && s->close_reason)
                r = buf_printf(b, ",\"close_reason\":\"%s\"", s->close_reason);
        else if (r >= 0)
                r = buf_puts(b, ",\"close_reason\":null");
        if (r >= 0)
                r = buf_puts(b, "}");
        return r;
}

static int append_stream_snapshot(Command *c, Buf *b, OutputStream st) {
        Buf raw = {};
        bool valid;
        int r;

        r = output_read_raw(c->output, st, &raw);
        if (r < 0)
                goto finish;
        if (utf8_valid_prefix(raw.data ?: "", raw.len, &valid) == raw.len && valid) {
                r = buf_printf(b, ",\"%s\":", stream_names[st]);
                if (r >= 0)
                        r = json_append_string(b, raw.data ?: "", raw.len);
        } else {
                r = buf_printf(b, ",\"%s\":null,\"%s_b64\":\"", stream_names[st], stream_names[st]);
                if (r >= 0)
                        r = base64_encode(b, raw.data, raw.len);
                if (r >= 0)
                        r = buf_puts(b, "\"");
        }
finish:
        buf_done(&raw);
        return r;
}

int command_append_json(Command *c, Buf *b, bool with_output) {
        Output *o = c->output;
        int r;

        r = buf_puts(b, "{\"request_id\":");
        if (r >= 0)
                r = json_append_string(b, c->request_id, strlen(c->request_id));
        if (r >= 0)
                r = buf_printf(b, ",\"unit\":\"%s\",\"session\":\"%s\",\"terminal\":%s,\"created_at_usec\":%" PRIu64
                                  ",\"stdin\":\"%s\",\"argv\":[",
                               c->unit, c->session->id, command_status_is_terminal(c->result.status) ? "true" : "false",
                               c->created_realtime_usec, stdin_mode_to_string(c->stdin_mode));
        for (char **a = c->argv; r >= 0 && a && *a; a++) {
                if (a != c->argv)
                        r = buf_puts(b, ",");
                if (r >= 0)
                        r = json_append_string(b, *a, strlen(*a));
        }
        if (r >= 0)
                r = buf_puts(b, "],");
        if (r >= 0 && c->tty)
                r = buf_printf(b, "\"tty\":{\"rows\":%u,\"cols\":%u},", c->tty_rows, c->tty_cols);
        else if (r >= 0)
                r = buf_puts(b, "\"tty\":null,");
        /* run by the session's executor: its own cgroup below the exec unit's, once it runs */
        if (r >= 0 && c->in_executor && c->cgroup && strrchr(c->cgroup, '/'))
                r = buf_printf(b, "\"cgroup\":\"%s\",", strrchr(c->cgroup, '/') + 1);
        else if (r >= 0)
                r = buf_puts(b, "\"cgroup\":null,");
        if (r < 0)
                return r;

        if (command_status_is_terminal(c->result.status))
                r = ndjson_append_result_fields(b, &c->result);
        else
                r = buf_printf(b, "\"status\":\"%s\",\"exit_code\":null,\"signal\":null,\"reason\":null,"
                                  "\"duration_ms\":null,\"usage\":{\"cpu_usec\":%" PRIu64 ",\"memory_bytes\":%" PRIu64
                                  ",\"tasks\":%" PRIu64 "}",
                               command_status_to_string(c->result.status), c->cpu_sampled_usec, c->memory_peak,
                               c->tasks_peak);
        if (r < 0)
                return r;

        r = buf_printf(b, ",\"truncated\":%s,\"stdout_truncated\":%s,\"stderr_truncated\":%s,"
                          "\"stdout_bytes\":%" PRIu64 ",\"stderr_bytes\":%" PRIu64 ",\"events_bytes\":%" PRIu64,
                       o->truncated[0] || o->truncated[1] ? "true" : "false", o->truncated[0] ? "true" : "false",
                       o->truncated[1] ? "true" : "false", o->total[0], o->total[1], o->log_size);
        if (r >= 0 && with_output)
                r = append_stream_snapshot(c, b, OUTPUT_STDOUT);
        if (r >= 0 && with_output)
                r = append_stream_snapshot(c, b, OUTPUT_STDERR);
        if (r >= 0)
                r = buf_puts(b, "}");
        return r;
}

int port_append_json(Port *p, Buf *b) {
        _cleanup_free_ char *path = NULL, *unit = NULL;
        int r;

        r = port_socket_path(p, &path);
        if (r >= 0)
                r = systemd_port_unit_names(p->session->id, p->port, &unit, NULL);
        if (r < 0)
                return r;
        r = buf_printf(b, "{\"port\":%u,\"socket\":", p->port);
        if (r >= 0)
                r = json_append_string(b, path, strlen(path));
        if (r >= 0 && p->host_port > 0)
                r = buf_printf(b, ",\"host_port\":%u,\"url\":\"http://127.0.0.1:%u/\"", p->host_port, p->host_port);
        else if (r >= 0)
                r = buf_puts(b, ",\"host_port\":null,\"url\":null");
        if (r >= 0)
                r = buf_printf(b, ",\"unit\":\"%s\",\"state\":\"%s\"}", unit, p->active ? "active" : "starting");
        return r;
}

int port_list_append_json(Session *s, Buf *b) {
        Port *p;
        int r;

        r = buf_puts(b, "{\"ports\":[");
        /* the list is newest first; the answer goes by port number, smallest first */
        for (unsigned last = 0; r >= 0;) {
                Port *next = NULL;

                LIST_FOREACH(ports, p, s->ports)
                        if (p->port > last && (!next || p->port < next->port))
                                next = p;
                if (!next)
                        break;
                if (last > 0)
                        r = buf_puts(b, ",");
                if (r >= 0)
                        r = port_append_json(next, b);
                last = next->port;
        }
        if (r >= 0)
                r = buf_puts(b, "]}");
        return r;
}

static int append_string_or_null(Buf *b, const char *key, const char *v) {
        int r = buf_printf(b, "\"%s\":", key);

        if (r >= 0)
                r = v ? json_append_string(b, v, strlen(v)) : buf_puts(b, "null");
        return r;
}

int image_append_json(const ImageInfo *i, unsigned sessions, Buf *b) {
        int r;

        /* the name is valid (image_name_is_valid()), the os-release values UTF-8 (images.c) */
        r = buf_printf(b, "{\"name\":\"%s\",\"size_bytes\":", i->name);
        if (r >= 0)
                r = i->size_bytes == UINT64_MAX ? buf_puts(b, "null") : buf_printf(b, "%" PRIu64, i->size_bytes);
        if (r >= 0)
                r = buf_printf(b, ",\"created_usec\":%" PRIu64 ",\"os\":{", i->created_usec);
        if (r >= 0)
                r = append_string_or_null(b, "id", i->os_id);
        if (r >= 0)
                r = buf_puts(b, ",");
        if (r >= 0)
                r = append_string_or_null(b, "version_id", i->os_version_id);
        if (r >= 0)
                r = buf_puts(b, ",");
        if (r >= 0)
                r = append_string_or_null(b, "pretty_name", i->os_pretty_name);
        if (r >= 0)
                r = buf_printf(b, "},\"user_names\":%s,\"sessions\":%u}", i->user_names ? "true" : "false", sessions);
        return r;
}
