/* Clock control for a Redis node under test: an LD_PRELOAD library that shifts the wall
 * clock (CLOCK_REALTIME and gettimeofday) by a signed offset in microseconds read from
 * /clock/offset_us, so a harness can make one node's clock jump or run behind.
 *
 * Invariant: only the wall clock moves. Every other clock (CLOCK_MONOTONIC, which Redis
 * uses for timers) is passed through unchanged, and both entry points call the kernel
 * through the raw syscall, never through libc or the allocator (Debian's libfaketime
 * recurses through the allocator at redis-server start-up and never starts). A missing or
 * unparsable file means offset 0; the file is re-read whenever its inode or mtime changes,
 * so a new offset takes effect on the next call. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define OFFSET_FILE "/clock/offset_us"

static long long cached_offset_us;
static struct stat cached_stat;

static long long offset_us(void) {
    struct stat now;
    if (syscall(SYS_stat, OFFSET_FILE, &now) != 0) return cached_offset_us = 0;
    if (now.st_ino == cached_stat.st_ino && now.st_mtim.tv_sec == cached_stat.st_mtim.tv_sec &&
        now.st_mtim.tv_nsec == cached_stat.st_mtim.tv_nsec)
        return cached_offset_us;
    char text[32] = {0};
    long fd = syscall(SYS_open, OFFSET_FILE, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cached_offset_us = 0;
    long got = syscall(SYS_read, fd, text, sizeof text - 1);
    syscall(SYS_close, fd);
    char *end = text;
    long long parsed = got > 0 ? strtoll(text, &end, 10) : 0;
    cached_offset_us = end == text ? 0 : parsed;
    cached_stat = now;
    return cached_offset_us;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    long rc = syscall(SYS_clock_gettime, clock, ts);
    if (rc != 0 || clock != CLOCK_REALTIME) return (int)rc;
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_us() * 1000LL;
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
    return 0;
}

/* glibc declares `tv` non-null; the obsolete `tz` is ignored, as glibc does. */
int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    (void)tz;
    return 0;
}
