/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The authorization model as a table: every caller on every transport, every operation, on
 * a session a member of group sandboxd created and on one a tenant created. The expected
 * verdicts are written out here, not computed. */

#include "authz.h"
#include "macro.h"
#include "tests.h"

enum { ROOT, ADMIN_GROUP, MEMBER_A, MEMBER_B, NON_MEMBER, TENANT_1, TENANT_2, ADMIN_TENANT, _CALLER_MAX };

static const char *const caller_names[_CALLER_MAX] = {
        "root", "admin-group", "member A", "member B", "non-member", "tenant 1", "tenant 2", "admin tenant",
};

static const AuthzCaller callers[_CALLER_MAX] = {
        [ROOT] = { .uid = 0, .name = "root", .admin = true },
        [ADMIN_GROUP] = { .uid = 1100, .name = "ops", .admin = true },
        [MEMBER_A] = { .uid = 1001, .name = "alice", .member = true },
        [MEMBER_B] = { .uid = 1002, .name = "bob", .member = true },
        [NON_MEMBER] = { .uid = 1003, .name = "carol" },
        [TENANT_1] = { .is_tenant = true, .name = "tenant1" },
        [TENANT_2] = { .is_tenant = true, .name = "tenant2" },
        [ADMIN_TENANT] = { .is_tenant = true, .name = "opsteam", .admin = true },
};

static const char *const transport_names[_AUTHZ_TRANSPORT_MAX] = { "http-unix", "http-tcp", "dbus" };

/* One character per operation, in AuthzOp's order: create list get exec files signal stdin
 * freeze close drain metrics images. A allow, o ask polkit manage-sessions, a ask manage-all,
 * h hidden (404), f forbidden. */
static AuthzVerdict verdict_of(char ch) {
        switch (ch) {
        case 'A': return AUTHZ_ALLOW;
        case 'o': return AUTHZ_ASK_OWN;
        case 'a': return AUTHZ_ASK_ALL;
        case 'h': return AUTHZ_HIDDEN;
        default: return AUTHZ_FORBIDDEN;
        }
}

/* Session created by member A over the unix socket (user "alice"); CREATE asks for that
 * session's scope while it is active. */
static const char *const on_member_a_session[_CALLER_MAX][_AUTHZ_TRANSPORT_MAX] = {
        /*                 http-unix       http-tcp        dbus */
        [ROOT] =         { "AAAAAAAAAAAA", "ffffffffffff", "AAAAAAAAAAAA" },
        [ADMIN_GROUP] =  { "AAAAAAAAAAAA", "ffffffffffff", "AAAAAAAAAAAA" },
        [MEMBER_A] =     { "AAAAAAAAAfff", "ffffffffffff", "ooooooooofff" },
        [MEMBER_B] =     { "fAhhhhhhhfff", "ffffffffffff", "aoaaaaaaafff" },
        [NON_MEMBER] =   { "ffffffffffff", "ffffffffffff", "aoaaaaaaafff" },
        [TENANT_1] =     { "ffffffffffff", "hAhhhhhhhfff", "ffffffffffff" },
        [TENANT_2] =     { "ffffffffffff", "hAhhhhhhhfff", "ffffffffffff" },
        [ADMIN_TENANT] = { "ffffffffffff", "hAhhhhhhhAAA", "ffffffffffff" },
};

/* Session created by tenant 1 over TCP (user "alice"). */
static const char *const on_tenant_1_session[_CALLER_MAX][_AUTHZ_TRANSPORT_MAX] = {
        [ROOT] =         { "AAAAAAAAAAAA", "ffffffffffff", "AAAAAAAAAAAA" },
        [ADMIN_GROUP] =  { "AAAAAAAAAAAA", "ffffffffffff", "AAAAAAAAAAAA" },
        [MEMBER_A] =     { "fAhhhhhhhfff", "ffffffffffff", "aoaaaaaaafff" },
        [MEMBER_B] =     { "fAhhhhhhhfff", "ffffffffffff", "aoaaaaaaafff" },
        [NON_MEMBER] =   { "ffffffffffff", "ffffffffffff", "aoaaaaaaafff" },
        [TENANT_1] =     { "ffffffffffff", "AAAAAAAAAfff", "ffffffffffff" },
        [TENANT_2] =     { "ffffffffffff", "hAhhhhhhhfff", "ffffffffffff" },
        [ADMIN_TENANT] = { "ffffffffffff", "hAhhhhhhhAAA", "ffffffffffff" },
};

static unsigned check_table(const char *const table[_CALLER_MAX][_AUTHZ_TRANSPORT_MAX], const char *creator,
                            const char *what) {
        AuthzTarget target = { .user = "alice", .session = true, .creator = creator };
        unsigned cells = 0;

        for (int c = 0; c < _CALLER_MAX; c++)
                for (int t = 0; t < _AUTHZ_TRANSPORT_MAX; t++) {
                        ASSERT(strlen(table[c][t]) == _AUTHZ_OP_MAX);
                        for (int op = 0; op < _AUTHZ_OP_MAX; op++) {
                                const char *reason = NULL;
                                AuthzVerdict want = verdict_of(table[c][t][op]);
                                AuthzVerdict got = authz_decide(&callers[c], (AuthzTransport) t, (AuthzOp) op,
                                                                &target, &reason);

                                cells++;
                                ASSERT(reason && *reason);
                                if (got != want) {
                                        tests_failed++;
                                        fprintf(stderr, "%s: %s on %s, %s: %s, expected %s (%s)\n", what, caller_names[c],
                                                transport_names[t], authz_op_to_string((AuthzOp) op),
                                                authz_verdict_to_string(got), authz_verdict_to_string(want),
                                                reason ?: "?");
                                }
                        }
                }
        return cells;
}

static void test_tables(void) {
        unsigned n = 0;

        n += check_table(on_member_a_session, "unix:1001", "member A's session");
        /* the same session, created by member A over D-Bus: the uid decides, not the transport */
        n += check_table(on_member_a_session, "dbus:1001", "member A's session (D-Bus)");
        n += check_table(on_tenant_1_session, "tenant1", "tenant 1's session");
        printf("authorization table: %u cells\n", n);
        ASSERT(n == 3 * _CALLER_MAX * _AUTHZ_TRANSPORT_MAX * _AUTHZ_OP_MAX);
}

static void test_create_new_scope(void) {
        AuthzTarget alice = { .user = "alice" }, bob = { .user = "bob" };

        /* no active session: a member in a scope of its login name, a tenant in any */
        ASSERT(authz_decide(&callers[MEMBER_A], AUTHZ_HTTP_UNIX, AUTHZ_CREATE, &alice, NULL) == AUTHZ_ALLOW);
        ASSERT(authz_decide(&callers[MEMBER_A], AUTHZ_DBUS, AUTHZ_CREATE, &alice, NULL) == AUTHZ_ASK_OWN);
        ASSERT(authz_decide(&callers[MEMBER_A], AUTHZ_HTTP_UNIX, AUTHZ_CREATE, &bob, NULL) == AUTHZ_FORBIDDEN);
        ASSERT(authz_decide(&callers[MEMBER_A], AUTHZ_DBUS, AUTHZ_CREATE, &bob, NULL) == AUTHZ_ASK_ALL);
        ASSERT(authz_decide(&callers[NON_MEMBER], AUTHZ_DBUS, AUTHZ_CREATE, &(AuthzTarget) { .user = "carol" }, NULL) ==
               AUTHZ_ASK_OWN);
        ASSERT(authz_decide(&callers[TENANT_2], AUTHZ_HTTP_TCP, AUTHZ_CREATE, &bob, NULL) == AUTHZ_ALLOW);
        ASSERT(authz_decide(&callers[ROOT], AUTHZ_HTTP_UNIX, AUTHZ_CREATE, &bob, NULL) == AUTHZ_ALLOW);
        ASSERT(authz_decide(&callers[ADMIN_GROUP], AUTHZ_DBUS, AUTHZ_CREATE, &bob, NULL) == AUTHZ_ALLOW);
        /* a uid without a login name has no scope of its own */
        ASSERT(authz_decide(&(AuthzCaller) { .uid = 4242, .member = true }, AUTHZ_HTTP_UNIX, AUTHZ_CREATE, &alice,
                            NULL) == AUTHZ_FORBIDDEN);
}

static void test_unknown_creator(void) {
        /* records from before the creator was kept: no one's own, root's and admins' only */
        AuthzTarget old = { .user = "alice", .session = true, .creator = NULL };

        ASSERT(authz_decide(&callers[MEMBER_A], AUTHZ_HTTP_UNIX, AUTHZ_EXEC, &old, NULL) == AUTHZ_HIDDEN);
        ASSERT(authz_decide(&callers[MEMBER_A], AUTHZ_DBUS, AUTHZ_EXEC, &old, NULL) == AUTHZ_ASK_ALL);
        ASSERT(authz_decide(&callers[TENANT_1], AUTHZ_HTTP_TCP, AUTHZ_GET, &old, NULL) == AUTHZ_HIDDEN);
        ASSERT(authz_decide(&callers[ROOT], AUTHZ_HTTP_UNIX, AUTHZ_CLOSE, &old, NULL) == AUTHZ_ALLOW);
        ASSERT(!authz_may_see(&callers[MEMBER_A], AUTHZ_HTTP_UNIX, NULL, "alice"));
        ASSERT(authz_may_see(&callers[ADMIN_GROUP], AUTHZ_HTTP_UNIX, NULL, "alice"));
}

static void test_uid_reused(void) {
        /* uid 1001 was another user's, deleted; its sessions are not the new user's */
        AuthzTarget old = { .user = "zed", .session = true, .creator = "dbus:1001" };

        ASSERT(authz_decide(&callers[MEMBER_A], AUTHZ_HTTP_UNIX, AUTHZ_GET, &old, NULL) == AUTHZ_HIDDEN);
        ASSERT(authz_decide(&callers[MEMBER_A], AUTHZ_DBUS, AUTHZ_CLOSE, &old, NULL) == AUTHZ_ASK_ALL);
        ASSERT(!authz_may_see(&callers[MEMBER_A], AUTHZ_DBUS, "dbus:1001", "zed"));
        ASSERT(authz_may_see(&callers[MEMBER_A], AUTHZ_DBUS, "dbus:1001", "alice"));
}

static void test_created(void) {
        ASSERT(authz_caller_created(&callers[MEMBER_A], "unix:1001"));
        ASSERT(authz_caller_created(&callers[MEMBER_A], "dbus:1001"));
        ASSERT(!authz_caller_created(&callers[MEMBER_A], "unix:10011"));
        ASSERT(!authz_caller_created(&callers[MEMBER_A], "unix:1001x"));
        ASSERT(!authz_caller_created(&callers[MEMBER_A], "unix:"));
        ASSERT(!authz_caller_created(&callers[MEMBER_A], "tcp:1001"));
        ASSERT(!authz_caller_created(&callers[MEMBER_A], "alice"));
        ASSERT(!authz_caller_created(&callers[MEMBER_A], NULL));
        ASSERT(!authz_caller_created(&callers[ROOT], "unix:4294967295"));
        ASSERT(authz_caller_created(&callers[TENANT_1], "tenant1"));
        ASSERT(!authz_caller_created(&callers[TENANT_1], "tenant2"));
        ASSERT(!authz_caller_created(&callers[TENANT_1], "unix:1001"));
}

static void test_names(void) {
        for (int op = 0; op < _AUTHZ_OP_MAX; op++)
                ASSERT(authz_op_from_string(authz_op_to_string((AuthzOp) op)) == op);
        ASSERT(authz_op_from_string("frobnicate") == _AUTHZ_OP_INVALID);
        ASSERT(authz_op_from_string(NULL) == _AUTHZ_OP_INVALID);
        ASSERT(authz_op_to_string(_AUTHZ_OP_MAX) == NULL);
        ASSERT(authz_decide(&callers[ROOT], AUTHZ_HTTP_UNIX, _AUTHZ_OP_INVALID, NULL, NULL) == AUTHZ_FORBIDDEN);
}

int main(void) {
        test_tables();
        test_create_new_scope();
        test_unknown_creator();
        test_uid_reused();
        test_created();
        test_names();
        return TESTS_DONE();
}
