/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>

#include "authz.h"
#include "macro.h"
#include "parse-util.h"

static const char *const op_names[_AUTHZ_OP_MAX] = {
        [AUTHZ_CREATE] = "create", [AUTHZ_LIST] = "list",     [AUTHZ_GET] = "get",
        [AUTHZ_EXEC] = "exec",     [AUTHZ_FILES] = "files",   [AUTHZ_SIGNAL] = "signal",
        [AUTHZ_STDIN] = "stdin",   [AUTHZ_FREEZE] = "freeze", [AUTHZ_CLOSE] = "close",
        [AUTHZ_DRAIN] = "drain",   [AUTHZ_METRICS] = "metrics", [AUTHZ_IMAGES] = "images",
};

static const char *const verdict_names[_AUTHZ_VERDICT_MAX] = {
        [AUTHZ_ALLOW] = "allow",   [AUTHZ_ASK_OWN] = "ask-own",     [AUTHZ_ASK_ALL] = "ask-all",
        [AUTHZ_HIDDEN] = "hidden", [AUTHZ_FORBIDDEN] = "forbidden",
};

const char *authz_op_to_string(AuthzOp op) {
        return op >= 0 && op < _AUTHZ_OP_MAX ? op_names[op] : NULL;
}

AuthzOp authz_op_from_string(const char *s) {
        for (int i = 0; s && i < _AUTHZ_OP_MAX; i++)
                if (streq(op_names[i], s))
                        return (AuthzOp) i;
        return _AUTHZ_OP_INVALID;
}

const char *authz_verdict_to_string(AuthzVerdict v) {
        return v >= 0 && v < _AUTHZ_VERDICT_MAX ? verdict_names[v] : NULL;
}

int authz_creator_uid(const char *creator, uid_t *ret) {
        const char *p;
        uint64_t v;

        if (!creator)
                return -EINVAL;
        p = startswith(creator, "unix:") ?: startswith(creator, "dbus:");
        if (!p || parse_uint64(p, &v) < 0 || v >= UINT32_MAX)
                return -EINVAL;
        *ret = (uid_t) v;
        return 0;
}

bool authz_caller_created(const AuthzCaller *c, const char *creator) {
        uid_t uid;

        if (!creator)
                return false;
        if (c->is_tenant)
                return c->name && streq(c->name, creator);
        return authz_creator_uid(creator, &uid) >= 0 && uid == c->uid;
}

static AuthzVerdict say(const char **ret_reason, AuthzVerdict v, const char *reason) {
        if (ret_reason)
                *ret_reason = reason;
        return v;
}

AuthzVerdict authz_decide(const AuthzCaller *c, AuthzTransport t, AuthzOp op, const AuthzTarget *target,
                          const char **ret_reason) {
        bool uid_admin = !c->is_tenant && c->admin;
        bool dbus = t == AUTHZ_DBUS;

        if (op < 0 || op >= _AUTHZ_OP_MAX || t < 0 || t >= _AUTHZ_TRANSPORT_MAX)
                return say(ret_reason, AUTHZ_FORBIDDEN, "Unknown operation.");

        /* Who may use the transport at all. */
        switch (t) {
        case AUTHZ_HTTP_UNIX:
                if (c->is_tenant || !(c->member || c->admin))
                        return say(ret_reason, AUTHZ_FORBIDDEN,
                                   "Only root and members of group sandboxd or of AdminGroup= may use this socket.");
                break;
        case AUTHZ_HTTP_TCP:
                if (!c->is_tenant)
                        return say(ret_reason, AUTHZ_FORBIDDEN, "Over TCP only API keys are accepted.");
                break;
        case AUTHZ_DBUS:
                if (c->is_tenant)
                        return say(ret_reason, AUTHZ_FORBIDDEN, "D-Bus callers are users, not API tenants.");
                break;
        default:
                break;
        }

        /* Daemon-wide. */
        if (authz_op_is_daemon_wide(op)) {
                if (c->admin)
                        return say(ret_reason, AUTHZ_ALLOW, "An administrator.");
                return say(ret_reason, AUTHZ_FORBIDDEN,
                           c->is_tenant ? "Only tenants in AdminTenants= may do this."
                                        : "Only root and members of AdminGroup= may do this.");
        }

        if (uid_admin)
                return say(ret_reason, AUTHZ_ALLOW, "Root or a member of AdminGroup= manages every session.");

        if (op == AUTHZ_LIST)
                return say(ret_reason, dbus ? AUTHZ_ASK_OWN : AUTHZ_ALLOW, "Everyone lists the sessions it may see.");

        /* A new session: tenants in their own scopes; a uid in the scopes of its login name. */
        if (op == AUTHZ_CREATE && !c->is_tenant && !(c->name && target && target->user && streq(c->name, target->user))) {
                if (dbus)
                        return say(ret_reason, AUTHZ_ASK_ALL, "The scope is another user's.");
                return say(ret_reason, AUTHZ_FORBIDDEN,
                           "Members of group sandboxd create sessions for their own user name only.");
        }
        if (op == AUTHZ_CREATE && !(target && target->session))
                return say(ret_reason, dbus ? AUTHZ_ASK_OWN : AUTHZ_ALLOW, "A scope of the caller's own.");

        /* An existing session (for CREATE: the active one of the scope, which it would return).
         * A uid's own is also of its login name, as every session it could create: a uid
         * given again to another user after userdel does not inherit the old one's. */
        if (target && authz_caller_created(c, target->creator) &&
            (c->is_tenant || (c->name && target->user && streq(c->name, target->user))))
                return say(ret_reason, dbus ? AUTHZ_ASK_OWN : AUTHZ_ALLOW, "The caller created the session.");
        if (dbus)
                return say(ret_reason, AUTHZ_ASK_ALL, "Another caller created the session.");
        if (op == AUTHZ_CREATE && !c->is_tenant)
                /* its own scope, taken by a session root or an administrator created */
                return say(ret_reason, AUTHZ_FORBIDDEN,
                           "The active session of this scope was created by another caller; it may not be shared.");
        return say(ret_reason, AUTHZ_HIDDEN, "No such session.");
}

bool authz_may_see(const AuthzCaller *c, AuthzTransport t, const char *creator, const char *user) {
        AuthzTarget target = { .user = user, .session = true, .creator = creator };
        AuthzVerdict v = authz_decide(c, t, AUTHZ_GET, &target, NULL);

        return v == AUTHZ_ALLOW || v == AUTHZ_ASK_OWN;
}
