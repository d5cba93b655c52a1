/* Clock control for a Redis node under test: an LD_PRELOAD library that shifts the wall
 * clock (CLOCK_REALTIME and gettimeofday) by what /clock/offset_us says, so a harness can
 * make one node's clock jump, run behind, or drift (run fast or slow).
 *
 * The file holds one line of decimal integers separated by spaces:
 *
 *     OFFSET_US [PPM SINCE_US]
 *
 * OFFSET_US is a signed offset in microseconds. PPM (parts per million, signed: positive
 * runs fast, -1000000 stops the clock) and SINCE_US (a real CLOCK_REALTIME instant, µs since
 * the epoch) add a drift, so the shifted clock reads
 *
 *     real + OFFSET_US + max(real - SINCE_US, 0) * PPM / 1e6
 *
 * A file with only OFFSET_US (the original format) has no drift; a PPM without a SINCE_US
 * is unparsable and counts as no drift.
 *
 * Invariant: only the wall clock moves. Every other clock (CLOCK_MONOTONIC, which Redis
 * uses for timers) is passed through unchanged, and both entry points call the kernel
 * through the raw syscall, never through libc or the allocator (Debian's libfaketime
 * recurses through the allocator at redis-server start-up and never starts). A missing or
 * unparsable file means offset 0 and no drift; the file is re-read whenever its inode or
 * mtime changes, so a new offset or rate takes effect on the next call. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define OFFSET_FILE "/clock/offset_us"

/* What the file says (all zero: real time). */
struct shift {
    long long offset_us;
    long long ppm;
    long long since_us;
};

static struct shift cached_shift;
static struct stat cached_stat;

/* Parses the file's text; anything unparsable is left zero. */
static struct shift parse(const char *text) {
    struct shift parsed = {0, 0, 0};
    char *end;
    long long offset = strtoll(text, &end, 10);
    if (end == text) return parsed;
    parsed.offset_us = offset;
    const char *rest = end;
    long long ppm = strtoll(rest, &end, 10);
    if (end == rest) return parsed;
    rest = end;
    long long since = strtoll(rest, &end, 10);
    if (end == rest) return parsed;
    parsed.ppm = ppm;
    parsed.since_us = since;
    return parsed;
}

static struct shift current_shift(void) {
    static const struct shift none = {0, 0, 0};
    struct stat now;
    if (syscall(SYS_stat, OFFSET_FILE, &now) != 0) return cached_shift = none;
    if (now.st_ino == cached_stat.st_ino && now.st_mtim.tv_sec == cached_stat.st_mtim.tv_sec &&
        now.st_mtim.tv_nsec == cached_stat.st_mtim.tv_nsec)
        return cached_shift;
    char text[96] = {0};
    long fd = syscall(SYS_open, OFFSET_FILE, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cached_shift = none;
    long got = syscall(SYS_read, fd, text, sizeof text - 1);
    syscall(SYS_close, fd);
    cached_shift = got > 0 ? parse(text) : none;
    cached_stat = now;
    return cached_shift;
}

/* The shift in nanoseconds at the real instant `real_ns`. The drift is split into whole
 * milliseconds and the rest, so that neither product overflows 64 bits for decades of
 * elapsed time at any rate up to a million ppm (and no 128-bit libgcc helper is needed). */
static long long shift_ns(long long real_ns) {
    struct shift s = current_shift();
    long long elapsed_ns = real_ns - s.since_us * 1000;
    if (elapsed_ns < 0) elapsed_ns = 0;
    long long drift_ns =
        elapsed_ns / 1000000 * s.ppm + elapsed_ns % 1000000 * s.ppm / 1000000;
    return s.offset_us * 1000 + drift_ns;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    long rc = syscall(SYS_clock_gettime, clock, ts);
    if (rc != 0 || clock != CLOCK_REALTIME) return (int)rc;
    long long real_ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec;
    long long ns = real_ns + shift_ns(real_ns);
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
