/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxd-unpack [--max-bytes=N] [--max-entries=N] [--from-dir=SRC] DEST
 *
 * Unpacks the tar on stdin (or copies the tree SRC) into DEST, a new directory, by the rules
 * of unpack.c. Success: exit 0 and {"bytes":N,"entries":N} on stdout. Failure: DEST is gone,
 * one line "sandboxd-unpack: CODE: message" on stderr, exit 65 (a refused archive:
 * unsafe_path, device_node, too_large, too_many_entries, invalid_archive) or 74 (io_error,
 * exists); a wrong command line exits 64. */

#include <getopt.h>
#include <inttypes.h>
#include <locale.h>
#include <signal.h>

#include "macro.h"
#include "parse-util.h"
#include "unpack.h"

static void on_signal(int sig) {
        unpack_interrupted = 1;
}

static _noreturn_ void usage_error(const char *message) {
        fprintf(stderr, "sandboxd-unpack: %s\n"
                "usage: sandboxd-unpack [--max-bytes=N] [--max-entries=N] [--from-dir=SRC] DEST\n", message);
        exit(64); /* EX_USAGE */
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "max-bytes", required_argument, NULL, 'b' },
                { "max-entries", required_argument, NULL, 'e' },
                { "from-dir", required_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        UnpackLimits limits = {
                .max_bytes = UNPACK_MAX_BYTES_DEFAULT,
                .max_entries = UNPACK_MAX_ENTRIES_DEFAULT,
        };
        struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: a blocked read returns */
        const char *from_dir = NULL;
        UnpackResult result;
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'b':
                        if (parse_size(optarg, &limits.max_bytes) < 0)
                                usage_error("--max-bytes= wants a size (bytes, or with K, M, G, T)");
                        break;
                case 'e':
                        if (parse_uint64(optarg, &limits.max_entries) < 0)
                                usage_error("--max-entries= wants a number");
                        break;
                case 'd':
                        if (optarg[0] == 0)
                                usage_error("--from-dir= wants a directory");
                        from_dir = optarg;
                        break;
                case 'h':
                        printf("usage: sandboxd-unpack [--max-bytes=N] [--max-entries=N] [--from-dir=SRC] DEST\n\n"
                               "Unpacks the tar on stdin (plain, gzip, bzip2, xz, zstd, lz4), or copies the\n"
                               "tree SRC, into DEST, a new directory: nothing outside DEST, no device nodes,\n"
                               "no set-uid/set-gid bits, all owned by the caller. On any error DEST is removed.\n"
                               "  --max-bytes=N    bytes of regular files (default 8G)\n"
                               "  --max-entries=N  entries (default 1000000)\n");
                        return 0;
                default:
                        usage_error("unknown option");
                }
        if (optind != argc - 1)
                usage_error("one DEST, please");

        /* pax names are UTF-8: libarchive converts them to the locale's charset */
        if (!setlocale(LC_CTYPE, "C.UTF-8"))
                (void) setlocale(LC_CTYPE, "");
        (void) sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGHUP, &sa, NULL);
        (void) signal(SIGPIPE, SIG_IGN);

        if (from_dir)
                r = unpack_from_dir(from_dir, argv[optind], &limits, &result);
        else
                r = unpack_tar_fd(STDIN_FILENO, argv[optind], &limits, &result);
        if (r < 0) {
                if (result.code == UNPACK_OK) /* cannot be, but never exit 0 on a failure */
                        result.code = UNPACK_IO_ERROR;
                fprintf(stderr, "sandboxd-unpack: %s: %s\n", unpack_code_to_string(result.code), result.message);
                return unpack_code_to_exit_status(result.code);
        }
        printf("{\"bytes\":%" PRIu64 ",\"entries\":%" PRIu64 "}\n", result.bytes, result.entries);
        if (fflush(stdout) != 0)
                return 74;
        return 0;
}
