/* An LD_PRELOAD shim that shifts one process's wall clock, never the
 * machine's: clock_gettime(CLOCK_REALTIME, CLOCK_REALTIME_COARSE),
 * gettimeofday() and time() return the real time plus an offset in seconds
 * read from the file named by TRL_CLOCK_SHIFT_FILE (one number, e.g. 3600
 * or -30.5; a missing or unreadable file is 0). The file is read again at
 * most every 50 ms of the monotonic clock, so the offset can change while
 * the process runs (the clock jumps). Monotonic and boot-time clocks are
 * untouched.
 *
 * The shim removes LD_PRELOAD and TRL_CLOCK_SHIFT_FILE from the environment
 * before main(), so only this process is shifted, not the programs it
 * starts.
 *
 * Build: cc -shared -fPIC -O2 -o clock_shift.so clock_shift.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char shift_file[4096];
static _Atomic long long offset_ns;
static _Atomic long long next_read_ns;
static int (*real_clock_gettime)(clockid_t, struct timespec *);

static long long monotonic_ns(void) {
  struct timespec ts;
  /* The raw syscall: never through this shim, whatever the clock. */
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Parses "[-]SECONDS[.FRACTION]" without the C library's locale. */
static long long parse_seconds(const char *s) {
  int negative = 0;
  long long whole = 0, frac = 0, scale = 1000000000LL;
  while (*s == ' ' || *s == '\t') s++;
  if (*s == '-' || *s == '+') negative = *s++ == '-';
  while (*s >= '0' && *s <= '9') whole = whole * 10 + (*s++ - '0');
  if (*s == '.') {
    s++;
    while (*s >= '0' && *s <= '9' && scale > 1) {
      scale /= 10;
      frac += (*s++ - '0') * scale;
    }
  }
  long long ns = whole * 1000000000LL + frac;
  return negative ? -ns : ns;
}

static long long current_offset(void) {
  if (!shift_file[0]) return 0;
  long long now = monotonic_ns();
  if (now >= atomic_load(&next_read_ns)) {
    atomic_store(&next_read_ns, now + 50000000LL);
    char buffer[64];
    long long value = 0;
    int fd = (int)syscall(SYS_open, shift_file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = syscall(SYS_read, fd, buffer, sizeof(buffer) - 1);
      syscall(SYS_close, fd);
      if (n > 0) {
        buffer[n] = 0;
        value = parse_seconds(buffer);
      }
    }
    atomic_store(&offset_ns, value);
  }
  return atomic_load(&offset_ns);
}

__attribute__((constructor)) static void clock_shift_init(void) {
  real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
  const char *file = getenv("TRL_CLOCK_SHIFT_FILE");
  if (file && strlen(file) < sizeof(shift_file)) strcpy(shift_file, file);
  /* By hand, not unsetenv(): a program may bring its own (bash does). */
  char **out = environ;
  for (char **in = environ; in && *in; in++) {
    if (strncmp(*in, "TRL_CLOCK_SHIFT_FILE=", 21) != 0 &&
        strncmp(*in, "LD_PRELOAD=", 11) != 0) {
      *out++ = *in;
    }
  }
  if (out) *out = NULL;
}

static int shifted_realtime(clockid_t clock, struct timespec *ts) {
  int rc = real_clock_gettime ? real_clock_gettime(clock, ts)
                              : (int)syscall(SYS_clock_gettime, clock, ts);
  if (rc != 0) return rc;
  long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec +
                 current_offset();
  ts->tv_sec = (time_t)(ns / 1000000000LL);
  ts->tv_nsec = (long)(ns % 1000000000LL);
  if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000L;
    ts->tv_sec -= 1;
  }
  return 0;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
  if (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) {
    return shifted_realtime(clock, ts);
  }
  if (real_clock_gettime) return real_clock_gettime(clock, ts);
  return (int)syscall(SYS_clock_gettime, clock, ts);
}

int gettimeofday(struct timeval *tv, void *tz) {
  (void)tz;
  struct timespec ts;
  if (shifted_realtime(CLOCK_REALTIME, &ts) != 0) return -1;
  struct timeval *volatile result = tv; /* NULL is allowed */
  if (result) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  if (shifted_realtime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
