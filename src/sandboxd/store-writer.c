/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include "list.h"
#include "log.h"
#include "store.h"
#include "store-writer.h"
#include "time-util.h"

/* A loop that queues faster than the disk writes waits for it beyond this many entries;
 * one entry per record makes that a great many records. */
#define STORE_WRITER_QUEUE_MAX 4096

typedef enum StoreOp {
        STORE_OP_WRITE,
        STORE_OP_UNLINK,
        STORE_OP_RM_RF,
} StoreOp;

struct StoreJob {
        StoreOp op;
        char *path;
        char *text;
        StoreJob **owner; /* points back at the owner's pointer while queued, or NULL */
        LIST_FIELDS(StoreJob, jobs);
};

struct StoreWriter {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t work;   /* the writer waits for jobs */
        pthread_cond_t done;   /* the loop waits for room, or for the queue to empty */
        StoreJob *head, *tail;
        unsigned n_queued;
        bool busy;             /* the writer holds a job outside the queue */
        bool stop;
        StoreWriterStats stats;
};

static StoreJob *job_free(StoreJob *j) {
        if (!j)
                return NULL;
        free(j->path);
        free(j->text);
        free(j);
        return NULL;
}

/* Under the lock. */
static void job_unqueue(StoreWriter *w, StoreJob *j) {
        if (j->jobs_prev)
                j->jobs_prev->jobs_next = j->jobs_next;
        else
                w->head = j->jobs_next;
        if (j->jobs_next)
                j->jobs_next->jobs_prev = j->jobs_prev;
        else
                w->tail = j->jobs_prev;
        j->jobs_next = j->jobs_prev = NULL;
        if (j->owner)
                *j->owner = NULL;
        j->owner = NULL;
        w->n_queued--;
}

static void job_enqueue(StoreWriter *w, StoreJob *j) {
        j->jobs_prev = w->tail;
        j->jobs_next = NULL;
        if (w->tail)
                w->tail->jobs_next = j;
        else
                w->head = j;
        w->tail = j;
        w->n_queued++;
        pthread_cond_signal(&w->work);
}

static int mkdir_parent(const char *path) {
        char dir[PATH_MAX];
        const char *slash = strrchr(path, '/');

        if (!slash || slash == path || (size_t) (slash - path) >= sizeof(dir))
                return -EINVAL;
        memcpy(dir, path, slash - path);
        dir[slash - path] = 0;
        return store_mkdir_p(dir, 0700);
}

static int job_run(StoreJob *j) {
        int r;

        switch (j->op) {
        case STORE_OP_WRITE:
                r = store_write_text(j->path, j->text, strlen(j->text));
                if (r == -ENOENT) {
                        /* the first record of a session makes its directory */
                        r = mkdir_parent(j->path);
                        if (r >= 0)
                                r = store_write_text(j->path, j->text, strlen(j->text));
                }
                if (r < 0)
                        log_warning_errno(r, "Failed to write the record %s, ignoring: %m", j->path);
                return r;
        case STORE_OP_UNLINK:
                r = unlink(j->path) < 0 && errno != ENOENT ? -errno : 0;
                break;
        case STORE_OP_RM_RF:
                r = store_rm_rf(j->path);
                break;
        default:
                r = -EINVAL;
        }
        if (r < 0)
                log_warning_errno(r, "Failed to remove the record %s, ignoring: %m", j->path);
        return r;
}

static void *writer_thread(void *userdata) {
        StoreWriter *w = userdata;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                StoreJob *j;
                uint64_t t0, dt;
                int r;

                while (!w->head && !w->stop)
                        pthread_cond_wait(&w->work, &w->lock);
                if (!w->head)
                        break; /* stopping, and all written */
                j = w->head;
                job_unqueue(w, j);
                w->busy = true;
                pthread_mutex_unlock(&w->lock);

                t0 = now_usec(CLOCK_MONOTONIC);
                r = job_run(j);
                dt = now_usec(CLOCK_MONOTONIC) - t0;

                pthread_mutex_lock(&w->lock);
                w->busy = false;
                if (r < 0)
                        w->stats.errors++;
                else if (j->op == STORE_OP_WRITE) {
                        w->stats.writes++;
                        w->stats.write_usec += dt;
                        w->stats.write_max_usec = MAX(w->stats.write_max_usec, dt);
                }
                pthread_cond_broadcast(&w->done);
                job_free(j);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

int store_writer_new(StoreWriter **ret) {
        StoreWriter *w;
        sigset_t all, old;
        int k;

        assert(ret);

        w = calloc(1, sizeof(StoreWriter));
        if (!w)
                return -ENOMEM;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->work, NULL);
        pthread_cond_init(&w->done, NULL);
        /* signals are the loop's (signalfd): the thread takes none */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        k = pthread_create(&w->thread, NULL, writer_thread, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (k != 0) {
                pthread_cond_destroy(&w->done);
                pthread_cond_destroy(&w->work);
                pthread_mutex_destroy(&w->lock);
                free(w);
                return -k;
        }
        *ret = w;
        return 0;
}

StoreWriter *store_writer_free(StoreWriter *w) {
        if (!w)
                return NULL;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_signal(&w->work);
        pthread_mutex_unlock(&w->lock);
        (void) pthread_join(w->thread, NULL); /* after the last queued job */
        assert(!w->head);
        pthread_cond_destroy(&w->done);
        pthread_cond_destroy(&w->work);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

int store_writer_put(StoreWriter *w, StoreJob **owner, const char *path, char *text) {
        StoreJob *j;
        int r;

        assert(owner);
        assert(path);
        assert(text);

        if (!w) {
                r = store_write_text(path, text, strlen(text));
                if (r == -ENOENT) {
                        r = mkdir_parent(path);
                        if (r >= 0)
                                r = store_write_text(path, text, strlen(text));
                }
                free(text);
                return r;
        }

        pthread_mutex_lock(&w->lock);
        if (*owner) {
                /* not yet taken by the writer: the newer text is what it will write */
                j = *owner;
                assert(j->op == STORE_OP_WRITE && streq(j->path, path));
                free(j->text);
                j->text = text;
                w->stats.coalesced++;
                pthread_mutex_unlock(&w->lock);
                return 0;
        }
        while (w->n_queued >= STORE_WRITER_QUEUE_MAX)
                pthread_cond_wait(&w->done, &w->lock);
        j = calloc(1, sizeof(StoreJob));
        if (!j || !(j->path = strdup(path))) {
                pthread_mutex_unlock(&w->lock);
                free(j);
                free(text);
                return -ENOMEM;
        }
        j->op = STORE_OP_WRITE;
        j->text = text;
        j->owner = owner;
        *owner = j;
        job_enqueue(w, j);
        pthread_mutex_unlock(&w->lock);
        return 0;
}

void store_writer_drop(StoreWriter *w, StoreJob **owner) {
        StoreJob *j;

        assert(owner);
        if (!w)
                return;
        /* *owner is the writer's to clear: read under the lock */
        pthread_mutex_lock(&w->lock);
        j = *owner;
        if (j) {
                job_unqueue(w, j);
                job_free(j);
        }
        pthread_mutex_unlock(&w->lock);
}

int store_writer_remove(StoreWriter *w, StoreJob **owner, const char *path, bool recursive) {
        StoreJob *j;

        if (owner)
                store_writer_drop(w, owner);
        if (!w) {
                if (recursive)
                        return store_rm_rf(path);
                return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
        }

        j = calloc(1, sizeof(StoreJob));
        if (!j || !(j->path = strdup(path))) {
                free(j);
                return -ENOMEM;
        }
        j->op = recursive ? STORE_OP_RM_RF : STORE_OP_UNLINK;
        pthread_mutex_lock(&w->lock);
        job_enqueue(w, j);
        pthread_mutex_unlock(&w->lock);
        return 0;
}

void store_writer_release(StoreWriter *w, StoreJob **owner) {
        assert(owner);
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        if (*owner) {
                (*owner)->owner = NULL;
                *owner = NULL;
        }
        pthread_mutex_unlock(&w->lock);
}

void store_writer_flush(StoreWriter *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        while (w->head || w->busy)
                pthread_cond_wait(&w->done, &w->lock);
        pthread_mutex_unlock(&w->lock);
}

void store_writer_stats(StoreWriter *w, StoreWriterStats *ret) {
        assert(ret);
        if (!w) {
                *ret = (StoreWriterStats) {};
                return;
        }
        pthread_mutex_lock(&w->lock);
        *ret = w->stats;
        ret->queued = w->n_queued + w->busy;
        pthread_mutex_unlock(&w->lock);
}
