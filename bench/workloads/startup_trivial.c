/* The start-up floor (issue 11): a C program that mallocs and frees 10 bytes
 * and does nothing else. Whatever it has resident at its peak is the cost of
 * loading the C library and the allocator and of the allocator's first
 * malloc; bench/run measures it with wait4 (bench/tools/launch.c) and with
 * /usr/bin/time -f %M.
 *
 * Its only other work is to print, without allocating (no stdio buffer:
 * snprintf into a stack buffer, then write), one JSON line with its own
 * VmHWM read from /proc/self/status just before it returns: the peak of this
 * process's own address space since exec, free of any floor that a launcher
 * can leave in wait4's figure. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long own_peak_kib(void) {
  char text[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = 0;
  const char* field = strstr(text, "VmHWM:");
  return field ? strtol(field + 6, NULL, 10) : -1;
}

int main(void) {
  void* volatile p = malloc(10);
  free(p);
  const char* name = getenv("STRATA_BENCH_ALLOCATOR");
  char line[512];
  int n = snprintf(line, sizeof line,
                   "{\"workload\":\"startup_floor\",\"allocator\":\"%s\",\"metric\":\"own_vmhwm_kib\","
                   "\"value\":%ld,\"unit\":\"KiB\",\"program\":\"trivial_c\"}\n",
                   name && *name ? name : "glibc", own_peak_kib());
  if (n > 0 && write(1, line, (size_t)n) < 0) return 1;
  return 0;
}
