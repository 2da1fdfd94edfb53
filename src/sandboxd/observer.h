/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* Who wants to know what happens to sessions and commands (the D-Bus front end, for its
 * signals). The core tells the manager (manager_notify_*()), the manager tells each
 * observer, in the order they were added; the core knows nothing of who listens. */

typedef struct Session Session;
typedef struct Command Command;

/* What changed of a session: a mask of these. */
typedef enum SessionChange {
        SESSION_CHANGED_STATE = 1 << 0,    /* state (and with it the expiry, the close reason) */
        SESSION_CHANGED_ACTIVITY = 1 << 1, /* last activity (and the expiry) */
        SESSION_CHANGED_FROZEN = 1 << 2,
        SESSION_CHANGED_COMMANDS = 1 << 3, /* the number of its commands */
} SessionChange;

typedef struct Observer {
        /* in the manager's list now (or, for a pooled slice, about to be active) */
        void (*session_added)(Session *s, void *userdata);
        void (*session_changed)(Session *s, unsigned what, void *userdata);
        /* forgotten (RetainClosedSec= after its close), or failed to start: freed right
         * after (a closed session is still there: a change of its state) */
        void (*session_removed)(Session *s, void *userdata);
        /* started, or over (its status, result, usage) */
        void (*command_changed)(Command *c, void *userdata);
        /* its result is final: after command_changed */
        void (*command_finished)(Command *c, void *userdata);
        /* whether it holds work that keeps sandboxd from exiting when idle (calls it
         * answers later): asked by manager_is_idle() */
        bool (*busy)(void *userdata);
} Observer;

#define OBSERVERS_MAX 4
