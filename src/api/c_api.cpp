// The C API of include/strata/strata.h.
#include <cerrno>

#include "api/allocator.h"
#include "profile/profile_writer.h"
#include "strata/strata.h"

using namespace strata::detail;

extern "C" {

void* strata_malloc(size_t size) { return allocate(size); }

void* strata_calloc(size_t count, size_t size) { return allocate_zeroed(count, size); }

void* strata_realloc(void* ptr, size_t size) { return reallocate(ptr, size); }

void strata_free(void* ptr) { release(ptr); }

void strata_free_sized(void* ptr, size_t size) { release_sized(ptr, size); }

void* strata_aligned_alloc(size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return allocate_aligned(alignment, size);
}

size_t strata_usable_size(const void* ptr) { return usable_size(ptr); }

int strata_profile_dump(const char* path) {
  ensure_initialized();
  return dump_heap_profile(path);
}

}  // extern "C"
