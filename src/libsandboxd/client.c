/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "internal.h"
#include "validate.h"

_public_ int sandboxd_client_new(const char *url, const char *key, sandboxd_client **ret) {
        sandboxd_client *c;
        int r;

        if (!ret || (key && (strpbrk(key, "\r\n") || !*key)))
                return -EINVAL;
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -EIO;
        c = calloc(1, sizeof(*c));
        if (!c) {
                curl_global_cleanup();
                return -ENOMEM;
        }
        c->wakeup_fd = -EBADF;
        c->timeout_usec = DEFAULT_TIMEOUT_USEC;
        r = url_parse_endpoint(url, &c->base_url, &c->unix_path);
        if (r >= 0 && key && asprintf(&c->auth_header, "Authorization: Bearer %s", key) < 0) {
                c->auth_header = NULL;
                r = -ENOMEM;
        }
        if (r < 0) {
                sandboxd_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

_public_ int sandboxd_client_new_bus(sandboxd_client **ret) {
        sandboxd_client *c = NULL;
        int r;

        if (!ret)
                return -EINVAL;
        /* set up as an HTTP client of the local unix socket too: sandboxd_request() is raw HTTP */
        r = sandboxd_client_new(NULL, NULL, &c);
        if (r < 0)
                return r;
        r = bus_open(c);
        if (r < 0) {
                sandboxd_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

_public_ int sandboxd_client_set_interactive(sandboxd_client *c, bool interactive) {
        if (!c)
                return -EINVAL;
        if (!c->bus)
                return 0; /* HTTP asks nobody */
        return sd_bus_set_allow_interactive_authorization(c->bus, interactive);
}

_public_ bool sandboxd_client_is_bus(const sandboxd_client *c) {
        return c && c->bus;
}

_public_ sandboxd_client *sandboxd_client_free(sandboxd_client *c) {
        if (!c)
                return NULL;
        bus_close(c);
        free(c->base_url);
        free(c->unix_path);
        if (c->auth_header) {
                /* the key is a secret: don't leave it in freed memory */
                explicit_bzero(c->auth_header, strlen(c->auth_header));
                free(c->auth_header);
        }
        free(c);
        curl_global_cleanup();
        return NULL;
}

_public_ int sandboxd_client_set_timeout(sandboxd_client *c, uint64_t usec) {
        if (!c)
                return -EINVAL;
        c->timeout_usec = usec;
        return 0;
}

_public_ int sandboxd_client_set_wakeup(sandboxd_client *c, int fd, sandboxd_wakeup_fn fn, void *userdata) {
        if (!c || (fd >= 0 && !fn))
                return -EINVAL;
        c->wakeup_fd = fd >= 0 ? fd : -EBADF;
        c->wakeup_fn = fd >= 0 ? fn : NULL;
        c->wakeup_userdata = userdata;
        return 0;
}

_public_ const sandboxd_error *sandboxd_client_last_error(const sandboxd_client *c) {
        return c ? &c->error : NULL;
}

_public_ int sandboxd_request(sandboxd_client *c, const char *method, const char *path, const char *body,
                              long *ret_status, char **ret_body, size_t *ret_size) {
        _cleanup_free_ char *url = NULL;
        HttpCall call = HTTP_CALL_INIT;
        int r;

        if (!c || !method || !path || path[0] != '/')
                return -EINVAL;
        client_begin(c);
        if (asprintf(&url, "%s%s", c->base_url, path) < 0) {
                url = NULL;
                return client_fail(c, -ENOMEM);
        }
        call.method = method;
        call.url = url;
        call.body = body;
        call.body_size = body ? strlen(body) : 0;
        r = http_call_perform(c, &call);
        /* an error status is an answer too */
        if (r < 0 && call.status == 0) {
                http_call_done(&call);
                return r;
        }
        if (!call.response.data && buf_reserve(&call.response, 0) < 0) {
                http_call_done(&call);
                return client_fail(c, -ENOMEM);
        }
        if (ret_status)
                *ret_status = call.status;
        if (ret_size)
                *ret_size = call.response.len;
        if (ret_body)
                *ret_body = buf_steal(&call.response);
        http_call_done(&call);
        return client_done(c, 0);
}

static int get_json_text(sandboxd_client *c, const char *method, const char *path, char **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *url = NULL;
        char *text;
        int r;

        if (asprintf(&url, "%s%s", c->base_url, path) < 0) {
                url = NULL;
                return client_fail(c, -ENOMEM);
        }
        r = http_json(c, method, url, NULL, NULL, &o);
        if (r < 0)
                return r;
        text = json_to_text(o);
        if (!text)
                return client_fail(c, -ENOMEM);
        *ret = text;
        return 0;
}

_public_ int sandboxd_health(sandboxd_client *c, char **ret_json) {
        if (!c || !ret_json)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_health(c, ret_json));
        return client_done(c, get_json_text(c, "GET", "/v1/health", ret_json));
}

_public_ int sandboxd_drain(sandboxd_client *c, int drain, char **ret_json) {
        if (!c || !ret_json)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_drain(c, drain, ret_json));
        return client_done(c, get_json_text(c, drain > 0 ? "POST" : drain == 0 ? "DELETE" : "GET", "/v1/drain",
                                            ret_json));
}

/* --- images --- */

static int image_url(sandboxd_client *c, const char *name, char **ret) {
        if (name && !image_name_is_valid(name))
                return error_set(&c->error, SANDBOXD_ERROR_INVALID, -EINVAL,
                                 "Invalid image name '%.64s': 1 to 64 of a-z, 0-9, '_' and '-'.", name);
        if (asprintf(ret, "%s/v1/images%s%s", c->base_url, name ? "/" : "", name ?: "") < 0) {
                *ret = NULL;
                return client_fail(c, -ENOMEM);
        }
        return 0;
}

static int image_json(sandboxd_client *c, const char *method, const char *name, char **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *url = NULL;
        int r;

        r = image_url(c, name, &url);
        if (r < 0)
                return r;
        r = http_json(c, method, url, NULL, NULL, &o);
        if (r < 0)
                return r;
        *ret = json_to_text(o);
        return *ret ? 0 : client_fail(c, -ENOMEM);
}

_public_ int sandboxd_image_get(sandboxd_client *c, const char *name, char **ret_json) {
        if (!c || !ret_json)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_image_json(c, name, ret_json));
        return client_done(c, image_json(c, "GET", name, ret_json));
}

_public_ int sandboxd_image_remove(sandboxd_client *c, const char *name, char **ret_json) {
        if (!c || !name || !ret_json)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_image_remove(c, name, ret_json));
        return client_done(c, image_json(c, "DELETE", name, ret_json));
}

static int image_import(sandboxd_client *c, const char *name, int fd, char **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *url = NULL;
        HttpCall call = HTTP_CALL_INIT;
        int r;

        r = image_url(c, name, &url);
        if (r < 0)
                return r;
        call.method = "PUT";
        call.url = url;
        call.content_type = "application/x-tar";
        call.stream = true;
        call.upload_fd = fd;
        r = http_call_perform(c, &call);
        if (r >= 0) {
                o = json_tokener_parse(call.response.data ?: "");
                *ret = o ? json_to_text(o) : NULL;
                if (!*ret)
                        r = error_set(&c->error, SANDBOXD_ERROR_PROTOCOL, -EBADMSG, "sandboxd's answer is not JSON.");
        }
        http_call_done(&call);
        return r;
}

_public_ int sandboxd_image_import(sandboxd_client *c, const char *name, int fd, char **ret_json) {
        if (!c || !name || fd < 0 || !ret_json)
                return -EINVAL;
        client_begin(c);
        BUS_DISPATCH(c, bus_image_import(c, name, fd, ret_json));
        return client_done(c, image_import(c, name, fd, ret_json));
}
