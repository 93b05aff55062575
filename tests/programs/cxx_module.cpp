// A C++ module that a C program loads with dlopen(RTLD_LOCAL), as Python
// loads extension modules: its C++ runtime (libstdc++) is not in the global
// scope, so libstrata.so, preloaded and linked without libstdc++, must find
// it at run time to throw std::bad_alloc from operator new
// (src/override/cxx_runtime.cpp). Returns the number of failed checks.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>

namespace {

int g_handler_calls = 0;

void handler_that_gives_up_on_the_third_call() {
  if (++g_handler_calls == 3) std::set_new_handler(nullptr);
}

void* volatile g_sink;

}  // namespace

extern "C" int run_cxx_module_checks() {
  int failures = 0;
  const std::size_t impossible = std::size_t{1} << 60;
  auto check = [&failures](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "cxx_module: FAILED: %s\n", what);
      ++failures;
    }
  };

  bool caught = false;
  try {
    g_sink = ::operator new(impossible);
  } catch (const std::bad_alloc& e) {
    caught = std::strcmp(e.what(), "std::bad_alloc") == 0;
  }
  check(caught, "operator new of an impossible size throws std::bad_alloc");

  caught = false;
  try {
    g_sink = ::operator new[](impossible, std::align_val_t{64});
  } catch (const std::bad_alloc&) {
    caught = true;
  }
  check(caught, "aligned operator new[] throws std::bad_alloc");

  std::set_new_handler(handler_that_gives_up_on_the_third_call);
  caught = false;
  try {
    g_sink = ::operator new(impossible);
  } catch (const std::bad_alloc&) {
    caught = true;
  }
  check(caught && g_handler_calls == 3, "the module's new_handler is called until it removes itself");

  check(::operator new(impossible, std::nothrow) == nullptr, "nothrow new returns null");

  int* object = new int(42);
  check(object != nullptr && *object == 42, "new int works");
  delete object;
  return failures;
}
