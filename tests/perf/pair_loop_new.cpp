// operator new(32)+sized operator delete pairs for the instruction-count
// guard (what `new T` and `delete p` of a 32-byte type call). argv:
// iterations, pattern (0: deleted at once, 1: 100 allocated then deleted).
#include <cstdlib>
#include <new>

static void* volatile sink;

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  long n = std::atol(argv[1]);
  int pattern = std::atoi(argv[2]);
  void* held[100];
  for (long i = 0; i < n; ++i) {
    if (pattern == 0) {
      void* p = ::operator new(32);
      sink = p;
      ::operator delete(p, 32);
    } else {
      for (int j = 0; j < 100; ++j) held[j] = ::operator new(32);
      for (int j = 0; j < 100; ++j) ::operator delete(held[j], 32);
    }
  }
  return 0;
}
