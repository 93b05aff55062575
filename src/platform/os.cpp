#include "platform/os.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char** environ;

namespace strata::detail {

namespace {
std::atomic<long> g_injected_map_failures{0};

bool take_injected_failure() noexcept {
  long n = g_injected_map_failures.load(std::memory_order_relaxed);
  while (n != 0) {
    if (n < 0) return true;
    if (g_injected_map_failures.compare_exchange_weak(n, n - 1, std::memory_order_relaxed))
      return true;
  }
  return false;
}
}  // namespace

void* os_map(std::size_t bytes, std::size_t alignment) noexcept {
  if (take_injected_failure()) return nullptr;
  // Over-map by the alignment and trim both ends: one reservation, no retry loop.
  std::size_t padded = bytes + (alignment > 4096 ? alignment : 0);
  if (padded < bytes) return nullptr;
  int saved_errno = errno;  // a failed mmap must not leak its errno into the caller's view
  void* raw = mmap(nullptr, padded, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved_errno;
  if (raw == MAP_FAILED) return nullptr;
  auto start = reinterpret_cast<std::uintptr_t>(raw);
  auto aligned = (start + alignment - 1) & ~(std::uintptr_t(alignment) - 1);
  if (aligned > start) munmap(raw, aligned - start);
  std::uintptr_t end = start + padded, used_end = aligned + bytes;
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
  return reinterpret_cast<void*>(aligned);
}

void os_unmap(void* address, std::size_t bytes) noexcept { munmap(address, bytes); }

void os_decommit(void* address, std::size_t bytes) noexcept {
  int saved_errno = errno;
  madvise(address, bytes, MADV_DONTNEED);
  errno = saved_errno;
}

void os_advise_hugepage(void* address, std::size_t bytes) noexcept {
  int saved_errno = errno;
  madvise(address, bytes, MADV_HUGEPAGE);
  errno = saved_errno;
}

void os_inject_map_failures(long count) noexcept {
  g_injected_map_failures.store(count, std::memory_order_relaxed);
}

void os_write_stderr(const char* text) noexcept {
  std::size_t n = 0;
  while (text[n]) ++n;
  int saved_errno = errno;
  while (n > 0) {
    ssize_t w = write(2, text, n);
    if (w <= 0) break;
    text += w;
    n -= static_cast<std::size_t>(w);
  }
  errno = saved_errno;
}

void os_write_stderr_u64(std::uint64_t value, int base) noexcept {
  char buffer[24];
  char* p = buffer + sizeof(buffer) - 1;
  *p = '\0';
  do {
    unsigned digit = static_cast<unsigned>(value % static_cast<unsigned>(base));
    *--p = static_cast<char>(digit < 10 ? '0' + digit : 'a' + digit - 10);
    value /= static_cast<unsigned>(base);
  } while (value != 0);
  if (base == 16) {
    *--p = 'x';
    *--p = '0';
  }
  os_write_stderr(p);
}

void os_fatal(const char* message) noexcept {
  os_write_stderr("strata: ");
  os_write_stderr(message);
  os_write_stderr("\n");
  abort();
}

std::uint64_t os_random_u64() noexcept {
  std::uint64_t seed = 0x9e3779b97f4a7c15ull;
  if (auto* bytes = reinterpret_cast<const void*>(getauxval(AT_RANDOM))) {
    std::uint64_t random[2];  // 16 bytes with no alignment promise: copy, do not cast
    std::memcpy(random, bytes, sizeof(random));
    seed ^= random[0] ^ (random[1] << 1);
  }
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  seed ^= static_cast<std::uint64_t>(now.tv_nsec) * 0xbf58476d1ce4e5b9ull;
  seed ^= reinterpret_cast<std::uintptr_t>(&seed);
  // splitmix64 finaliser: spreads the few varying bits over the whole word.
  seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
  seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
  return seed ^ (seed >> 31);
}

void os_futex_wait(volatile int* word, int expected) noexcept {
  int saved_errno = errno;
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
  errno = saved_errno;
}

void os_futex_wake(volatile int* word, int count) noexcept {
  int saved_errno = errno;
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
  errno = saved_errno;
}

const char* os_getenv(const char* name) noexcept {
  char** env = environ;
  if (env == nullptr) return nullptr;
  for (; *env != nullptr; ++env) {
    const char* entry = *env;
    const char* n = name;
    while (*n != '\0' && *entry == *n) {
      ++entry;
      ++n;
    }
    if (*n == '\0' && *entry == '=') return entry + 1;
  }
  return nullptr;
}

std::size_t os_resident_bytes() noexcept {
  int saved_errno = errno;
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errno = saved_errno;
    return 0;
  }
  char buffer[128];
  ssize_t n = read(fd, buffer, sizeof(buffer) - 1);
  close(fd);
  errno = saved_errno;
  if (n <= 0) return 0;
  buffer[n] = '\0';
  // Second field: resident pages.
  const char* p = buffer;
  while (*p != ' ' && *p != '\0') ++p;
  std::size_t pages = 0;
  while (*p == ' ') ++p;
  while (*p >= '0' && *p <= '9') pages = pages * 10 + static_cast<std::size_t>(*p++ - '0');
  return pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace strata::detail
