/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sandboxctl port expose|ls|rm: the exposed ports of a session (sandboxd_port_*()). */

#include "log.h"
#include "parse-util.h"
#include "sandboxctl.h"

static int parse_port_arg(const char *s, uint16_t *ret) {
        uint64_t u;

        if (parse_uint64(s, &u) < 0 || u < 1 || u > UINT16_MAX)
                return log_error_errno(-EINVAL, "'%s' is not a TCP port (1-65535).", s);
        *ret = (uint16_t) u;
        return 0;
}

static int port_expose(const char *session, const char *port_arg) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        sandboxd_port *p = NULL;
        uint16_t port;
        int r;

        r = parse_port_arg(port_arg, &port);
        if (r < 0)
                return r;
        r = connect_client(&b);
        if (r < 0)
                return r;
        r = sandboxd_port_expose(b, session, port, arg_host, &p);
        if (r < 0)
                return log_client_error(b, r, "Failed to expose port %u of session %s", port, session);
        if (arg_json)
                print_json_text(p->json);
        else if (arg_quiet)
                printf("%s\n", p->socket);
        else {
                printf("Socket: %s\n", p->socket);
                if (p->url)
                        printf("   URL: %s\n", p->url);
        }
        sandboxd_port_free(p);
        return 0;
}

static int port_list(const char *session) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        sandboxd_port **list = NULL;
        size_t n = 0;
        int r;

        r = connect_client(&b);
        if (r < 0)
                return r;
        r = sandboxd_port_list(b, session, &list, &n);
        if (r < 0)
                return log_client_error(b, r, "Failed to list the ports of session %s", session);
        if (arg_json) {
                fputs("{\"ports\":[", stdout);
                for (size_t i = 0; i < n; i++)
                        printf("%s%s", i ? "," : "", list[i]->json);
                fputs("]}\n", stdout);
        } else if (n == 0) {
                if (!arg_quiet)
                        printf("No exposed ports.\n");
        } else {
                printf("%5s  %-26s  %s\n", "PORT", "URL", "SOCKET");
                for (size_t i = 0; i < n; i++)
                        printf("%5u  %-26s  %s\n", list[i]->port, list[i]->url ?: "-", list[i]->socket);
        }
        sandboxd_port_list_free(list);
        return 0;
}

static int port_remove(const char *session, const char *port_arg) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        uint16_t port;
        int r;

        r = parse_port_arg(port_arg, &port);
        if (r < 0)
                return r;
        r = connect_client(&b);
        if (r < 0)
                return r;
        r = sandboxd_port_unexpose(b, session, port);
        if (r < 0)
                return log_client_error(b, r, "Failed to stop exposing port %u of session %s", port, session);
        return 0;
}

/* argv: "port", the sub-verb, SESSION [PORT] (main.c checked there are 2 or 3) */
int verb_port(int argc, char *argv[]) {
        const char *what = argv[1];
        int r;

        if (argc < 3)
                return log_error_errno(-EINVAL, "'port %s' takes a session; see sandboxctl --help.", what);
        r = check_session_id(argv[2]);
        if (r < 0)
                return r;
        if (streq(what, "expose") || streq(what, "rm")) {
                if (argc != 4)
                        return log_error_errno(-EINVAL, "'port %s' takes SESSION PORT; see sandboxctl --help.", what);
                return streq(what, "expose") ? port_expose(argv[2], argv[3]) : port_remove(argv[2], argv[3]);
        }
        if (streq(what, "ls") || streq(what, "list")) {
                if (argc != 3)
                        return log_error_errno(-EINVAL, "'port %s' takes SESSION only; see sandboxctl --help.", what);
                return port_list(argv[2]);
        }
        return log_error_errno(-EINVAL, "Unknown 'port' command '%s' (expose, ls, rm); see sandboxctl --help.", what);
}
