/* log.c - the worker's JSON lines (observe.h): a bounded queue filled by any thread and one
 * writer thread that owns the descriptor, so a slow stderr pipe or a full disk stalls only that
 * thread, never the event loop; lines that do not fit while the writer is behind are dropped
 * and counted (sbx_worker_log_lines_dropped_total). It also formats the lines (worker_json).
 * This file must not know about calls, metrics or connections.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "worker/observe.h"

/* Bytes queued for the writer: about 2,000 call lines, several seconds of a busy worker, so a
 * pause of the reader (journald restarting) loses nothing while memory stays bounded. */
#define LOG_QUEUE_BYTES (1u << 20)
/* Most bytes handed to one write(2). */
#define LOG_WRITE_CHUNK (64u << 10)
/* The writer wakes this often to write what is queued, instead of being woken per line (a
 * wake-up per line costs a context switch per call on a loaded host); a line reaches the file
 * at most this late. Half a queue also wakes it at once; an empty one puts it to sleep until
 * the next line. */
#define LOG_FLUSH_MS 20

struct worker_log {
    worker_log_level level;
    char *path; /* NULL: stderr */
    int fd;     /* writer thread only (after open) */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    /* ring of queued bytes, guarded by mu */
    char *ring;
    size_t head, len;
    bool stop, reopen;
    bool idle; /* the writer waits for a first line, untimed (an appender signals) */
    pthread_t thread;
    atomic_uint_fast64_t dropped;
};

static const char *const level_names[] = {"error", "warn", "info", "debug"};

bool worker_log_level_parse(const char *name, worker_log_level *out)
{
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, level_names[i]) == 0) {
            *out = (worker_log_level)i;
            return true;
        }
    return false;
}

const char *worker_log_level_name(worker_log_level level)
{
    return (unsigned)level < 4 ? level_names[level] : "info";
}

static int open_log_file(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to report a failing log; the lines are lost */
        p += w;
        n -= (size_t)w;
    }
}

static void *writer_main(void *arg)
{
    worker_log *log = arg;
    char *chunk = malloc(LOG_WRITE_CHUNK);
    pthread_mutex_lock(&log->mu);
    for (;;) {
        while (log->len == 0 && !log->stop && !log->reopen) {
            /* Nothing queued: sleep until a line comes (its appender wakes an idle writer),
             * then gather lines for LOG_FLUSH_MS and write them together. An idle worker's
             * writer does not wake at all (it woke every LOG_FLUSH_MS, 50 times a second). */
            log->idle = true;
            pthread_cond_wait(&log->cond, &log->mu);
            log->idle = false;
            struct timespec until = sbx_mono_after_ms(LOG_FLUSH_MS);
            while (!log->stop && !log->reopen && log->len < LOG_QUEUE_BYTES / 2 &&
                   pthread_cond_timedwait(&log->cond, &log->mu, &until) == 0) {
            }
        }
        if (log->reopen) {
            log->reopen = false;
            if (log->path) {
                pthread_mutex_unlock(&log->mu);
                int fd = open_log_file(log->path);
                if (fd >= 0) { /* keep the old descriptor when the new path cannot be opened */
                    close(log->fd);
                    log->fd = fd;
                }
                pthread_mutex_lock(&log->mu);
            }
            continue;
        }
        if (log->len == 0 && log->stop)
            break;
        size_t n = log->len;
        if (n > LOG_WRITE_CHUNK)
            n = LOG_WRITE_CHUNK;
        if (log->head + n > LOG_QUEUE_BYTES) /* contiguous part only; the rest next round */
            n = LOG_QUEUE_BYTES - log->head;
        if (!chunk) {
            log->head = (log->head + n) % LOG_QUEUE_BYTES;
            log->len -= n;
            continue;
        }
        memcpy(chunk, log->ring + log->head, n);
        log->head = (log->head + n) % LOG_QUEUE_BYTES;
        log->len -= n;
        pthread_mutex_unlock(&log->mu);
        write_all(log->fd, chunk, n);
        pthread_mutex_lock(&log->mu);
    }
    pthread_mutex_unlock(&log->mu);
    free(chunk);
    return NULL;
}

sbx_status worker_log_open(const char *path, worker_log_level level, worker_log **out,
                           sbx_error *err)
{
    *out = NULL;
    worker_log *log = calloc(1, sizeof *log);
    if (!log)
        return sbx_error_set(err, SBX_E_INTERNAL, "worker log: out of memory");
    log->level = level;
    log->fd = STDERR_FILENO;
    log->ring = malloc(LOG_QUEUE_BYTES);
    if (path) {
        log->path = strdup(path);
        log->fd = open_log_file(path);
        if (log->fd < 0) {
            int e = errno;
            free(log->ring);
            free(log->path);
            free(log);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "worker.log_file '%s': cannot open for appending: %s (create "
                                 "its directory or point log_file elsewhere)",
                                 path, strerror(e));
        }
    }
    pthread_mutex_init(&log->mu, NULL);
    sbx_cond_init_mono(&log->cond);
    if (!log->ring || (path && !log->path) ||
        pthread_create(&log->thread, NULL, writer_main, log) != 0) {
        if (path && log->fd >= 0)
            close(log->fd);
        pthread_mutex_destroy(&log->mu);
        pthread_cond_destroy(&log->cond);
        free(log->ring);
        free(log->path);
        free(log);
        return sbx_error_set(err, SBX_E_INTERNAL, "worker log: cannot start the writer");
    }
    *out = log;
    return SBX_OK;
}

bool worker_log_enabled(const worker_log *log, worker_log_level level)
{
    return log && level <= log->level;
}

void worker_log_line(worker_log *log, const char *line, size_t len)
{
    if (!log)
        return;
    pthread_mutex_lock(&log->mu);
    if (log->len + len + 1 > LOG_QUEUE_BYTES) {
        pthread_mutex_unlock(&log->mu);
        atomic_fetch_add_explicit(&log->dropped, 1, memory_order_relaxed);
        return;
    }
    size_t tail = (log->head + log->len) % LOG_QUEUE_BYTES;
    size_t first = LOG_QUEUE_BYTES - tail < len ? LOG_QUEUE_BYTES - tail : len;
    memcpy(log->ring + tail, line, first);
    memcpy(log->ring, line + first, len - first);
    log->ring[(tail + len) % LOG_QUEUE_BYTES] = '\n';
    bool was_below = log->len < LOG_QUEUE_BYTES / 2;
    log->len += len + 1;
    if (log->idle) { /* the first line since the writer emptied the queue: wake it once */
        log->idle = false;
        pthread_cond_signal(&log->cond);
    } else if (was_below && log->len >= LOG_QUEUE_BYTES / 2) { /* else within LOG_FLUSH_MS */
        pthread_cond_signal(&log->cond);
    }
    pthread_mutex_unlock(&log->mu);
}

void worker_log_reopen(worker_log *log)
{
    if (!log)
        return;
    pthread_mutex_lock(&log->mu);
    log->reopen = true;
    pthread_cond_signal(&log->cond);
    pthread_mutex_unlock(&log->mu);
}

uint64_t worker_log_dropped(const worker_log *log)
{
    return log ? atomic_load_explicit(&((worker_log *)log)->dropped, memory_order_relaxed) : 0;
}

void worker_log_close(worker_log *log)
{
    if (!log)
        return;
    pthread_mutex_lock(&log->mu);
    log->stop = true;
    pthread_cond_signal(&log->cond);
    pthread_mutex_unlock(&log->mu);
    pthread_join(log->thread, NULL);
    if (log->path)
        close(log->fd);
    pthread_mutex_destroy(&log->mu);
    pthread_cond_destroy(&log->cond);
    free(log->ring);
    free(log->path);
    free(log);
}

/* ---- formatting ---------------------------------------------------------------------------- */

/* Room kept at the end of every line for `,"truncated":true}` and the NUL. */
#define JSON_TAIL_RESERVE 24

static void json_raw(worker_json *j, const char *s, size_t n)
{
    if (j->full || j->len + n + JSON_TAIL_RESERVE > sizeof j->buf) {
        j->full = true;
        return;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
}

/* A JSON string: quotes, backslashes and control bytes escaped; bytes >= 0x80 pass through
 * (fields are UTF-8 already or were made so by the engine), cut at WORKER_LOG_FIELD_MAX. */
static void json_string(worker_json *j, const char *s)
{
    json_raw(j, "\"", 1);
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n < WORKER_LOG_FIELD_MAX;
         p++, n++) {
        char esc[8];
        size_t run = 0; /* bytes that need no escape, copied at once */
        while (p[run] && n + run < WORKER_LOG_FIELD_MAX && p[run] >= 0x20 && p[run] != 0x7f &&
               p[run] != '"' && p[run] != '\\')
            run++;
        if (run > 0) {
            json_raw(j, (const char *)p, run);
            p += run - 1;
            n += run - 1;
            continue;
        }
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            json_raw(j, esc, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            json_raw(j, esc, 6);
        } else {
            json_raw(j, (const char *)p, 1);
        }
    }
    json_raw(j, "\"", 1);
}

static void json_key(worker_json *j, const char *key)
{
    if (j->len > 1)
        json_raw(j, ",", 1);
    json_string(j, key);
    json_raw(j, ":", 1);
}

void worker_json_begin(worker_json *j, worker_log_level level, const char *event)
{
    j->len = 0;
    j->full = false;
    json_raw(j, "{", 1);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[80];
    snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    worker_json_str(j, "time", when);
    worker_json_str(j, "level", worker_log_level_name(level));
    worker_json_str(j, "event", event);
}

/* A field that does not fit is left out whole (never half a key or value): the line stays one
 * valid object, marked "truncated", and later fields are skipped. */
static void field_done(worker_json *j, size_t before)
{
    if (j->full)
        j->len = before;
}

void worker_json_str(worker_json *j, const char *key, const char *value)
{
    if (!value || j->full)
        return;
    size_t before = j->len;
    json_key(j, key);
    json_string(j, value);
    field_done(j, before);
}

void worker_json_int(worker_json *j, const char *key, int64_t value)
{
    if (j->full)
        return;
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", (long long)value);
    size_t before = j->len;
    json_key(j, key);
    json_raw(j, num, (size_t)n);
    field_done(j, before);
}

void worker_json_ms(worker_json *j, const char *key, int64_t us)
{
    char num[40];
    if (us < 0)
        us = 0;
    int n =
        snprintf(num, sizeof num, "%lld.%03lld", (long long)(us / 1000), (long long)(us % 1000));
    if (j->full)
        return;
    size_t before = j->len;
    json_key(j, key);
    json_raw(j, num, (size_t)n);
    field_done(j, before);
}

void worker_json_end(worker_json *j)
{
    static const char truncated[] = ",\"truncated\":true";
    if (j->full) { /* JSON_TAIL_RESERVE keeps room for this */
        memcpy(j->buf + j->len, truncated, sizeof truncated - 1);
        j->len += sizeof truncated - 1;
    }
    j->buf[j->len++] = '}';
    j->buf[j->len] = '\0';
}
