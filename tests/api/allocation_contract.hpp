// The contract every strata allocation entry point keeps, written once and run
// against two surfaces: the strata_* C API and the overridden libc names.
#pragma once

#include <cstddef>
#include <ostream>

namespace strata_test {

// One allocator surface under test, as plain function pointers.
struct AllocApi {
  const char* name;
  void* (*malloc)(std::size_t);
  void* (*calloc)(std::size_t, std::size_t);
  void* (*realloc)(void*, std::size_t);
  void (*free)(void*);
  void (*free_sized)(void*, std::size_t);
  void* (*aligned_alloc)(std::size_t, std::size_t);
  std::size_t (*usable_size)(const void*);
  // realloc(p, 0) may return NULL (glibc) or a fresh block (strata's C API).
  bool realloc_zero_returns_block;
};

// GoogleTest prints the parameter of a failing test with this.
inline void PrintTo(const AllocApi& api, std::ostream* os) { *os << api.name; }

// Defined once per test executable: the surface its contract tests run on.
const AllocApi& surface_under_test();

// Keeps the optimiser from eliding an allocation whose result is unused.
inline void escape(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

}  // namespace strata_test
