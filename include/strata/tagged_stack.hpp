// strata/tagged_stack.hpp — a lock-free LIFO of free slots (Treiber stack)
// whose head carries a version tag beside the pointer.
//
// The head is 16 bytes {pointer, tag}, swapped as one unit with a
// double-width compare-and-swap (x86-64 `lock cmpxchg16b`). Every successful
// push or pop increments the tag, so a pop that read head = {A, t} and then
// was delayed while other threads popped A, popped B and pushed A back sees
// head = {A, t+3} and fails: ABA cannot install a stale `next` (seed 003 §4).
//
// Nodes are `tagged_node`s: the link is a word of its own (concurrent_pool
// keeps one per slot in an array at the start of the slot's chunk, apart
// from the object) never written by the object's user, and it is read
// and written only atomically. A pop reads `top->next` while another thread
// may already have popped `top` (the value is then stale, and the CAS
// fails); that read is an atomic load of memory that stays mapped as long
// as the pool lives, so it can neither fault nor race.
//
// Contention: when threads push and pop at once (seed 003's producer and
// consumer), every operation moves the head's cache line between cores and
// many CASes fail. After a failed CAS a thread therefore backs off (1, 2,
// 4 .. 128 `pause`s, doubling per failure of the same operation) before it
// retries, so the other side finishes a run of operations on a line that
// stays in its cache instead of both retrying in lockstep. And each
// operation first asks for the head's line in exclusive state
// (`prefetchw`, where CPUID says the CPU has it), so the CAS after the
// read needs no second transfer to upgrade a shared copy. Both change only
// timing, never what a CAS decides. In seed 003's test pinned to two cores
// they took allocation from about 115 to 60 cycles and free from about 60
// to 50 (docs/design.md).
//
// Code generation: the CAS is inline assembly, so it is one `lock
// cmpxchg16b` whatever the compiler flags (no -mcx16 needed, no libatomic
// call that might take a lock). Under ThreadSanitizer, which cannot see
// inside assembly, the same operations use the 16-byte __atomic builtins
// that TSan intercepts.
#ifndef STRATA_TAGGED_STACK_HPP
#define STRATA_TAGGED_STACK_HPP

#include <atomic>
#include <cpuid.h>
#include <cstdint>
#include <immintrin.h>

#if !defined(__x86_64__)
#error "strata's lock-free pool needs x86-64 (cmpxchg16b)"
#endif

#if defined(__SANITIZE_THREAD__)
#define STRATA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRATA_TSAN 1
#endif
#endif
#ifndef STRATA_TSAN
#define STRATA_TSAN 0
#endif

namespace strata::detail {

// PREFETCHW (CPUID 0x80000001 ECX bit 8): every AMD64 CPU, Intel since
// Broadwell. Read once at start-up; until then (zero) the hint is skipped.
inline bool cpu_has_prefetchw() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001u, &a, &b, &c, &d) != 0 && (c & (1u << 8)) != 0;
}
inline const bool g_cpu_has_prefetchw = cpu_has_prefetchw();

struct tagged_node {
  std::atomic<tagged_node*> next;
};

class tagged_stack {
 public:
  constexpr tagged_stack() noexcept = default;
  tagged_stack(const tagged_stack&) = delete;
  tagged_stack& operator=(const tagged_stack&) = delete;

  // Pushes the chain first -> ... -> last (last->next is overwritten).
  void push_chain(tagged_node* first, tagged_node* last) noexcept {
    prefetch_head_for_write();
    head expected = load();
    for (backoff wait;; wait()) {
      last->next.store(expected.top, std::memory_order_relaxed);
      if (compare_exchange(expected, {first, expected.tag + 1})) return;
    }
  }

  void push(tagged_node* n) noexcept { push_chain(n, n); }

  // nullptr when empty.
  tagged_node* pop() noexcept {
    prefetch_head_for_write();
    head expected = load();
    for (backoff wait;; wait()) {
      if (expected.top == nullptr) return nullptr;
      // Possibly stale (see above); the tag makes the CAS reject it.
      tagged_node* next = expected.top->next.load(std::memory_order_relaxed);
      if (compare_exchange(expected, {next, expected.tag + 1})) return expected.top;
    }
  }

  bool empty() const noexcept { return load().top == nullptr; }

  // True when the compare-and-swap compiles to an inline cmpxchg16b (always,
  // outside TSan builds); the tests check the instruction in the binary too.
  static constexpr bool uses_inline_cmpxchg16b = !STRATA_TSAN;

 private:
  struct alignas(16) head {
    tagged_node* top;
    std::uint64_t tag;
  };

  void prefetch_head_for_write() const noexcept {
    if (g_cpu_has_prefetchw) __asm__("prefetchw %0" : : "m"(head_));
  }

  // Exponential backoff between the attempts of one operation.
  class backoff {
   public:
    void operator()() noexcept {
      for (unsigned i = 0; i < pauses_; ++i) _mm_pause();
      if (pauses_ < max_pauses) pauses_ *= 2;
    }

   private:
    static constexpr unsigned max_pauses = 128;
    unsigned pauses_ = 1;
  };

#if STRATA_TSAN
  using wide = unsigned __int128;
  static wide pack(head h) noexcept {
    return static_cast<wide>(reinterpret_cast<std::uintptr_t>(h.top)) | (static_cast<wide>(h.tag) << 64);
  }
  static head unpack(wide w) noexcept {
    return {reinterpret_cast<tagged_node*>(static_cast<std::uintptr_t>(w)), static_cast<std::uint64_t>(w >> 64)};
  }
  head load() const noexcept {
    return unpack(__atomic_load_n(reinterpret_cast<const wide*>(&head_), __ATOMIC_ACQUIRE));
  }
  bool compare_exchange(head& expected, head desired) noexcept {
    wide e = pack(expected);
    bool ok = __atomic_compare_exchange_n(reinterpret_cast<wide*>(&head_), &e, pack(desired), false,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    expected = unpack(e);
    return ok;
  }
#else
  head load() const noexcept {
    // Two 8-byte loads, not one 16-byte load (x86-64 has none that is
    // guaranteed atomic without a locked write). A torn pair {new top, old
    // tag} never equals the current head, whose tag is newer, so the CAS
    // just fails and returns the current value.
    head h;
    h.tag = __atomic_load_n(&head_.tag, __ATOMIC_ACQUIRE);
    h.top = __atomic_load_n(&head_.top, __ATOMIC_ACQUIRE);
    return h;
  }
  bool compare_exchange(head& expected, head desired) noexcept {
    // lock cmpxchg16b: compares rdx:rax with the 16 bytes at the address;
    // equal -> stores rcx:rbx, ZF=1; else loads them into rdx:rax, ZF=0.
    // A locked instruction is a full barrier on x86, hence acq_rel.
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(head_), "+a"(expected.top), "+d"(expected.tag)
                         : "b"(desired.top), "c"(desired.tag)
                         : "memory");
    return ok;
  }
#endif

  head head_{nullptr, 0};
};

}  // namespace strata::detail

#endif
