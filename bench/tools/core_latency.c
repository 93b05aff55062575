/* How far apart two CPUs are: the round trip of one cache line between two
 * threads pinned to the first two CPUs this process may run on.
 *
 *   core_latency
 *
 * prints one JSON line: {"workload":"core_latency","metric":"core_round_trip_ns",
 * "value":<median ns per round trip>,"cpus":"<a>,<b>"}; with fewer than two
 * CPUs, no line.
 *
 * Why bench/run asks: on a virtual machine the host places the two vCPUs
 * where it likes and moves them. On the 2-vCPU machines this suite runs on,
 * a round trip took either about 60 ns (the vCPUs on cores sharing a cache)
 * or about 330 ns (on cores that do not), switching every few hundred
 * milliseconds to minutes. Every workload whose threads hand memory to each
 * other (a free of another thread's block) ran 1.5-4.4x slower
 * in the far placement, with every allocator. bench/run probes before and
 * after each run of such a workload, so the report can say in which
 * placement each repetition ran (docs/benchmarks.md, *Placement*). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kBatches = 9, kTripsPerBatch = 2000 };

/* The line that travels: one side writes an odd number, the other answers
 * with the next even one. Alone on its line. */
static _Alignas(64) _Atomic long g_turn;
static int g_cpus[2];

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void* answer(void* unused) {
  (void)unused;
  pin(g_cpus[1]);
  for (long i = 1; i < 2L * kBatches * kTripsPerBatch; i += 2) {
    while (atomic_load_explicit(&g_turn, memory_order_acquire) != i) {
    }
    atomic_store_explicit(&g_turn, i + 1, memory_order_release);
  }
  return NULL;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(void) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) g_cpus[found++] = cpu;
  if (found < 2) return 0;  // one CPU: nothing to measure

  pthread_t other;
  if (pthread_create(&other, NULL, answer, NULL) != 0) return 1;
  pin(g_cpus[0]);
  /* The median batch: a batch in which either thread lost its CPU to
   * another process does not count. */
  double batches[kBatches];
  long turn = 0;
  for (int b = 0; b < kBatches; ++b) {
    double start = now_ns();
    for (int k = 0; k < kTripsPerBatch; ++k, turn += 2) {
      atomic_store_explicit(&g_turn, turn + 1, memory_order_release);
      while (atomic_load_explicit(&g_turn, memory_order_acquire) != turn + 2) {
      }
    }
    batches[b] = (now_ns() - start) / kTripsPerBatch;
  }
  pthread_join(other, NULL);
  qsort(batches, kBatches, sizeof batches[0], by_value);
  printf("{\"workload\":\"core_latency\",\"metric\":\"core_round_trip_ns\",\"value\":%.1f,"
         "\"unit\":\"ns\",\"cpus\":\"%d,%d\"}\n",
         batches[kBatches / 2], g_cpus[0], g_cpus[1]);
  return 0;
}
