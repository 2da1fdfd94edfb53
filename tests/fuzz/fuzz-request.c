/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the parsers of request bodies. Built as a libFuzzer/AFL++ target with
 * -Dfuzzers=true and clang, and always as a replay program that runs the committed
 * corpus as an ordinary test. */

#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        SessionRequest s = {};
        CommandRequest c = {};
        RequestError e = {};

        if (session_request_parse((const char *) data, size, &s, &e) >= 0)
                session_request_done(&s);
        if (command_request_parse((const char *) data, size, &c, &e) >= 0)
                command_request_done(&c);
        return 0;
}
