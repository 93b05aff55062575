// The only door to the operating system. Nothing outside src/platform/
// includes <sys/mman.h> or makes a system call; every function here is
// safe to call from inside malloc (none of them allocates).
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::detail {

// Maps `bytes` of fresh, zeroed, read-write memory aligned to `alignment`
// (a power of two, at least the OS page size). Returns nullptr when the OS
// refuses (or the failure hook says so). Never commits physical pages.
void* os_map(std::size_t bytes, std::size_t alignment) noexcept;

// Gives pages back for good.
void os_unmap(void* address, std::size_t bytes) noexcept;

// Drops the physical pages behind a range; the range stays mapped and reads
// as zero afterwards (MADV_DONTNEED semantics).
void os_decommit(void* address, std::size_t bytes) noexcept;

// Asks for transparent huge pages over a range, or keeps a range on small
// pages even where the system's THP mode is "always" (best effort).
void os_advise_hugepage(void* address, std::size_t bytes) noexcept;
void os_advise_no_hugepage(void* address, std::size_t bytes) noexcept;
// Leaves a range out of core dumps (MADV_DONTDUMP).
void os_advise_no_dump(void* address, std::size_t bytes) noexcept;

// Asks the kernel to hand a fork child zero-filled pages over a range
// (MADV_WIPEONFORK, Linux 4.14). False when the kernel refuses.
bool os_advise_wipe_on_fork(void* address, std::size_t bytes) noexcept;

// Test hook: make the next `count` calls of os_map fail as if the OS had run
// out of memory (count < 0: fail until reset with 0).
void os_inject_map_failures(long count) noexcept;

// Writes a message to stderr with write(2); no buffering, no allocation.
void os_write_stderr(const char* text) noexcept;
void os_write_stderr_u64(std::uint64_t value, int base) noexcept;

// Prints "strata: <message>" and aborts the process.
[[noreturn]] void os_fatal(const char* message) noexcept;

// 64 random bits from the kernel (AT_RANDOM, mixed with time and address).
std::uint64_t os_random_u64() noexcept;

// Whether the CPU has the popcnt instruction (x86-64's baseline does not;
// every x86-64 CPU since 2008-2011 does).
bool os_cpu_has_popcnt() noexcept;

// CLOCK_MONOTONIC_COARSE in nanoseconds, read through the vDSO (no system
// call, and no libc time code touched).
std::uint64_t os_monotonic_coarse_ns() noexcept;

// Blocks while *word == expected (futex wait); wakes up to `count` waiters.
void os_futex_wait(volatile int* word, int expected) noexcept;
void os_futex_wake(volatile int* word, int count) noexcept;

// Reads an environment variable without allocating; nullptr when unset or
// when the environment is not set up yet (very early in process start).
const char* os_getenv(const char* name) noexcept;

// Bytes of physical memory the process holds now (from /proc/self/statm).
std::size_t os_resident_bytes() noexcept;

}  // namespace strata::detail
