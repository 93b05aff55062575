// strata/pool_steps.hpp — the hand-over points of the shared pools, named,
// so that tests can stretch or force the interleavings around them.
//
// A hand-over point is where one thread gives something to another: a
// thread slot (claimed, returned at exit), a magazine or batch (traded with
// a depot under its lock), a per-thread cache (made, then found by the
// slot's next owner). Races live there, and a race that needs a thread to
// be preempted at one exact instruction shows up once in a thousand CI
// runs. STRATA_POOL_STEP(name) marks such a point.
//
// In every normal build the macro expands to nothing: no call, no load, not
// even an argument is evaluated. A test program built with
// -DSTRATA_POOL_STEP_HOOK=1 defines strata::detail::pool_step_hook, which
// may yield, sleep, count, or block the thread until another one has
// reached some other step (tests/pools/pool_step_hook.hpp). Every
// translation unit of such a program must be built with the same setting
// (the pools are inline functions; two settings in one program would be
// two definitions of one function).
#ifndef STRATA_POOL_STEPS_HPP
#define STRATA_POOL_STEPS_HPP

#ifndef STRATA_POOL_STEP_HOOK
#define STRATA_POOL_STEP_HOOK 0
#endif

namespace strata::detail {

enum class pool_step : unsigned char {
  // thread_slots.hpp
  slot_claim_locked,    // a new thread picked its slot, registry lock held
  slot_claimed,         // ... lock released, before the exit key is set
  slot_exiting,         // at exit: the thread stopped using its slot, still holds it
  slot_return_locked,   // ... the slot goes back, registry lock held
  slot_returned,        // ... the slot is free; the thread still runs (other destructors)
  // thread_cached_pool.hpp
  cache_publish,        // a cache and its magazines are made, not yet in the slot's entry
  cache_refill,         // allocate's slow path, before it looks at `previous`
  cache_spill,          // deallocate's slow path, likewise
  cache_traded,         // a depot exchange returned, the cache not yet updated
  // magazine_depot.hpp and batch_depot.hpp: inside the depot's lock
  depot_take_locked,    // a magazine / batch / object is about to leave the depot
  depot_give_locked,    // one is about to join it
  // per_type_pool.hpp
  cache_flush,          // a thread's exit hook, before its magazines go back
  count_                // number of steps (not a step)
};

#if STRATA_POOL_STEP_HOOK
// Defined by the test program. Called on the thread that reaches `step`.
void pool_step_hook(pool_step step) noexcept;
#define STRATA_POOL_STEP(name) ::strata::detail::pool_step_hook(::strata::detail::pool_step::name)
#else
#define STRATA_POOL_STEP(name) static_cast<void>(0)
#endif

}  // namespace strata::detail

#endif
