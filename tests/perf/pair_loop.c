/* malloc(32)+free pairs for the instruction-count guard. argv: iterations,
 * pattern (0: free at once, 1: 100 allocated then freed). */
#include <stdlib.h>

static void* volatile sink;

int main(int argc, char** argv) {
  long n = atol(argv[1]);
  int pattern = atoi(argv[2]);
  void* held[100];
  for (long i = 0; i < n; ++i) {
    if (pattern == 0) {
      void* p = malloc(32);
      sink = p;
      free(p);
    } else if (pattern == 1) {
      for (int j = 0; j < 100; ++j) held[j] = malloc(32);
      for (int j = 0; j < 100; ++j) free(held[j]);
    }
  }
  return 0;
}
