/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <json-c/json.h>
#include <signal.h>
#include <sys/wait.h>

#include "ndjson.h"
#include "tests.h"

/* Every line we produce must be one JSON object that json-c reads back. */
static json_object *parse_line(const Buf *b) {
        ASSERT(b->len > 0 && b->data[b->len - 1] == '\n');
        ASSERT(memchr(b->data, '\n', b->len) == b->data + b->len - 1);
        return json_tokener_parse(b->data);
}

static void test_output_text(void) {
        Buf b = {};
        size_t consumed;
        json_object *o, *v;

        ASSERT(ndjson_append_output(&b, "stdout", "a\"b\\c\n\t\x01\x7f", 10, false, &consumed) == 0);
        ASSERT(consumed == 10);
        o = parse_line(&b);
        ASSERT(o);
        ASSERT(json_object_object_get_ex(o, "type", &v) && streq(json_object_get_string(v), "stdout"));
        ASSERT(json_object_object_get_ex(o, "data", &v));
        ASSERT(json_object_get_string_len(v) == 10 && memcmp(json_object_get_string(v), "a\"b\\c\n\t\x01\x7f", 10) == 0);
        json_object_put(o);
        buf_done(&b);
}

static void test_output_split_utf8(void) {
        Buf b = {};
        size_t consumed;
        json_object *o, *v;

        /* "hé" cut after the first byte of é: only "h" goes out, the rest waits */
        ASSERT(ndjson_append_output(&b, "stderr", "h\xc3", 2, false, &consumed) == 0);
        ASSERT(consumed == 1);
        o = parse_line(&b);
        ASSERT(o && json_object_object_get_ex(o, "data", &v) && streq(json_object_get_string(v), "h"));
        json_object_put(o);
        buf_done(&b);

        /* only an incomplete character: nothing is written */
        ASSERT(ndjson_append_output(&b, "stderr", "\xc3", 1, false, &consumed) == 0);
        ASSERT(consumed == 0 && b.len == 0);
        /* at the end it must go out anyway, as base64 */
        ASSERT(ndjson_append_output(&b, "stderr", "\xc3", 1, true, &consumed) == 0);
        ASSERT(consumed == 1);
        o = parse_line(&b);
        ASSERT(o && json_object_object_get_ex(o, "data_b64", &v) && streq(json_object_get_string(v), "ww=="));
        json_object_put(o);
        buf_done(&b);
}

/* The escaping scans 8 bytes at a time: every byte value, at every place of a word and
 * across words, must come out as a byte-at-a-time escape would write it. */
static void test_escape_every_byte_everywhere(void) {
        for (unsigned c = 0; c < 256; c++)
                for (size_t at = 0; at < 24; at++) {
                        char in[24];
                        Buf b = {};
                        char want[16];
                        size_t wn;

                        memset(in, 'a', sizeof(in));
                        in[at] = (char) c;
                        ASSERT(json_append_string(&b, in, sizeof(in)) == 0);
                        if (c == '"' || c == '\\')
                                wn = (size_t) snprintf(want, sizeof(want), "\\%c", c);
                        else if (c == '\n')
                                wn = (size_t) snprintf(want, sizeof(want), "\\n");
                        else if (c == '\r')
                                wn = (size_t) snprintf(want, sizeof(want), "\\r");
                        else if (c == '\t')
                                wn = (size_t) snprintf(want, sizeof(want), "\\t");
                        else if (c < 0x20 || c == 0x7f)
                                wn = (size_t) snprintf(want, sizeof(want), "\\u%04x", c);
                        else
                                want[0] = (char) c, wn = 1;
                        ASSERT(b.len == 2 + sizeof(in) - 1 + wn);
                        ASSERT(b.data[0] == '"' && b.data[b.len - 1] == '"');
                        ASSERT(memcmp(b.data + 1 + at, want, wn) == 0);
                        for (size_t i = 0; i < sizeof(in); i++)
                                if (i != at)
                                        ASSERT(b.data[1 + i + (i > at ? wn - 1 : 0)] == 'a');
                        buf_done(&b);
                }
}

static void test_output_binary(void) {
        Buf b = {};
        size_t consumed;
        json_object *o, *v;

        ASSERT(ndjson_append_output(&b, "stdout", "\xff\xfe\x00", 3, false, &consumed) == 0);
        ASSERT(consumed == 3);
        o = parse_line(&b);
        ASSERT(o && json_object_object_get_ex(o, "data_b64", &v) && streq(json_object_get_string(v), "//4A"));
        ASSERT(!json_object_object_get_ex(o, "data", NULL));
        json_object_put(o);
        buf_done(&b);
}

static void test_accepted_and_exit(void) {
        CommandResult res;
        Buf b = {};
        json_object *o, *v, *u;

        ASSERT(ndjson_append_accepted(&b, "job\"1", "sandboxd-0123456789abcdef-1.service", "0123456789abcdef") == 0);
        o = parse_line(&b);
        ASSERT(o && json_object_object_get_ex(o, "request_id", &v) && streq(json_object_get_string(v), "job\"1"));
        ASSERT(json_object_object_get_ex(o, "unit", &v) &&
               streq(json_object_get_string(v), "sandboxd-0123456789abcdef-1.service"));
        json_object_put(o);
        buf_done(&b);

        ASSERT(command_result_from_unit("signal", CLD_KILLED, SIGKILL, false, &res) == 0);
        res.duration_ms = 12;
        res.usage.cpu_usec = 3000;
        res.usage.memory_bytes = 4096;
        res.usage.tasks = 2;
        ASSERT(ndjson_append_exit(&b, &res) == 0);
        o = parse_line(&b);
        ASSERT(o);
        ASSERT(json_object_object_get_ex(o, "type", &v) && streq(json_object_get_string(v), "exit"));
        ASSERT(json_object_object_get_ex(o, "status", &v) && streq(json_object_get_string(v), "signaled"));
        ASSERT(json_object_object_get_ex(o, "exit_code", &v) && json_object_is_type(v, json_type_null));
        ASSERT(json_object_object_get_ex(o, "signal", &v) && streq(json_object_get_string(v), "SIGKILL"));
        ASSERT(json_object_object_get_ex(o, "reason", &v) && streq(json_object_get_string(v), "signal"));
        ASSERT(json_object_object_get_ex(o, "duration_ms", &v) && json_object_get_int(v) == 12);
        ASSERT(json_object_object_get_ex(o, "usage", &u));
        ASSERT(json_object_object_get_ex(u, "cpu_usec", &v) && json_object_get_int(v) == 3000);
        ASSERT(json_object_object_get_ex(u, "memory_bytes", &v) && json_object_get_int(v) == 4096);
        ASSERT(json_object_object_get_ex(u, "tasks", &v) && json_object_get_int(v) == 2);
        json_object_put(o);
        buf_done(&b);
}

static void check_result(const char *result, int code, int status, bool oom, CommandStatus expect, const char *reason,
                         int exit_code, int sig) {
        CommandResult r;

        ASSERT(command_result_from_unit(result, code, status, oom, &r) == 0);
        ASSERT(r.status == expect);
        ASSERT_STREQ(r.reason, reason);
        ASSERT(r.exit_code == exit_code);
        ASSERT(r.signal == sig);
}

static void test_result_mapping(void) {
        check_result("success", CLD_EXITED, 0, false, COMMAND_SUCCEEDED, "success", 0, 0);
        check_result("exit-code", CLD_EXITED, 3, false, COMMAND_FAILED, "exit-code", 3, 0);
        check_result("exit-code", CLD_EXITED, 203, false, COMMAND_FAILED, "setup-exec", 203, 0);
        check_result("exit-code", CLD_EXITED, 200, false, COMMAND_FAILED, "setup-chdir", 200, 0);
        check_result("exit-code", CLD_EXITED, 226, false, COMMAND_FAILED, "setup-namespace", 226, 0);
        check_result("timeout", CLD_KILLED, SIGTERM, false, COMMAND_TIMED_OUT, "timeout", -1, SIGTERM);
        check_result("signal", CLD_KILLED, SIGKILL, false, COMMAND_SIGNALED, "signal", -1, SIGKILL);
        check_result("signal", CLD_KILLED, SIGKILL, true, COMMAND_SIGNALED, "oom-kill", -1, SIGKILL);
        check_result("oom-kill", CLD_KILLED, SIGKILL, false, COMMAND_SIGNALED, "oom-kill", -1, SIGKILL);
        check_result("core-dump", CLD_DUMPED, SIGSEGV, false, COMMAND_SIGNALED, "core-dump", -1, SIGSEGV);
        check_result("resources", 0, 0, false, COMMAND_FAILED, "resources", -1, 0);
        /* an OOM flag without a SIGKILL does not make a plain exit an OOM kill */
        check_result("exit-code", CLD_EXITED, 1, true, COMMAND_FAILED, "exit-code", 1, 0);

        ASSERT(command_status_from_string("timed_out") == COMMAND_TIMED_OUT);
        ASSERT(command_status_from_string("nope") == _COMMAND_STATUS_INVALID);
        ASSERT(signal_from_string("SIGUSR2") == SIGUSR2);
        ASSERT(signal_from_string("USR2") == -EINVAL);
}

int main(void) {
        test_escape_every_byte_everywhere();
        test_output_text();
        test_output_split_utf8();
        test_output_binary();
        test_accepted_and_exit();
        test_result_mapping();
        return TESTS_DONE();
}
