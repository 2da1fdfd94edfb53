/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the records sandboxd reads back at start-up from /var/lib/sandboxd/sessions/:
 * the input as the text of a file (store_parse()), decoded as a session's record
 * (session.json) and as a command's (<n>.json), as recovery does before it looks at
 * systemd, the fd store, the spool or the directories. What was accepted must be what sandboxd itself
 * could have written: valid names, values in range, text that D-Bus and JSON take. */

#include <assert.h>

#include "command.h"
#include "encoding.h"
#include "ndjson.h"
#include "net-policy.h"
#include "scope.h"
#include "session.h"
#include "store.h"
#include "validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_utf8(const char *s) {
        bool valid;

        return utf8_valid_prefix(s, strlen(s), &valid) == strlen(s) && valid;
}

static void check_session(const Session *s) {
        char slice[128];

        assert(session_id_is_valid(s->id));
        assert(user_name_is_valid(s->user) && workspace_name_is_valid(s->workspace));
        snprintf(slice, sizeof(slice), "sandboxd-%s.slice", s->id);
        assert(streq(s->slice, slice));
        assert(startswith(s->dynamic_user, "sbx-") && strlen(s->dynamic_user) == 4 + 16);
        assert(startswith(s->workspace_dir, "/var/lib/sandboxd/ws/") && !strstr(s->workspace_dir, ".."));
        assert(!strchr(scope_tenant(s->tenant), '/') && !streq(scope_tenant(s->tenant), ".."));
        assert(s->state == SESSION_ACTIVE || s->state == SESSION_CLOSING || s->state == SESSION_CLOSED);
        assert(s->closing == (s->state == SESSION_CLOSING));
        assert(s->limits.memory_max > 0 && s->limits.cpu_quota_percent > 0 && s->limits.tasks_max > 0);
        assert(network_mode_to_string(s->network));
        assert(exec_mode_to_string(s->exec_mode));
        assert(!s->tenant || is_utf8(s->tenant));
        /* written into JSON as it is */
        assert(!s->close_reason || strspn(s->close_reason, "abcdefghijklmnopqrstuvwxyz-") == strlen(s->close_reason));
        for (char **d = s->net_deny; d && *d; d++)
                assert(domain_pattern_is_valid(*d));
        for (char **d = s->net_allow; d && *d; d++)
                assert(domain_pattern_is_valid(*d));
}

static void check_command(const Command *c) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char unit[128];
        Buf b = {};

        assert(c->n > 0 && request_id_is_valid(c->request_id));
        snprintf(unit, sizeof(unit), "sandboxd-%s-%u.service", c->session->id, c->n);
        assert(streq(c->unit, unit) && startswith(c->unit_path, "/org/freedesktop/systemd1/unit/"));
        assert(command_status_to_string(c->result.status));
        assert(stdin_mode_to_string(c->stdin_mode));
        for (char **a = c->argv; a && *a; a++)
                assert(is_utf8(*a));
        assert(is_utf8(c->result.reason));

        /* the result as the API shows it is JSON */
        assert(buf_puts(&b, "{") >= 0 && ndjson_append_result_fields(&b, &c->result) >= 0 && buf_puts(&b, "}") >= 0);
        assert(store_parse(b.data, b.len, &o) >= 0);
        buf_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* Of the manager, a session's paths take the runtime directory; nothing else is read. */
        static Manager manager = { .runtime_dir = (char *) "/run/sandboxd" };
        _cleanup_(json_object_putp) json_object *o = NULL;
        Config config;
        Session *s, *owner;
        Command *c;
        int r;

        if (store_parse((const char *) data, size, &o) < 0)
                return 0;
        assert(json_object_is_type(o, json_type_object));

        config_init(&config);

        /* a session's record, into a session the manager does not know */
        s = calloc(1, sizeof(Session));
        assert(s);
        s->manager = &manager;
        r = session_record_decode(s, o, &config);
        assert(r >= 0 || r == -EBADMSG || r == -ENOMEM);
        if (r >= 0)
                check_session(s);
        session_free(s);

        /* a command's, twice: the second is one too many */
        owner = calloc(1, sizeof(Session));
        assert(owner);
        owner->manager = &manager;
        strcpy(owner->id, "0123456789abcdef");
        r = command_record_decode(owner, o, &c);
        assert(r >= 0 || r == -EBADMSG || r == -ENOMEM);
        if (r >= 0) {
                Command *again;

                assert(owner->commands == c);
                check_command(c);
                assert(command_record_decode(owner, o, &again) == -EEXIST);
        } else
                assert(!owner->commands);
        session_free(owner);

        config_done(&config);
        return 0;
}
