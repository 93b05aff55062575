// The test side of strata/pool_steps.hpp: what a thread does when it
// reaches a pool's hand-over point, in programs built with
// -DSTRATA_POOL_STEP_HOOK=1 (pool_step_hook.cpp defines the hook).
//
// Two uses, which combine:
//  * perturbation: at each step a thread yields, or sleeps for a random
//    time, with given odds, so that a thread is often preempted exactly
//    between two halves of a hand-over (on one CPU, under `taskset -c 0`,
//    that is where the scheduler switches);
//  * an observer: a function called at every step before the perturbation,
//    which tests use to force one interleaving (park a thread at a step
//    until another thread has done something).
// Hits are counted per step, so a test can prove that its threads really
// went through the points it meant to stretch.
#pragma once

#include <strata/pool_steps.hpp>

#include <cstdint>

namespace pool_steps_test {

using strata::detail::pool_step;

struct perturbation {
  std::uint64_t seed = 1;
  unsigned yield_per_mille = 0;  // odds of a sched_yield at a step
  unsigned sleep_per_mille = 0;  // odds of a sleep at a step (checked after the yield)
  unsigned max_sleep_us = 0;     // sleeps last 1 .. max_sleep_us microseconds
};

// STRATA_POOL_STEPS="seed=N,yield=P,sleep=Q,max_us=U" (P, Q per mille),
// each field optional; `fallback` where the variable or a field is absent.
perturbation perturbation_from_environment(perturbation fallback);
// Applies to every thread from its next step (threads draw their own random
// sequence from the seed and the order in which they first reach a step).
void set_perturbation(const perturbation& p);

using observer = void (*)(pool_step step);
void set_observer(observer o);  // nullptr: none

std::uint64_t hits(pool_step step);
void reset_hits();
const char* step_name(pool_step step);

}  // namespace pool_steps_test
