/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A command's stdout and stdin, for a client attached as to a terminal (terminal.h). */

#include <assert.h>
#include <json-c/json.h>

#include "encoding.h"
#include "json-util.h"
#include "log.h"
#include "manager.h"
#include "session.h"
#include "terminal.h"

/* What one read of the log takes at most. */
#define TERMINAL_READ_CHUNK (64U * 1024)

static void terminal_detach(Terminal *t) {
        Session *s = t->session;

        t->input_op = op_free(t->input_op);
        output_detach(&t->reader);
        if (s) {
                assert(s->n_terminals > 0 && s->manager->n_terminals > 0);
                s->n_terminals--;
                s->manager->n_terminals--;
        }
        t->session = NULL;
        t->command = NULL;
}

/* The output is there to read, or it ended, or it is going away with its command: the reader
 * was detached then (output_detach_readers()), and the command is not to be touched again. */
static void on_output(OutputReader *r) {
        Terminal *t = r->userdata;

        if (!r->output)
                terminal_detach(t);
        t->notify(t, t->userdata);
}

int terminal_new(Command *c, uint64_t offset, bool readonly, TerminalNotify notify, void *userdata, Terminal **ret) {
        Session *s;
        Terminal *t;

        assert(c && notify && ret);
        s = c->session;
        if (s->n_terminals >= TERMINALS_PER_SESSION_MAX || s->manager->n_terminals >= TERMINALS_MAX)
                return -EAGAIN;
        if (offset > c->output->kept[OUTPUT_STDOUT])
                return -ERANGE;

        t = calloc(1, sizeof(Terminal));
        if (!t)
                return -ENOMEM;
        t->command = c;
        t->session = s;
        t->readonly = readonly;
        t->skip = offset;
        t->notify = notify;
        t->userdata = userdata;
        t->reader.notify = on_output;
        t->reader.userdata = t;
        /* The log from its start: an offset of stdout is not one of the log. */
        output_attach(c->output, &t->reader, 0);
        s->n_terminals++;
        s->manager->n_terminals++;
        *ret = t;
        return 0;
}

Terminal *terminal_free(Terminal *t) {
        if (!t)
                return NULL;
        terminal_detach(t);
        buf_done(&t->in);
        buf_done(&t->out);
        free(t->exit_event);
        free(t);
        return NULL;
}

/* Bytes [stdout_pos, +n) of stdout (or, live: past what was kept), to be handed out from
 * the offset on. */
static int take_output(Terminal *t, const char *p, size_t n, bool live) {
        uint64_t from = t->stdout_pos;

        if (!live)
                t->stdout_pos += n;
        if (!live && from + n <= t->skip)
                return 0;
        if (!live && from < t->skip) {
                p += t->skip - from;
                n -= (size_t) (t->skip - from);
        }
        return buf_append(&t->out, p, n);
}

/* One event line of the log (sandboxd wrote it): stdout's bytes, or the exit. */
static int take_line(Terminal *t, const char *line, size_t n) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *type, *v;
        const char *ty;
        bool live;

        /* Cheap look first: most lines of a terminal are stdout, the rest mostly skipped. */
        if (!memmem(line, n, "\"type\":\"stdout\"", 15) && !memmem(line, n, "\"type\":\"exit\"", 13))
                return 0;
        {
                json_tokener *tok = json_tokener_new();

                if (!tok)
                        return -ENOMEM;
                o = json_tokener_parse_ex(tok, line, (int) n);
                json_tokener_free(tok);
        }
        if (!o || !json_object_object_get_ex(o, "type", &type) || !json_object_is_type(type, json_type_string))
                return -EBADMSG;
        ty = json_object_get_string(type);
        if (streq(ty, "exit")) {
                free(t->exit_event);
                t->exit_event = strndup(line, n);
                return t->exit_event ? 0 : -ENOMEM;
        }
        if (!streq(ty, "stdout"))
                return 0;
        live = json_object_object_get_ex(o, "live", &v) && json_object_get_boolean(v);
        if (json_object_object_get_ex(o, "data", &v) && json_object_is_type(v, json_type_string))
                return take_output(t, json_object_get_string(v), (size_t) json_object_get_string_len(v), live);
        if (json_object_object_get_ex(o, "data_b64", &v) && json_object_is_type(v, json_type_string)) {
                Buf raw = {};
                int r;

                r = base64_decode(json_object_get_string(v), (size_t) json_object_get_string_len(v), &raw);
                if (r >= 0)
                        r = take_output(t, raw.data, raw.len, live);
                buf_done(&raw);
                return r;
        }
        return -EBADMSG;
}

ssize_t terminal_read(Terminal *t, char *buf, size_t max) {
        ssize_t n;
        int r;

        assert(t && buf && max > 0);
        for (;;) {
                const char *nl;

                if (t->out_pos < t->out.len) {
                        size_t k = MIN(max, t->out.len - t->out_pos);

                        memcpy(buf, t->out.data + t->out_pos, k);
                        t->out_pos += k;
                        if (t->out_pos == t->out.len) {
                                t->out.len = t->out_pos = 0;
                                if (t->out.cap > TERMINAL_READ_CHUNK)
                                        buf_done(&t->out); /* an idle terminal keeps little */
                        }
                        return (ssize_t) k;
                }

                nl = t->in_pos < t->in.len ? memchr(t->in.data + t->in_pos, '\n', t->in.len - t->in_pos) : NULL;
                if (nl) {
                        size_t len = (size_t) (nl - (t->in.data + t->in_pos));

                        r = take_line(t, t->in.data + t->in_pos, len);
                        if (r < 0)
                                return log_debug_errno(r, "Terminal: an event line of the log cannot be read: %m");
                        t->in_pos += len + 1;
                        continue;
                }

                /* Keep the start of the next line, read more. */
                if (t->in_pos > 0) {
                        memmove(t->in.data, t->in.data + t->in_pos, t->in.len - t->in_pos);
                        t->in.len -= t->in_pos;
                        t->in_pos = 0;
                }
                if (t->in.len == 0 && t->in.cap > TERMINAL_READ_CHUNK)
                        buf_done(&t->in);
                if (t->in.len >= TERMINAL_LINE_MAX)
                        return -E2BIG;
                if (!t->reader.output)
                        return -EPIPE; /* the end, or the command is gone */
                r = buf_reserve(&t->in, TERMINAL_READ_CHUNK);
                if (r < 0)
                        return r;
                n = output_read(&t->reader, t->in.data + t->in.len, MIN(TERMINAL_READ_CHUNK, TERMINAL_LINE_MAX - t->in.len));
                if (n <= 0)
                        return n == 0 ? 0 : -EPIPE; /* the reader stays: it says when the command goes */
                t->in.len += (size_t) n;
        }
}

static void on_input_written(Op *op, int r, const char *message, void *userdata) {
        Terminal *t = userdata;

        t->input_op = op_free(op);
        if (t->input_waiting) {
                t->input_waiting = false;
                t->notify(t, t->userdata);
        }
}

int terminal_write(Terminal *t, const void *p, size_t n) {
        Op *op = NULL;
        int r;

        assert(t);
        if (t->readonly)
                return -EROFS;
        if (!t->command)
                return -EPIPE;
        r = command_write_stdin(t->command, p, n, false, on_input_written, t, &op);
        if (r < 0)
                return r;
        /* Ops complete in order: the last one says when all before it are in too. */
        op_free(t->input_op);
        t->input_op = op;
        return 0;
}

bool terminal_input_blocked(Terminal *t) {
        Command *c = t->command;

        if (t->readonly || !c || c->stdin_pending.len < TERMINAL_INPUT_PENDING_MAX) {
                t->input_waiting = false;
                return false;
        }
        /* Someone else's bytes may be the ones pending: an empty write says when all are in. */
        if (!op_pending(t->input_op)) {
                t->input_op = op_free(t->input_op);
                if (command_write_stdin(c, "", 0, false, on_input_written, t, &t->input_op) < 0)
                        return false; /* closed: the next write says so */
        }
        t->input_waiting = true;
        return true;
}

int terminal_resize(Terminal *t, unsigned rows, unsigned cols) {
        assert(t);
        if (t->readonly)
                return -EROFS;
        if (!t->command)
                return -ESRCH;
        return command_resize(t->command, rows, cols);
}
