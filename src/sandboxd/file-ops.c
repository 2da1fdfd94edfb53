/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>

#include "file-ops.h"
#include "log.h"

struct FileOps {
        pthread_t threads[FILE_OPS_WORKERS];
        unsigned n_threads;
        pthread_mutex_t lock;
        pthread_cond_t work;
        /* every op from file_ops_submit() until the loop reaped it, oldest first; under lock */
        FileOp *head, *tail;
        unsigned n_ops, n_running;
        bool stop;      /* the threads end */
        bool abandoned; /* nothing more is taken */
        int event_fd;   /* a worker finished an op */
        sd_event_source *event;
        uint64_t n_done, n_refused;
};

static const char *const file_op_kind_table[_FILE_OP_KIND_MAX] = {
        [FILE_OP_STAT] = "stat",
        [FILE_OP_READ] = "read",
        [FILE_OP_MKDIR] = "mkdir",
        [FILE_OP_REMOVE] = "remove",
        [FILE_OP_MOVE] = "move",
        [FILE_OP_DISK_USAGE] = "disk-usage",
        [FILE_OP_WRITE] = "write",
};

const char *file_op_kind_to_string(FileOpKind k) {
        if (k < 0 || k >= _FILE_OP_KIND_MAX)
                return NULL;
        return file_op_kind_table[k];
}

int file_op_new(FileOpKind kind, const char *key, const char *dir, const char *path, FileOp **ret) {
        _cleanup_(file_op_freep) FileOp *op = NULL;

        assert(kind >= 0 && kind < _FILE_OP_KIND_MAX);
        assert(key && strlen(key) < sizeof(op->key));
        assert(dir);
        assert(ret);

        op = calloc(1, sizeof(FileOp));
        if (!op)
                return -ENOMEM;
        op->kind = kind;
        op->fd = op->src_fd = -EBADF;
        op->expect_bytes = UINT64_MAX;
        strcpy(op->key, key);
        op->dir = strdup(dir);
        if (!op->dir)
                return -ENOMEM;
        if (path && !(op->path = strdup(path)))
                return -ENOMEM;
        *ret = TAKE_PTR(op);
        return 0;
}

FileOp *file_op_free(FileOp *op) {
        if (!op)
                return NULL;
        safe_close(op->fd);
        safe_close(op->src_fd);
        buf_done(&op->listing);
        free(op->dir);
        free(op->path);
        free(op->to);
        free(op);
        return NULL;
}

/* --- the workers ------------------------------------------------------------------- */

static int file_op_read(FileOp *op, Workspace *ws) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = files_open(ws, op->path, &fd, &op->st);
        if (r < 0)
                return r;
        if (!S_ISDIR(op->st.st_mode)) {
                op->fd = TAKE_FD(fd);
                return 0;
        }
        r = buf_puts(&op->listing, "{");
        if (r >= 0)
                r = files_append_name(&op->listing, "path", op->path);
        if (r >= 0)
                r = buf_puts(&op->listing, ",");
        if (r >= 0)
                r = files_append_listing(ws, fd, op->path, op->max_entries, &op->listing);
        if (r >= 0)
                r = buf_puts(&op->listing, "}");
        return r;
}

/* Copies src_fd to its end into an upload (files.h: nothing is left behind unless it is
 * committed), in chunks, stopping when the waiter went away. */
static int file_op_write(FileOp *op, Workspace *ws) {
        FileUpload *u = NULL;
        char buf[65536];
        int r;

        r = files_upload_begin(ws, op->path, op->mode, op->max_bytes, &u);
        while (r >= 0) {
                ssize_t n = read(op->src_fd, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : 0;
                        break;
                }
                if (atomic_load(&op->cancel))
                        r = -ECANCELED;
                else
                        r = files_upload_write(u, buf, (size_t) n);
                op->bytes += (uint64_t) n;
        }
        if (r >= 0 && op->expect_bytes != UINT64_MAX && op->bytes != op->expect_bytes)
                r = -EPIPE;
        if (r >= 0)
                r = files_upload_commit(u, &op->created, &op->st);
        files_upload_free(u);
        return r;
}

static int file_op_run(FileOp *op) {
        _cleanup_(workspace_close) Workspace ws = WORKSPACE_NULL;
        int r;

        if (op->kind == FILE_OP_DISK_USAGE)
                return files_disk_usage_cancellable(op->dir, &op->cancel, &op->bytes);

        r = workspace_open(op->dir, true, &ws);
        if (r < 0) {
                op->workspace_failed = true;
                return r;
        }
        ws.cancel = &op->cancel;

        switch (op->kind) {
        case FILE_OP_STAT:
                return files_stat(&ws, op->path, &op->st);
        case FILE_OP_READ:
                return file_op_read(op, &ws);
        case FILE_OP_MKDIR:
                return files_mkdir_p(&ws, op->path, 0700, &op->created, &op->st);
        case FILE_OP_REMOVE:
                return files_remove(&ws, op->path, op->flag);
        case FILE_OP_MOVE:
                return files_move(&ws, op->path, op->to, op->flag, &op->st);
        case FILE_OP_WRITE:
                return file_op_write(op, &ws);
        default:
                return -EINVAL;
        }
}

static void file_op_unlink(FileOps *f, FileOp *op) {
        if (op->ops_prev)
                op->ops_prev->ops_next = op->ops_next;
        else
                f->head = op->ops_next;
        if (op->ops_next)
                op->ops_next->ops_prev = op->ops_prev;
        else
                f->tail = op->ops_prev;
        op->ops_next = op->ops_prev = NULL;
        f->n_ops--;
}

/* Under the lock: the oldest queued op whose session has a worker to spare. At most
 * FILE_OPS_MAX queued, each checked against the few running. */
static FileOp *next_op(FileOps *f) {
        for (FileOp *op = f->head; op; op = op->ops_next) {
                unsigned n = 0;

                if (op->state != FILE_OP_QUEUED)
                        continue;
                for (FileOp *o = f->head; o && n < FILE_OPS_SESSION_RUNNING_MAX; o = o->ops_next)
                        if (o->state == FILE_OP_RUNNING && streq(o->key, op->key))
                                n++;
                if (n < FILE_OPS_SESSION_RUNNING_MAX)
                        return op;
        }
        return NULL;
}

static void *worker_thread(void *userdata) {
        FileOps *f = userdata;

        pthread_mutex_lock(&f->lock);
        for (;;) {
                FileOp *op;
                int r;

                while (!f->stop && !(op = next_op(f)))
                        pthread_cond_wait(&f->work, &f->lock);
                if (f->stop)
                        break;
                op->state = FILE_OP_RUNNING;
                f->n_running++;
                pthread_mutex_unlock(&f->lock);

                r = file_op_run(op);

                pthread_mutex_lock(&f->lock);
                op->result = r;
                op->state = FILE_OP_FINISHED;
                f->n_running--;
                (void) eventfd_write(f->event_fd, 1);
                /* a session's other op may run now */
                pthread_cond_broadcast(&f->work);
        }
        pthread_mutex_unlock(&f->lock);
        return NULL;
}

/* --- the loop's side ---------------------------------------------------------------- */

static void file_op_finish(FileOp *op, int r) {
        FileOpDoneFn done = op->done;

        op->done = NULL;
        if (done)
                done(op, r, op->userdata);
}

static int on_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FileOps *f = userdata;
        FileOp *finished = NULL, *op, *next;
        eventfd_t v;

        (void) eventfd_read(f->event_fd, &v);

        pthread_mutex_lock(&f->lock);
        for (op = f->head; op; op = next) {
                next = op->ops_next;
                if (op->state != FILE_OP_FINISHED)
                        continue;
                file_op_unlink(f, op);
                op->ops_next = finished;
                finished = op;
                f->n_done++;
        }
        pthread_mutex_unlock(&f->lock);

        for (op = finished; op; op = next) {
                next = op->ops_next;
                file_op_finish(op, op->result);
                file_op_free(op);
        }
        return 0;
}

int file_ops_new(sd_event *e, FileOps **ret) {
        FileOps *f;
        sigset_t all, old;
        int r;

        assert(e);
        assert(ret);

        f = calloc(1, sizeof(FileOps));
        if (!f)
                return -ENOMEM;
        pthread_mutex_init(&f->lock, NULL);
        pthread_cond_init(&f->work, NULL);
        f->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (f->event_fd < 0) {
                r = -errno;
                goto fail;
        }
        r = sd_event_add_io(e, &f->event, f->event_fd, EPOLLIN, on_event, f);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(f->event, "file-ops");

        /* signals are the loop's (signalfd): the threads take none */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        for (; f->n_threads < FILE_OPS_WORKERS; f->n_threads++) {
                int k = pthread_create(&f->threads[f->n_threads], NULL, worker_thread, f);
                if (k != 0) {
                        r = -k;
                        break;
                }
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (f->n_threads == 0)
                goto fail;
        if (f->n_threads < FILE_OPS_WORKERS)
                log_warning_errno(r, "Started %u of %u file operation threads, continuing: %m", f->n_threads,
                                  FILE_OPS_WORKERS);
        *ret = f;
        return 0;
fail:
        file_ops_free(f);
        return r;
}

FileOps *file_ops_free(FileOps *f) {
        FileOp *op;

        if (!f)
                return NULL;
        pthread_mutex_lock(&f->lock);
        f->stop = f->abandoned = true;
        for (op = f->head; op; op = op->ops_next)
                atomic_store(&op->cancel, true);
        pthread_cond_broadcast(&f->work);
        pthread_mutex_unlock(&f->lock);
        for (unsigned i = 0; i < f->n_threads; i++)
                (void) pthread_join(f->threads[i], NULL);

        while ((op = f->head)) {
                file_op_unlink(f, op);
                file_op_finish(op, -ECANCELED);
                file_op_free(op);
        }
        sd_event_source_disable_unref(f->event);
        safe_close(f->event_fd);
        pthread_cond_destroy(&f->work);
        pthread_mutex_destroy(&f->lock);
        free(f);
        return NULL;
}

int file_ops_submit(FileOps *f, FileOp *op, bool internal, FileOpDoneFn done, void *userdata) {
        unsigned n = 0;
        int r = 0;

        assert(f);
        assert(op);

        pthread_mutex_lock(&f->lock);
        if (f->abandoned)
                r = -ECANCELED;
        else if (f->n_ops >= FILE_OPS_MAX)
                r = -EAGAIN;
        else if (!internal) {
                for (FileOp *o = f->head; o; o = o->ops_next)
                        if (streq(o->key, op->key) && o->done)
                                n++;
                if (n >= FILE_OPS_SESSION_MAX)
                        r = -EBUSY;
        }
        if (r < 0) {
                if (r != -ECANCELED)
                        f->n_refused++;
                pthread_mutex_unlock(&f->lock);
                file_op_free(op);
                return r;
        }
        op->ops = f;
        op->state = FILE_OP_QUEUED;
        op->done = done;
        op->userdata = userdata;
        op->ops_prev = f->tail;
        if (f->tail)
                f->tail->ops_next = op;
        else
                f->head = op;
        f->tail = op;
        f->n_ops++;
        pthread_cond_signal(&f->work);
        pthread_mutex_unlock(&f->lock);
        return 0;
}

void file_op_detach(FileOp *op) {
        FileOps *f;

        if (!op)
                return;
        f = op->ops;
        op->done = NULL;
        pthread_mutex_lock(&f->lock);
        if (op->state == FILE_OP_QUEUED) {
                file_op_unlink(f, op);
                pthread_mutex_unlock(&f->lock);
                file_op_free(op);
                return;
        }
        atomic_store(&op->cancel, true);
        pthread_mutex_unlock(&f->lock);
}

void file_ops_abandon(FileOps *f) {
        FileOp *op, *next, *dropped = NULL, *waiting = NULL;

        if (!f)
                return;
        pthread_mutex_lock(&f->lock);
        f->abandoned = true;
        for (op = f->head; op; op = next) {
                next = op->ops_next;
                atomic_store(&op->cancel, true);
                if (op->state == FILE_OP_QUEUED) {
                        file_op_unlink(f, op);
                        op->ops_next = dropped;
                        dropped = op;
                }
        }
        pthread_mutex_unlock(&f->lock);

        /* The done functions run without the lock: they may detach others. */
        for (op = dropped; op; op = next) {
                next = op->ops_next;
                file_op_finish(op, -ECANCELED);
                file_op_free(op);
        }
        for (;;) {
                pthread_mutex_lock(&f->lock);
                for (waiting = f->head; waiting && !waiting->done; waiting = waiting->ops_next)
                        ;
                pthread_mutex_unlock(&f->lock);
                if (!waiting)
                        break;
                /* running or finished: reaped later, its result unread */
                file_op_finish(waiting, -ECANCELED);
        }
}

void file_ops_stats(FileOps *f, FileOpsStats *ret) {
        assert(ret);
        if (!f) {
                *ret = (FileOpsStats) {};
                return;
        }
        pthread_mutex_lock(&f->lock);
        *ret = (FileOpsStats) {
                .queued = f->n_ops - f->n_running,
                .running = f->n_running,
                .done = f->n_done,
                .refused = f->n_refused,
        };
        pthread_mutex_unlock(&f->lock);
}
