/* Programs profiled by profile_programs_test and pprof_tools.sh, built twice:
 * linked with libstrata.a, and plain (strata comes in by LD_PRELOAD). Each
 * leaves its live blocks allocated at exit, where STRATA_PROFILE=1 writes
 * the profile. Modes:
 *   accuracy TRUTH   three call sites hold 60 / 30 / 10 % of the live bytes
 *                    (800 MB live, 2.4 GB allocated, sizes 16 B..128 KiB);
 *                    TRUTH gets each site's address and exact totals
 *   leak             the worked example of docs/profiling.md: a cache that
 *                    is never trimmed leaks from one site
 *   entries TRUTH    each entry point (malloc, calloc, realloc, reallocarray,
 *                    aligned_alloc, posix_memalign, memalign, valloc, operator
 *                    new, new[], aligned new) called
 *                    from its own function, 50 blocks each; TRUTH gets the
 *                    functions' addresses (run with STRATA_PROFILE_SAMPLE=1) */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Log-uniform-ish sizes from 16 B to 128 KiB. */
static size_t mixed_size(void) {
  uint64_t x = next_random();
  size_t base = (size_t)16 << (x % 13);
  return base + (size_t)((x >> 20) % base);
}

struct totals {
  uint64_t live, allocated;
};

/* Each site is its own function, so that its calls of malloc have their own
 * return addresses (not a tail call: the block is touched after malloc). */
__attribute__((noinline)) void* site_sixty(size_t n) {
  char* p = malloc(n);
  if (p != NULL) p[0] = 60;
  return p;
}
__attribute__((noinline)) void* site_thirty(size_t n) {
  char* p = malloc(n);
  if (p != NULL) p[0] = 30;
  return p;
}
__attribute__((noinline)) void* site_ten(size_t n) {
  char* p = malloc(n);
  if (p != NULL) p[0] = 10;
  return p;
}

typedef void* (*site_fn)(size_t);

/* Allocates `allocate_bytes` from `site`, keeping about a third live. */
static void run_site(site_fn site, uint64_t allocate_bytes, struct totals* t) {
  while (t->allocated < allocate_bytes) {
    size_t n = mixed_size();
    char* p = site(n);
    if (p == NULL) {
      fprintf(stderr, "out of memory\n");
      exit(2);
    }
    p[0] = 1;
    p[n - 1] = 2;
    t->allocated += n;
    if (next_random() % 3 == 0) t->live += n;  /* kept until exit */
    else free(p);
  }
}

static int accuracy(const char* truth_path) {
  const uint64_t mb = 1000000;
  struct totals sixty = {0, 0}, thirty = {0, 0}, ten = {0, 0};
  /* Interleaved in slices, as a program's phases would be. */
  for (int slice = 1; slice <= 8; ++slice) {
    run_site(site_sixty, 1440 * mb * slice / 8, &sixty);
    run_site(site_thirty, 720 * mb * slice / 8, &thirty);
    run_site(site_ten, 240 * mb * slice / 8, &ten);
  }
  FILE* truth = fopen(truth_path, "w");
  if (truth == NULL) return 1;
  fprintf(truth, "site_sixty %p %llu %llu\n", (void*)site_sixty, (unsigned long long)sixty.live,
          (unsigned long long)sixty.allocated);
  fprintf(truth, "site_thirty %p %llu %llu\n", (void*)site_thirty, (unsigned long long)thirty.live,
          (unsigned long long)thirty.allocated);
  fprintf(truth, "site_ten %p %llu %llu\n", (void*)site_ten, (unsigned long long)ten.live,
          (unsigned long long)ten.allocated);
  fclose(truth);
  return 0;
}

/* --- the worked example ------------------------------------------------- */

struct entry {
  struct entry* next;
  char key[64];
  char value[936];
};
static struct entry* cache;

/* The leak: entries go in and never come out. */
__attribute__((noinline)) void leaky_cache_insert(const char* key) {
  struct entry* e = malloc(sizeof *e);
  snprintf(e->key, sizeof e->key, "%s", key);
  memset(e->value, 'v', sizeof e->value);
  e->next = cache;
  cache = e;
}

/* Allocates as much, but frees it all: in-use space 0, allocated space high. */
__attribute__((noinline)) size_t parse_request(int i) {
  char* buffer = malloc(1000);
  int n = snprintf(buffer, 1000, "GET /item/%d HTTP/1.1", i);
  size_t length = (size_t)n;
  free(buffer);
  return length;
}

__attribute__((noinline)) void handle_request(int i) {
  char key[32];
  snprintf(key, sizeof key, "item-%d", i);
  if (parse_request(i) > 0) leaky_cache_insert(key);
}

static int leak(void) {
  for (int i = 0; i < 100000; ++i) handle_request(i);
  printf("served 100000 requests, %zu bytes cached\n", (size_t)100000 * sizeof(struct entry));
  return 0;
}

/* --- every entry point names its caller ---------------------------------- */

void* _Znwm(unsigned long size);  /* operator new(size_t), callable from C */
void* _Znam(unsigned long size);  /* operator new[](size_t) */
void* _ZnwmSt11align_val_t(unsigned long size, unsigned long alignment);  /* operator new(size_t, align_val_t) */

#define KEEP(p) \
  do {          \
    kept[n++] = (p); \
  } while (0)
void* kept[2000]; /* visible: the compiler must not drop the allocations */
int n;

__attribute__((noinline)) void via_malloc(void) { KEEP(malloc(100)); }
__attribute__((noinline)) void via_calloc(void) { KEEP(calloc(10, 10)); }
__attribute__((noinline)) void via_realloc(void) { KEEP(realloc(NULL, 100)); }
__attribute__((noinline)) void via_realloc_move(void) {
  void* p = malloc(16);
  KEEP(realloc(p, 3000));
}
__attribute__((noinline)) void via_aligned_alloc(void) { KEEP(aligned_alloc(64, 100)); }
__attribute__((noinline)) void via_posix_memalign(void) {
  void* p = NULL;
  if (posix_memalign(&p, 128, 100) == 0) KEEP(p);
}
__attribute__((noinline)) void via_memalign(void) { KEEP(memalign(32768, 100)); }
__attribute__((noinline)) void via_operator_new(void) { KEEP(_Znwm(100)); }
__attribute__((noinline)) void via_operator_new_array(void) { KEEP(_Znam(5000)); }
__attribute__((noinline)) void via_operator_new_aligned(void) { KEEP(_ZnwmSt11align_val_t(100, 256)); }
__attribute__((noinline)) void via_valloc(void) { KEEP(valloc(100)); }
__attribute__((noinline)) void via_reallocarray(void) { KEEP(reallocarray(NULL, 10, 10)); }

static int entries(const char* truth_path) {
  struct { const char* name; void (*call)(void); } calls[] = {
      {"via_malloc", via_malloc}, {"via_calloc", via_calloc}, {"via_realloc", via_realloc},
      {"via_realloc_move", via_realloc_move}, {"via_aligned_alloc", via_aligned_alloc},
      {"via_posix_memalign", via_posix_memalign}, {"via_memalign", via_memalign},
      {"via_operator_new", via_operator_new}, {"via_operator_new_array", via_operator_new_array},
      {"via_operator_new_aligned", via_operator_new_aligned}, {"via_valloc", via_valloc},
      {"via_reallocarray", via_reallocarray}};
  FILE* truth = fopen(truth_path, "w");
  if (truth == NULL) return 1;
  for (size_t c = 0; c < sizeof calls / sizeof calls[0]; ++c) {
    for (int i = 0; i < 50; ++i) calls[c].call();
    fprintf(truth, "%s %p 0 0\n", calls[c].name, (void*)calls[c].call);
  }
  fprintf(truth, "entries %p 0 0\n", (void*)entries);
  fclose(truth);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "entries") == 0) return entries(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "accuracy") == 0) return accuracy(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "leak") == 0) return leak();
  fprintf(stderr, "usage: %s accuracy TRUTH | leak\n", argv[0]);
  return 2;
}
