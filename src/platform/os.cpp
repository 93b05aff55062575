#include "platform/os.h"

#include "platform/digits.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <ctime>
#include <elf.h>
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

namespace {
// madvise without touching the caller's errno; true when the kernel agreed.
bool advise(void* address, std::size_t bytes, int advice) noexcept {
  int saved_errno = errno;
  bool ok = madvise(address, bytes, advice) == 0;
  errno = saved_errno;
  return ok;
}
}  // namespace

void os_decommit(void* address, std::size_t bytes) noexcept { advise(address, bytes, MADV_DONTNEED); }

void os_advise_hugepage(void* address, std::size_t bytes) noexcept { advise(address, bytes, MADV_HUGEPAGE); }

void os_advise_no_hugepage(void* address, std::size_t bytes) noexcept { advise(address, bytes, MADV_NOHUGEPAGE); }

void os_advise_no_dump(void* address, std::size_t bytes) noexcept { advise(address, bytes, MADV_DONTDUMP); }

bool os_advise_wipe_on_fork(void* address, std::size_t bytes) noexcept {
#ifdef MADV_WIPEONFORK
  return advise(address, bytes, MADV_WIPEONFORK);
#else
  (void)address;
  (void)bytes;
  return false;
#endif
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
  char* p = digits_of(value, static_cast<unsigned>(base), buffer);
  char text[28];
  std::size_t n = 0;
  if (base == 16) {
    text[n++] = '0';
    text[n++] = 'x';
  }
  while (p < buffer + sizeof(buffer)) text[n++] = *p++;
  text[n] = '\0';
  os_write_stderr(text);
}

void os_fatal(const char* message) noexcept {
  os_write_stderr("strata: ");
  os_write_stderr(message);
  os_write_stderr("\n");
  abort();
}

bool os_cpu_has_popcnt() noexcept {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  return (ecx & bit_POPCNT) != 0;
#else
  return false;
#endif
}

std::uint64_t os_random_u64() noexcept {
  std::uint64_t seed = 0x9e3779b97f4a7c15ull;
  if (auto* bytes = reinterpret_cast<const void*>(getauxval(AT_RANDOM))) {
    std::uint64_t random[2];  // 16 bytes with no alignment promise: copy, do not cast
    std::memcpy(random, bytes, sizeof(random));
    seed ^= random[0] ^ (random[1] << 1);
  }
  // The time stamp counter rather than clock_gettime: as good a varying
  // input, and no libc code to fault in (see os_monotonic_coarse_ns).
  seed ^= __builtin_ia32_rdtsc() * 0xbf58476d1ce4e5b9ull;
  seed ^= reinterpret_cast<std::uintptr_t>(&seed);
  // splitmix64 finaliser: spreads the few varying bits over the whole word.
  seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
  seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
  return seed ^ (seed >> 31);
}

// --- the coarse monotonic clock, straight from the vDSO ----------------------
//
// libc's clock_gettime makes the same vDSO call through one more function,
// but that function sits among libc's time and date code, which a program
// that never asks for the time never touches: calling it would fault in a
// 64 KiB window of libc text (the kernel maps page-cache pages around a
// fault), the largest single item of strata's start-up cost after libstdc++.

namespace {

using ClockGettime = int (*)(clockid_t, timespec*);

bool same_name(const char* a, const char* b) noexcept {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

// __vdso_clock_gettime from the vDSO's dynamic symbol table (the kernel
// links it with a SysV hash table, whose second word counts the symbols), or
// nullptr when there is no vDSO.
ClockGettime find_vdso_clock_gettime() noexcept {
  auto base = static_cast<std::uintptr_t>(getauxval(AT_SYSINFO_EHDR));
  if (base == 0) return nullptr;
  const auto* header = reinterpret_cast<const Elf64_Ehdr*>(base);
  const auto* program = reinterpret_cast<const Elf64_Phdr*>(base + header->e_phoff);
  std::uintptr_t bias = 0;
  bool loaded = false;
  const Elf64_Dyn* dynamic = nullptr;
  for (unsigned i = 0; i < header->e_phnum; ++i) {
    if (program[i].p_type == PT_LOAD && !loaded) {
      bias = base + program[i].p_offset - program[i].p_vaddr;
      loaded = true;
    } else if (program[i].p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const Elf64_Dyn*>(base + program[i].p_offset);
    }
  }
  if (!loaded || dynamic == nullptr) return nullptr;
  const Elf64_Sym* symbols = nullptr;
  const char* names = nullptr;
  const Elf64_Word* hash = nullptr;
  for (const Elf64_Dyn* entry = dynamic; entry->d_tag != DT_NULL; ++entry) {
    if (entry->d_tag == DT_SYMTAB) symbols = reinterpret_cast<const Elf64_Sym*>(bias + entry->d_un.d_ptr);
    else if (entry->d_tag == DT_STRTAB) names = reinterpret_cast<const char*>(bias + entry->d_un.d_ptr);
    else if (entry->d_tag == DT_HASH) hash = reinterpret_cast<const Elf64_Word*>(bias + entry->d_un.d_ptr);
  }
  if (symbols == nullptr || names == nullptr || hash == nullptr) return nullptr;
  for (Elf64_Word i = 0; i < hash[1]; ++i) {
    const Elf64_Sym& symbol = symbols[i];
    if (ELF64_ST_TYPE(symbol.st_info) == STT_FUNC && symbol.st_shndx != SHN_UNDEF &&
        same_name(names + symbol.st_name, "__vdso_clock_gettime"))
      return reinterpret_cast<ClockGettime>(bias + symbol.st_value);
  }
  return nullptr;
}

int libc_clock_gettime(clockid_t clock, timespec* now) { return clock_gettime(clock, now); }

std::atomic<ClockGettime> g_clock_gettime{nullptr};  // found on first use

}  // namespace

std::uint64_t os_monotonic_coarse_ns() noexcept {
  ClockGettime read_clock = g_clock_gettime.load(std::memory_order_relaxed);
  if (__builtin_expect(read_clock == nullptr, 0)) {
    // Threads that race here all find the same function.
    read_clock = find_vdso_clock_gettime();
    if (read_clock == nullptr) read_clock = libc_clock_gettime;
    g_clock_gettime.store(read_clock, std::memory_order_relaxed);
  }
  timespec now{};
  read_clock(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(now.tv_nsec);
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
