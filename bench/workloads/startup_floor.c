/* Start-up floor (issue 11): the peak RSS of programs that barely allocate,
 * i.e. what an allocator costs a process before it does any work.
 *
 *   startup_floor [--runs N] [--python PATH]
 *
 * Runs each case N times as a child (fork, exec, wait4) and prints the
 * child's peak RSS (ru_maxrss, KiB) as one JSON line per run:
 *   trivial_c     this program again: malloc(10), free, exit (a C program:
 *                 no libstdc++ in the process unless the allocator brings it)
 *   trivial_cxx   startup_floor_cxx next to this program: new int, delete
 *   python_pass   PATH -c pass
 *   python_list   PATH -c "x = list(range(1000))"
 * The children inherit LD_PRELOAD (bench/run's launcher sets it for this
 * program). Forked, not vforked: a child's peak includes what it had when it
 * forked (its parent's pages), and this program is small; the same floor
 * bench/tools/launch.c leaves. Written in C with no stdio before the
 * measured work, so that the trivial case is trivial. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static long child_peak_kib(char* const argv[]) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  struct rusage usage;
  if (wait4(pid, &status, 0, &usage) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return usage.ru_maxrss;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--child-trivial") == 0) {
    void* volatile block = malloc(10);
    free(block);
    return block == NULL;
  }
  int runs = 3;
  const char* python = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--python") == 0 && i + 1 < argc) python = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--runs N] [--python PATH]\n", argv[0]);
      return 2;
    }
  }
  const char* allocator = getenv("STRATA_BENCH_ALLOCATOR");
  if (allocator == NULL) allocator = "unknown";

  char self[4096], cxx[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 32);
  if (n <= 0) return 1;
  self[n] = '\0';
  memcpy(cxx, self, (size_t)n + 1);
  strcat(cxx, "_cxx");

  struct {
    const char* name;
    char* argv[4];
  } cases[] = {
      {"trivial_c", {self, "--child-trivial", NULL, NULL}},
      {"trivial_cxx", {cxx, NULL, NULL, NULL}},
      {"python_pass", {(char*)python, "-c", "pass", NULL}},
      {"python_list", {(char*)python, "-c", "x = list(range(1000))", NULL}},
  };
  int failed = 0;
  for (int run = 0; run < runs; ++run) {  /* interleaved: every case once per run */
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
      if (cases[c].argv[0] == NULL) continue;  /* no --python */
      long kib = child_peak_kib(cases[c].argv);
      if (kib < 0) {
        fprintf(stderr, "startup_floor: case %s failed\n", cases[c].name);
        failed = 1;
        continue;
      }
      printf("{\"workload\":\"startup_floor\",\"allocator\":\"%s\",\"metric\":\"child_peak_rss\","
             "\"value\":%ld,\"unit\":\"KiB\",\"case\":\"%s\"}\n",
             allocator, kib, cases[c].name);
      fflush(stdout);
    }
  }
  return failed;
}
