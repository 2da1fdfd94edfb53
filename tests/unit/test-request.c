/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "request.h"
#include "tests.h"

static int parse_session(const char *body, SessionRequest *s, RequestError *e) {
        *s = (SessionRequest) {};
        *e = (RequestError) {};
        return session_request_parse(body, strlen(body), s, e);
}

static int parse_command(const char *body, CommandRequest *c, RequestError *e) {
        *c = (CommandRequest) {};
        *e = (RequestError) {};
        return command_request_parse(body, strlen(body), c, e);
}

static void expect_session_error(const char *body, const char *code) {
        SessionRequest s;
        RequestError e;

        ASSERT(parse_session(body, &s, &e) == -EINVAL);
        ASSERT_STREQ(e.code, code);
        ASSERT(e.message[0] != 0);
        ASSERT(!s.user && !s.workspace);
}

static void expect_command_error(const char *body, const char *code) {
        CommandRequest c;
        RequestError e;

        ASSERT(parse_command(body, &c, &e) == -EINVAL);
        ASSERT_STREQ(e.code, code);
        ASSERT(!c.argv);
}

static void test_session(void) {
        SessionRequest s;
        RequestError e;

        ASSERT(parse_session("{\"user\":\"alice\",\"workspace\":\"proj\"}", &s, &e) == 0);
        ASSERT_STREQ(s.user, "alice");
        ASSERT_STREQ(s.workspace, "proj");
        ASSERT(!s.has_memory_max);
        session_request_done(&s);

        ASSERT(parse_session("{\"user\":\"a\",\"workspace\":\"w\",\"limits\":{\"memory_max\":\"256M\",\"cpu_quota\":50,"
                             "\"tasks_max\":10},\"network\":{\"mode\":\"none\"}}", &s, &e) == 0);
        ASSERT(s.has_memory_max && s.memory_max == 256ULL << 20);
        ASSERT(s.has_cpu_quota && s.cpu_quota_percent == 50);
        ASSERT(s.has_tasks_max && s.tasks_max == 10);
        ASSERT(s.has_network_mode && s.network == NETWORK_NONE);
        session_request_done(&s);

        ASSERT(parse_session("{\"user\":\"a\",\"workspace\":\"w\"}", &s, &e) == 0);
        ASSERT(!s.has_network_mode && !s.network_deny && !s.network_allow); /* the config decides */
        ASSERT(!s.has_exec_mode);                                            /* this too */
        session_request_done(&s);

        ASSERT(parse_session("{\"user\":\"a\",\"workspace\":\"w\",\"exec_mode\":\"session\"}", &s, &e) == 0);
        ASSERT(s.has_exec_mode && s.exec_mode == EXEC_MODE_SESSION);
        session_request_done(&s);
        ASSERT(parse_session("{\"user\":\"a\",\"workspace\":\"w\",\"exec_mode\":\"unit\"}", &s, &e) == 0);
        ASSERT(s.has_exec_mode && s.exec_mode == EXEC_MODE_UNIT);
        session_request_done(&s);
        ASSERT_STREQ(exec_mode_to_string(EXEC_MODE_UNIT), "unit");
        ASSERT_STREQ(exec_mode_to_string(EXEC_MODE_SESSION), "session");
        ASSERT(!exec_mode_to_string(_EXEC_MODE_MAX));
        ASSERT(exec_mode_from_string("session") == EXEC_MODE_SESSION);
        ASSERT(exec_mode_from_string("Session") == _EXEC_MODE_INVALID);
        ASSERT(exec_mode_from_string(NULL) == _EXEC_MODE_INVALID);

        ASSERT(parse_session("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"mode\":\"host\"}}", &s, &e) == 0);
        ASSERT(s.network == NETWORK_HOST); /* whether the tenant may: session_create() decides */
        session_request_done(&s);

        ASSERT(parse_session("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"mode\":\"proxy\","
                             "\"deny\":[\"Evil.TEST.\",\"*.tracker.test\"],\"allow\":[]}}", &s, &e) == 0);
        ASSERT(s.network == NETWORK_PROXY);
        ASSERT(strv_length(s.network_deny) == 2);
        ASSERT_STREQ(s.network_deny[0], "evil.test");
        ASSERT_STREQ(s.network_deny[1], "*.tracker.test");
        ASSERT(s.network_allow && strv_length(s.network_allow) == 0); /* allow nothing */
        session_request_done(&s);

        expect_session_error("", "invalid_json");
        expect_session_error("{", "invalid_json");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\"} x", "invalid_json");
        expect_session_error("[1]", "invalid_type");
        expect_session_error("null", "invalid_type");
        expect_session_error("123", "invalid_type");
        expect_session_error("{\"user\":\"a\"}", "missing_field");
        expect_session_error("{\"workspace\":\"w\"}", "missing_field");
        expect_session_error("{\"user\":1,\"workspace\":\"w\"}", "invalid_type");
        expect_session_error("{\"user\":\"Bad\",\"workspace\":\"w\"}", "invalid_name");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"../w\"}", "invalid_name");
        expect_session_error("{\"user\":\"a\\u0000b\",\"workspace\":\"w\"}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"color\":1}", "unknown_field");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"limits\":{\"disk\":1}}", "unknown_field");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"limits\":{\"tasks_max\":-1}}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"limits\":{\"tasks_max\":\"5\"}}", "invalid_type");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"mode\":1}}", "invalid_type");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"deny\":\"x.test\"}}", "invalid_type");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"deny\":[1]}}", "invalid_type");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"deny\":[\"a b\"]}}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"deny\":[\"*\"]}}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"allow\":[\"x..test\"]}}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"allow\":[\"*.*.test\"]}}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"dns\":[]}}", "unknown_field");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"network\":{\"mode\":\"wifi\"}}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"exec_mode\":\"thread\"}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"exec_mode\":\"\"}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"exec_mode\":\"unit\\u0000\"}", "invalid_value");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"exec_mode\":1}", "invalid_type");
        expect_session_error("{\"user\":\"a\",\"workspace\":\"w\",\"exec_mode\":null}", "invalid_type");
}

static void test_command(void) {
        CommandRequest c;
        RequestError e;

        ASSERT(parse_command("{\"argv\":[\"echo\",\"$HOME\"],\"env\":{\"A\":\"1\"},\"cwd\":\"src\",\"timeout_ms\":1500,"
                             "\"request_id\":\"r-1\"}", &c, &e) == 0);
        ASSERT(c.argv && strv_length(c.argv) == 2);
        ASSERT_STREQ(c.argv[1], "$HOME"); /* literal, never expanded */
        ASSERT(c.env && strv_length(c.env) == 1);
        ASSERT_STREQ(c.env[0], "A=1");
        ASSERT_STREQ(c.cwd, "src");
        ASSERT(c.has_timeout && c.timeout_ms == 1500);
        ASSERT_STREQ(c.request_id, "r-1");
        command_request_done(&c);

        expect_command_error("{}", "missing_field");
        expect_command_error("{\"argv\":[]}", "invalid_value");
        expect_command_error("{\"argv\":\"echo hi\"}", "invalid_type");
        expect_command_error("{\"argv\":[\"echo\",1]}", "invalid_type");
        expect_command_error("{\"argv\":[\"\"]}", "invalid_value");
        expect_command_error("{\"argv\":[\"a\\u0000b\"]}", "invalid_value");
        /* UTF-8 that json-c lets through and D-Bus does not: an overlong NUL, a surrogate,
         * a code point above U+10FFFF; escapes of lone surrogates become U+FFFD */
        expect_command_error("{\"argv\":[\"a\xc0\x80\"]}", "invalid_json");
        expect_command_error("{\"argv\":[\"\xed\xa0\x80\"]}", "invalid_json");
        expect_command_error("{\"argv\":[\"\xf4\x90\x80\x80\"]}", "invalid_json");
        expect_command_error("{\"argv\":[\"\xe9t\xe9\"]}", "invalid_json");
        ASSERT(parse_command("{\"argv\":[\"\\ud800\",\"\xc3\xa9t\xc3\xa9\"]}", &c, &e) == 0);
        ASSERT_STREQ(c.argv[0], "\xef\xbf\xbd");
        command_request_done(&c);
        expect_command_error("{\"argv\":[\"true\"],\"env\":{\"HOME\":\"/root\"}}", "reserved_env");
        expect_command_error("{\"argv\":[\"true\"],\"env\":{\"XDG_CACHE_HOME\":\"/x\"}}", "reserved_env");
        expect_command_error("{\"argv\":[\"true\"],\"env\":{\"A=B\":\"x\"}}", "invalid_value");
        expect_command_error("{\"argv\":[\"true\"],\"env\":{\"A\":1}}", "invalid_type");
        expect_command_error("{\"argv\":[\"true\"],\"env\":[]}", "invalid_type");
        expect_command_error("{\"argv\":[\"true\"],\"timeout_ms\":0}", "invalid_value");
        expect_command_error("{\"argv\":[\"true\"],\"timeout_ms\":1.5}", "invalid_type");
        expect_command_error("{\"argv\":[\"true\"],\"request_id\":\"a b\"}", "invalid_name");
        expect_command_error("{\"argv\":[\"true\"],\"cwd\":\"\"}", "invalid_path");
        expect_command_error("{\"argv\":[\"true\"],\"shell\":true}", "unknown_field");
}

int main(void) {
        test_session();
        test_command();
        return TESTS_DONE();
}
