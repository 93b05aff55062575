// Symbol visibility of strata's own globals.
#pragma once

// Marks the declaration of an internal global: -fvisibility=hidden covers
// definitions only, and a declaration the compiler believes preemptible is
// reached through the GOT (one more load on every fast-path access).
#define STRATA_INTERNAL __attribute__((visibility("hidden")))
