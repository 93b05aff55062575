// The allocation contract run on the libc names, in a program linked with
// libstrata.a: malloc & co., the glibc extras and every operator new/delete.
// The first tests prove that these names really are strata's.
#include "allocation_contract.hpp"

#include <strata/strata.h>

#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

// C23 names that glibc 2.36 does not declare yet. Weak, so a missing
// definition shows up as a failed test instead of a link error.
extern "C" void free_sized(void* ptr, size_t size) __attribute__((weak));
extern "C" void free_aligned_sized(void* ptr, size_t alignment, size_t size) __attribute__((weak));

namespace strata::detail {
bool fork_handlers_registered() noexcept;  // frontend/thread_cache.h
}

namespace strata_test {
namespace {

std::size_t libc_usable_size(const void* p) { return malloc_usable_size(const_cast<void*>(p)); }

void libc_free_sized(void* p, std::size_t n) {
  if (free_sized == nullptr) {
    ADD_FAILURE() << "free_sized is not defined by libstrata.a";
    free(p);
    return;
  }
  free_sized(p, n);
}

bool aligned_to(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

// Base address of the object (executable or library) that defines `addr`.
const void* defining_object(const void* addr) {
  Dl_info info{};
  if (dladdr(addr, &info) == 0) return nullptr;
  return info.dli_fbase;
}
std::string defining_file(const void* addr) {
  Dl_info info{};
  if (dladdr(addr, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

}  // namespace

const AllocApi& surface_under_test() {
  static const AllocApi api = {"libc_override", malloc, calloc, realloc, free, libc_free_sized,
                               aligned_alloc,   libc_usable_size, false};
  return api;
}

namespace {

// ---------------------------------------------------------------------------
// Proof that the override took effect.

// Every overridden symbol, as the dynamic linker resolves it for libc and
// libstdc++ (global scope): it must come from this executable, i.e. libstrata.a.
TEST(OverrideProof, EverySymbolResolvesToThisExecutable) {
  const char* symbols[] = {
      "malloc", "free", "calloc", "realloc", "reallocarray", "aligned_alloc", "posix_memalign",
      "memalign", "valloc", "pvalloc", "malloc_usable_size", "free_sized", "free_aligned_sized",
      "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
      "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
      "_ZnamSt11align_val_tRKSt9nothrow_t", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
      "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZdlPvSt11align_val_t",
      "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
      "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t"};
  const void* self = defining_object(reinterpret_cast<const void*>(&surface_under_test));
  ASSERT_NE(self, nullptr);
  for (const char* name : symbols) {
    void* addr = dlsym(RTLD_DEFAULT, name);
    ASSERT_NE(addr, nullptr) << name << " is not resolvable";
    EXPECT_EQ(defining_object(addr), self) << name << " resolves to " << defining_file(addr)
                                           << ", not to the executable linked with libstrata.a";
  }
}

// What malloc returns, strata knows, and the other way round.
TEST(OverrideProof, BlocksMoveFreelyBetweenLibcNamesAndStrataApi) {
  for (std::size_t n : {std::size_t{1}, std::size_t{100}, std::size_t{5000}, std::size_t{1} << 20}) {
    void* p = malloc(n);
    ASSERT_NE(p, nullptr);
    EXPECT_GE(strata_usable_size(p), n);
    EXPECT_EQ(strata_usable_size(p), malloc_usable_size(p));
    strata_free(p);
    void* q = strata_malloc(n);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(malloc_usable_size(q), strata_usable_size(q));
    free(q);
  }
  char* a = new char[300];
  EXPECT_GE(strata_usable_size(a), 300u);
  delete[] a;
}

// glibc's own heap does not grow while the program allocates: its arena
// statistics stay flat because glibc's malloc is never called.
TEST(OverrideProof, GlibcArenaStaysUntouched) {
  struct mallinfo2 before = mallinfo2();
  std::vector<void*> blocks;
  for (int i = 0; i < 2000; ++i) blocks.push_back(malloc(64 + i));
  struct mallinfo2 during = mallinfo2();
  for (void* p : blocks) free(p);
  EXPECT_EQ(during.uordblks, before.uordblks) << "glibc's arena grew: malloc is glibc's";
  EXPECT_EQ(during.hblkhd, before.hblkhd);
}

// ---------------------------------------------------------------------------
// glibc extras and C23.

std::size_t volatile g_huge = SIZE_MAX;  // volatile: the compiler cannot fold the failing calls

TEST(LibcExtras, MallocUsableSizeOfNullIsZero) { EXPECT_EQ(malloc_usable_size(nullptr), 0u); }

TEST(LibcExtras, PosixMemalignHonoursAlignment) {
  for (std::size_t a = sizeof(void*); a <= (std::size_t{4} << 20); a *= 2) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, a - 1, a + 1, 2 * a}) {
      void* p = nullptr;
      ASSERT_EQ(posix_memalign(&p, a, n), 0) << "posix_memalign(" << a << ", " << n << ")";
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned_to(p, a));
      EXPECT_GE(malloc_usable_size(p), n);
      free(p);
    }
  }
}

TEST(LibcExtras, PosixMemalignRejectsBadAlignmentWithEinval) {
  // Not a power of two, or not a multiple of sizeof(void*).
  for (std::size_t a : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{3},
                        std::size_t{24}, std::size_t{4097}, SIZE_MAX}) {
    void* sentinel = reinterpret_cast<void*>(0x1234);
    void* p = sentinel;
    EXPECT_EQ(posix_memalign(&p, a, 64), EINVAL) << "alignment " << a;
    EXPECT_EQ(p, sentinel) << "posix_memalign must not write the result on failure";
  }
}

TEST(LibcExtras, PosixMemalignOfImpossibleSizeReturnsEnomem) {
  void* p = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(posix_memalign(&p, 64, SIZE_MAX - 32), ENOMEM);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1234));
}

TEST(LibcExtras, MemalignHonoursAlignmentAndRejectsBadOnes) {
  for (std::size_t a = 1; a <= (std::size_t{2} << 20); a *= 2) {
    void* p = memalign(a, 100);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_to(p, a)) << "memalign(" << a << ")";
    free(p);
  }
  for (std::size_t a : {std::size_t{3}, std::size_t{24}, std::size_t{1000}}) {
    errno = 0;
    void* p = memalign(a, 100);
    escape(p);
    EXPECT_EQ(p, nullptr) << "memalign(" << a << ", 100)";
    EXPECT_EQ(errno, EINVAL);
    free(p);
  }
}

TEST(LibcExtras, VallocAndPvallocArePageAligned) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  for (std::size_t n : {std::size_t{1}, std::size_t{100}, page, page + 1, std::size_t{1} << 20}) {
    void* v = valloc(n);
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(aligned_to(v, page));
    EXPECT_GE(malloc_usable_size(v), n);
    free(v);
    void* pv = pvalloc(n);
    ASSERT_NE(pv, nullptr);
    EXPECT_TRUE(aligned_to(pv, page));
    EXPECT_GE(malloc_usable_size(pv), (n + page - 1) / page * page) << "pvalloc rounds up to whole pages";
    std::memset(pv, 7, malloc_usable_size(pv));
    free(pv);
  }
  errno = 0;
  EXPECT_EQ(valloc(g_huge), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(pvalloc(g_huge - 10), nullptr) << "rounding up to a page must not wrap around";
  EXPECT_EQ(errno, ENOMEM);
}

TEST(LibcExtras, ReallocarrayResizesAndDetectsOverflow) {
  auto* p = static_cast<int*>(reallocarray(nullptr, 10, sizeof(int)));
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 10; ++i) p[i] = i * 3;
  p = static_cast<int*>(reallocarray(p, 1000, sizeof(int)));
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p[i], i * 3);
  errno = 0;
  // Through a volatile pointer: GCC would warn that p is used after a
  // reallocarray it cannot know failed.
  void* (*volatile reallocarray_fn)(void*, size_t, size_t) = reallocarray;
  void* q = reallocarray_fn(p, g_huge / 2, 4);
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p[i], i * 3) << "the old block must survive a failed reallocarray";
  free(p);
}

TEST(LibcExtras, C23SizedFrees) {
  ASSERT_NE(free_sized, nullptr) << "libstrata.a does not define free_sized";
  ASSERT_NE(free_aligned_sized, nullptr) << "libstrata.a does not define free_aligned_sized";
  for (std::size_t n : {std::size_t{1}, std::size_t{64}, std::size_t{3000}, std::size_t{1} << 20}) {
    free_sized(malloc(n), n);
    free_sized(calloc(n, 1), n);
    for (std::size_t a : {std::size_t{16}, std::size_t{256}, std::size_t{65536}}) {
      void* p = aligned_alloc(a, n);
      ASSERT_NE(p, nullptr);
      free_aligned_sized(p, a, n);
    }
  }
  free_sized(nullptr, 10);
  free_aligned_sized(nullptr, 64, 10);
}

// ---------------------------------------------------------------------------
// operator new / delete.

TEST(OperatorNew, EveryFormReturnsAStrataBlock) {
  for (std::size_t n : {std::size_t{1}, std::size_t{48}, std::size_t{4000}, std::size_t{300000}}) {
    void* p = ::operator new(n);
    EXPECT_GE(strata_usable_size(p), n);
    ::operator delete(p);
    p = ::operator new[](n);
    EXPECT_GE(strata_usable_size(p), n);
    ::operator delete[](p);
    p = ::operator new(n);
    ::operator delete(p, n);
    p = ::operator new[](n);
    ::operator delete[](p, n);
    p = ::operator new(n, std::nothrow);
    ASSERT_NE(p, nullptr);
    ::operator delete(p, std::nothrow);
    p = ::operator new[](n, std::nothrow);
    ASSERT_NE(p, nullptr);
    ::operator delete[](p, std::nothrow);
    for (std::size_t a = 1; a <= (std::size_t{1} << 20); a *= 4) {
      auto al = std::align_val_t{a};
      p = ::operator new(n, al);
      EXPECT_TRUE(aligned_to(p, a)) << "new(" << n << ", align " << a << ")";
      EXPECT_GE(strata_usable_size(p), n);
      ::operator delete(p, al);
      p = ::operator new[](n, al);
      EXPECT_TRUE(aligned_to(p, a));
      ::operator delete[](p, al);
      p = ::operator new(n, al);
      ::operator delete(p, n, al);
      p = ::operator new[](n, al);
      ::operator delete[](p, n, al);
      p = ::operator new(n, al, std::nothrow);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned_to(p, a));
      ::operator delete(p, al, std::nothrow);
      p = ::operator new[](n, al, std::nothrow);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned_to(p, a));
      ::operator delete[](p, al, std::nothrow);
    }
  }
}

TEST(OperatorNew, ZeroSizeGivesUniquePointers) {
  void* a = ::operator new(0);
  void* b = ::operator new(0);
  EXPECT_NE(a, b);
  ::operator delete(a);
  ::operator delete(b);
}

TEST(OperatorNew, ImpossibleSizesThrowBadAlloc) {
  EXPECT_THROW(escape(::operator new(g_huge)), std::bad_alloc);
  EXPECT_THROW(escape(::operator new[](g_huge)), std::bad_alloc);
  EXPECT_THROW(escape(::operator new(g_huge - 100, std::align_val_t{64})), std::bad_alloc);
  EXPECT_THROW(escape(::operator new[](g_huge - 100, std::align_val_t{4096})), std::bad_alloc);
  EXPECT_THROW(escape(new char[g_huge / 2]), std::bad_alloc);
}

TEST(OperatorNew, NothrowFormsReturnNullOnImpossibleSizes) {
  EXPECT_EQ(::operator new(g_huge, std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](g_huge, std::nothrow), nullptr);
  EXPECT_EQ(::operator new(g_huge, std::align_val_t{256}, std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](g_huge, std::align_val_t{256}, std::nothrow), nullptr);
}

int g_handler_calls = 0;
void counting_handler() {
  // Give up after three tries, as a handler that cannot free memory must.
  if (++g_handler_calls == 3) std::set_new_handler(nullptr);
}

TEST(OperatorNew, CallsTheNewHandlerBeforeThrowing) {
  g_handler_calls = 0;
  std::set_new_handler(counting_handler);
  EXPECT_THROW(escape(::operator new(g_huge)), std::bad_alloc);
  std::set_new_handler(nullptr);
  EXPECT_EQ(g_handler_calls, 3) << "operator new must call the new_handler until it is removed";
}

TEST(OperatorNew, StandardContainersRunOnStrata) {
  std::vector<std::string> words;
  for (int i = 0; i < 10000; ++i) words.push_back(std::string(20 + i % 50, static_cast<char>('a' + i % 26)));
  EXPECT_GE(strata_usable_size(words.data()), words.size() * sizeof(std::string));
  EXPECT_GE(strata_usable_size(words.back().data()), words.back().size() + 1);
}

// ---------------------------------------------------------------------------
// Fork handlers: registered when the process gets its second thread, before
// that thread runs (a single-threaded program never maps the libc pages
// that registering touches; docs/design.md, *Start-up cost*).

TEST(ForkHandlers, RegisteredBeforeTheSecondThreadRuns) {
  if (!__libc_single_threaded) GTEST_SKIP() << "this process has had a second thread already (run alone, as ctest does)";
  void* block = std::malloc(24);  // the process is set up
  escape(block);
  std::free(block);
  EXPECT_FALSE(strata::detail::fork_handlers_registered()) << "registered while the process has one thread";
  bool registered_when_it_ran = false;
  std::thread([&] { registered_when_it_ran = strata::detail::fork_handlers_registered(); }).join();
  EXPECT_TRUE(registered_when_it_ran) << "a second thread ran before the fork handlers were registered";
}
// Forks while other threads allocate: tests/stress/stress_fork.cpp.

}  // namespace
}  // namespace strata_test
