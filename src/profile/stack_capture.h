// The call stack of a sampled allocation, without malloc, safe in any thread
// and in a fork child.
//
// strata's own functions have no frame pointers, and its slow paths use
// %rbp as an ordinary register: a frame-pointer walk from inside strata
// loses the program's frames (checked with objdump: the chain broke in
// allocate_at_sampling_point). So the allocator's entry point (malloc,
// operator new, ...) hands its call site down: its return address (the
// program's call site) and the frame pointer the program had then, which the
// entry point leaves untouched. From there the walk follows the program's
// chain of saved frame pointers, validating every step (strictly
// increasing, 8-aligned, less than 1 MiB apart, inside the thread's stack),
// so a program built without frame pointers gives a short stack, never a
// crash. docs/profiling.md says what is lost in such programs.
#pragma once

#include <cstdint>

namespace strata::detail {

inline constexpr std::uint32_t kMaxStackFrames = 64;

// Where the program called the allocator.
struct CallSite {
  const void* return_address;  // into the program, after its call of malloc
  const void* frame;           // %rbp at that call: the program's frame pointer
};

// %rbp of the function this is inlined into: in an entry point, which does
// not touch %rbp, the caller's frame pointer. One register move.
__attribute__((always_inline)) inline const void* frame_pointer_register() noexcept {
  const void* fp;
  asm("mov %%rbp, %0" : "=r"(fp));
  return fp;
}

// Evaluated inside an entry point (inlined, or as a default argument).
#define STRATA_CALL_SITE                                                                  \
  ::strata::detail::CallSite {                                                            \
    __builtin_return_address(0), ::strata::detail::frame_pointer_register()                \
  }

// Writes up to `max` return addresses, innermost first (the call site
// first), and returns their number (at least 1).
std::uint32_t capture_stack(CallSite site, void** frames, std::uint32_t max) noexcept;

}  // namespace strata::detail
