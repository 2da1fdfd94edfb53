/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "buf.h"
#include "manager.h"
#include "request.h"
#include "result.h"
#include "systemd.h"

typedef enum CommandStream {
        STREAM_STDOUT,
        STREAM_STDERR,
        _STREAM_MAX,
} CommandStream;

/* Someone reading a command's event log as it grows (an HTTP stream). */
typedef struct CommandFollower CommandFollower;
struct CommandFollower {
        Command *command;
        void (*notify)(CommandFollower *f); /* new events, or the command is going away */
        LIST_FIELDS(CommandFollower, followers);
};

/* r >= 0: the unit was accepted by systemd; r < 0: it was not, `message` says why. */
typedef void (*CommandStartedFn)(Command *c, int r, const char *message, void *userdata);

struct Command {
        Session *session;
        unsigned n;
        char *request_id;
        char *unit;
        char *unit_path;

        CommandResult result; /* .status is PENDING, RUNNING or terminal */

        /* The NDJSON event log: accepted, output chunks, exit. Followers read it by offset. */
        Buf log;
        uint64_t output_total[_STREAM_MAX];
        uint64_t output_kept[_STREAM_MAX];
        bool truncated[_STREAM_MAX];

        int fd[_STREAM_MAX];
        sd_event_source *io[_STREAM_MAX];
        Buf partial[_STREAM_MAX]; /* an incomplete UTF-8 character held back */

        sd_bus_slot *start_slot, *match_slot, *state_slot;
        bool refresh_again;
        UnitState state;
        uint64_t accepted_monotonic_usec;
        uint64_t memory_peak, tasks_peak, cpu_sampled_usec;
        sd_event_source *sample_timer; /* reads the cgroup while the command runs */
        char *cgroup;                  /* ControlGroup=, kept once seen: it empties at the end */

        CommandStartedFn started_fn;
        void *started_userdata;

        CommandFollower *followers;
        LIST_FIELDS(Command, commands);
};

/* Validates what depends on the session (cwd, executable), then starts the unit. `fn`
 * is called once systemd answers. Returns -EINVAL with *error set for bad input. */
int command_start(Session *s, const CommandRequest *req, CommandStartedFn fn, void *userdata, Command **ret,
                  RequestError *error);
Command *command_free(Command *c);

void command_follow(Command *c, CommandFollower *f);
void command_unfollow(CommandFollower *f);

/* Resolves argv[0] like execvp() would, in `path` (colon-separated). */
int find_executable(const char *name, const char *path, char **ret);
