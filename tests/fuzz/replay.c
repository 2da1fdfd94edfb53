/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Runs a fuzz target over the files named on the command line (a corpus replay). */

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
        FILE *f = fopen(path, "re");
        uint8_t *buf;
        long n;

        if (!f)
                return -errno;
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        rewind(f);
        buf = malloc(n > 0 ? (size_t) n : 1);
        if (!buf || fread(buf, 1, (size_t) n, f) != (size_t) n) {
                free(buf);
                fclose(f);
                return -EIO;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, (size_t) n);
        free(buf);
        return 0;
}

int main(int argc, char *argv[]) {
        int n = 0;

        for (int i = 1; i < argc; i++) {
                struct dirent **list;
                int k = scandir(argv[i], &list, NULL, alphasort);

                if (k < 0) {
                        fprintf(stderr, "%s: %m\n", argv[i]);
                        return EXIT_FAILURE;
                }
                for (int j = 0; j < k; j++) {
                        char path[4096];

                        if (list[j]->d_name[0] != '.') {
                                snprintf(path, sizeof(path), "%s/%s", argv[i], list[j]->d_name);
                                if (run_file(path) < 0) {
                                        fprintf(stderr, "%s: cannot read\n", path);
                                        return EXIT_FAILURE;
                                }
                                n++;
                        }
                        free(list[j]);
                }
                free(list);
        }
        printf("replayed %d inputs\n", n);
        return n > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
