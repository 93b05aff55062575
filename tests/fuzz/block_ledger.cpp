// The ledger and the wrappers that feed it. The link (CMakeLists.txt) turns
// every call to strata_malloc outside the engine into a call to
// __wrap_strata_malloc, and __real_strata_malloc into strata's own; likewise
// for the other functions below.
#include "block_ledger.hpp"

#include "block_model.hpp"

#include <strata/strata.h>

namespace strata_fuzz {

void BlockLedger::add(const void* p, std::size_t request) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!blocks_.emplace(p, LedgerEntry{request, request}).second)
    model_violation("strata handed out a block the ledger holds as live", p, request, 0);
}

void BlockLedger::resized_in_place(const void* p, std::size_t request) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = blocks_.find(p);
  if (it == blocks_.end()) model_violation("realloc in place of a block the ledger never saw", p, request, 0);
  it->second.request = request;
}

void BlockLedger::remove(const void* p) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (blocks_.erase(p) != 1) model_violation("free of a block the ledger never saw", p, 0, 0);
}

bool BlockLedger::contains(const void* p) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return blocks_.count(p) != 0;
}

BlockLedger& ledger() {
  static BlockLedger* instance = new BlockLedger;  // never destroyed (see the header)
  return *instance;
}

}  // namespace strata_fuzz

using strata_fuzz::ledger;

extern "C" {

void* __real_strata_malloc(size_t size);
void* __real_strata_calloc(size_t count, size_t size);
void* __real_strata_realloc(void* ptr, size_t size);
void* __real_strata_aligned_alloc(size_t alignment, size_t size);
void __real_strata_free(void* ptr);
void __real_strata_free_sized(void* ptr, size_t size);

void* __wrap_strata_malloc(size_t size) {
  void* p = __real_strata_malloc(size);
  if (p) ledger().add(p, size);
  return p;
}

void* __wrap_strata_calloc(size_t count, size_t size) {
  void* p = __real_strata_calloc(count, size);
  if (p) ledger().add(p, count * size);
  return p;
}

void* __wrap_strata_realloc(void* ptr, size_t size) {
  void* p = __real_strata_realloc(ptr, size);
  if (p == nullptr) return p;  // failed: `ptr` is still live
  if (p == ptr) {
    ledger().resized_in_place(p, size);
  } else {
    if (ptr) ledger().remove(ptr);
    ledger().add(p, size);
  }
  return p;
}

void* __wrap_strata_aligned_alloc(size_t alignment, size_t size) {
  void* p = __real_strata_aligned_alloc(alignment, size);
  if (p) ledger().add(p, size);
  return p;
}

void __wrap_strata_free(void* ptr) {
  if (ptr) ledger().remove(ptr);  // before the free: the address may be reused at once by another thread
  __real_strata_free(ptr);
}

void __wrap_strata_free_sized(void* ptr, size_t size) {
  if (ptr) ledger().remove(ptr);
  __real_strata_free_sized(ptr, size);
}

}  // extern "C"
