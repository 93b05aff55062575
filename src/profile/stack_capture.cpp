#include "profile/stack_capture.h"

#include <pthread.h>

// Under valgrind memcheck, the words of a frame-pointer chain may be stack
// memory the program never wrote (a program without frame pointers): they
// are declared defined before they are looked at. The client request is a
// few instructions of no effect outside valgrind; the header comes with
// Debian's valgrind package, and without it nothing changes.
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define STRATA_STACK_WORDS_DEFINED(address, bytes) VALGRIND_MAKE_MEM_DEFINED_IF_ADDRESSABLE(address, bytes)
#endif
#endif
#ifndef STRATA_STACK_WORDS_DEFINED
#define STRATA_STACK_WORDS_DEFINED(address, bytes) ((void)0)
#endif

extern "C" void* __libc_stack_end;  // ld.so: the main thread's initial stack pointer

namespace strata::detail {

namespace {

// A frame larger than this ends the walk (a wrong pointer is more likely
// than a 1 MiB frame).
constexpr std::uintptr_t kMaxFrameBytes = std::uintptr_t{1} << 20;

// Code lives above the lowest address Linux maps by default (vm.mmap_min_addr
// is 64 KiB) and below the end of the 47-bit user address space.
constexpr std::uintptr_t kLowestCode = std::uintptr_t{1} << 16;
constexpr std::uintptr_t kUserSpaceEnd = std::uintptr_t{1} << 47;

// The end (highest address) of the calling thread's stack, or 0 when it
// cannot be told. glibc places a thread's descriptor (pthread_self) at the
// top of the thread's stack block, also for stacks the program supplies; the
// main thread's stack ends at __libc_stack_end. A stack of another kind (a
// coroutine's, a signal stack) gives 0: only the call site is recorded.
std::uintptr_t stack_end(std::uintptr_t sp) noexcept {
  auto descriptor = reinterpret_cast<std::uintptr_t>(pthread_self());
  if (descriptor > sp && descriptor - sp < (std::uintptr_t{1} << 32)) return descriptor;
  auto main_end = reinterpret_cast<std::uintptr_t>(__libc_stack_end);
  if (main_end > sp && main_end - sp < (std::uintptr_t{1} << 34)) return main_end;
  return 0;
}

}  // namespace

// Reads the stack above its own frame: not instrumented by the sanitizers
// (the words read are saved registers, never their redzones, but ASan cannot
// tell).
__attribute__((noinline, no_sanitize("address", "thread", "undefined")))
std::uint32_t capture_stack(CallSite site, void** frames, std::uint32_t max) noexcept {
  if (max == 0) return 0;
  frames[0] = const_cast<void*>(site.return_address);
  std::uint32_t depth = 1;
  // Our own frame bounds the program's from below: anything lower is not a
  // frame of a caller.
  auto low = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  std::uintptr_t end = stack_end(low);
  if (end == 0) return depth;
  auto cursor = reinterpret_cast<std::uintptr_t>(site.frame);
  STRATA_STACK_WORDS_DEFINED(&cursor, sizeof cursor);  // %rbp may hold anything
  bool first = true;
  while (depth < max) {
    // The first step may cross strata's own frames (small); every later one
    // is one of the program's frames.
    if (cursor <= low || (cursor & 7) != 0 || cursor + 16 > end ||
        (!first && cursor - low > kMaxFrameBytes))
      break;
    auto* frame = reinterpret_cast<const std::uintptr_t*>(cursor);
    STRATA_STACK_WORDS_DEFINED(frame, 2 * sizeof(std::uintptr_t));
    std::uintptr_t ret = frame[1];
    // Not code: the outermost frame (0), or a word of a program without
    // frame pointers (small numbers, stack addresses, beyond user space).
    if (ret < kLowestCode || ret >= kUserSpaceEnd || (ret >= low && ret < end)) break;
    // When strata itself keeps frame pointers (sanitizer builds), %rbp in
    // the entry point is the entry point's own frame: its return address is
    // the call site, already recorded.
    if (!(first && ret == reinterpret_cast<std::uintptr_t>(site.return_address)))
      frames[depth++] = reinterpret_cast<void*>(ret);
    first = false;
    low = cursor;
    cursor = frame[0];
  }
  return depth;
}

}  // namespace strata::detail
