/* What a burst costs per block in each way of keeping free blocks, on the
 * machine it runs on, without an allocator around it.
 *
 *   burst_chains [blocks]        (default 5000; pin it: taskset -c 1)
 *
 * A burst: malloc `blocks` blocks of 16 B one after another, then free them
 * in the same order (seed 000's new/delete, the bulk shapes in order).
 * Each "malloc" and "free" is a call into a noinline function over the
 * same metadata an allocator keeps, so that what differs between the rows
 * is only how free blocks are kept:
 *   - list: a singly linked list threaded through the blocks with a length
 *     (tcmalloc's thread cache, glibc's tcache): free stores the old head
 *     into the block, malloc loads the block's link;
 *   - bits: strata's shape (frontend/thread_cache.h): malloc takes the
 *     lowest bit of an allocation word; free finds the block's page entry
 *     and span, computes its bit with one multiply, sets it (load, bts,
 *     store: the old bit is the double-free check) and counts the block
 *     back (the span's countdown);
 *   - and three frees of the bits shape that each leave something out:
 *     the bit itself (countdown only), the old bit (a memory-destination
 *     `or`), or the read-modify-write (the old bit read, then `or` to
 *     memory);
 *   - and strata's free over bits laid out eight ways interleaved (block
 *     b's bit in word b % 8, bit b / 8; the same instructions, the word
 *     from the top 3 bits of the product's low half): consecutive blocks'
 *     bits sit in different words, so a free in address order does not
 *     load the word the free before it stored. Only the free is modelled:
 *     an allocator that hands out blocks in address order over such a
 *     layout must gather each allocation word from eight words of bits at
 *     its refill;
 *   - and the free tried in session 24: the bit's mask added with `xadd`
 *     (one read-modify-write instruction that hands back the old word);
 *   - and an empty free: the call through a function pointer alone, the
 *     floor under every bits row (3.5-3.8 ticks on AMD family 26; the list
 *     rows make direct calls). The rows differ by less than the floor, and
 *     the differences move with the code's layout: in two builds of this
 *     file in session 24 strata's free took 5.2 and 4.6 ticks, the
 *     interleaved row 4.7 and 4.9. Read the rows as hints; the engine's own
 *     runs decide (docs/design.md, *2026-12-07 (session 24)*: in the
 *     engine the chain through the word was real, a fifth of a free in
 *     order).
 * Prints TSC ticks per call (median over rounds; the variants interleave
 * within each round). Why it exists: in order, consecutive frees set bits
 * of one word, so each free's load waits for the store of the free before
 * it; a list's free stores a pointer it was handed and carries no such
 * chain from one call to the next (docs/design.md, *Measurements*,
 * *2026-12-07 (session 19)*). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

enum { kBlockSize = 16, kPageShift = 13, kBlocksPerSpan = (1 << kPageShift) / kBlockSize, kRounds = 9 };

/* --- the list shape ----------------------------------------------------- */

struct List {
  void* head;
  uint32_t length;
  uint32_t max_length;
};
static __thread struct List* t_list __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) static void* list_malloc(void) {
  struct List* list = t_list;
  void* block = list->head;
  if (__builtin_expect(block == NULL, 0)) abort();
  list->head = *(void**)block;
  --list->length;
  return block;
}

__attribute__((noinline)) static void list_free(void* block) {
  struct List* list = t_list;
  *(void**)block = list->head;
  list->head = block;
  if (__builtin_expect(++list->length > list->max_length, 0)) abort();
}

/* --- the bits shape ----------------------------------------------------- */

struct Span {
  uint32_t countdown;     /* blocks out; 0: every block came back */
  uint64_t block_base;
  uint64_t multiplier;    /* 2^64 / (64 blocks' bytes), rounded up: word in the high half, bit on top of the low */
  uint64_t free_bits[kBlocksPerSpan / 64];
  uint64_t multiplier8;   /* 2^64 / (8 blocks' bytes), rounded up: bit in the high half, word in the top 3 bits of the low */
};
struct Entry {
  uint64_t tag;           /* the owning thread */
  struct Span* span;
};
struct AllocWord {
  uint64_t bits;
  uint64_t base;
  uint64_t size;
};
static __thread struct AllocWord* t_word __attribute__((tls_model("initial-exec")));
static struct Entry* g_entries;  /* indexed by address >> kPageShift */
static uint64_t g_tag = 1;

__attribute__((noinline)) static void* bits_malloc(void) {
  struct AllocWord* word = t_word;
  uint64_t bits = word->bits;
  if (__builtin_expect(bits == 0, 0)) return NULL;
  uint64_t index;
  __asm__("bsfq %1, %0" : "=r"(index) : "r"(bits));   /* as strata's malloc: bsf, then btr */
  __asm__("btrq %1, %0" : "+r"(bits) : "r"(index));
  word->bits = bits;
  return (void*)(word->base + index * word->size);
}

/* The block's span, as strata's free finds it, and the product that gives
 * its place in the span's bits. */
#define FIND_PRODUCT(block, multiplier_field)                                        \
  uintptr_t address = (uintptr_t)(block);                                           \
  const struct Entry* entry = &g_entries[address >> kPageShift];                    \
  if (__builtin_expect(entry->tag != g_tag, 0)) abort();                            \
  struct Span* span = entry->span;                                                  \
  unsigned __int128 product = (unsigned __int128)(address - span->block_base) * span->multiplier_field

/* The span and the block's place in it, as strata's free finds them. */
#define FIND_PLACE(block)                                                            \
  FIND_PRODUCT(block, multiplier);                                                  \
  uint64_t* slot = &span->free_bits[(uint64_t)(product >> 64)];                     \
  uint64_t bit = (uint64_t)product >> 58

#define COUNT_BACK()                                                                 \
  if (__builtin_expect(--span->countdown == 0, 0)) span->countdown = 1u << 30

__attribute__((noinline)) static void bits_free(void* block) {  /* strata's */
  FIND_PLACE(block);
  uint64_t old = *slot;
  *slot = old | (UINT64_C(1) << bit);
  if (__builtin_expect((old >> bit) & 1, 0)) abort();
  COUNT_BACK();
}

__attribute__((noinline)) static void bits_free_countdown_only(void* block) {
  FIND_PLACE(block);
  __asm__ volatile("" : : "r"(slot), "r"(bit));
  COUNT_BACK();
}

__attribute__((noinline)) static void bits_free_or_to_memory(void* block) {
  FIND_PLACE(block);
  __asm__ volatile("orq %1, %0" : "+m"(*slot) : "r"(UINT64_C(1) << bit));
  COUNT_BACK();
}

__attribute__((noinline)) static void bits_free_read_then_or(void* block) {
  FIND_PLACE(block);
  uint64_t mask = UINT64_C(1) << bit;
  uint64_t old = *(volatile uint64_t*)slot;
  __asm__ volatile("orq %1, %0" : "+m"(*slot) : "r"(mask));
  if (__builtin_expect(old & mask, 0)) abort();
  COUNT_BACK();
}

/* The interleaved layout (block b: word b % 8, bit b / 8). */
__attribute__((noinline)) static void bits_free_interleaved(void* block) {
  FIND_PRODUCT(block, multiplier8);
  uint64_t* slot = &span->free_bits[(uint64_t)product >> 61];
  uint64_t bit = (uint64_t)(product >> 64);
  uint64_t old = *slot;
  *slot = old | (UINT64_C(1) << bit);
  if (__builtin_expect((old >> bit) & 1, 0)) abort();
  COUNT_BACK();
}

/* Tried in session 24: the bit's mask added to its word in one
 * instruction, whose old word says whether the bit was set. */
__attribute__((noinline)) static void bits_free_xadd(void* block) {
  FIND_PLACE(block);
  uint64_t old = UINT64_C(1) << bit;
  __asm__ volatile("xaddq %0, %1" : "+r"(old), "+m"(*slot));
  if (__builtin_expect((old >> bit) & 1, 0)) abort();
  COUNT_BACK();
}

/* The call alone: the floor under every bits row. */
__attribute__((noinline)) static void empty_free(void* block) { __asm__ volatile("" : : "r"(block)); }

/* --- the burst ----------------------------------------------------------- */

static char* g_heap;
static struct Span* g_spans;
static size_t g_spans_used;
static void** g_blocks;
static struct AllocWord g_word;
static struct List g_list;

/* Every bit of the blocks' spans cleared (all out), as the mallocs leave
 * them (an allocation word's blocks count as out of their span). */
static void bits_take_all(void) {
  for (size_t s = 0; s < g_spans_used; ++s) memset(g_spans[s].free_bits, 0, sizeof g_spans[s].free_bits);
}

/* A malloc phase of the bits shape: an empty word refills from the next 64
 * blocks of the heap (the allocator's slow path, counted in the time). */
static void bits_malloc_all(long count) {
  for (long i = 0; i < count; ++i) {
    void* block = bits_malloc();
    if (block == NULL) {
      g_word.bits = ~UINT64_C(0);
      g_word.base = (uintptr_t)g_heap + (uint64_t)(i / 64) * 64 * kBlockSize;
      block = bits_malloc();
    }
    g_blocks[i] = block;
    __asm__ volatile("" : : "r"(block) : "memory");
  }
  g_word.bits = 0;
}

typedef void (*FreeFn)(void*);

static double per_call(uint64_t ticks, long count) { return (double)ticks / (double)count; }

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* values, int n) {
  qsort(values, (size_t)n, sizeof *values, compare);
  return values[n / 2];
}

int main(int argc, char** argv) {
  long count = argc > 1 ? atol(argv[1]) : 5000;
  if (count < 64 || count > 1000000) {
    fprintf(stderr, "usage: burst_chains [blocks: 64..1000000]\n");
    return 2;
  }
  g_spans_used = (size_t)(count + kBlocksPerSpan - 1) / kBlocksPerSpan;
  size_t heap_bytes = g_spans_used << kPageShift;
  g_heap = aligned_alloc((size_t)1 << kPageShift, heap_bytes);
  g_spans = aligned_alloc(64, g_spans_used * sizeof *g_spans);
  struct Entry* entries = calloc(g_spans_used, sizeof *entries);
  g_blocks = malloc((size_t)count * sizeof *g_blocks);
  if (!g_heap || !g_spans || !entries || !g_blocks) return 1;
  g_entries = entries - ((uintptr_t)g_heap >> kPageShift);
  for (size_t s = 0; s < g_spans_used; ++s) {
    g_spans[s].countdown = 1u << 30;
    g_spans[s].block_base = (uintptr_t)g_heap + (s << kPageShift);
    g_spans[s].multiplier = UINT64_MAX / (64 * kBlockSize) + 1;
    g_spans[s].multiplier8 = UINT64_MAX / (8 * kBlockSize) + 1;
    entries[s].tag = g_tag;
    entries[s].span = &g_spans[s];
  }
  memset(g_heap, 0, heap_bytes);
  t_list = &g_list;
  t_word = &g_word;
  g_word.size = kBlockSize;
  g_list.max_length = UINT32_MAX;
  for (long i = count - 1; i >= 0; --i) list_free(g_heap + i * kBlockSize);

  static const struct {
    const char* name;
    FreeFn free_fn;
  } frees[] = {
      {"bits, strata's free (load, bts, store; old bit checked)", bits_free},
      {"bits, free without the bit (countdown only)", bits_free_countdown_only},
      {"bits, free with `or` to memory (no old bit)", bits_free_or_to_memory},
      {"bits, free reading the old bit, then `or` to memory", bits_free_read_then_or},
      {"bits interleaved 8 ways, strata's free (consecutive blocks in different words)", bits_free_interleaved},
      {"bits, xadd of the mask (old bit checked; tried in session 24)", bits_free_xadd},
      {"an empty free (the call alone: the floor under the rows above)", empty_free},
  };
  enum { kFrees = sizeof frees / sizeof frees[0] };
  double list_malloc_ticks[kRounds], list_free_ticks[kRounds], bits_malloc_ticks[kRounds];
  double free_ticks[kFrees][kRounds];
  const int passes = (int)(2000000 / count) + 1;  /* about 2 M calls per row and round */

  for (int round = 0; round < kRounds; ++round) {
    uint64_t malloc_sum = 0, free_sum = 0;
    for (int pass = 0; pass < passes; ++pass) {
      uint64_t t0 = __rdtsc();
      for (long i = 0; i < count; ++i) {
        g_blocks[i] = list_malloc();
        __asm__ volatile("" : : "r"(g_blocks[i]) : "memory");
      }
      uint64_t t1 = __rdtsc();
      for (long i = 0; i < count; ++i) list_free(g_blocks[i]);
      uint64_t t2 = __rdtsc();
      malloc_sum += t1 - t0;
      free_sum += t2 - t1;
      /* back in address order for the next pass (the list is now reversed) */
      g_list.head = NULL;
      g_list.length = 0;
      for (long i = count - 1; i >= 0; --i) list_free(g_heap + i * kBlockSize);
    }
    list_malloc_ticks[round] = per_call(malloc_sum, count * passes);
    list_free_ticks[round] = per_call(free_sum, count * passes);

    uint64_t bits_malloc_sum = 0;
    for (int f = 0; f < kFrees; ++f) {
      uint64_t sum = 0;
      for (int pass = 0; pass < passes; ++pass) {
        bits_take_all();
        uint64_t t0 = __rdtsc();
        bits_malloc_all(count);
        uint64_t t1 = __rdtsc();
        for (long i = 0; i < count; ++i) frees[f].free_fn(g_blocks[i]);
        uint64_t t2 = __rdtsc();
        bits_malloc_sum += t1 - t0;
        sum += t2 - t1;
      }
      free_ticks[f][round] = per_call(sum, count * passes);
    }
    bits_malloc_ticks[round] = per_call(bits_malloc_sum, count * passes * kFrees);
  }

  printf("burst of %ld blocks of %d B, malloc all then free all in order: TSC ticks per call, median of %d rounds\n",
         count, kBlockSize, kRounds);
  printf("  list (tcmalloc's shape)        malloc %5.2f  free %5.2f\n", median(list_malloc_ticks, kRounds),
         median(list_free_ticks, kRounds));
  printf("  bits (strata's shape)          malloc %5.2f (the bits mallocs of every row below)\n",
         median(bits_malloc_ticks, kRounds));
  for (int f = 0; f < kFrees; ++f) printf("    free %5.2f  %s\n", median(free_ticks[f], kRounds), frees[f].name);
  return 0;
}
