/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "internal.h"

static int session_answer(sandboxd_client *c, json_object *o, sandboxd_session **ret) {
        sandboxd_session *s;
        int r;

        r = session_from_json(o, &s);
        if (r == -EBADMSG)
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, r, "The answer is not a session.");
        if (r < 0)
                return client_fail(c, r);
        if (ret)
                *ret = s;
        else
                sandboxd_session_free(s);
        return 0;
}

_public_ int sandboxd_session_create(sandboxd_client *c, const char *user, const char *workspace,
                                     const char *options_json, sandboxd_session **ret, bool *ret_created) {
        _cleanup_(json_object_putp) json_object *body = NULL, *answer = NULL;
        _cleanup_free_ char *url = NULL, *scope = NULL;
        bool oom = false;
        long status = 0;
        int r;

        if (!c || !user || !workspace)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_session_create(c, user, workspace, options_json, ret, ret_created));
        if (options_json) {
                r = json_parse_text(options_json, strlen(options_json), &body);
                if (r < 0 || !json_object_is_type(body, json_type_object))
                        return error_set(&c->error, SANDBOXD_ERROR_LOCAL, -EINVAL,
                                         "The session options are not a JSON object.");
        } else if (!(body = json_object_new_object()))
                return client_fail(c, -ENOMEM);
        /* a failed json_object_new_string() would be sent as null */
        json_put(body, "user", json_object_new_string(user), &oom);
        json_put(body, "workspace", json_object_new_string(workspace), &oom);
        if (oom)
                return client_fail(c, -ENOMEM);
        if (asprintf(&url, "%s/v1/sessions", c->base_url) < 0) {
                url = NULL;
                return client_fail(c, -ENOMEM);
        }
        if (url_scope_header(user, workspace, &scope) < 0)
                return client_fail(c, -ENOMEM);
        r = http_json_scoped(c, "POST", url, body, scope, &status, &answer);
        if (r < 0)
                return r;
        r = session_answer(c, answer, ret);
        if (r < 0)
                return r;
        if (ret_created)
                *ret_created = status == 201;
        return client_done(c, 0);
}

_public_ int sandboxd_session_get(sandboxd_client *c, const char *id, sandboxd_session **ret) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        Buf url = {};
        int r;

        if (!c || !id || !ret)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_session_get(c, id, ret));
        r = url_session(&url, c, id, NULL);
        if (r >= 0)
                r = http_json(c, "GET", url.data, NULL, NULL, &answer);
        if (r >= 0)
                r = session_answer(c, answer, ret);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_session_list(sandboxd_client *c, const char *user, sandboxd_session ***ret, size_t *ret_n) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        sandboxd_session **list = NULL;
        json_object *arr;
        size_t n = 0;
        Buf url = {};
        int r;

        if (!c || !ret)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_session_list(c, user, ret, ret_n));
        r = buf_printf(&url, "%s/v1/sessions", c->base_url);
        if (r >= 0 && user)
                r = url_append_query(&url, "user", user);
        if (r >= 0)
                r = http_json(c, "GET", url.data, NULL, NULL, &answer);
        buf_done(&url);
        if (r < 0)
                return client_done(c, r);
        if (!json_object_object_get_ex(answer, "sessions", &arr) || !json_object_is_type(arr, json_type_array))
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "The answer has no list of sessions.");

        n = json_object_array_length(arr);
        list = calloc(n + 1, sizeof(*list));
        if (!list)
                return client_fail(c, -ENOMEM);
        for (size_t i = 0; i < n; i++) {
                r = session_answer(c, json_object_array_get_idx(arr, i), &list[i]);
                if (r < 0) {
                        sandboxd_session_list_free(list);
                        return r;
                }
        }
        *ret = list;
        if (ret_n)
                *ret_n = n;
        return client_done(c, 0);
}

_public_ int sandboxd_session_close(sandboxd_client *c, const char *id, bool purge, sandboxd_session **ret) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        Buf url = {};
        int r;

        if (!c || !id)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_session_close(c, id, purge, ret));
        r = url_session(&url, c, id, NULL);
        if (r >= 0 && purge)
                r = url_append_query(&url, "purge", "true");
        if (r >= 0)
                r = http_json(c, "DELETE", url.data, NULL, NULL, &answer);
        if (r >= 0)
                r = session_answer(c, answer, ret);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_session_freeze(sandboxd_client *c, const char *id, bool freeze, sandboxd_session **ret) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        Buf url = {};
        int r;

        if (!c || !id)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_session_freeze(c, id, freeze, ret));
        r = url_session(&url, c, id, freeze ? "freeze" : "thaw");
        if (r >= 0)
                r = http_json(c, "POST", url.data, NULL, NULL, &answer);
        if (r >= 0)
                r = session_answer(c, answer, ret);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_session_touch(sandboxd_client *c, const char *id) {
        Buf url = {};
        int r;

        if (!c || !id)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_session_touch(c, id));
        r = url_session(&url, c, id, "activity");
        if (r >= 0)
                r = http_json(c, "POST", url.data, NULL, NULL, NULL);
        buf_done(&url);
        return client_done(c, r);
}
