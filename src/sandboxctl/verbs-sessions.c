/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <pwd.h>

#include "json-util.h"
#include "log.h"
#include "nodes.h"
#include "sandboxctl.h"
#include "validate.h"

static char *session_options_json(void) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *limits = json_object_new_object();
        const char *text;
        bool oom = false;

        if (!o || !limits)
                return NULL;
        if (arg_memory_max)
                json_put(limits, "memory_max", json_object_new_string(arg_memory_max), &oom);
        if (arg_cpu_quota) {
                uint64_t pct = strtoull(arg_cpu_quota, NULL, 10);
                json_put(limits, "cpu_quota", json_object_new_int64((int64_t) pct), &oom);
        }
        if (arg_tasks_max)
                json_put(limits, "tasks_max", json_object_new_int64((int64_t) strtoull(arg_tasks_max, NULL, 10)),
                         &oom);
        if (json_object_object_length(limits) > 0)
                json_put(o, "limits", json_object_get(limits), &oom);
        if (arg_ttl_s > 0)
                json_put(o, "ttl_s", json_object_new_int64((int64_t) arg_ttl_s), &oom);
        if (arg_exec_mode)
                json_put(o, "exec_mode", json_object_new_string(arg_exec_mode), &oom);
        if (arg_image)
                json_put(o, "image", json_object_new_string(arg_image), &oom);
        if (oom)
                return NULL;
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        return text ? strdup(text) : NULL;
}

int verb_create(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        _cleanup_free_ char *options = NULL;
        sandboxd_session *s = NULL;
        bool created = false;
        int r;

        if (!user_name_is_valid(argv[1]))
                return log_error_errno(-EINVAL, "Invalid user name '%s': it must match ^[a-z_][a-z0-9_-]{0,31}$.",
                                       argv[1]);
        if (!workspace_name_is_valid(argv[2]))
                return log_error_errno(-EINVAL, "Invalid workspace name '%s': it must match ^[a-z0-9_-]{1,64}$.",
                                       argv[2]);
        options = session_options_json();
        if (!options)
                return log_oom();
        r = connect_client(&b);
        if (r < 0)
                return r;
        r = sandboxd_session_create(b, argv[1], argv[2], options, &s, &created);
        if (r < 0)
                return log_client_error(b, r, "Failed to create the session of %s/%s", argv[1], argv[2]);
        if (arg_json)
                print_json_text(s->json);
        else {
                puts(s->id);
                if (!created && !arg_quiet)
                        log_info("(the session of %s/%s was already active)", s->user, s->workspace);
        }
        sandboxd_session_free(s);
        return 0;
}

static int compare_sessions(const void *a, const void *b) {
        const sandboxd_session *x = *(sandboxd_session *const *) a, *y = *(sandboxd_session *const *) b;

        return strcmp(x->id, y->id);
}

/* The sessions of every node of SANDBOXD_NODES, over HTTP with the same key: *ret the
 * lists put together. A node that does not answer is reported and left out (-EREMOTEIO at
 * the end); a malformed SANDBOXD_NODES is an error. */
static int list_nodes(const char *spec, sandboxd_session ***ret, size_t *ret_n) {
        const char *key = arg_key ?: getenv("SANDBOXD_KEY"), *why = NULL;
        sandboxd_session **all = NULL;
        NodeEntry *nodes = NULL;
        size_t n_nodes = 0, n = 0;
        int r, failed = 0;

        r = nodes_parse(spec, &nodes, &n_nodes, &why);
        if (r == -EINVAL)
                return log_error_errno(r, "$" NODES_ENV " cannot be read: %s.", why);
        if (r < 0)
                return log_oom();
        for (size_t i = 0; i < n_nodes; i++) {
                _cleanup_(sandboxd_client_freep) sandboxd_client *c = NULL;
                sandboxd_session **list = NULL, **m;
                size_t k = 0;

                r = sandboxd_client_new(nodes[i].url, key && *key ? key : NULL, &c);
                if (r >= 0)
                        r = sandboxd_session_list(c, arg_user, &list, &k);
                if (r < 0) {
                        if (c)
                                (void) log_client_error(c, r, "Failed to list the sessions of node %s (%s)", nodes[i].name,
                                                        nodes[i].url);
                        else
                                log_error_errno(r, "Node %s: bad URL '%s': %m", nodes[i].name, nodes[i].url);
                        failed = -EREMOTEIO;
                        continue;
                }
                m = realloc(all, (n + k + 1) * sizeof(sandboxd_session *));
                if (!m) {
                        sandboxd_session_list_free(list);
                        r = log_oom();
                        goto fail;
                }
                all = m;
                memcpy(all + n, list, k * sizeof(sandboxd_session *));
                n += k;
                all[n] = NULL;
                free(list); /* the sessions are all's now */
        }
        nodes_free(nodes, n_nodes);
        if (n > 0)
                qsort(all, n, sizeof(sandboxd_session *), compare_sessions);
        *ret = all;
        *ret_n = n;
        return failed;
fail:
        nodes_free(nodes, n_nodes);
        sandboxd_session_list_free(all);
        return r;
}

int verb_list(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        const char *spec = getenv(NODES_ENV);
        sandboxd_session **list = NULL;
        size_t n = 0, w = 2;
        int r, failed = 0;

        if (arg_user && !user_name_is_valid(arg_user))
                return log_error_errno(-EINVAL, "Invalid user name '%s'.", arg_user);
        if (spec && spec[strspn(spec, ", \t\r\n")]) {
                /* every node of the cluster, not only the one behind --url */
                r = list_nodes(spec, &list, &n);
                if (r < 0 && r != -EREMOTEIO)
                        return r;
                failed = r;
        } else {
                r = connect_client(&b);
                if (r < 0)
                        return r;
                r = sandboxd_session_list(b, arg_user, &list, &n);
                if (r < 0)
                        return log_client_error(b, r, "Failed to list sessions");
        }

        if (arg_json) {
                fputs("{\"sessions\":[", stdout);
                for (size_t i = 0; i < n; i++)
                        printf("%s%s", i ? "," : "", list[i]->json);
                fputs("]}\n", stdout);
        } else if (n == 0) {
                if (!arg_quiet)
                        printf("No sessions.\n");
        } else {
                for (size_t i = 0; i < n; i++)
                        w = MAX(w, strlen(list[i]->id));
                printf("%-*s  %-12s  %-20s  %-8s  %8s  %7s  %s\n", (int) w, "ID", "USER", "WORKSPACE", "STATE",
                       "COMMANDS", "RUNNING", "EXPIRES");
                for (size_t i = 0; i < n; i++) {
                        char ts[64];
                        printf("%-*s  %-12s  %-20s  %-8s  %8u  %7u  %s\n", (int) w, list[i]->id, list[i]->user ?: "-",
                               list[i]->workspace ?: "-", list[i]->frozen ? "frozen" : list[i]->state ?: "-",
                               list[i]->commands, list[i]->running, format_timestamp(list[i]->expires_at_usec, ts));
                }
        }
        sandboxd_session_list_free(list);
        return failed;
}

static void print_session(const sandboxd_session *s) {
        char a[64], b[64], m[32];

        printf("Session: %s\n", s->id);
        printf("   Node: %s\n", s->node ?: "-");
        printf("  Scope: %s/%s\n", s->user ?: "-", s->workspace ?: "-");
        printf("  State: %s%s\n", s->state ?: "-", s->frozen ? " (frozen)" : "");
        printf("   Unit: %s\n", s->unit ?: "-");
        printf("   Path: %s\n", s->workspace_path ?: "-");
        printf("   Exec: %s\n", s->exec_mode ?: "-");
        {
                _cleanup_(json_object_putp) json_object *o = s->json ? json_tokener_parse(s->json) : NULL;
                json_object *v;

                printf("  Image: %s\n", o && json_object_object_get_ex(o, "image", &v) && json_object_is_type(v, json_type_string)
                                                 ? json_object_get_string(v) : "- (the host's root)");
        }
        printf(" Limits: memory %s, cpu %" PRIu64 "%%, tasks %" PRIu64 "\n", format_bytes(s->memory_max, m),
               s->cpu_quota, s->tasks_max);
        printf("Created: %s\n", format_timestamp(s->created_at_usec, a));
        printf("Expires: %s (idle TTL %" PRIu64 "s)\n", format_timestamp(s->expires_at_usec, b), s->ttl_s);
        printf("Commands: %u (%u running)\n", s->commands, s->running);
}

static void print_argv_of(const sandboxd_result *r) {
        _cleanup_(json_object_putp) json_object *o = r->json ? json_tokener_parse(r->json) : NULL;
        json_object *argv;

        if (!o || !json_object_object_get_ex(o, "argv", &argv) || !json_object_is_type(argv, json_type_array))
                return;
        for (size_t i = 0; i < json_object_array_length(argv); i++)
                printf("%s%s", i ? " " : "", json_object_get_string(json_object_array_get_idx(argv, i)));
}

static void print_result(const sandboxd_result *r) {
        char m[32];

        printf("Command: %s\n", r->request_id ?: "-");
        printf("   Unit: %s\n", r->unit ?: "-");
        printf("   Argv: ");
        print_argv_of(r);
        printf("\n Status: %s", sandboxd_status_to_string(r->status) ?: "unknown");
        if (r->terminal) {
                if (r->exit_code >= 0)
                        printf(", exit code %d", r->exit_code);
                if (r->signal_name)
                        printf(", %s", r->signal_name);
                printf(" (%s), %" PRIu64 " ms", r->reason ?: "-", r->duration_ms);
        }
        printf("\n  Usage: cpu %" PRIu64 " ms, memory %s, tasks %" PRIu64 "\n", r->cpu_usec / 1000,
               format_bytes(r->memory_bytes, m), r->tasks);
        printf(" Output: stdout %" PRIu64 " bytes%s, stderr %" PRIu64 " bytes%s\n", r->stdout_bytes,
               r->stdout_truncated ? " (truncated)" : "", r->stderr_bytes, r->stderr_truncated ? " (truncated)" : "");
        fflush(stdout);
        if (r->stdout_size > 0) {
                printf("-- stdout --\n");
                fflush(stdout);
                (void) !write(STDOUT_FILENO, r->stdout_data, r->stdout_size);
                if (r->stdout_data[r->stdout_size - 1] != '\n')
                        printf("\n");
        }
        if (r->stderr_size > 0) {
                printf("-- stderr --\n");
                fflush(stdout);
                (void) !write(STDOUT_FILENO, r->stderr_data, r->stderr_size);
                if (r->stderr_data[r->stderr_size - 1] != '\n')
                        printf("\n");
        }
}

int verb_show(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        sandboxd_session *s = NULL;
        sandboxd_result **cmds = NULL, *res = NULL;
        size_t n = 0;
        int r;

        r = check_session_id(argv[1]);
        if (r < 0)
                return r;
        r = connect_client(&b);
        if (r < 0)
                return r;

        if (argc > 2) {
                r = sandboxd_command_get(b, argv[1], argv[2], &res);
                if (r < 0)
                        return log_client_error(b, r, "Failed to get command %s of session %s", argv[2], argv[1]);
                if (arg_json)
                        print_json_text(res->json);
                else
                        print_result(res);
                sandboxd_result_free(res);
                return 0;
        }

        r = sandboxd_session_get(b, argv[1], &s);
        if (r < 0)
                return log_client_error(b, r, "Failed to get session %s", argv[1]);
        r = sandboxd_command_list(b, argv[1], &cmds, &n);
        if (r < 0) {
                sandboxd_session_free(s);
                return log_client_error(b, r, "Failed to list the commands of session %s", argv[1]);
        }
        if (arg_json) {
                /* the session, with its commands added */
                printf("{\"session\":%s,\"commands\":[", s->json);
                for (size_t i = 0; i < n; i++)
                        printf("%s%s", i ? "," : "", cmds[i]->json);
                printf("]}\n");
        } else {
                print_session(s);
                if (n > 0)
                        printf("\n%-20s  %-10s  %5s  %-12s  %s\n", "REQUEST", "STATUS", "EXIT", "REASON", "ARGV");
                for (size_t i = 0; i < n; i++) {
                        char code[16];
                        if (cmds[i]->exit_code >= 0)
                                snprintf(code, sizeof(code), "%d", cmds[i]->exit_code);
                        else
                                snprintf(code, sizeof(code), "%s", cmds[i]->signal_name ?: "-");
                        printf("%-20s  %-10s  %5s  %-12s  ", cmds[i]->request_id ?: "-",
                               sandboxd_status_to_string(cmds[i]->status) ?: "?", code, cmds[i]->reason ?: "-");
                        print_argv_of(cmds[i]);
                        printf("\n");
                }
        }
        sandboxd_result_list_free(cmds);
        sandboxd_session_free(s);
        return 0;
}

int verb_remove(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        int r, ret = 0;

        for (int i = 1; i < argc; i++) {
                r = check_session_id(argv[i]);
                if (r < 0)
                        return r;
        }
        r = connect_client(&b);
        if (r < 0)
                return r;
        for (int i = 1; i < argc; i++) {
                sandboxd_session *s = NULL;

                r = sandboxd_session_close(b, argv[i], arg_purge, &s);
                if (r < 0) {
                        ret = log_client_error(b, r, "Failed to close session %s", argv[i]);
                        continue;
                }
                if (arg_json)
                        print_json_text(s->json);
                sandboxd_session_free(s);
        }
        return ret;
}

static int freeze_thaw(const char *id, bool freeze) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        sandboxd_session *s = NULL;
        int r;

        r = check_session_id(id);
        if (r < 0)
                return r;
        r = connect_client(&b);
        if (r < 0)
                return r;
        r = sandboxd_session_freeze(b, id, freeze, &s);
        if (r < 0)
                return log_client_error(b, r, "Failed to %s session %s", freeze ? "freeze" : "thaw", id);
        if (arg_json)
                print_json_text(s->json);
        sandboxd_session_free(s);
        return 0;
}

int verb_freeze(int argc, char *argv[]) {
        return freeze_thaw(argv[1], true);
}

int verb_thaw(int argc, char *argv[]) {
        return freeze_thaw(argv[1], false);
}

int verb_health(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        _cleanup_free_ char *json = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v, *pool;
        int r;

        r = connect_client(&b);
        if (r < 0)
                return r;
        r = sandboxd_health(b, &json);
        if (r < 0)
                return log_client_error(b, r, "Failed to get sandboxd's health");
        if (arg_json) {
                print_json_text(json);
                return 0;
        }
        o = json_tokener_parse(json);
        if (!o)
                return log_error_errno(-EBADMSG, "sandboxd's health is not JSON.");
#define FIELD(k) (json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "-")
        printf("   Status: %s\n", FIELD("status"));
        printf("  Version: %s\n", FIELD("version"));
        printf("   Uptime: %s s\n", FIELD("uptime"));
        printf(" Sessions: %s\n", FIELD("sessions"));
        printf("  Running: %s commands\n", FIELD("running_commands"));
#undef FIELD
        if (json_object_object_get_ex(o, "pool", &pool) && json_object_is_type(pool, json_type_object)) {
                json_object *ready, *size, *in_use;
                if (json_object_object_get_ex(pool, "ready", &ready) && json_object_object_get_ex(pool, "size", &size) &&
                    json_object_object_get_ex(pool, "in_use", &in_use))
                        printf("     Pool: %s ready, %s in use, %s at most\n", json_object_get_string(ready),
                               json_object_get_string(in_use), json_object_get_string(size));
        }
        json_object_object_get_ex(o, "status", &v);
        /* a script may check the exit status alone */
        return v && streq(json_object_get_string(v), "ok") ? 0 : 1;
}

int verb_drain(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        _cleanup_free_ char *json = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *d = NULL, *n = NULL;
        int r;

        r = connect_client(&b);
        if (r < 0)
                return r;
        r = sandboxd_drain(b, arg_drain, &json);
        if (r < 0)
                return log_client_error(b, r, "Failed to %s", arg_drain > 0    ? "drain sandboxd"
                                                               : arg_drain == 0 ? "stop draining sandboxd"
                                                                                : "get the drain state");
        if (arg_json) {
                print_json_text(json);
                return 0;
        }
        o = json_tokener_parse(json);
        if (o) {
                json_object_object_get_ex(o, "draining", &d);
                json_object_object_get_ex(o, "running_commands", &n);
        }
        printf("Draining: %s, running commands: %s\n", d && json_object_get_boolean(d) ? "yes" : "no",
               n ? json_object_get_string(n) : "?");
        return 0;
}

int default_scope(const char **ret_user, const char **ret_workspace) {
        static char name[64];
        const char *user = arg_user, *ws = arg_workspace ?: "default";
        struct passwd *pw;

        if (!user) {
                pw = getpwuid(geteuid());
                if (pw && user_name_is_valid(pw->pw_name)) {
                        snprintf(name, sizeof(name), "%s", pw->pw_name);
                        user = name;
                }
        }
        if (!user)
                return log_error_errno(-EINVAL, "Pass --user=: your user name is not a valid sandboxd user name.");
        if (!user_name_is_valid(user))
                return log_error_errno(-EINVAL, "Invalid user name '%s': it must match ^[a-z_][a-z0-9_-]{0,31}$.", user);
        if (!workspace_name_is_valid(ws))
                return log_error_errno(-EINVAL, "Invalid workspace name '%s': it must match ^[a-z0-9_-]{1,64}$.", ws);
        *ret_user = user;
        *ret_workspace = ws;
        return 0;
}
