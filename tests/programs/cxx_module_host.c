/* A C program (no libstdc++ of its own):
 *   cxx_module_host trivial          mallocs 10 bytes, frees them, and prints
 *                                    its peak RSS in KiB (VmHWM: this program's
 *                                    own, not what its parent had when it forked)
 *   cxx_module_host MODULE.so        dlopen()s a C++ module with RTLD_LOCAL and
 *                                    runs its checks (tests/programs/cxx_module.cpp) */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  if (strcmp(argv[1], "trivial") == 0) {
    void* volatile block = malloc(10);
    free(block);
    char status[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, status, sizeof(status) - 1);
    if (n <= 0) return 1;
    status[n] = '\0';
    const char* peak = strstr(status, "VmHWM:");
    if (peak == NULL) return 1;
    printf("%ld\n", strtol(peak + 6, NULL, 10));
    return block == NULL;
  }
  void* module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (module == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  int (*run)(void) = (int (*)(void))dlsym(module, "run_cxx_module_checks");
  if (run == NULL) return 2;
  int failures = run();
  printf("%s\n", failures == 0 ? "module checks passed" : "module checks FAILED");
  return failures == 0 ? 0 : 1;
}
