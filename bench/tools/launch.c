/* Starts a benchmark program with an allocator preloaded and reports the
 * program's own peak RSS.
 *
 *   launch <preload or ""> <rss-file> <program> [args...]
 *
 * Why a separate launcher: Linux carries a process's peak RSS across exec
 * (ru_maxrss of a child includes what its parent had resident when it forked).
 * bench/run is a Python process of 50+ MiB, so measuring from there would put a
 * 50 MiB floor under every figure. This launcher is tiny (about 1 MiB), so the
 * floor it leaves is small; it also keeps LD_PRELOAD away from itself. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <preload or \"\"> <rss-file> <program> [args...]\n", argv[0]);
    return 2;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 2;
  }
  if (pid == 0) {
    if (argv[1][0]) setenv("LD_PRELOAD", argv[1], 1);
    else unsetenv("LD_PRELOAD");
    execv(argv[3], argv + 3);
    perror("execv");
    _exit(127);
  }
  int status = 0;
  struct rusage usage;
  if (wait4(pid, &status, 0, &usage) < 0) {
    perror("wait4");
    return 2;
  }
  FILE* out = fopen(argv[2], "w");
  if (out) {
    fprintf(out, "%ld\n", usage.ru_maxrss); /* KiB on Linux */
    fclose(out);
  }
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "launch: %s killed by signal %d\n", argv[3], WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}
