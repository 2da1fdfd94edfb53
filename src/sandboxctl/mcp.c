/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl mcp: a Model Context Protocol server on stdin/stdout (JSON-RPC 2.0, one message a
 * line). This file is the protocol: the main thread reads messages and answers what needs no
 * sandboxd (initialize, ping, tools/list, prompts/list, cancellations) at once; tool calls and
 * resource reads go to a queue that --jobs= worker threads serve, each with a libsandboxd client
 * of its own. Answers and notifications leave through one lock, a line each. The tools are in
 * mcp-tools-*.c, the resources in mcp-resources.c. */

#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "buf.h"
#include "io-util.h"
#include "json-util.h"
#include "log.h"
#include "mcp.h"
#include "time-util.h"
#include "validate.h"

#define MCP_LATEST_VERSION "2025-11-25"
/* newest first: initialize answers with the client's version when it is one of these */
static const char *const mcp_versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07" };

#define JSONRPC_PARSE_ERROR -32700
#define JSONRPC_INVALID_REQUEST -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS -32602
#define JSONRPC_INTERNAL_ERROR -32603

#define MCP_LINE_MAX (16u * 1024 * 1024) /* a longer message is refused, and skipped to its end */
/* json-c takes far more memory than the text it parses (some 800 bytes an empty object): a
 * message with more objects, arrays and elements than this is refused before it is parsed */
#define MCP_TOKENS_MAX 100000
#define MCP_QUEUE_BYTES_MAX (64u * 1024 * 1024) /* the messages of the calls waiting, in all */
#define MCP_ID_MAX 1024 /* the longest id or progressToken, serialized */
#define MCP_QUEUE_MAX 256                /* calls waiting for a worker; more are refused (overloaded) */
#define MCP_JOBS_DEFAULT 4
#define MCP_TIMEOUT_MS_DEFAULT 50000 /* under the 60 s that MCP clients commonly wait */
#define MCP_KILL_GRACE_MS_DEFAULT 5000
#define MCP_PROGRESS_USEC USEC_PER_SEC

/* --- calls in flight ----------------------------------------------------------------------- */

typedef struct Job {
        McpCall call;            /* what the tool sees; first, for container_of */
        json_object *id;         /* the request's */
        json_object *params;
        char *method;
        json_object *progress_token; /* NULL: the client wants no progress */
        size_t bytes;            /* of its message, counted in queue_bytes while it waits */
        uint64_t begin_usec;
        uint64_t last_progress_usec;
        uint64_t output_bytes;
        atomic_bool cancelled;
        bool running;
        int cancel_fd;           /* an eventfd, written on cancellation */
        int tick_fd;             /* a timerfd: progress every second */
        int epoll_fd;            /* both, and a tool's own fd: the client's wakeup */
        int watch_fd;
        sandboxd_wakeup_fn watch_fn;
        void *watch_userdata;
        struct Job *next;
} Job;

static McpConfig config;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the queue and the list of running jobs */
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER; /* stdout */
static Job *queue_head, *queue_tail, *running_jobs;
static size_t queue_len, queue_bytes;
static bool quitting;

static Job *job_of(McpCall *c) {
        return (Job *) c; /* call is Job's first member */
}

static Job *job_free(Job *j) {
        if (!j)
                return NULL;
        json_object_put(j->id);
        json_object_put(j->params);
        json_object_put(j->progress_token);
        free(j->method);
        safe_close(j->cancel_fd);
        safe_close(j->tick_fd);
        safe_close(j->epoll_fd);
        free(j);
        return NULL;
}

/* --- output: one line each, under out_lock -------------------------------------------------- */

static void write_line(const char *t) {
        pthread_mutex_lock(&out_lock);
        fputs(t, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        pthread_mutex_unlock(&out_lock);
}

/* When the answer cannot be built: an error written without allocating, with the id if it can
 * still be written, so that the client is not left waiting. */
static void send_oom(json_object *id) {
        const char *t = id ? json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN) : NULL;
        char line[512];

        log_error("Out of memory.");
        snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":%.400s,\"error\":{\"code\":%d,\"message\":\"Out of memory.\"}}",
                 t && strlen(t) < 400 ? t : "null", JSONRPC_INTERNAL_ERROR);
        write_line(line);
}

/* takes msg; NULL (a message that could not be built) becomes send_oom() */
static void send_message(json_object *id, json_object *msg) {
        const char *t = msg ? json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                            : NULL;

        if (!t)
                send_oom(id);
        else
                write_line(t); /* PLAIN never puts a newline inside */
        json_object_put(msg);
}

/* takes result; NULL is an answer that could not be built */
static void send_result(json_object *id, json_object *result) {
        _cleanup_(json_object_putp) json_object *msg = json_object_new_object();
        bool oom = !result;

        json_put(msg, "jsonrpc", json_object_new_string("2.0"), &oom);
        json_put(msg, "id", json_object_get(id), &oom);
        json_put(msg, "result", result, &oom);
        send_message(id, oom ? NULL : TAKE_PTR(msg));
}

/* uri: NULL, or the error's data {"uri": uri} */
static void send_error_data(json_object *id, int code, const char *message, const char *uri) {
        _cleanup_(json_object_putp) json_object *msg = json_object_new_object();
        json_object *err = json_object_new_object();
        bool oom = false;

        json_put(err, "code", json_object_new_int(code), &oom);
        json_put(err, "message", json_object_new_string(message), &oom);
        if (uri) {
                json_object *data = json_object_new_object();

                json_put(data, "uri", json_object_new_string(uri), &oom);
                json_put(err, "data", data, &oom);
        }
        json_put(msg, "jsonrpc", json_object_new_string("2.0"), &oom);
        if (id)
                json_put(msg, "id", json_object_get(id), &oom);
        else
                json_put_null(msg, "id", &oom);
        json_put(msg, "error", err, &oom);
        send_message(id, oom ? NULL : TAKE_PTR(msg));
}

static void send_error(json_object *id, int code, const char *message) {
        send_error_data(id, code, message, NULL);
}

void mcp_notify(const char *method, json_object *params) {
        _cleanup_(json_object_putp) json_object *msg = json_object_new_object();
        bool oom = false;

        json_put(msg, "jsonrpc", json_object_new_string("2.0"), &oom);
        json_put(msg, "method", json_object_new_string(method), &oom);
        if (params)
                json_put(msg, "params", params, &oom);
        if (oom) {
                log_error("Out of memory: notification %s dropped.", method);
                return;
        }
        send_message(NULL, TAKE_PTR(msg));
}

/* --- what the tools call -------------------------------------------------------------------- */

bool mcp_call_cancelled(McpCall *c) {
        return atomic_load(&job_of(c)->cancelled);
}

static void progress_send(Job *j, uint64_t now) {
        json_object *p;
        double secs = (double) (now - j->begin_usec) / USEC_PER_SEC;
        char msg[128];
        bool oom = false;

        if (atomic_load(&j->cancelled))
                return; /* the client has forgotten the token */
        p = json_object_new_object();
        j->last_progress_usec = now;
        snprintf(msg, sizeof(msg), "running for %.1f s, %llu bytes of output", secs,
                 (unsigned long long) j->output_bytes);
        json_put(p, "progressToken", json_object_get(j->progress_token), &oom);
        /* seconds since the call began: grows with every notification, as MCP requires */
        json_put(p, "progress", json_object_new_double(secs), &oom);
        json_put(p, "message", json_object_new_string(msg), &oom);
        if (oom) {
                json_object_put(p);
                return;
        }
        mcp_notify("notifications/progress", p);
}

void mcp_call_progress(McpCall *c, uint64_t output_bytes) {
        Job *j = job_of(c);
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        j->output_bytes = output_bytes;
        if (j->progress_token && now >= j->last_progress_usec + MCP_PROGRESS_USEC)
                progress_send(j, now);
}

/* The client's wakeup: epoll_fd became readable. */
static int on_wakeup(sandboxd_client *cl, int fd, void *userdata) {
        Job *j = userdata;
        struct epoll_event ev[3];
        int n;

        (void) fd;
        n = epoll_wait(j->epoll_fd, ev, ELEMENTSOF(ev), 0);
        for (int i = 0; i < n; i++) {
                int f = ev[i].data.fd;

                if (f == j->cancel_fd)
                        return -ECANCELED; /* stays readable: the next wait ends at once too */
                if (f == j->tick_fd) {
                        uint64_t ticks;

                        (void) !read(j->tick_fd, &ticks, sizeof(ticks));
                        if (j->progress_token)
                                progress_send(j, now_usec(CLOCK_MONOTONIC));
                } else if (f == j->watch_fd && j->watch_fn) {
                        int r = j->watch_fn(cl, f, j->watch_userdata);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int mcp_call_watch(McpCall *c, int fd, sandboxd_wakeup_fn fn, void *userdata) {
        Job *j = job_of(c);

        if (j->watch_fd >= 0)
                (void) epoll_ctl(j->epoll_fd, EPOLL_CTL_DEL, j->watch_fd, NULL);
        j->watch_fd = -EBADF;
        j->watch_fn = NULL;
        j->watch_userdata = NULL;
        if (fd < 0)
                return 0;
        if (epoll_ctl(j->epoll_fd, EPOLL_CTL_ADD, fd, &(struct epoll_event) { .events = EPOLLIN, .data.fd = fd }) < 0)
                return -errno;
        j->watch_fd = fd;
        j->watch_fn = fn;
        j->watch_userdata = userdata;
        return 0;
}

void mcp_call_cleanup_begin(McpCall *c) {
        Job *j = job_of(c);

        /* the cancellation stays readable: out of the wakeup, it cuts no more calls short */
        if (j->cancel_fd >= 0)
                (void) epoll_ctl(j->epoll_fd, EPOLL_CTL_DEL, j->cancel_fd, NULL);
}

int mcp_call_stop_command(McpCall *c, const char *session, const char *request_id) {
        sandboxd_result *res = NULL;
        int r;

        mcp_call_cleanup_begin(c);
        r = sandboxd_command_signal(c->client, session, request_id, SIGTERM);
        if (r >= 0) {
                r = sandboxd_command_wait(c->client, session, request_id, config.kill_grace_ms * USEC_PER_MSEC, &res);
                if (r == -ETIMEDOUT || (r >= 0 && res && res->status == SANDBOXD_STATUS_RUNNING)) {
                        log_debug("Command %s outlived SIGTERM by %llu ms: SIGKILL.", request_id,
                                  (unsigned long long) config.kill_grace_ms);
                        sandboxd_result_free(res);
                        res = NULL;
                        r = sandboxd_command_signal(c->client, session, request_id, SIGKILL);
                        if (r >= 0)
                                r = sandboxd_command_wait(c->client, session, request_id, 30 * USEC_PER_SEC, &res);
                }
        }
        if (r == -ESRCH || r == -EBUSY || r == -ENOENT)
                r = 0; /* it had ended already, or never began */
        sandboxd_result_free(res);
        if (r < 0)
                log_warning_errno(r, "Stopping command %s of a cancelled call failed: %m", request_id);
        return r;
}

/* --- tools/list and tools/call -------------------------------------------------------------- */

static const McpTool *const tool_modules[] = { mcp_session_tools, mcp_exec_tools, mcp_file_tools };
static json_object *tools_list_json; /* built once, at start */

static int build_tools_list(void) {
        _cleanup_(json_object_putp) json_object *arr = json_object_new_array();
        bool oom = !arr;

        for (size_t m = 0; m < ELEMENTSOF(tool_modules); m++)
                for (const McpTool *t = tool_modules[m]; t->name; t++) {
                        _cleanup_free_ char *text = NULL;
                        json_object *o;

                        if (asprintf(&text, "{\"name\":\"%s\",%s}", t->name, t->json) < 0)
                                return log_oom();
                        o = json_tokener_parse(text);
                        if (!o)
                                return log_error_errno(-EINVAL, "BUG: the description of tool %s is not JSON.", t->name);
                        json_push(arr, o, &oom);
                }
        if (oom)
                return log_oom();
        tools_list_json = TAKE_PTR(arr);
        return 0;
}

static const McpTool *tool_find(const char *name) {
        for (size_t m = 0; m < ELEMENTSOF(tool_modules); m++)
                for (const McpTool *t = tool_modules[m]; t->name; t++)
                        if (streq(t->name, name))
                                return t;
        return NULL;
}

/* takes data; NULL when out of memory */
static json_object *tool_result(json_object *data, const ToolError *e) {
        _cleanup_(json_object_putp) json_object *res = json_object_new_object(), *body = json_object_new_object();
        json_object *content = json_object_new_array(), *text = json_object_new_object();
        const char *t;
        bool oom = false;

        json_put(body, "ok", json_object_new_boolean(!e), &oom);
        if (e) {
                json_object *err = json_object_new_object();
                json_put(err, "code", json_object_new_string(e->code ?: "internal"), &oom);
                json_put(err, "message", json_object_new_string(e->message), &oom);
                json_put(err, "http_status", json_object_new_int((int) (e->http_status ?: 500)), &oom);
                if (e->node[0])
                        json_put(err, "node", json_object_new_string(e->node), &oom);
                json_put(body, "error", err, &oom);
                json_object_put(data);
        } else
                json_put(body, "data", data, &oom);

        t = oom ? NULL : json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        json_put(text, "type", json_object_new_string("text"), &oom);
        json_put(text, "text", t ? json_object_new_string(t) : NULL, &oom);
        json_push(content, text, &oom);
        json_put(res, "content", content, &oom);
        json_put(res, "structuredContent", json_object_get(body), &oom);
        json_put(res, "isError", json_object_new_boolean(!!e), &oom);
        return oom ? NULL : TAKE_PTR(res);
}

/* tools/call on a worker: the answer, or NULL with *rpc set for a protocol error */
static json_object *run_tool(Job *j, McpRpcError *rpc) {
        _cleanup_(json_object_putp) json_object *empty = json_object_new_object();
        json_object *name = NULL, *args = NULL, *data = NULL;
        const McpTool *tool;
        ToolError e = {};
        int r;

        if (!empty)
                return NULL;
        if (!j->params || !json_object_object_get_ex(j->params, "name", &name) ||
            !json_object_is_type(name, json_type_string)) {
                *rpc = (McpRpcError) { JSONRPC_INVALID_PARAMS, "tools/call needs a tool name." };
                return NULL;
        }
        if (!json_object_object_get_ex(j->params, "arguments", &args) || json_object_is_type(args, json_type_null))
                args = empty;
        if (!json_object_is_type(args, json_type_object)) {
                *rpc = (McpRpcError) { JSONRPC_INVALID_PARAMS, "The tool's arguments must be an object." };
                return NULL;
        }
        tool = tool_find(json_object_get_string(name));
        if (!tool) {
                *rpc = (McpRpcError) { JSONRPC_INVALID_PARAMS, "" };
                snprintf(rpc->message, sizeof(rpc->message), "Unknown tool: %.200s", json_object_get_string(name));
                return NULL;
        }
        r = tool->run(&j->call, args, &data, &e);
        if (r < 0 && !e.code) {
                if (r == -ENOMEM)
                        tool_fail(&e, "internal", "Out of memory.");
                else
                        tool_fail(&e, "internal", "%s", strerror(-r));
        }
        return tool_result(r < 0 ? NULL : data, r < 0 ? &e : NULL);
}

static json_object *run_method(Job *j, McpRpcError *rpc) {
        json_object *res = NULL;

        if (streq(j->method, "tools/call"))
                return run_tool(j, rpc);
        for (const McpMethod *m = mcp_resource_methods; m->name; m++)
                if (streq(m->name, j->method)) {
                        if (m->run(&j->call, j->params, &res, rpc) < 0 && rpc->code == 0)
                                *rpc = (McpRpcError) { JSONRPC_INTERNAL_ERROR, "The method failed." };
                        return res;
                }
        *rpc = (McpRpcError) { JSONRPC_METHOD_NOT_FOUND, "Method not found." };
        return NULL;
}

static bool method_is_pooled(const char *name) {
        if (streq(name, "tools/call"))
                return true;
        for (const McpMethod *m = mcp_resource_methods; m->name; m++)
                if (streq(m->name, name))
                        return true;
        return false;
}

/* --- the workers ---------------------------------------------------------------------------- */

static void unlink_running(Job *j) {
        for (Job **p = &running_jobs; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        break;
                }
}

static void *worker(void *userdata) {
        sandboxd_client *client = userdata;

        for (;;) {
                McpRpcError rpc = {};
                json_object *res;
                Job *j;

                pthread_mutex_lock(&lock);
                while (!queue_head && !quitting)
                        pthread_cond_wait(&work, &lock);
                if (!queue_head) {
                        pthread_mutex_unlock(&lock);
                        return NULL;
                }
                j = queue_head;
                queue_head = j->next;
                if (!queue_head)
                        queue_tail = NULL;
                queue_len--;
                queue_bytes -= j->bytes;
                j->running = true;
                j->next = running_jobs;
                running_jobs = j;
                pthread_mutex_unlock(&lock);

                j->call.client = client;
                j->begin_usec = now_usec(CLOCK_MONOTONIC);
                j->last_progress_usec = j->begin_usec;
                if (j->progress_token) {
                        struct itimerspec its = {
                                .it_value = { .tv_sec = 1 },
                                .it_interval = { .tv_sec = 1 },
                        };
                        (void) timerfd_settime(j->tick_fd, 0, &its, NULL);
                }
                (void) sandboxd_client_set_wakeup(client, j->epoll_fd, on_wakeup, j);
                res = atomic_load(&j->cancelled) ? NULL : run_method(j, &rpc);
                (void) sandboxd_client_set_wakeup(client, -1, NULL, NULL);

                pthread_mutex_lock(&lock);
                unlink_running(j);
                pthread_mutex_unlock(&lock);
                /* a cancelled request gets no answer (MCP: the client has forgotten it) */
                if (atomic_load(&j->cancelled))
                        json_object_put(res);
                else if (res)
                        send_result(j->id, res);
                else if (rpc.code != 0)
                        send_error_data(j->id, rpc.code, rpc.message, rpc.uri[0] ? rpc.uri : NULL);
                else
                        send_oom(j->id);
                job_free(j);
        }
}

static int job_new(json_object *id, const char *method, json_object *params, size_t bytes, Job **ret) {
        Job *j = calloc(1, sizeof(Job));
        json_object *meta, *token;

        if (!j)
                return -ENOMEM;
        j->call.config = &config;
        j->cancel_fd = j->tick_fd = j->epoll_fd = j->watch_fd = -EBADF;
        j->bytes = bytes;
        /* copies: json-c's reference counts are not atomic, and the message is the main
         * thread's */
        if (json_object_deep_copy(id, &j->id, NULL) < 0 ||
            (params && json_object_deep_copy(params, &j->params, NULL) < 0)) {
                job_free(j);
                return -ENOMEM;
        }
        if (j->params && json_object_object_get_ex(j->params, "_meta", &meta) &&
            json_object_object_get_ex(meta, "progressToken", &token) &&
            (json_object_is_type(token, json_type_string) || json_object_is_type(token, json_type_int)))
                j->progress_token = json_object_get(token);
        j->method = strdup(method);
        j->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        j->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        j->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (!j->method || j->cancel_fd < 0 || j->tick_fd < 0 || j->epoll_fd < 0 ||
            epoll_ctl(j->epoll_fd, EPOLL_CTL_ADD, j->cancel_fd,
                      &(struct epoll_event) { .events = EPOLLIN, .data.fd = j->cancel_fd }) < 0 ||
            epoll_ctl(j->epoll_fd, EPOLL_CTL_ADD, j->tick_fd,
                      &(struct epoll_event) { .events = EPOLLIN, .data.fd = j->tick_fd }) < 0) {
                int r = errno > 0 ? -errno : -ENOMEM;
                job_free(j);
                return r;
        }
        *ret = j;
        return 0;
}

static void enqueue(json_object *id, const char *method, json_object *params, size_t bytes) {
        Job *j = NULL;
        int r;

        pthread_mutex_lock(&lock);
        r = queue_len >= MCP_QUEUE_MAX || queue_bytes + bytes > MCP_QUEUE_BYTES_MAX ? -EBUSY : 0;
        pthread_mutex_unlock(&lock);
        if (r < 0) {
                ToolError e = {};

                tool_fail(&e, "overloaded",
                          "Too many calls wait already (at most %d, of %u MiB in all); ask again once some are answered.",
                          MCP_QUEUE_MAX, MCP_QUEUE_BYTES_MAX >> 20);
                if (streq(method, "tools/call"))
                        return send_result(id, tool_result(NULL, &e));
                return send_error(id, JSONRPC_INTERNAL_ERROR, e.message);
        }
        r = job_new(id, method, params, bytes, &j);
        if (r < 0)
                return send_oom(id);
        pthread_mutex_lock(&lock);
        if (queue_tail)
                queue_tail->next = j;
        else
                queue_head = j;
        queue_tail = j;
        queue_len++;
        queue_bytes += j->bytes;
        pthread_cond_signal(&work);
        pthread_mutex_unlock(&lock);
}

/* notifications/cancelled: a waiting call goes without an answer, a running one is told */
static void cancel(json_object *params) {
        json_object *rid;
        Job *dropped = NULL;

        if (!params || !json_object_object_get_ex(params, "requestId", &rid))
                return;
        pthread_mutex_lock(&lock);
        for (Job **p = &queue_head, *prev = NULL; *p; prev = *p, p = &(*p)->next)
                if (json_object_equal((*p)->id, rid)) {
                        dropped = *p;
                        *p = dropped->next;
                        if (queue_tail == dropped)
                                queue_tail = prev;
                        queue_len--;
                        queue_bytes -= dropped->bytes;
                        break;
                }
        if (!dropped)
                for (Job *j = running_jobs; j; j = j->next)
                        if (json_object_equal(j->id, rid)) {
                                atomic_store(&j->cancelled, true);
                                (void) eventfd_write(j->cancel_fd, 1);
                                log_debug("Call %s cancelled while running.", json_object_to_json_string(rid));
                        }
        pthread_mutex_unlock(&lock);
        job_free(dropped);
}

/* Told to stop (SIGTERM, as an MCP client does after closing stdin): waiting calls are
 * dropped, running ones cancelled, so that their commands stop too. */
static void cancel_all(void) {
        Job *dropped;

        pthread_mutex_lock(&lock);
        dropped = queue_head;
        queue_head = queue_tail = NULL;
        queue_len = queue_bytes = 0;
        for (Job *j = running_jobs; j; j = j->next) {
                atomic_store(&j->cancelled, true);
                (void) eventfd_write(j->cancel_fd, 1);
        }
        quitting = true;
        pthread_cond_broadcast(&work);
        pthread_mutex_unlock(&lock);
        while (dropped) {
                Job *next = dropped->next;
                job_free(dropped);
                dropped = next;
        }
}

/* --- prompts ------------------------------------------------------------------------------ */

static const char prompts_json[] =
        "[{\"name\":\"sandbox_task\",\"title\":\"Do a task in a sandbox\","
        "\"description\":\"Carry out a task (write code, run it, test it) in a sandboxd session, and close it.\","
        "\"arguments\":[{\"name\":\"task\",\"description\":\"what to do\",\"required\":true},"
        "{\"name\":\"workspace\",\"description\":\"the workspace to keep files in (default: the server's)\","
        "\"required\":false}]},"
        "{\"name\":\"sandbox_overview\",\"title\":\"What the sandbox offers\","
        "\"description\":\"Look at sandboxd's runtime and policy and say what commands in a sandbox can do.\","
        "\"arguments\":[]}]";

/* prompts/get: NULL with *rpc set for a protocol error */
static json_object *handle_prompts_get(json_object *params, McpRpcError *rpc) {
        _cleanup_(json_object_putp) json_object *res = json_object_new_object();
        json_object *name = NULL, *args = NULL, *v, *messages = json_object_new_array(),
                    *msg = json_object_new_object(), *content = json_object_new_object();
        const char *task = NULL, *ws = NULL;
        _cleanup_free_ char *text = NULL;
        bool oom = false;

        if (!params || !json_object_object_get_ex(params, "name", &name) || !json_object_is_type(name, json_type_string)) {
                *rpc = (McpRpcError) { JSONRPC_INVALID_PARAMS, "prompts/get needs a prompt name." };
                goto fail;
        }
        if (json_object_object_get_ex(params, "arguments", &args) && !json_object_is_type(args, json_type_object))
                args = NULL;
        if (args && json_object_object_get_ex(args, "task", &v) && json_object_is_type(v, json_type_string))
                task = json_object_get_string(v);
        if (args && json_object_object_get_ex(args, "workspace", &v) && json_object_is_type(v, json_type_string))
                ws = json_object_get_string(v);
        if (streq(json_object_get_string(name), "sandbox_task")) {
                if (!task || !*task || strlen(task) > 65536) {
                        *rpc = (McpRpcError) { JSONRPC_INVALID_PARAMS,
                                               "sandbox_task needs the argument task (1 to 65536 bytes)." };
                        goto fail;
                }
                if (ws && !workspace_name_is_valid(ws)) {
                        *rpc = (McpRpcError) { JSONRPC_INVALID_PARAMS,
                                               "workspace must match ^[a-z0-9_-]{1,64}$." };
                        goto fail;
                }
                if (asprintf(&text,
                             "Do this task in a sandbox of sandboxd, with its tools:\n\n%s\n\n"
                             "Create a session with sandbox_create_session (workspace \"%s\"); write files with "
                             "sandbox_write_file (paths relative to the workspace) and run commands with sandbox_exec. "
                             "For anything that may take longer than %llu seconds, start it with sandbox_exec_start "
                             "and follow it with sandbox_exec_poll. Read the result of each command (status, "
                             "exit_code, stdout, stderr) before the next step. When you are done, say what you did "
                             "and what the commands reported, and close the session with sandbox_close_session.",
                             task, ws ?: config.workspace, (unsigned long long) (config.timeout_ms / 1000)) < 0) {
                        text = NULL;
                        oom = true;
                }
        } else if (streq(json_object_get_string(name), "sandbox_overview")) {
                text = strdup("Call sandbox_health, and read the resources sandboxd://runtime and sandboxd://policy. "
                              "Then say in a few lines what a command in a sandbox can do here: the network it has "
                              "(by network mode), its limits (memory, CPU, tasks, time), where its files persist, and "
                              "what the exec modes are.");
                oom = !text;
        } else {
                *rpc = (McpRpcError) { JSONRPC_INVALID_PARAMS, "" };
                snprintf(rpc->message, sizeof(rpc->message), "Unknown prompt: %.200s", json_object_get_string(name));
                goto fail;
        }
        json_put(content, "type", json_object_new_string("text"), &oom);
        json_put(content, "text", text ? json_object_new_string(text) : NULL, &oom);
        json_put(msg, "role", json_object_new_string("user"), &oom);
        json_put(msg, "content", content, &oom);
        json_push(messages, msg, &oom);
        json_put(res, "messages", messages, &oom);
        return oom ? NULL : TAKE_PTR(res);
fail:
        json_object_put(messages);
        json_object_put(msg);
        json_object_put(content);
        return NULL;
}

/* --- what the main thread answers ----------------------------------------------------------- */

static const char instructions[] =
        "Run commands in sandboxes: each session is a set of systemd units with a dynamic user, resource limits "
        "and the network its network mode allows (by default: only the domains sandboxd's policy allows, "
        "through its proxy; see the sandbox_health tool and the sandboxd://runtime resource). "
        "Create a session (sandbox_create_session), or use sandbox_run for a one-off command in a session "
        "it removes afterwards; files persist in a session's workspace across sessions of the same scope. "
        "Paths are relative to the workspace. A call waits at most its timeout_ms (default: the server's); "
        "for longer work start a command with sandbox_exec_start and poll it with sandbox_exec_poll. "
        "Interactive commands (a shell, a REPL) run on a terminal by rounds: sandbox_terminal_start, then "
        "sandbox_terminal_send. Every tool returns {ok:true, data} or {ok:false, error:{code, message, http_status}}.";

/* NULL when out of memory */
static json_object *handle_initialize(json_object *params) {
        _cleanup_(json_object_putp) json_object *res = json_object_new_object();
        json_object *caps = json_object_new_object(), *tools_cap = json_object_new_object(),
                    *prompts_cap = json_object_new_object(), *info = json_object_new_object(), *v;
        const char *version = MCP_LATEST_VERSION;
        bool oom = false;

        /* answer with the client's version when we speak it, else ours (the client decides) */
        if (params && json_object_object_get_ex(params, "protocolVersion", &v) && json_object_is_type(v, json_type_string))
                for (size_t i = 0; i < ELEMENTSOF(mcp_versions); i++)
                        if (streq(json_object_get_string(v), mcp_versions[i]))
                                version = mcp_versions[i];
        json_put(tools_cap, "listChanged", json_object_new_boolean(false), &oom);
        json_put(prompts_cap, "listChanged", json_object_new_boolean(false), &oom);
        json_put(caps, "tools", tools_cap, &oom);
        json_put(caps, "resources", json_tokener_parse(MCP_RESOURCES_CAPABILITY), &oom);
        json_put(caps, "prompts", prompts_cap, &oom);
        json_put(info, "name", json_object_new_string("sandboxctl"), &oom);
        json_put(info, "title", json_object_new_string("sandboxd"), &oom);
        json_put(info, "version", json_object_new_string(PROJECT_VERSION), &oom);
        json_put(res, "protocolVersion", json_object_new_string(version), &oom);
        json_put(res, "capabilities", caps, &oom);
        json_put(res, "serverInfo", info, &oom);
        json_put(res, "instructions", json_object_new_string(instructions), &oom);
        return oom ? NULL : TAKE_PTR(res);
}

static json_object *result_with(const char *key, json_object *v) {
        json_object *res = json_object_new_object();
        bool oom = !res || !v;

        json_put(res, key, v, &oom);
        if (oom) {
                json_object_put(res);
                return NULL;
        }
        return res;
}

/* Objects, arrays and elements of a JSON text (its '{', '[' and ',' outside strings): what
 * json-c would allocate for, counted without allocating. */
static size_t json_tokens(const char *p, size_t n) {
        bool in_string = false, escaped = false;
        size_t count = 0;

        for (size_t i = 0; i < n; i++) {
                char ch = p[i];

                if (in_string) {
                        if (escaped)
                                escaped = false;
                        else if (ch == '\\')
                                escaped = true;
                        else if (ch == '"')
                                in_string = false;
                } else if (ch == '"')
                        in_string = true;
                else if (ch == '{' || ch == '[' || ch == ',')
                        count++;
        }
        return count;
}

/* One JSON text, the whole line and nothing after it; NULL if it is not. */
static json_object *parse_line(const char *line, size_t n) {
        struct json_tokener *tok = json_tokener_new();
        json_object *o;

        if (!tok || n > INT_MAX) {
                json_tokener_free(tok);
                return NULL;
        }
        o = json_tokener_parse_ex(tok, line, (int) n);
        if (o && (json_tokener_get_error(tok) != json_tokener_success ||
                  line[json_tokener_get_parse_end(tok) + strspn(line + json_tokener_get_parse_end(tok), " \t")])) {
                json_object_put(o); /* trailing bytes: not one message */
                o = NULL;
        }
        json_tokener_free(tok);
        return o;
}

static bool id_too_long(json_object *v) {
        const char *t = v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN) : NULL;

        return t && strlen(t) > MCP_ID_MAX;
}

static void handle_message(const char *line, size_t n) {
        _cleanup_(json_object_putp) json_object *msg = NULL;
        json_object *id = NULL, *method = NULL, *params = NULL, *meta, *token;
        const char *name;

        if (json_tokens(line, n) > MCP_TOKENS_MAX)
                return send_error(NULL, JSONRPC_INVALID_REQUEST,
                                  "Message too large: more than 100000 objects, arrays and elements.");
        msg = parse_line(line, n);
        if (!msg)
                return send_error(NULL, JSONRPC_PARSE_ERROR, "Parse error.");
        if (!json_object_is_type(msg, json_type_object))
                return send_error(NULL, JSONRPC_INVALID_REQUEST, "Send one JSON-RPC object a line (no batches).");
        json_object_object_get_ex(msg, "id", &id);
        json_object_object_get_ex(msg, "params", &params);
        if (!json_object_object_get_ex(msg, "method", &method))
                return; /* a response to us: we send no requests, so there is nothing to match */
        if (!json_object_is_type(method, json_type_string))
                return send_error(id, JSONRPC_INVALID_REQUEST, "method must be a string.");
        if (params && !json_object_is_type(params, json_type_object))
                return send_error(id, JSONRPC_INVALID_PARAMS, "params must be an object.");
        name = json_object_get_string(method);
        if (!id) {
                if (streq(name, "notifications/cancelled"))
                        cancel(params);
                else
                        log_debug("MCP notification %s", name);
                return;
        }
        if ((!json_object_is_type(id, json_type_string) && !json_object_is_type(id, json_type_int)) ||
            id_too_long(id))
                return send_error(NULL, JSONRPC_INVALID_REQUEST, "id must be a string (at most 1 KiB) or an integer.");
        if (params && json_object_object_get_ex(params, "_meta", &meta) &&
            json_object_object_get_ex(meta, "progressToken", &token) && id_too_long(token))
                return send_error(id, JSONRPC_INVALID_PARAMS, "progressToken: at most 1 KiB.");
        if (streq(name, "initialize"))
                send_result(id, handle_initialize(params));
        else if (streq(name, "ping"))
                send_result(id, json_object_new_object());
        else if (streq(name, "tools/list"))
                send_result(id, result_with("tools", json_object_get(tools_list_json)));
        else if (streq(name, "prompts/list"))
                send_result(id, result_with("prompts", json_tokener_parse(prompts_json)));
        else if (streq(name, "prompts/get")) {
                McpRpcError rpc = {};
                json_object *res = handle_prompts_get(params, &rpc);

                if (!res && rpc.code != 0)
                        send_error(id, rpc.code, rpc.message);
                else
                        send_result(id, res);
        }
        else if (streq(name, "logging/setLevel"))
                send_result(id, json_object_new_object());
        else if (method_is_pooled(name))
                enqueue(id, name, params, n);
        else
                send_error(id, JSONRPC_METHOD_NOT_FOUND, "Method not found.");
}

/* --- start ---------------------------------------------------------------------------------- */

static int parse_host_paths(void) {
        size_t n = strv_length(arg_host_paths);

        config.host_paths = calloc(MAX(n, 1u), sizeof(McpHostPath));
        if (!config.host_paths)
                return log_oom();
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *dir = strdup(arg_host_paths[i]);
                char *colon, *real;
                bool rw = false;

                if (!dir)
                        return log_oom();
                colon = strrchr(dir, ':');
                if (colon && (streq(colon, ":ro") || streq(colon, ":rw"))) {
                        rw = streq(colon, ":rw");
                        *colon = 0;
                }
                if (dir[0] != '/')
                        return log_error_errno(-EINVAL, "--host-path= takes an absolute directory, not '%s'.", dir);
                real = realpath(dir, NULL);
                if (!real)
                        return log_error_errno(-errno, "--host-path=%s: %m", dir);
                config.host_paths[config.n_host_paths++] = (McpHostPath) { .dir = real, .writable = rw };
        }
        return 0;
}

/* Reads one line of at most MCP_LINE_MAX from fd into *b (without the newline): 1, 0 at the
 * end, -E2BIG for a longer one (skipped to its end), -EINTR when sig_fd (a signalfd) fired. */
static int read_line(int fd, int sig_fd, Buf *b, Buf *rest) {
        bool skipping = false;

        b->len = 0;
        for (;;) {
                char *nl = rest->len > 0 ? memchr(rest->data, '\n', rest->len) : NULL;
                size_t take = nl ? (size_t) (nl - rest->data) : rest->len;
                ssize_t k;

                if (!skipping && b->len + take > MCP_LINE_MAX)
                        skipping = true;
                if (!skipping && buf_append(b, rest->data, take) < 0)
                        return -ENOMEM;
                if (nl) {
                        memmove(rest->data, nl + 1, rest->len - take - 1);
                        rest->len -= take + 1;
                        if (skipping)
                                return -E2BIG;
                        if (buf_reserve(b, 1) < 0)
                                return -ENOMEM;
                        b->data[b->len] = 0;
                        return 1;
                }
                rest->len = 0;
                if (buf_reserve(rest, 64 * 1024) < 0)
                        return -ENOMEM;
                {
                        struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = sig_fd, .events = POLLIN } };

                        if (poll(p, 2, -1) < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        if (p[1].revents & POLLIN)
                                return -EINTR;
                }
                k = read(fd, rest->data, 64 * 1024);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0) {
                        if (skipping)
                                return -E2BIG;
                        if (b->len == 0)
                                return 0;
                        if (buf_reserve(b, 1) < 0)
                                return -ENOMEM;
                        b->data[b->len] = 0;
                        return 1; /* a last line without its newline */
                }
                rest->len = (size_t) k;
        }
}

int verb_mcp(int argc, char *argv[]) {
        unsigned jobs = arg_jobs ?: MCP_JOBS_DEFAULT;
        sandboxd_client *clients[64] = {};
        pthread_t threads[64];
        unsigned started = 0;
        Buf line = {}, rest = {};
        int sig_fd = -EBADF, r;
        sigset_t mask;

        (void) argc;
        (void) argv;
        r = default_scope(&config.user, &config.workspace);
        if (r < 0)
                return r;
        if (!arg_workspace)
                config.workspace = "mcp";
        config.timeout_ms = arg_timeout_ms ?: MCP_TIMEOUT_MS_DEFAULT;
        config.kill_grace_ms = arg_kill_grace_ms ?: MCP_KILL_GRACE_MS_DEFAULT;
        config.jobs = jobs;
        r = parse_host_paths();
        if (r < 0)
                goto finish;
        r = build_tools_list();
        if (r < 0)
                goto finish;
        /* a client each, made here: libsandboxd's set-up is not for threads */
        for (unsigned i = 0; i < jobs; i++) {
                r = connect_client(&clients[i]);
                if (r < 0)
                        goto finish;
        }
        /* the protocol owns stdout; everything else goes to stderr */
        (void) signal(SIGPIPE, SIG_IGN);
        /* SIGTERM, SIGINT, SIGHUP: the client is gone, as when stdin ends (the workers, which
         * inherit the mask, never take them) */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        r = -pthread_sigmask(SIG_BLOCK, &mask, NULL);
        if (r >= 0) {
                sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
                if (sig_fd < 0)
                        r = -errno;
        }
        if (r < 0) {
                log_error_errno(r, "Setting up signals failed: %m");
                goto finish;
        }
        for (; started < jobs; started++) {
                r = -pthread_create(&threads[started], NULL, worker, clients[started]);
                if (r < 0) {
                        log_error_errno(r, "Starting a worker failed: %m");
                        goto finish;
                }
        }
        while ((r = read_line(STDIN_FILENO, sig_fd, &line, &rest)) != 0) {
                if (r == -EINTR) {
                        struct signalfd_siginfo si = {};

                        (void) !read(sig_fd, &si, sizeof(si));
                        log_debug("Signal %u: stopping.", si.ssi_signo);
                        cancel_all();
                        r = 0;
                        break;
                }
                if (r == -E2BIG) {
                        send_error(NULL, JSONRPC_INVALID_REQUEST, "Message too long (at most 16 MiB a line).");
                        continue;
                }
                if (r < 0) {
                        log_error_errno(r, "Reading stdin failed: %m");
                        break;
                }
                while (line.len > 0 && line.data[line.len - 1] == '\r')
                        line.data[--line.len] = 0;
                if (line.len > 0)
                        handle_message(line.data, line.len);
        }

        /* stdin ended: the calls read so far are answered; a signal (an MCP client sends
         * SIGTERM after closing stdin) still cancels them */
        while (sig_fd >= 0) {
                struct pollfd p = { .fd = sig_fd, .events = POLLIN };
                bool busy;

                pthread_mutex_lock(&lock);
                busy = queue_head || running_jobs;
                pthread_mutex_unlock(&lock);
                if (!busy)
                        break;
                if (poll(&p, 1, 100) > 0) {
                        struct signalfd_siginfo si = {};

                        (void) !read(sig_fd, &si, sizeof(si));
                        log_debug("Signal %u after the end of input: stopping.", si.ssi_signo);
                        cancel_all();
                        break;
                }
        }

finish:
        /* the workers go once the queue is empty (after a signal, cancel_all() emptied it) */
        pthread_mutex_lock(&lock);
        quitting = true;
        pthread_cond_broadcast(&work);
        pthread_mutex_unlock(&lock);
        for (unsigned i = 0; i < started; i++)
                pthread_join(threads[i], NULL);
        mcp_resources_done();
        for (unsigned i = 0; i < jobs; i++)
                sandboxd_client_free(clients[i]);
        for (size_t i = 0; i < config.n_host_paths; i++)
                free(config.host_paths[i].dir);
        free(config.host_paths);
        json_object_put(tools_list_json);
        buf_done(&line);
        buf_done(&rest);
        safe_close(sig_fd);
        return r < 0 ? r : 0;
}
