/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "buf.h"
#include "command.h"
#include "images.h"
#include "session.h"

/* The JSON objects of the HTTP API (docs/openapi.yaml): a session, and a command (with a
 * snapshot of its output if with_output). */
int session_append_json(Session *s, Buf *b);
int command_append_json(Command *c, Buf *b, bool with_output);
/* An exposed port: {"port","socket","host_port","url","unit"}; a list: {"ports":[...]}. */
int port_append_json(Port *p, Buf *b);
int port_list_append_json(Session *s, Buf *b);
/* An image: {"name","size_bytes","created_usec","os":{"id","version_id","pretty_name"},
 * "user_names","sessions"}; size_bytes null when not known. */
int image_append_json(const ImageInfo *i, unsigned sessions, Buf *b);
