/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure parts of libsandboxd: NDJSON line splitting and event decoding, URL building,
 * error mapping, results, exposed ports. The parts that talk to sandboxd are in the integration tests. */

#include "internal.h"
#include "nodes.h"
#include "error-table.h"
#include "tests.h"

/* --- line splitting ----------------------------------------------------------------------- */

typedef struct Lines {
        char got[16][64];
        size_t n;
} Lines;

static int collect(const char *line, size_t size, void *userdata) {
        Lines *l = userdata;

        if (l->n >= ELEMENTSOF(l->got))
                return -E2BIG;
        snprintf(l->got[l->n++], sizeof(l->got[0]), "%.*s", (int) size, line);
        return 0;
}

static void test_lines_chunks(void) {
        const char text[] = "{\"a\":1}\n{\"b\":2}\n\n{\"c\":\"x\\ny\"}\n";
        /* every way of cutting the text in two gives the same lines */
        for (size_t cut = 0; cut <= sizeof(text) - 1; cut++) {
                LineSplitter s = {};
                Lines l = {};

                ASSERT(line_splitter_feed(&s, text, cut, collect, &l) == 0);
                ASSERT(line_splitter_feed(&s, text + cut, sizeof(text) - 1 - cut, collect, &l) == 0);
                ASSERT(line_splitter_finish(&s) == 0);
                ASSERT(l.n == 4);
                ASSERT_STREQ(l.got[0], "{\"a\":1}");
                ASSERT_STREQ(l.got[1], "{\"b\":2}");
                ASSERT_STREQ(l.got[2], "");
                ASSERT_STREQ(l.got[3], "{\"c\":\"x\\ny\"}");
                line_splitter_done(&s);
        }
}

static void test_lines_byte_by_byte(void) {
        const char text[] = "one\r\ntwo\nthree";
        LineSplitter s = {};
        Lines l = {};

        for (size_t i = 0; i < sizeof(text) - 1; i++)
                ASSERT(line_splitter_feed(&s, text + i, 1, collect, &l) == 0);
        ASSERT(l.n == 2);
        ASSERT_STREQ(l.got[0], "one\r"); /* the caller decides what \r means */
        ASSERT_STREQ(l.got[1], "two");
        /* "three" never got its newline */
        ASSERT(line_splitter_finish(&s) == -EBADMSG);
        line_splitter_done(&s);
}

static void test_lines_too_long(void) {
        LineSplitter s = { .max_line = 8 };
        Lines l = {};

        ASSERT(line_splitter_feed(&s, "12345678\n", 9, collect, &l) == 0);
        ASSERT(line_splitter_feed(&s, "12345", 5, collect, &l) == 0);
        ASSERT(line_splitter_feed(&s, "6789", 4, collect, &l) == -EMSGSIZE);
        line_splitter_done(&s);
}

static int fail_second(const char *line, size_t size, void *userdata) {
        unsigned *n = userdata;
        return ++*n == 2 ? -ECANCELED : 0;
}

static void test_lines_stop(void) {
        LineSplitter s = {};
        unsigned n = 0;

        ASSERT(line_splitter_feed(&s, "a\nb\nc\n", 6, fail_second, &n) == -ECANCELED);
        ASSERT(n == 2);
        line_splitter_done(&s);
}

/* --- events ------------------------------------------------------------------------------- */

typedef struct Seen {
        char out[256];
        char err[256];
        size_t n_out, n_err;
        unsigned n_events, n_live;
        uint64_t last_offset;
        char request_id[64];
        int exit_status;
} Seen;

static int on_event(sandboxd_client *c, const sandboxd_event *ev, void *userdata) {
        Seen *s = userdata;

        s->n_events++;
        s->last_offset = ev->offset;
        if (ev->live)
                s->n_live++;
        switch (ev->type) {
        case SANDBOXD_EVENT_ACCEPTED:
                snprintf(s->request_id, sizeof(s->request_id), "%s", ev->request_id);
                break;
        case SANDBOXD_EVENT_STDOUT:
                memcpy(s->out + s->n_out, ev->data, ev->size);
                s->n_out += ev->size;
                break;
        case SANDBOXD_EVENT_STDERR:
                memcpy(s->err + s->n_err, ev->data, ev->size);
                s->n_err += ev->size;
                break;
        case SANDBOXD_EVENT_EXIT:
                s->exit_status = sandboxd_result_exit_status(ev->result);
                break;
        default:
                break;
        }
        return 0;
}

static void test_event_stream(void) {
        const char *lines[] = {
                "{\"type\":\"accepted\",\"request_id\":\"r-1\",\"unit\":\"sandboxd-0123456789abcdef-1.service\",\"session\":\"0123456789abcdef\"}\n",
                "{\"type\":\"stdout\",\"data\":\"h\\u00e9\\n\"}\n",
                "{\"type\":\"stderr\",\"data_b64\":\"//4A\"}\n",
                "{\"type\":\"truncated\",\"stream\":\"stdout\",\"kept_bytes\":4}\n",
                "{\"type\":\"stdout\",\"data\":\"more\",\"live\":true}\n",
                "{\"type\":\"notice\",\"message\":\"x\"}\n",
                "{\"type\":\"exit\",\"status\":\"failed\",\"exit_code\":3,\"signal\":null,\"reason\":\"exit-code\",\"duration_ms\":5,\"usage\":{\"cpu_usec\":10,\"memory_bytes\":20,\"tasks\":1}}\n",
        };
        EventReader er = { .fn = on_event };
        Seen seen = {};
        uint64_t kept = 0;

        er.userdata = &seen;
        for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
                ASSERT(event_reader_feed(&er, lines[i], strlen(lines[i])) == 0);
                if (i != 4)
                        kept += strlen(lines[i]);
        }
        ASSERT(seen.n_events == 7);
        ASSERT(seen.n_live == 1);
        ASSERT_STREQ(seen.request_id, "r-1");
        ASSERT(seen.n_out == 8 && memcmp(seen.out, "h\xc3\xa9\nmore", 8) == 0);
        ASSERT(seen.n_err == 3 && memcmp(seen.err, "\xff\xfe\x00", 3) == 0);
        /* live lines are not in sandboxd's log: offsets skip them */
        ASSERT(seen.last_offset == kept && er.offset == kept);
        ASSERT(seen.exit_status == 3);
        ASSERT(er.result && er.result->status == SANDBOXD_STATUS_FAILED && er.result->terminal);
        ASSERT(er.result->exit_code == 3 && er.result->signal == 0);
        ASSERT_STREQ(er.result->reason, "exit-code");
        ASSERT(er.result->duration_ms == 5 && er.result->cpu_usec == 10 && er.result->memory_bytes == 20 &&
               er.result->tasks == 1);
        ASSERT_STREQ(er.request_id, "r-1");
        event_reader_done(&er);
}

static void test_event_bad(void) {
        static const char *bad[] = {
                "not json\n",
                "[1,2]\n",
                "{\"no\":\"type\"}\n",
                "{\"type\":\"stdout\"}\n",
                "{\"type\":\"stdout\",\"data_b64\":\"!!\"}\n",
                "{\"type\":\"accepted\"}\n",
                "{\"type\":\"stdout\",\"data\":\"a\"} trailing\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                EventReader er = {};
                ASSERT(event_reader_feed(&er, bad[i], strlen(bad[i])) == -EBADMSG);
                event_reader_done(&er);
        }
        /* blank lines are no events and no error */
        EventReader er = {};
        ASSERT(event_reader_feed(&er, "\n\r\n", 3) == 0);
        ASSERT(!er.result && er.offset == 0);
        event_reader_done(&er);
}

static void test_event_signaled(void) {
        const char line[] = "{\"type\":\"exit\",\"status\":\"signaled\",\"exit_code\":null,\"signal\":\"SIGINT\","
                            "\"reason\":\"signal\",\"duration_ms\":1,\"usage\":{}}\n";
        EventReader er = {};

        ASSERT(event_reader_feed(&er, line, strlen(line)) == 0);
        ASSERT(er.result && er.result->signal == 2 && er.result->exit_code == -1);
        ASSERT_STREQ(er.result->signal_name, "SIGINT");
        ASSERT(sandboxd_result_exit_status(er.result) == 130);
        event_reader_done(&er);
}

/* --- results -------------------------------------------------------------------------------- */

static int exit_status_of(const char *json) {
        json_object *o = NULL;
        sandboxd_result *r = NULL;
        int s;

        ASSERT(json_parse_text(json, strlen(json), &o) == 0);
        ASSERT(result_from_json(o, &r) == 0);
        s = sandboxd_result_exit_status(r);
        sandboxd_result_free(r);
        json_object_put(o);
        return s;
}

static void test_exit_status(void) {
        ASSERT(exit_status_of("{\"status\":\"succeeded\",\"exit_code\":0}") == 0);
        ASSERT(exit_status_of("{\"status\":\"failed\",\"exit_code\":42,\"reason\":\"exit-code\"}") == 42);
        ASSERT(exit_status_of("{\"status\":\"failed\",\"exit_code\":203,\"reason\":\"setup-exec\"}") == 1);
        ASSERT(exit_status_of("{\"status\":\"timed_out\",\"exit_code\":null,\"signal\":\"SIGTERM\"}") == 124);
        ASSERT(exit_status_of("{\"status\":\"signaled\",\"signal\":\"SIGKILL\",\"reason\":\"oom-kill\"}") == 137);
        ASSERT(exit_status_of("{\"status\":\"signaled\",\"signal\":\"SIG40\"}") == 168);
        ASSERT(exit_status_of("{\"status\":\"lost\"}") == 125);
        /* not terminal yet */
        ASSERT(exit_status_of("{\"status\":\"running\",\"terminal\":false}") == -1);
        ASSERT(exit_status_of("{\"status\":\"bogus\"}") == -1);

        ASSERT_STREQ(sandboxd_status_to_string(SANDBOXD_STATUS_TIMED_OUT), "timed_out");
        ASSERT(sandboxd_status_from_string("lost") == SANDBOXD_STATUS_LOST);
        ASSERT(sandboxd_status_from_string("nope") == SANDBOXD_STATUS_UNKNOWN);
        ASSERT(sandboxd_status_to_string(_SANDBOXD_STATUS_MAX) == NULL);
}

static void test_snapshot(void) {
        const char json[] = "{\"found\":true,\"request_id\":\"7\",\"unit\":\"u\",\"session\":\"s\",\"terminal\":true,"
                            "\"status\":\"succeeded\",\"exit_code\":0,\"stdout\":\"a\\u0000b\",\"stderr_b64\":\"/w==\","
                            "\"stdout_truncated\":true,\"stdout_bytes\":99,\"events_bytes\":1234}";
        json_object *o = NULL;
        sandboxd_result *r = NULL;

        ASSERT(json_parse_text(json, strlen(json), &o) == 0);
        ASSERT(result_from_json(o, &r) == 0);
        ASSERT(r->stdout_size == 3 && memcmp(r->stdout_data, "a\0b", 3) == 0);
        ASSERT(r->stderr_size == 1 && (unsigned char) r->stderr_data[0] == 0xff && r->stderr_data[1] == 0);
        ASSERT(r->stdout_truncated && !r->stderr_truncated);
        ASSERT(r->stdout_bytes == 99 && r->events_bytes == 1234);
        ASSERT_STREQ(r->request_id, "7");
        ASSERT(r->json && strstr(r->json, "\"events_bytes\":1234"));
        sandboxd_result_free(r);
        json_object_put(o);
}

/* --- exposed ports ------------------------------------------------------------------------ */

static int port_of(const char *json, sandboxd_port **ret) {
        json_object *o = NULL;
        int r;

        ASSERT(json_parse_text(json, strlen(json), &o) == 0);
        r = port_from_json(o, ret);
        json_object_put(o);
        return r;
}

static void test_port(void) {
        static const char *bad[] = {
                "[]",
                "{}",
                "{\"port\":8000}",                                           /* no socket */
                "{\"port\":8000,\"socket\":\"\"}",
                "{\"port\":8000,\"socket\":1}",
                "{\"socket\":\"/s\"}",                                       /* no port */
                "{\"port\":0,\"socket\":\"/s\"}",
                "{\"port\":65536,\"socket\":\"/s\"}",
                "{\"port\":-1,\"socket\":\"/s\"}",
                "{\"port\":\"8000\",\"socket\":\"/s\"}",
                "{\"port\":8000.5,\"socket\":\"/s\"}",
                "{\"port\":8000,\"socket\":\"/s\",\"host_port\":0}",
                "{\"port\":8000,\"socket\":\"/s\",\"host_port\":70000}",
                "{\"port\":8000,\"socket\":\"/s\",\"host_port\":\"40000\"}",
        };
        sandboxd_port *p = NULL;
        json_object *o = NULL;

        ASSERT(port_of("{\"port\":8000,\"socket\":\"/run/sandboxd/ports/s/8000.sock\",\"host_port\":40001,"
                       "\"url\":\"http://127.0.0.1:40001/\",\"unit\":\"sandboxd-s-port-8000.socket\"}", &p) == 0);
        ASSERT(p->port == 8000 && p->host_port == 40001);
        ASSERT_STREQ(p->socket, "/run/sandboxd/ports/s/8000.sock");
        ASSERT_STREQ(p->url, "http://127.0.0.1:40001/");
        ASSERT_STREQ(p->unit, "sandboxd-s-port-8000.socket");
        ASSERT(p->json && strstr(p->json, "\"host_port\":40001"));
        p = sandboxd_port_free(p);

        /* no host port: null, and fields it does not know are kept in json only */
        ASSERT(port_of("{\"port\":1,\"socket\":\"/s\",\"host_port\":null,\"url\":null,\"new\":[1]}", &p) == 0);
        ASSERT(p->port == 1 && p->host_port == 0 && !p->url && !p->unit);
        ASSERT(strstr(p->json, "\"new\""));
        p = sandboxd_port_free(p);

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                p = NULL;
                ASSERT(port_of(bad[i], &p) == -EBADMSG);
                ASSERT(!p);
        }

        /* what the D-Bus transport makes of (q, s, q) reads as HTTP's object */
        ASSERT(port_json_new("0123456789abcdef", 8000, "/run/x.sock", 0, &o) == 0);
        ASSERT_STREQ(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                     "{\"port\":8000,\"socket\":\"\\/run\\/x.sock\",\"host_port\":null,\"url\":null,"
                     "\"unit\":\"sandboxd-0123456789abcdef-port-8000.socket\",\"state\":\"active\"}");
        ASSERT(port_from_json(o, &p) == 0 && p->port == 8000 && p->host_port == 0 && !p->url);
        p = sandboxd_port_free(p);
        json_object_put(o);
        ASSERT(port_json_new("s", 9000, "/y", 40999, &o) == 0);
        ASSERT(port_from_json(o, &p) == 0 && p->host_port == 40999);
        ASSERT_STREQ(p->url, "http://127.0.0.1:40999/");
        sandboxd_port_free(p);
        json_object_put(o);
        sandboxd_port_list_free(NULL);
}

/* --- URLs --------------------------------------------------------------------------------- */

static void test_urls(void) {
        sandboxd_client c = { .base_url = (char *) "http://localhost" };
        Buf b = {};

        ASSERT(url_append_escaped(&b, "a b/ü?&=#%", false) == 0);
        ASSERT_STREQ(b.data, "a%20b%2F%C3%BC%3F%26%3D%23%25");
        buf_done(&b);

        ASSERT(url_session(&b, &c, "0123456789abcdef", "freeze") == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/0123456789abcdef/freeze");
        buf_done(&b);
        /* a session id is one segment, whatever it contains */
        ASSERT(url_session(&b, &c, "../../healthz", NULL) == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/..%2F..%2Fhealthz");
        buf_done(&b);
        ASSERT(url_session(&b, &c, "..", NULL) == -EINVAL);
        buf_done(&b);
        ASSERT(url_session(&b, &c, "", NULL) == -EINVAL);
        buf_done(&b);

        ASSERT(url_command(&b, &c, "s1", "job 1", "events") == 0);
        ASSERT(url_append_query(&b, "offset", "42") == 0);
        ASSERT(url_append_query(&b, "x", "a&b") == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/s1/commands/job%201/events?offset=42&x=a%26b");
        buf_done(&b);

        ASSERT(url_file(&b, &c, "s1", "//dir/./sub dir//f#1.txt") == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/s1/files/dir/sub%20dir/f%231.txt");
        buf_done(&b);
        ASSERT(url_file(&b, &c, "s1", "/") == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/s1/files/");
        buf_done(&b);
        ASSERT(url_file(&b, &c, "s1", "a/../b") == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/s1/files/a/%2E%2E/b");
        buf_done(&b);
        ASSERT(url_file(&b, &c, "s1", "../x") == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/s1/files/%2E%2E/x");
        buf_done(&b);
        ASSERT(url_file(&b, &c, "s1", "a/..b") == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/s1/files/a/..b");
        buf_done(&b);

        ASSERT(url_file(&b, &c, "s1", "x") == 0);
        ASSERT(url_append_query(&b, "stat", NULL) == 0);
        ASSERT_STREQ(b.data, "http://localhost/v1/sessions/s1/files/x?stat");
        buf_done(&b);
}

static void test_endpoints(void) {
        char *base = NULL, *path = NULL;

        ASSERT(url_parse_endpoint(NULL, &base, &path) == 0);
        ASSERT_STREQ(base, "http://localhost");
        ASSERT_STREQ(path, SANDBOXD_DEFAULT_SOCKET);
        free(base), free(path);

        ASSERT(url_parse_endpoint("unix:/tmp/x.sock", &base, &path) == 0);
        ASSERT_STREQ(path, "/tmp/x.sock");
        free(base), free(path);

        ASSERT(url_parse_endpoint("http://127.0.0.1:8421//", &base, &path) == 0);
        ASSERT_STREQ(base, "http://127.0.0.1:8421");
        ASSERT(path == NULL);
        free(base);

        ASSERT(url_parse_endpoint("https://sbx.example/api", &base, &path) == 0);
        ASSERT_STREQ(base, "https://sbx.example/api");
        free(base);

        ASSERT(url_parse_endpoint("unix:relative", &base, &path) == -EINVAL);
        ASSERT(url_parse_endpoint("ftp://x", &base, &path) == -EINVAL);
        ASSERT(url_parse_endpoint("http://", &base, &path) == -EINVAL);
        ASSERT(url_parse_endpoint("http://h/x?y", &base, &path) == -EINVAL);
        ASSERT(url_parse_endpoint("127.0.0.1:8421", &base, &path) == -EINVAL);

        sandboxd_client *c = NULL;
        ASSERT(sandboxd_client_new("http://h:1", "k\r\nX-Evil: 1", &c) == -EINVAL);
        ASSERT(sandboxd_client_new("http://h:1", "key", &c) == 0);
        ASSERT_STREQ(c->auth_header, "Authorization: Bearer key");
        sandboxd_client_free(c);
}

/* --- errors ------------------------------------------------------------------------------- */

static void test_error_mapping(void) {
        static const struct {
                long status;
                sandboxd_error_kind kind;
                int error;
        } table[] = {
                { 400, SANDBOXD_ERROR_INVALID, -EINVAL },      { 401, SANDBOXD_ERROR_UNAUTHORIZED, -EKEYREJECTED },
                { 403, SANDBOXD_ERROR_FORBIDDEN, -EPERM },     { 404, SANDBOXD_ERROR_NOT_FOUND, -ENOENT },
                { 405, SANDBOXD_ERROR_INVALID, -EINVAL },      { 409, SANDBOXD_ERROR_CONFLICT, -EBUSY },
                { 413, SANDBOXD_ERROR_TOO_LARGE, -EFBIG },     { 415, SANDBOXD_ERROR_INVALID, -EINVAL },
                { 416, SANDBOXD_ERROR_RANGE, -ERANGE },        { 418, SANDBOXD_ERROR_INVALID, -EINVAL },
                { 500, SANDBOXD_ERROR_SERVER, -EPROTO },       { 501, SANDBOXD_ERROR_UNSUPPORTED, -EOPNOTSUPP },
                { 502, SANDBOXD_ERROR_SYSTEMD, -EREMOTEIO },   { 503, SANDBOXD_ERROR_UNAVAILABLE, -EAGAIN },
                { 302, SANDBOXD_ERROR_PROTOCOL, -EBADMSG },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                sandboxd_error e;
                ASSERT(api_error_kind_from_http(table[i].status) == table[i].kind);
                ASSERT(api_error_kind_errno(table[i].kind) == table[i].error);
                ASSERT(error_from_http(&e, table[i].status, NULL, 0) == table[i].error);
                ASSERT(e.kind == table[i].kind && e.http_status == table[i].status && e.error == table[i].error);
        }
        ASSERT(api_error_kind_from_http(200) == SANDBOXD_ERROR_NONE);
        for (int k = 0; k < _SANDBOXD_ERROR_KIND_MAX; k++)
                ASSERT(sandboxd_error_kind_to_string((sandboxd_error_kind) k));
        ASSERT(sandboxd_error_kind_to_string(_SANDBOXD_ERROR_KIND_MAX) == NULL);
        ASSERT_STREQ(sandboxd_error_kind_to_string(SANDBOXD_ERROR_NOT_FOUND), "not_found");
}

static void test_error_bodies(void) {
        const char body[] = "{\"error\":{\"code\":\"session_not_active\",\"message\":\"The session is closed.\"}}";
        sandboxd_error e;

        ASSERT(error_from_http(&e, 409, body, strlen(body)) == -EBUSY);
        ASSERT_STREQ(e.code, "session_not_active");
        ASSERT_STREQ(e.message, "The session is closed.");

        /* not our envelope: the start of the body, or the status */
        ASSERT(error_from_http(&e, 502, "Bad Gateway\r\nmore", 17) == -EREMOTEIO);
        ASSERT_STREQ(e.code, "");
        ASSERT_STREQ(e.message, "HTTP 502: Bad Gateway");
        ASSERT(error_from_http(&e, 500, "{\"error\":\"flat\"}", 16) == -EPROTO);
        ASSERT(strstr(e.message, "500") != NULL);
}

static void test_wrong_node(void) {
        const char body[] = "{\"error\":{\"code\":\"wrong_node\",\"message\":\"on n2\",\"node\":\"n2\"}}";
        const char bad[] = "{\"error\":{\"code\":\"wrong_node\",\"message\":\"x\",\"node\":\"../N2\"}}";
        sandboxd_error e;

        ASSERT(error_from_http(&e, 421, body, strlen(body)) == -EREMOTE);
        ASSERT(e.kind == SANDBOXD_ERROR_WRONG_NODE);
        ASSERT_STREQ(e.code, "wrong_node");
        ASSERT_STREQ(e.node, "n2");
        ASSERT_STREQ(sandboxd_error_kind_to_string(SANDBOXD_ERROR_WRONG_NODE), "wrong_node");
        /* a node that is no node name is not taken */
        ASSERT(error_from_http(&e, 421, bad, strlen(bad)) == -EREMOTE);
        ASSERT_STREQ(e.node, "");
        /* other errors name none */
        {
                const char nf[] = "{\"error\":{\"code\":\"not_found\",\"message\":\"x\",\"node\":\"n2\"}}";

                ASSERT(error_from_http(&e, 404, nf, strlen(nf)) == -ENOENT && e.kind == SANDBOXD_ERROR_NOT_FOUND);
        }
}

static void test_nodes_lookup(void) {
        char *url = NULL, *h = NULL;
        const char *why = NULL;

        ASSERT(nodes_lookup("n1=http://10.0.0.1:8421,n2=http://10.0.0.2:8421/", "n2", &url, &why) == 0);
        ASSERT_STREQ(url, "http://10.0.0.2:8421");
        free(url);
        ASSERT(nodes_lookup("  n1=http://a:1 \t n2=https://b/x//\n", "n2", &url, &why) == 0);
        ASSERT_STREQ(url, "https://b/x");
        free(url);
        ASSERT(nodes_lookup("n1=http://a:1, ,n3=http://c", "n1", &url, &why) == 0);
        ASSERT_STREQ(url, "http://a:1");
        free(url);
        ASSERT(nodes_lookup("n1=http://a:1", "n2", &url, &why) == -ENOENT && !url);
        ASSERT(nodes_lookup(NULL, "n2", &url, &why) == -ENOENT);
        ASSERT(nodes_lookup("", "n2", &url, &why) == -ENOENT);
        ASSERT(nodes_lookup("n1", "n2", &url, &why) == -EINVAL && why && strstr(why, "NAME=URL"));
        ASSERT(nodes_lookup("N1=http://a", "n2", &url, &why) == -EINVAL && strstr(why, "node name"));
        ASSERT(nodes_lookup("=http://a", "n2", &url, &why) == -EINVAL);
        ASSERT(nodes_lookup("n1=ftp://a", "n1", &url, &why) == -EINVAL && strstr(why, "http"));
        ASSERT(nodes_lookup("n1=http://", "n1", &url, &why) == -EINVAL);
        ASSERT(nodes_lookup("n1=unix:/run/x", "n1", &url, &why) == -EINVAL);
        ASSERT(nodes_lookup("n1=http://a,n1=http://b", "n1", &url, &why) == -EINVAL && strstr(why, "twice"));
        ASSERT(!url);
        {
                NodeEntry *l = NULL;
                size_t n = 0;

                ASSERT(nodes_parse("b2=http://b:2 a1=https://a:1/", &l, &n, &why) == 0 && n == 2);
                ASSERT_STREQ(l[0].name, "b2");
                ASSERT_STREQ(l[0].url, "http://b:2");
                ASSERT_STREQ(l[1].name, "a1");
                ASSERT_STREQ(l[1].url, "https://a:1");
                nodes_free(l, n);
                ASSERT(nodes_parse(NULL, &l, &n, &why) == 0 && n == 0 && !l);
        }

        ASSERT(url_scope_header("alice", "demo-1_x", &h) == 0);
        ASSERT_STREQ(h, "X-Sandboxd-Scope: alice/demo-1_x");
        free(h);
        ASSERT(url_scope_header("a/b", "c d", &h) == 0);
        ASSERT_STREQ(h, "X-Sandboxd-Scope: a%2Fb/c%20d");
        free(h);
}

static void test_curl_errors(void) {
        ASSERT(errno_from_curl(CURLE_OK, 0) == 0);
        ASSERT(errno_from_curl(CURLE_COULDNT_CONNECT, ENOENT) == -ENOENT);
        ASSERT(errno_from_curl(CURLE_COULDNT_CONNECT, EACCES) == -EACCES);
        ASSERT(errno_from_curl(CURLE_COULDNT_CONNECT, 0) == -ECONNREFUSED);
        ASSERT(errno_from_curl(CURLE_OPERATION_TIMEDOUT, 0) == -ETIMEDOUT);
        ASSERT(errno_from_curl(CURLE_RECV_ERROR, 0) == -ECONNRESET);
        ASSERT(errno_from_curl(CURLE_GOT_NOTHING, 0) == -ECONNRESET);
        ASSERT(errno_from_curl(CURLE_COULDNT_RESOLVE_HOST, 0) == -EHOSTUNREACH);
        ASSERT(errno_from_curl(CURLE_URL_MALFORMAT, 0) == -EINVAL);
        ASSERT(errno_from_curl(CURLE_WRITE_ERROR, 0) == -ECANCELED);
}

/* --- files -------------------------------------------------------------------------------- */

static void test_file_info(void) {
        const char json[] = "{\"name\":\"a.txt\",\"type\":\"file\",\"size\":12,\"mode\":\"0640\","
                            "\"mtime\":\"2024-02-29T12:00:01.5Z\"}";
        const char json2[] = "{\"name_b64\":\"/w==\",\"type\":\"symlink\",\"size\":3,\"mode\":511,\"target\":\"x\","
                             "\"mtime_usec\":7}";
        json_object *o = NULL, *v;
        sandboxd_file_info *i = NULL;
        unsigned m;

        ASSERT(json_parse_text(json, strlen(json), &o) == 0);
        ASSERT(file_info_from_json(o, NULL, &i) == 0);
        ASSERT_STREQ(i->name, "a.txt");
        ASSERT(i->type == SANDBOXD_FILE_REGULAR && i->size == 12 && i->mode == 0640);
        ASSERT(i->mtime_usec == 1709208001500000ULL);
        sandboxd_file_info_free(i);
        json_object_put(o);

        ASSERT(json_parse_text(json2, strlen(json2), &o) == 0);
        ASSERT(file_info_from_json(o, NULL, &i) == 0);
        ASSERT(i->name && (unsigned char) i->name[0] == 0xff);
        ASSERT(i->type == SANDBOXD_FILE_SYMLINK && i->mode == 0777 && i->mtime_usec == 7);
        ASSERT_STREQ(i->target, "x");
        sandboxd_file_info_free(i);
        json_object_put(o);

        ASSERT(file_type_from_string("dir") == SANDBOXD_FILE_DIRECTORY);
        ASSERT(file_type_from_string("fifo") == SANDBOXD_FILE_OTHER);
        v = json_object_new_string("99");
        ASSERT(mode_from_json(v, &m) == -EINVAL); /* not octal */
        json_object_put(v);
        v = json_object_new_string("4755");
        ASSERT(mode_from_json(v, &m) == 0 && m == 04755);
        json_object_put(v);
}

static void test_exec_spec(void) {
        const char *argv[] = { "sh", "-c", "echo \"$X\"", NULL };
        sandboxd_exec *e = NULL;

        ASSERT(sandboxd_exec_new(&e) == 0);
        ASSERT(sandboxd_exec_set_argv(e, argv) == 0);
        ASSERT(sandboxd_exec_set_env(e, "X", "1") == 0);
        ASSERT(sandboxd_exec_set_env(e, "A=B", "1") == -EINVAL);
        ASSERT(sandboxd_exec_set_timeout_ms(e, 1500) == 0);
        ASSERT(sandboxd_exec_set_stdin(e, "hi", 2) == 0);
        ASSERT(sandboxd_exec_set_request_id(e, "r1") == 0);
        ASSERT(sandboxd_exec_set_cwd(e, "sub") == 0);
        /* the request body, as sandboxd will read it */
        ASSERT_STREQ(json_object_to_json_string_ext(e->body, JSON_C_TO_STRING_PLAIN),
                     "{\"argv\":[\"sh\",\"-c\",\"echo \\\"$X\\\"\"],\"env\":{\"X\":\"1\"},\"timeout_ms\":1500,"
                     "\"stdin\":{\"base64\":\"aGk=\"},\"request_id\":\"r1\",\"cwd\":\"sub\"}");
        ASSERT(sandboxd_exec_set_stdin_stream(e, false) == 0);
        ASSERT(sandboxd_exec_set_timeout_ms(e, 0) == 0);
        ASSERT(strstr(json_object_to_json_string(e->body), "stdin") == NULL);
        sandboxd_exec_free(e);
}

#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static void test_ws_head(void) {
        static const char ok[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                 "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Accept: " ACCEPT "\r\n\r\n\x82\x01x";
        static const char refused[] = "HTTP/1.1 409 Conflict\r\nContent-Length: 12\r\n\r\n{\"error\":{}}";
        WsHead h;

        /* complete, with a frame after the head */
        ASSERT(ws_parse_head(ok, sizeof(ok) - 1, ACCEPT, &h) == 1);
        ASSERT(h.upgraded && h.status == 101);
        ASSERT(h.head_size == sizeof(ok) - 1 - 3);
        /* incomplete: every prefix before the empty line */
        for (size_t n = 0; n < sizeof(ok) - 1 - 3; n++)
                ASSERT(ws_parse_head(ok, n, ACCEPT, &h) == 0);
        /* a 101 without the proof of the handshake is not sandboxd's */
        ASSERT(ws_parse_head(ok, sizeof(ok) - 1, "AAAAAAAAAAAAAAAAAAAAAAAAAAA=", &h) == -EPROTO);
        /* a refusal: its status and body length */
        ASSERT(ws_parse_head(refused, sizeof(refused) - 1, ACCEPT, &h) == 1);
        ASSERT(!h.upgraded && h.status == 409 && h.content_length == 12);
        /* malformed */
        ASSERT(ws_parse_head("HTTP/1.1 1x1 X\r\n\r\n", 18, ACCEPT, &h) == -EBADMSG);
        ASSERT(ws_parse_head("SMTP 220\r\n\r\n", 12, ACCEPT, &h) == -EBADMSG);
        ASSERT(ws_parse_head("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", 29, ACCEPT, &h) == -EBADMSG);
        ASSERT(ws_parse_head("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 40, ACCEPT, &h) == -EBADMSG);
        /* too long without an end */
        char *big = malloc(WS_HEAD_MAX + 1);
        ASSERT(big);
        memset(big, 'a', WS_HEAD_MAX + 1);
        ASSERT(ws_parse_head(big, WS_HEAD_MAX + 1, ACCEPT, &h) == -EMSGSIZE);
        free(big);
}

static void test_ws_frames(void) {
        static const char frames[] = "\x82\x05hello"
                                     "\x81\x32{\"type\":\"exit\",\"status\":\"succeeded\",\"exit_code\":0}"
                                     "\x88\x02\x03\xe8";
        size_t used;
        bool result;

        ASSERT(terminal_replay(frames, sizeof(frames) - 1, &used, &result) == 0);
        ASSERT(used == sizeof(frames) - 1);
        ASSERT(result);
        /* a masked frame from a server is a protocol error: nothing more is read */
        ASSERT(terminal_replay("\x82\x81" "abcdx", 7, &used, &result) == 0);
        ASSERT(!result);
}

int main(void) {
        test_lines_chunks();
        test_lines_byte_by_byte();
        test_lines_too_long();
        test_lines_stop();
        test_event_stream();
        test_event_bad();
        test_event_signaled();
        test_exit_status();
        test_snapshot();
        test_port();
        test_urls();
        test_endpoints();
        test_error_mapping();
        test_error_bodies();
        test_curl_errors();
        test_wrong_node();
        test_nodes_lookup();
        test_file_info();
        test_exec_spec();
        test_ws_head();
        test_ws_frames();
        return TESTS_DONE();
}
