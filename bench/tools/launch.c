/* Starts a benchmark program with an allocator preloaded and reports the
 * program's own peak RSS.
 *
 *   launch <preload or ""> <rss-file> <program> [args...]
 *
 * writes "<peak RSS KiB> <floor KiB>" to <rss-file>.
 *
 * Why a separate launcher: Linux carries a process's peak RSS across exec
 * (ru_maxrss of a child includes what its parent had resident when it forked).
 * bench/run is a Python process of 50+ MiB, so measuring from there would put a
 * 50 MiB floor under every figure. This launcher is tiny, so the floor it
 * leaves is small; it also keeps LD_PRELOAD away from itself.
 *
 * The floor, exactly: wait4's ru_maxrss is the larger of the forked child's
 * resident set just before exec (its copy of this launcher's pages) and the
 * program's own peak after exec. The child reads the former from
 * /proc/self/statm right before execv and sends it back through a pipe, so
 * every figure above the floor is the program's own peak, exactly; a figure
 * at the floor only says the program's peak was not larger (bench/run flags
 * it). The floor is about 0.5 MiB. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Resident KiB of this process (second field of /proc/self/statm), read
 * without stdio so that nothing is allocated on the way. */
static long resident_kib(void) {
  char text[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = 0;
  char* p = text;
  strtol(p, &p, 10);
  return strtol(p, NULL, 10) * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <preload or \"\"> <rss-file> <program> [args...]\n", argv[0]);
    return 2;
  }
  int floor_pipe[2];
  if (pipe2(floor_pipe, O_CLOEXEC) != 0) {
    perror("pipe2");
    return 2;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 2;
  }
  if (pid == 0) {
    /* The environment is built on the stack (setenv would malloc and
     * raise the floor): every variable but LD_PRELOAD, then ours. */
    size_t count = 0;
    while (environ[count]) ++count;
    char* envp[count + 2];
    size_t used = 0;
    for (size_t i = 0; i < count; ++i)
      if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) envp[used++] = environ[i];
    size_t length = strlen(argv[1]);
    char preload[length + 12];
    if (length) {
      memcpy(preload, "LD_PRELOAD=", 11);
      memcpy(preload + 11, argv[1], length + 1);
      envp[used++] = preload;
    }
    envp[used] = NULL;
    long floor_kib = resident_kib(); /* last thing before exec */
    if (write(floor_pipe[1], &floor_kib, sizeof floor_kib) != (ssize_t)sizeof floor_kib) floor_kib = -1;
    execve(argv[3], argv + 3, envp);
    perror("execve");
    _exit(127);
  }
  close(floor_pipe[1]);
  int status = 0;
  struct rusage usage;
  if (wait4(pid, &status, 0, &usage) < 0) {
    perror("wait4");
    return 2;
  }
  long floor_kib = -1;
  if (read(floor_pipe[0], &floor_kib, sizeof floor_kib) != (ssize_t)sizeof floor_kib) floor_kib = -1;
  close(floor_pipe[0]);
  FILE* out = fopen(argv[2], "w");
  if (out) {
    fprintf(out, "%ld %ld\n", usage.ru_maxrss, floor_kib); /* KiB on Linux */
    fclose(out);
  }
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "launch: %s killed by signal %d\n", argv[3], WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}
