/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxctl image ls | show NAME | import NAME PATH|- | rm NAME */

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json-util.h"
#include "log.h"
#include "sandboxctl.h"
#include "validate.h"

static const char *str_of(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
                       ? json_object_get_string(v) : NULL;
}

static uint64_t u64_of(json_object *o, const char *key, uint64_t dflt) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int)
                       ? (uint64_t) json_object_get_int64(v) : dflt;
}

static void print_row(json_object *i) {
        json_object *os = NULL;
        char size[32];
        uint64_t bytes = u64_of(i, "size_bytes", UINT64_MAX);

        (void) json_object_object_get_ex(i, "os", &os);
        printf("%-24s  %8s  %-40s  %8" PRIu64 "\n", str_of(i, "name") ?: "-",
               bytes == UINT64_MAX ? "-" : format_bytes(bytes, size), (os ? str_of(os, "pretty_name") : NULL) ?: "-",
               u64_of(i, "sessions", 0));
}

static void print_image(json_object *i) {
        json_object *os = NULL, *v;
        char size[32], ts[64];
        uint64_t bytes = u64_of(i, "size_bytes", UINT64_MAX);

        (void) json_object_object_get_ex(i, "os", &os);
        printf("   Image: %s\n", str_of(i, "name") ?: "-");
        printf("      OS: %s (%s %s)\n", (os ? str_of(os, "pretty_name") : NULL) ?: "-", (os ? str_of(os, "id") : NULL) ?: "-",
               (os ? str_of(os, "version_id") : NULL) ?: "-");
        printf("    Size: %s\n", bytes == UINT64_MAX ? "- (not imported by sandboxd)" : format_bytes(bytes, size));
        printf(" Created: %s\n", format_timestamp(u64_of(i, "created_usec", 0), ts));
        printf("   Users: %s\n", json_object_object_get_ex(i, "user_names", &v) && json_object_get_boolean(v)
                                         ? "named inside (nss-systemd)" : "no names inside");
        printf("Sessions: %" PRIu64 "\n", u64_of(i, "sessions", 0));
}

static int print_json(const char *json, bool list) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *l;

        if (arg_json) {
                print_json_text(json);
                return 0;
        }
        o = json_tokener_parse(json);
        if (!o)
                return log_error_errno(-EBADMSG, "sandboxd's answer is not JSON.");
        if (!list) {
                print_image(o);
                return 0;
        }
        if (!json_object_object_get_ex(o, "images", &l) || !json_object_is_type(l, json_type_array))
                return log_error_errno(-EBADMSG, "sandboxd's answer has no list of images.");
        if (json_object_array_length(l) == 0) {
                if (!arg_quiet)
                        printf("No images.\n");
                return 0;
        }
        printf("%-24s  %8s  %-40s  %8s\n", "NAME", "SIZE", "OS", "SESSIONS");
        for (size_t i = 0; i < json_object_array_length(l); i++)
                print_row(json_object_array_get_idx(l, i));
        return 0;
}

/* A directory goes as a tar that tar(1) makes of it here, as the caller (root reads every
 * file of it; sandboxd, with no CAP_DAC_READ_SEARCH, could not). */
static int pack_directory(const char *dir, int *ret_fd, pid_t *ret_pid) {
        posix_spawn_file_actions_t fa;
        char *argv[] = { (char *) "tar", (char *) "--numeric-owner", (char *) "--one-file-system", (char *) "-C",
                         (char *) dir, (char *) "-c", (char *) "-f", (char *) "-", (char *) ".", NULL };
        int p[2], r;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        r = posix_spawn_file_actions_init(&fa);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        if (r == 0)
                r = posix_spawnp(ret_pid, "tar", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (r != 0) {
                close(p[0]);
                return -r;
        }
        *ret_fd = p[0];
        return 0;
}

static int image_import(sandboxd_client *b, const char *name, const char *path) {
        _cleanup_free_ char *json = NULL;
        _cleanup_close_ int fd = -EBADF;
        pid_t tar = 0;
        struct stat st;
        int r, status;

        if (streq(path, "-"))
                fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        else if (stat(path, &st) < 0)
                return log_error_errno(-errno, "Cannot read %s: %m", path);
        else if (S_ISDIR(st.st_mode)) {
                r = pack_directory(path, &fd, &tar);
                if (r < 0)
                        return log_error_errno(r, "Failed to start tar for %s: %m", path);
        } else
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return log_error_errno(-errno, "Cannot read %s: %m", path);

        /* a refusal closes the pipe early: tar's SIGPIPE is no error of ours */
        (void) signal(SIGPIPE, SIG_IGN);
        r = sandboxd_image_import(b, name, fd, &json);
        fd = safe_close(fd);
        if (tar > 0 && waitpid(tar, &status, 0) == tar && r >= 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
                return log_error_errno(-EIO, "tar failed on %s; sandboxd imported what it got as %s.", path, name);
        if (r < 0)
                return log_client_error(b, r, "Failed to import image %s", name);
        if (arg_json || !arg_quiet)
                return print_json(json, false);
        return 0;
}

int verb_image(int argc, char *argv[]) {
        _cleanup_(sandboxd_client_freep) sandboxd_client *b = NULL;
        _cleanup_free_ char *json = NULL;
        const char *what = argv[1];
        int r;

        if (streq(what, "ls") || streq(what, "list")) {
                if (argc != 2)
                        return log_error_errno(-EINVAL, "image ls takes no arguments.");
        } else if (streq(what, "show") || streq(what, "rm")) {
                if (argc != 3)
                        return log_error_errno(-EINVAL, "image %s takes an image name.", what);
        } else if (streq(what, "import")) {
                if (argc != 4)
                        return log_error_errno(-EINVAL, "image import takes a name and a directory, a tar or -.");
        } else
                return log_error_errno(-EINVAL, "Unknown image command '%s': ls, show, import or rm.", what);
        if (argc > 2 && !image_name_is_valid(argv[2]))
                return log_error_errno(-EINVAL, "Invalid image name '%s': 1 to 64 of a-z, 0-9, '_' and '-', starting "
                                       "with a letter or digit.", argv[2]);

        r = connect_client(&b);
        if (r < 0)
                return r;
        if (streq(what, "import"))
                return image_import(b, argv[2], argv[3]);
        if (streq(what, "rm")) {
                r = sandboxd_image_remove(b, argv[2], &json);
                if (r < 0)
                        return log_client_error(b, r, "Failed to remove image %s", argv[2]);
                if (arg_json)
                        print_json_text(json);
                return 0;
        }
        r = sandboxd_image_get(b, argc > 2 ? argv[2] : NULL, &json);
        if (r < 0)
                return log_client_error(b, r, argc > 2 ? "Failed to get image %s" : "Failed to list images%s",
                                        argc > 2 ? argv[2] : "");
        return print_json(json, argc == 2);
}
