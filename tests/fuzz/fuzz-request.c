/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the parsers of request bodies. Built as a libFuzzer/AFL++ target with
 * -Dfuzzers=true and clang, and always as a replay program that runs the committed
 * corpus as an ordinary test. What they accept goes to systemd over D-Bus: its strings
 * must be UTF-8 as D-Bus has it. */

#include <assert.h>

#include "encoding.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_utf8(const char *s) {
        bool valid;

        return !s || (utf8_valid_prefix(s, strlen(s), &valid) == strlen(s) && valid);
}

static bool strv_is_utf8(char * const *l) {
        for (size_t i = 0; l && l[i]; i++)
                if (!is_utf8(l[i]))
                        return false;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        SessionRequest s = {};
        CommandRequest c = {};
        RequestError e = {};
        PortRequest p = {};

        if (session_request_parse((const char *) data, size, &s, &e) >= 0) {
                assert(is_utf8(s.user) && is_utf8(s.workspace));
                assert(strv_is_utf8(s.network_deny) && strv_is_utf8(s.network_allow));
                assert(exec_mode_to_string(s.exec_mode));
                session_request_done(&s);
        }
        if (command_request_parse((const char *) data, size, &c, &e) >= 0) {
                assert(strv_is_utf8(c.argv) && strv_is_utf8(c.env));
                assert(is_utf8(c.cwd) && is_utf8(c.request_id));
                command_request_done(&c);
        }
        if (port_request_parse((const char *) data, size, &p, &e) >= 0)
                assert(p.port > 0);
        return 0;
}
