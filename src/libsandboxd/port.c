/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "internal.h"

/* At most this many ports in a list: sandboxd allows 64 a session ([Ports] MaxPerSession=),
 * and a list past this one is not sandboxd's answer. */
#define PORT_LIST_MAX 4096U

static int port_answer(sandboxd_client *c, json_object *o, sandboxd_port **ret) {
        sandboxd_port *p;
        int r;

        r = port_from_json(o, &p);
        if (r == -EBADMSG)
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, r, "The answer is not an exposed port.");
        if (r < 0)
                return client_fail(c, r);
        if (ret)
                *ret = p;
        else
                sandboxd_port_free(p);
        return 0;
}

static int url_port(Buf *b, sandboxd_client *c, const char *session, uint16_t port) {
        char tail[sizeof("ports/65535")];

        if (port == 0)
                return url_session(b, c, session, "ports");
        (void) snprintf(tail, sizeof(tail), "ports/%u", port);
        return url_session(b, c, session, tail);
}

_public_ int sandboxd_port_expose(sandboxd_client *c, const char *session, uint16_t port, bool host,
                                  sandboxd_port **ret) {
        _cleanup_(json_object_putp) json_object *body = NULL, *answer = NULL;
        bool oom = false;
        Buf url = {};
        int r;

        if (!c || !session || port == 0)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_port_expose(c, session, port, host, ret));
        body = json_object_new_object();
        json_put(body, "port", json_object_new_int(port), &oom);
        json_put(body, "host", json_object_new_boolean(host), &oom);
        if (oom)
                return client_fail(c, -ENOMEM);
        r = url_port(&url, c, session, 0);
        if (r >= 0)
                r = http_json(c, "POST", url.data, body, NULL, &answer);
        if (r >= 0)
                r = port_answer(c, answer, ret);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_port_get(sandboxd_client *c, const char *session, uint16_t port, sandboxd_port **ret) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        Buf url = {};
        int r;

        if (!c || !session || port == 0 || !ret)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_port_get(c, session, port, ret));
        r = url_port(&url, c, session, port);
        if (r >= 0)
                r = http_json(c, "GET", url.data, NULL, NULL, &answer);
        if (r >= 0)
                r = port_answer(c, answer, ret);
        buf_done(&url);
        return client_done(c, r);
}

_public_ int sandboxd_port_list(sandboxd_client *c, const char *session, sandboxd_port ***ret, size_t *ret_n) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        sandboxd_port **list;
        json_object *arr;
        Buf url = {};
        size_t n;
        int r;

        if (!c || !session || !ret)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_port_list(c, session, ret, ret_n));
        r = url_port(&url, c, session, 0);
        if (r >= 0)
                r = http_json(c, "GET", url.data, NULL, NULL, &answer);
        buf_done(&url);
        if (r < 0)
                return client_done(c, r);
        if (!json_object_object_get_ex(answer, "ports", &arr) || !json_object_is_type(arr, json_type_array) ||
            json_object_array_length(arr) > PORT_LIST_MAX)
                return error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "The answer has no list of ports.");

        n = json_object_array_length(arr);
        list = calloc(n + 1, sizeof(*list));
        if (!list)
                return client_fail(c, -ENOMEM);
        for (size_t i = 0; i < n; i++) {
                r = port_answer(c, json_object_array_get_idx(arr, i), &list[i]);
                if (r < 0) {
                        sandboxd_port_list_free(list);
                        return r;
                }
        }
        *ret = list;
        if (ret_n)
                *ret_n = n;
        return client_done(c, 0);
}

_public_ int sandboxd_port_unexpose(sandboxd_client *c, const char *session, uint16_t port) {
        Buf url = {};
        int r;

        if (!c || !session || port == 0)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_port_unexpose(c, session, port));
        r = url_port(&url, c, session, port);
        if (r >= 0)
                r = http_json(c, "DELETE", url.data, NULL, NULL, NULL);
        buf_done(&url);
        return client_done(c, r);
}
