// Out of memory, for real: a child process lowers RLIMIT_AS so that mmap
// fails, then checks that every entry point fails cleanly (NULL + ENOMEM,
// std::bad_alloc), that freed memory is reusable under the same limit (nothing
// leaked), and that allocation works again once the limit is raised.
// Linked with libstrata.a, so malloc and new are strata's.
#include <strata/strata.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::size_t address_space_in_use() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

bool set_address_space_limit(rlim_t bytes) {
  struct rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0) return false;
  limit.rlim_cur = bytes;
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

// Child-side checks report by exit code; the message says which step failed.
#define CHILD_CHECK(cond, code)                                               \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "child check failed (%d): %s\n", code, #cond);     \
      std::_Exit(code);                                                       \
    }                                                                         \
  } while (0)

using Alloc = void* (*)(std::size_t);
using Free = void (*)(void*);

// Fills memory with blocks of `size` until the allocator says no. `blocks`
// comes reserved: the bookkeeping must not need memory once the limit is hit.
void exhaust(Alloc alloc, std::size_t size, std::vector<void*>& blocks, int* last_errno) {
  for (;;) {
    errno = 0;
    void* p = alloc(size);
    if (p == nullptr) {
      *last_errno = errno;
      return;
    }
    std::memset(p, 0xee, size < 4096 ? size : 4096);  // touch it
    blocks.push_back(p);
    if (blocks.size() == blocks.capacity()) return;  // limit not reached: the caller checks
  }
}

void child_steps(Alloc alloc, Free release) {
  std::vector<void*> large, small, again;
  large.reserve(1 << 12);
  small.reserve(1 << 21);
  again.reserve(1 << 12);
  CHILD_CHECK(set_address_space_limit(address_space_in_use() + 96 * kMiB), 2);

  // Large blocks: the page heap asks the OS and is refused.
  int err = 0;
  exhaust(alloc, kMiB, large, &err);
  CHILD_CHECK(large.size() < large.capacity(), 3);
  CHILD_CHECK(err == ENOMEM, 4);
  const std::size_t large_count = large.size();
  CHILD_CHECK(large_count >= 16, 5);  // some memory was available below the limit

  // Small blocks: the central cache asks the page heap, which is out too.
  exhaust(alloc, 48, small, &err);
  CHILD_CHECK(small.size() < small.capacity(), 6);
  CHILD_CHECK(err == ENOMEM, 7);

  // Aligned and zeroed requests fail the same way.
  errno = 0;
  CHILD_CHECK(strata_aligned_alloc(kMiB, 8 * kMiB) == nullptr && errno == ENOMEM, 8);
  errno = 0;
  CHILD_CHECK(strata_calloc(8, kMiB) == nullptr && errno == ENOMEM, 9);

  // C++: new throws, nothrow new returns null.
  bool threw = false;
  try {
    void* volatile p = ::operator new(16 * kMiB);
    (void)p;
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHILD_CHECK(threw, 10);
  CHILD_CHECK(::operator new(16 * kMiB, std::nothrow) == nullptr, 11);
  // The same for a small size, whose class ran out above: new's own slow
  // entry (the allocation word is empty) throws where malloc returns null.
  threw = false;
  try {
    void* volatile p = ::operator new(48);
    (void)p;
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHILD_CHECK(threw, 15);
  CHILD_CHECK(::operator new(48, std::nothrow) == nullptr, 16);

  // Give everything back; under the same limit the same memory serves again.
  for (void* p : small) release(p);
  for (void* p : large) release(p);
  exhaust(alloc, kMiB, again, &err);
  std::fprintf(stderr, "large blocks before the limit: %zu, after freeing them: %zu\n", large_count,
               again.size());
  CHILD_CHECK(again.size() + 8 >= large_count, 12);  // a few MiB may sit in caches
  for (void* p : again) release(p);

  // Raise the limit: allocation works beyond the old ceiling.
  CHILD_CHECK(set_address_space_limit(RLIM_INFINITY), 13);
  std::vector<void*> beyond;
  for (std::size_t i = 0; i < large_count + 64; ++i) {
    void* p = alloc(kMiB);
    CHILD_CHECK(p != nullptr, 14);
    std::memset(p, 1, kMiB);
    beyond.push_back(p);
  }
  for (void* p : beyond) release(p);
}

[[noreturn]] void child_body(Alloc alloc, Free release) {
  alarm(60);  // a deadlock turns into SIGALRM, seen by the parent
  try {
    child_steps(alloc, release);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child: unexpected exception: %s\n", e.what());
    std::_Exit(20);
  }
  std::_Exit(0);
}

void run_in_child(Alloc alloc, Free release) {
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) child_body(alloc, release);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_FALSE(WIFSIGNALED(status)) << "child killed by signal " << WTERMSIG(status)
                                    << (WTERMSIG(status) == SIGALRM ? " (deadlock: 60 s alarm)" : "");
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's message above";
}

TEST(OutOfMemory, StrataApiFailsCleanlyAndRecovers) { run_in_child(strata_malloc, strata_free); }

TEST(OutOfMemory, MallocFailsCleanlyAndRecovers) { run_in_child(std::malloc, std::free); }

TEST(OutOfMemory, RepeatedFailuresDoNotLeakOrDeadlock) {
  // Many failing calls in a row must not consume anything.
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);
    CHILD_CHECK(set_address_space_limit(address_space_in_use() + 64 * kMiB), 2);
    for (int i = 0; i < 100000; ++i) {
      errno = 0;
      void* p = std::malloc(512 * kMiB);
      CHILD_CHECK(p == nullptr && errno == ENOMEM, 3);
    }
    void* p = std::malloc(16 * kMiB);  // what was under the limit is still there
    CHILD_CHECK(p != nullptr, 4);
    std::free(p);
    std::_Exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
