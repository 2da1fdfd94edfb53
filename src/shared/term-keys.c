/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "term-keys.h"

static const struct {
        const char *name;
        const char *bytes;
} keys[] = {
        { "Enter", "\r" },        { "Tab", "\t" },           { "Escape", "\x1b" },       { "Backspace", "\x7f" },
        { "Up", "\x1b[A" },       { "Down", "\x1b[B" },      { "Right", "\x1b[C" },      { "Left", "\x1b[D" },
        { "Home", "\x1b[H" },     { "End", "\x1b[F" },       { "PageUp", "\x1b[5~" },    { "PageDown", "\x1b[6~" },
        { "Delete", "\x1b[3~" },  { "F1", "\x1bOP" },        { "F2", "\x1bOQ" },         { "F3", "\x1bOR" },
        { "F4", "\x1bOS" },       { "F5", "\x1b[15~" },      { "F6", "\x1b[17~" },       { "F7", "\x1b[18~" },
        { "F8", "\x1b[19~" },     { "F9", "\x1b[20~" },      { "F10", "\x1b[21~" },      { "F11", "\x1b[23~" },
        { "F12", "\x1b[24~" },
};

/* C-a (0x01) .. C-z (0x1a), each with its NUL */
static const char ctrl[26][2] = {
        "\x01", "\x02", "\x03", "\x04", "\x05", "\x06", "\x07", "\x08", "\x09", "\x0a", "\x0b", "\x0c", "\x0d",
        "\x0e", "\x0f", "\x10", "\x11", "\x12", "\x13", "\x14", "\x15", "\x16", "\x17", "\x18", "\x19", "\x1a",
};

const char *term_key_bytes(const char *name) {
        if (!name)
                return NULL;
        if (name[0] == 'C' && name[1] == '-' && name[2] >= 'a' && name[2] <= 'z' && name[3] == 0)
                return ctrl[name[2] - 'a'];
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (strcmp(name, keys[i].name) == 0)
                        return keys[i].bytes;
        return NULL;
}
