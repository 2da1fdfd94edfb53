/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/stat.h>

#include "files.h"
#include "tests.h"

static char top[] = "/tmp/test-files-XXXXXX";
static char wsdir[300], outside[300];

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        ASSERT(f);
        if (!f)
                return;
        fputs(text, f);
        fclose(f);
}

static void at(char *buf, const char *base, const char *name) {
        snprintf(buf, 512, "%s/%s", base, name);
}

static int count_entries(const char *dir) {
        struct dirent *de;
        DIR *d = opendir(dir);
        int n = 0;

        if (!d)
                return -1;
        while ((de = readdir(d)))
                n += !streq(de->d_name, ".") && !streq(de->d_name, "..");
        closedir(d);
        return n;
}

static int upload(Workspace *ws, const char *path, const char *data, uint64_t max, bool *created) {
        FileUpload *u = NULL;
        struct stat st;
        int r;

        r = files_upload_begin(ws, path, MODE_INVALID, max, &u);
        if (r < 0)
                return r;
        r = files_upload_write(u, data, strlen(data));
        if (r >= 0)
                r = files_upload_commit(u, created, &st);
        files_upload_free(u);
        return r;
}

static void test_workspace_created(void) {
        Workspace ws = WORKSPACE_NULL;
        char parent[400];
        struct stat st;

        ASSERT(workspace_open(wsdir, false, &ws) == -ENOENT);
        ASSERT(workspace_open(wsdir, true, &ws) == 0);
        ASSERT(stat(wsdir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
        snprintf(parent, sizeof(parent), "%s/ws/user", top);
        ASSERT(stat(parent, &st) == 0 && (st.st_mode & 0777) == 0755); /* as systemd makes them */
        ASSERT(ws.uid == getuid());
        workspace_close(&ws);
        ASSERT(ws.fd < 0);
}

static void test_upload(Workspace *ws) {
        char p[512], buf[64] = {};
        bool created = false;
        FileUpload *u = NULL;
        struct stat st;
        int before, fd;

        ASSERT(upload(ws, "hello.txt", "hello\n", 100, &created) == 0);
        ASSERT(created);
        at(p, wsdir, "hello.txt");
        fd = open(p, O_RDONLY | O_CLOEXEC);
        ASSERT(fd >= 0 && read(fd, buf, sizeof(buf) - 1) == 6);
        ASSERT_STREQ(buf, "hello\n");
        safe_close(fd);
        ASSERT(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);

        /* replacing keeps the mode */
        ASSERT(chmod(p, 0640) == 0);
        ASSERT(upload(ws, "hello.txt", "again\n", 100, &created) == 0);
        ASSERT(!created);
        ASSERT(stat(p, &st) == 0 && (st.st_mode & 0777) == 0640 && st.st_size == 6);

        /* an explicit mode */
        ASSERT(files_upload_begin(ws, "run.sh", 0755, 100, &u) == 0);
        ASSERT(files_upload_commit(u, &created, &st) == 0 && created);
        u = files_upload_free(u);
        at(p, wsdir, "run.sh");
        ASSERT(stat(p, &st) == 0 && (st.st_mode & 0777) == 0755 && st.st_size == 0);

        /* aborted or too large: nothing left behind, the old content stays */
        before = count_entries(wsdir);
        ASSERT(files_upload_begin(ws, "partial", MODE_INVALID, 100, &u) == 0);
        ASSERT(files_upload_write(u, "abc", 3) == 0);
        u = files_upload_free(u);
        ASSERT(upload(ws, "big", "0123456789", 9, &created) == -EFBIG);
        ASSERT(upload(ws, "hello.txt", "0123456789", 9, &created) == -EFBIG);
        ASSERT(count_entries(wsdir) == before);
        at(p, wsdir, "hello.txt");
        ASSERT(stat(p, &st) == 0 && st.st_size == 6);

        /* not a path to a file */
        ASSERT(upload(ws, "", "x", 100, &created) == -EINVAL);
        ASSERT(upload(ws, "a/..", "x", 100, &created) == -EINVAL);
        ASSERT(upload(ws, "/etc/passwd", "x", 100, &created) == -EINVAL);
        ASSERT(upload(ws, "nodir/x", "x", 100, &created) == -ENOENT);
        ASSERT(upload(ws, "hello.txt/x", "x", 100, &created) == -ENOTDIR);
}

static void test_escapes(Workspace *ws) {
        char p[512], q[512];
        bool created;
        struct stat st;
        int fd = -EBADF;

        at(p, wsdir, "shadow");
        ASSERT(symlink("/etc/passwd", p) == 0);
        at(p, wsdir, "up");
        ASSERT(symlink("../../", p) == 0);
        at(p, wsdir, "outdir");
        ASSERT(symlink(outside, p) == 0);
        at(p, wsdir, "loop");
        ASSERT(symlink("loop", p) == 0);
        at(p, wsdir, "fifo");
        ASSERT(mkfifo(p, 0600) == 0);
        at(p, wsdir, "inside");
        ASSERT(symlink("hello.txt", p) == 0);

        ASSERT(files_stat(ws, "..", &st) == -EXDEV);
        ASSERT(files_stat(ws, "../x", &st) == -EXDEV);
        ASSERT(files_stat(ws, "hello.txt/../../x", &st) == -EXDEV || files_stat(ws, "hello.txt/../../x", &st) == -ENOTDIR);
        ASSERT(files_stat(ws, "/etc", &st) == -EINVAL);
        ASSERT(files_open(ws, "shadow", &fd, &st) == -EXDEV);
        ASSERT(files_open(ws, "up/etc/passwd", &fd, &st) == -EXDEV);
        ASSERT(files_open(ws, "outdir/secret", &fd, &st) == -EXDEV);
        ASSERT(files_open(ws, "loop", &fd, &st) == -ELOOP);
        ASSERT(fd < 0);

        /* a FIFO is refused, never opened (alarm: a blocking open would hang the test) */
        alarm(10);
        ASSERT(files_open(ws, "fifo", &fd, &st) == -EMEDIUMTYPE);
        ASSERT(upload(ws, "fifo", "x", 100, &created) == -EMEDIUMTYPE);
        alarm(0);
        at(p, wsdir, "fifo");
        ASSERT(lstat(p, &st) == 0 && S_ISFIFO(st.st_mode));

        /* writing through or over symlinks */
        ASSERT(upload(ws, "shadow", "x", 100, &created) == -EXDEV);
        ASSERT(upload(ws, "loop", "x", 100, &created) == -ELOOP);
        ASSERT(upload(ws, "inside", "x", 100, &created) == -EMEDIUMTYPE);
        ASSERT(upload(ws, "outdir/new", "x", 100, &created) == -EXDEV);
        at(q, outside, "new");
        ASSERT(access(q, F_OK) < 0 && errno == ENOENT);
        at(p, wsdir, "shadow");
        ASSERT(lstat(p, &st) == 0 && S_ISLNK(st.st_mode));

        /* inside, symlinks and ".." are fine */
        ASSERT(files_open(ws, "inside", &fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 6);
        fd = safe_close(fd);
        ASSERT(files_stat(ws, "nope/../hello.txt", &st) == -ENOENT);
        ASSERT(files_stat(ws, "./hello.txt", &st) == 0 && S_ISREG(st.st_mode));
        ASSERT(files_open(ws, "", &fd, &st) == 0 && S_ISDIR(st.st_mode));
        fd = safe_close(fd);
}

static void test_dirs(Workspace *ws) {
        char p[512], q[512];
        bool created;
        struct stat st;

        ASSERT(files_mkdir_p(ws, "x/y//z/", 0700, &created, &st) == 0 && created && S_ISDIR(st.st_mode));
        ASSERT(files_mkdir_p(ws, "x/y/z", 0700, &created, &st) == 0 && !created);
        ASSERT(files_mkdir_p(ws, "x/../w", 0700, &created, &st) == 0 && created);
        ASSERT(files_mkdir_p(ws, "", 0700, &created, &st) == 0 && !created);
        ASSERT(files_mkdir_p(ws, "hello.txt/a", 0700, &created, &st) == -ENOTDIR);
        ASSERT(files_mkdir_p(ws, "hello.txt", 0700, &created, &st) == -ENOTDIR);
        ASSERT(files_mkdir_p(ws, "outdir/made", 0700, &created, &st) == -EXDEV);
        ASSERT(files_mkdir_p(ws, "../made", 0700, &created, &st) == -EXDEV);
        at(q, outside, "made");
        ASSERT(access(q, F_OK) < 0);

        ASSERT(upload(ws, "x/y/z/f", "f", 10, &created) == 0);
        ASSERT(files_remove(ws, "x", false) == -ENOTEMPTY);
        ASSERT(files_remove(ws, "", true) == -EINVAL);
        ASSERT(files_remove(ws, "x/..", true) == -EINVAL);
        ASSERT(files_remove(ws, "outdir/secret", false) == -EXDEV);

        /* recursive removal never follows a symlink out */
        at(p, wsdir, "x/y/link");
        ASSERT(symlink(outside, p) == 0);
        ASSERT(files_remove(ws, "x", true) == 0);
        at(p, wsdir, "x");
        ASSERT(access(p, F_OK) < 0);
        at(q, outside, "secret");
        ASSERT(access(q, F_OK) == 0);

        /* a symlink is removed itself */
        ASSERT(files_remove(ws, "shadow", false) == 0);
        ASSERT(access("/etc/passwd", F_OK) == 0);
        ASSERT(files_remove(ws, "nothing", false) == -ENOENT);

        /* move */
        ASSERT(upload(ws, "m1", "1", 10, &created) == 0);
        ASSERT(upload(ws, "m2", "2", 10, &created) == 0);
        ASSERT(files_move(ws, "m1", "m2", false, &st) == -EEXIST);
        ASSERT(files_move(ws, "m1", "w/m3", false, &st) == 0 && S_ISREG(st.st_mode));
        ASSERT(files_move(ws, "w/m3", "m2", true, &st) == 0 && st.st_size == 1);
        ASSERT(files_move(ws, "m2", "outdir/m2", false, &st) == -EXDEV);
        ASSERT(files_move(ws, "m2", "../m2", false, &st) == -EXDEV);
        ASSERT(files_move(ws, "w", "w/inner", false, &st) == -EINVAL);
        ASSERT(files_move(ws, "", "z", false, &st) == -EINVAL);
        ASSERT(files_move(ws, "m2", "m2-new", false, &st) == 0);
}

static void test_listing(Workspace *ws) {
        json_object *o, *entries, *e, *v;
        char p[512];
        bool created;
        struct stat st;
        int fd;
        Buf b = {};

        ASSERT(upload(ws, "w/b", "bb", 10, &created) == 0);
        ASSERT(upload(ws, "w/a", "a", 10, &created) == 0);
        ASSERT(upload(ws, "w/\xff\xfe", "", 10, &created) == 0);
        at(p, wsdir, "w/l");
        ASSERT(symlink("/etc/passwd", p) == 0);

        ASSERT(files_open(ws, "w", &fd, &st) == 0);
        ASSERT(buf_puts(&b, "{") == 0 && files_append_listing(ws, fd, "w/", 100, &b) == 0 && buf_puts(&b, "}") == 0);
        safe_close(fd);
        o = json_tokener_parse(b.data);
        ASSERT(o);
        ASSERT(json_object_object_get_ex(o, "entries", &entries) && json_object_array_length(entries) == 4);
        e = json_object_array_get_idx(entries, 0);
        ASSERT(json_object_object_get_ex(e, "name", &v) && streq(json_object_get_string(v), "a"));
        ASSERT(json_object_object_get_ex(e, "path", &v) && streq(json_object_get_string(v), "w/a"));
        ASSERT(json_object_object_get_ex(e, "type", &v) && streq(json_object_get_string(v), "file"));
        ASSERT(json_object_object_get_ex(e, "mode", &v) && streq(json_object_get_string(v), "0600"));
        ASSERT(json_object_object_get_ex(e, "size", &v) && json_object_get_int(v) == 1);
        ASSERT(json_object_object_get_ex(e, "mtime", &v) && strlen(json_object_get_string(v)) == 27);
        e = json_object_array_get_idx(entries, 2);
        ASSERT(json_object_object_get_ex(e, "type", &v) && streq(json_object_get_string(v), "symlink"));
        ASSERT(json_object_object_get_ex(e, "target", &v) && streq(json_object_get_string(v), "/etc/passwd"));
        e = json_object_array_get_idx(entries, 3);
        ASSERT(json_object_object_get_ex(e, "name_b64", &v) && streq(json_object_get_string(v), "//4="));
        ASSERT(json_object_object_get_ex(e, "path_b64", &v) && streq(json_object_get_string(v), "dy///g=="));
        json_object_put(o);
        buf_done(&b);

        ASSERT(files_open(ws, "w", &fd, &st) == 0);
        ASSERT(files_append_listing(ws, fd, "", 2, &b) == 0 && strstr(b.data, "\"truncated\":true"));
        safe_close(fd);
        buf_done(&b);
}

static void test_disk_usage(void) {
        uint64_t before, after;
        char p[512], block[4096];
        FILE *f;

        ASSERT(files_disk_usage("/nonexistent/sandboxd", &before) == 0 && before == 0);
        ASSERT(files_disk_usage(wsdir, &before) == 0 && before > 0);
        at(p, wsdir, "w/1m");
        f = fopen(p, "we");
        ASSERT(f);
        memset(block, 'x', sizeof(block));
        for (int i = 0; f && i < 256; i++)
                fwrite(block, 1, sizeof(block), f);
        if (f)
                fclose(f);
        ASSERT(files_disk_usage(wsdir, &after) == 0 && after >= before + 1024 * 1024);
}

/* As root: operations run as the workspace's owner, with its rights only. */
static void test_owner_credentials(void) {
        const uid_t uid = 4242;
        char dir[300], p[512];
        Workspace ws = WORKSPACE_NULL;
        bool created;
        struct stat st;
        int fd = -EBADF;

        if (geteuid() != 0) {
                printf("# not root: skipping the owner's credentials\n");
                return;
        }
        snprintf(dir, sizeof(dir), "%s/owned", top);
        ASSERT(mkdir(dir, 0700) == 0 && chown(dir, uid, uid) == 0);
        ASSERT(workspace_open(dir, false, &ws) == 0 && ws.uid == uid && ws.gid == uid);

        ASSERT(upload(&ws, "f", "data", 10, &created) == 0);
        ASSERT(files_mkdir_p(&ws, "d", 0700, &created, &st) == 0);
        at(p, dir, "f");
        ASSERT(stat(p, &st) == 0 && st.st_uid == uid && st.st_gid == uid);
        at(p, dir, "d");
        ASSERT(stat(p, &st) == 0 && st.st_uid == uid);

        /* what the owner may not read, the API may not either (root could) */
        at(p, dir, "f");
        ASSERT(chmod(p, 0) == 0);
        ASSERT(files_open(&ws, "f", &fd, &st) == -EACCES);
        /* a file of someone else in a directory the owner cannot write */
        at(p, dir, "d");
        ASSERT(chown(p, 0, 0) == 0);
        ASSERT(upload(&ws, "d/x", "x", 10, &created) == -EACCES);
        ASSERT(files_remove(&ws, "d", false) == 0); /* its own directory entry: fine */

        /* and we are root again afterwards */
        ASSERT(setfsuid((uid_t) -1) == 0);
        workspace_close(&ws);
}

int main(void) {
        Workspace ws = WORKSPACE_NULL;
        char p[512];

        umask(0077);
        ASSERT(mkdtemp(top));
        snprintf(wsdir, sizeof(wsdir), "%s/ws/user/one", top);
        snprintf(outside, sizeof(outside), "%s/outside", top);
        ASSERT(mkdir(outside, 0755) == 0);
        at(p, outside, "secret");
        write_file(p, "secret\n");

        test_workspace_created();
        ASSERT(workspace_open(wsdir, false, &ws) == 0);
        test_upload(&ws);
        test_escapes(&ws);
        test_dirs(&ws);
        test_listing(&ws);
        workspace_close(&ws);
        test_disk_usage();
        test_owner_credentials();

        snprintf(p, sizeof(p), "rm -rf '%s'", top);
        (void) system(p);
        return TESTS_DONE();
}
