/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Intrusive doubly-linked lists: `name##_next` and `name##_prev` members in each item. */

#define LIST_FIELDS(t, name) t *name##_next, *name##_prev

#define LIST_PREPEND(name, head, item)                          \
        do {                                                    \
                __typeof__(*(head)) **_head = &(head), *_item = (item); \
                if ((_item->name##_next = *_head))              \
                        _item->name##_next->name##_prev = _item; \
                _item->name##_prev = NULL;                      \
                *_head = _item;                                 \
        } while (0)

#define LIST_REMOVE(name, head, item)                           \
        do {                                                    \
                __typeof__(*(head)) **_head = &(head), *_item = (item); \
                if (_item->name##_next)                         \
                        _item->name##_next->name##_prev = _item->name##_prev; \
                if (_item->name##_prev)                         \
                        _item->name##_prev->name##_next = _item->name##_next; \
                else                                            \
                        *_head = _item->name##_next;            \
                _item->name##_next = _item->name##_prev = NULL; \
        } while (0)

#define LIST_FOREACH(name, i, head) for ((i) = (head); (i); (i) = (i)->name##_next)

#define LIST_FOREACH_SAFE(name, i, n, head) \
        for ((i) = (head); (i) && (((n) = (i)->name##_next), 1); (i) = (n))
