/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Two ends of a D-Bus connection on a socketpair, for unit tests that play PID 1: the server
 * end hands every message the client sends to on_call; returns once both are authenticated. */

#include <sys/socket.h>
#include <unistd.h>
#include <systemd/sd-bus.h>

#include "tests.h"

static inline void bus_pair_new(sd_bus **ret_server, sd_bus **ret_client, sd_bus_message_handler_t on_call) {
        sd_bus *server = NULL, *client = NULL;
        sd_id128_t id;
        int fds[2];

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) == 0);
        ASSERT(sd_id128_randomize(&id) >= 0);
        ASSERT(sd_bus_new(&server) >= 0);
        ASSERT(sd_bus_set_fd(server, fds[0], fds[0]) >= 0);
        ASSERT(sd_bus_set_server(server, 1, id) >= 0);
        ASSERT(sd_bus_set_anonymous(server, 1) >= 0);
        ASSERT(sd_bus_add_filter(server, NULL, on_call, NULL) >= 0);
        ASSERT(sd_bus_start(server) >= 0);
        ASSERT(sd_bus_new(&client) >= 0);
        ASSERT(sd_bus_set_fd(client, fds[1], fds[1]) >= 0);
        ASSERT(sd_bus_set_anonymous(client, 1) >= 0);
        ASSERT(sd_bus_start(client) >= 0);
        /* the authentication, both ways */
        for (int i = 0; i < 100; i++) {
                (void) sd_bus_process(server, NULL);
                (void) sd_bus_process(client, NULL);
                if (sd_bus_is_ready(client) > 0 && sd_bus_is_ready(server) > 0)
                        break;
                usleep(1000);
        }
        ASSERT(sd_bus_is_ready(client) > 0);
        *ret_server = server;
        *ret_client = client;
}

/* Lets both ends process until neither has anything left to do. */
static inline void bus_pair_process(sd_bus *a, sd_bus *b) {
        for (int rounds = 0; rounds < 1000; rounds++) {
                int x = sd_bus_process(a, NULL), y = sd_bus_process(b, NULL);

                ASSERT(x >= 0 && y >= 0);
                if (x <= 0 && y <= 0)
                        return;
        }
}
