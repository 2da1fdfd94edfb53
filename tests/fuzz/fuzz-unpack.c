/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Fuzzes the image unpacker (src/unpack/unpack.c): the input is a tar (or a compressed
 * one), unpacked with small limits into TOP/box/dest, beside TOP/outside/keep. Whatever it
 * holds: on success the answer is within the limits, on failure DEST is gone and the code is
 * a refusal or an error, and either way nothing but DEST ever appears in TOP or TOP/box, and
 * the sentinel is untouched. */

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include "macro.h"
#include "unpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char top[] = "/tmp/fuzz-unpack-XXXXXX";
static char box[40], outside[40], dest[48], keep[48];

static int count_entries(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct dirent *de;
        DIR *d;
        int n = 0;

        if (fd < 0)
                abort();
        d = fdopendir(TAKE_FD(fd));
        if (!d)
                abort();
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        if (flag == FTW_DP)
                return rmdir(path) < 0 ? -1 : 0;
        return unlink(path) < 0 ? -1 : 0;
}

static int chmod_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        if (flag == FTW_D)
                (void) chmod(path, 0755);
        return 0;
}

static void cleanup(void) {
        (void) nftw(top, chmod_one, 16, FTW_PHYS);
        (void) nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void) {
        if (box[0])
                return;
        if (!mkdtemp(top))
                abort();
        snprintf(box, sizeof(box), "%s/box", top);
        snprintf(dest, sizeof(dest), "%s/dest", box);
        snprintf(outside, sizeof(outside), "%s/outside", top);
        snprintf(keep, sizeof(keep), "%s/keep", outside);
        if (mkdir(box, 0755) < 0 || mkdir(outside, 0755) < 0)
                abort();
        (void) atexit(cleanup);
        _cleanup_close_ int fd = open(keep, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "keep", 4) != 4)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        UnpackLimits limits = { .max_bytes = 1 << 20, .max_entries = 256 };
        UnpackResult result;
        struct stat st;
        int r;

        setup();
        r = unpack_tar_memory(data, size, dest, &limits, &result);
        if (r < 0) {
                if (result.code == UNPACK_OK || result.code == UNPACK_EXISTS || result.message[0] == 0)
                        abort();
                if (lstat(dest, &st) == 0 || errno != ENOENT)
                        abort(); /* left behind */
        } else {
                if (result.code != UNPACK_OK || result.bytes > limits.max_bytes ||
                    result.entries > limits.max_entries)
                        abort();
                if (lstat(dest, &st) < 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 07777) != 0755)
                        abort();
                /* read-only directories from the archive, then remove it all */
                (void) nftw(dest, chmod_one, 16, FTW_PHYS);
                if (nftw(dest, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
                        abort();
        }
        /* nothing escaped: TOP holds box and outside, box nothing, outside the sentinel only */
        if (count_entries(top) != 2 || count_entries(box) != 0 || count_entries(outside) != 1)
                abort();
        if (lstat(keep, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != 4 || st.st_nlink != 1)
                abort();
        return 0;
}
