/* strata — a three-tier, thread-caching memory allocator for Linux x86-64.
 *
 * The C API. Every function here is thread-safe and async-cancel-safe in the
 * same sense as malloc. None of them ever calls the system allocator.
 *
 * Contract shared by all allocation functions:
 *  - A returned pointer is 16-byte aligned (8-byte blocks may be 8-aligned),
 *    and a block whose usable size is a power of two up to 8 KiB is aligned
 *    to that size.
 *  - A size that cannot be served (overflow, beyond the address space,
 *    the OS refusing memory) returns NULL with errno = ENOMEM.
 *  - strata_malloc(0) returns a unique pointer that must be freed.
 *  - strata_free(NULL) does nothing.
 */
#ifndef STRATA_STRATA_H
#define STRATA_STRATA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define STRATA_API __attribute__((visibility("default")))
#define STRATA_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define STRATA_API
#define STRATA_MALLOC_ATTR
#endif

/* Returns a block of at least `size` bytes, or NULL with errno = ENOMEM. */
STRATA_API STRATA_MALLOC_ATTR void* strata_malloc(size_t size);

/* Returns a zeroed block for `count` objects of `size` bytes; NULL with
 * errno = ENOMEM when count * size overflows or cannot be served. Memory
 * already known to be zero (fresh pages from the OS) is not cleared again. */
STRATA_API STRATA_MALLOC_ATTR void* strata_calloc(size_t count, size_t size);

/* Resizes `ptr`, keeping its contents up to the smaller size. Stays in place
 * when the new size fits the block and is at least half its usable size
 * (shrinking further moves the data to a smaller block, so memory is not
 * wasted); grows large blocks in place when the next pages are free. realloc(NULL, n) == malloc(n); realloc(p, 0) frees p and
 * returns a fresh minimum-size block (glibc returns NULL; strata keeps the
 * C23 "may return either" freedom on the side of never losing a pointer).
 * On failure returns NULL, leaves `ptr` untouched, errno = ENOMEM. */
STRATA_API void* strata_realloc(void* ptr, size_t size);

/* Releases a block. NULL does nothing. */
STRATA_API void strata_free(void* ptr);

/* Releases a block whose requested size (or any size between the requested
 * one and its usable size) is known; saves the size lookup. */
STRATA_API void strata_free_sized(void* ptr, size_t size);

/* Returns a block aligned to `alignment` (a power of two). A non power of two
 * alignment returns NULL with errno = EINVAL. Unlike C11, `size` need not be
 * a multiple of `alignment`. */
STRATA_API STRATA_MALLOC_ATTR void* strata_aligned_alloc(size_t alignment, size_t size);

/* The number of bytes usable in the block (at least the requested size).
 * Writing up to that many bytes is legal. 0 for NULL. */
STRATA_API size_t strata_usable_size(const void* ptr);

/* ---- Memory back to the OS ------------------------------------------------
 * Returns every free page to the OS now: the calling thread's cached blocks
 * go back to their spans, empty spans to the page heap, and every free page
 * of the page heap is decommitted (MADV_DONTNEED). Other threads' caches are
 * left alone (they give memory back on their own, after the decay time).
 * Returns the number of bytes decommitted by this call. */
STRATA_API size_t strata_release_free_memory(void);

/* ---- Statistics -----------------------------------------------------------
 * Counters are kept per thread and per tier, and added up on request; while
 * other threads allocate, the sums are a close snapshot, not an atomic one.
 * docs/configuration.md explains each field. */
#define STRATA_NUM_SIZE_CLASSES 61 /* class 0 is unused */

typedef struct strata_class_stats {
  size_t block_size;     /* bytes per block */
  size_t blocks_in_use;  /* handed to the program (and not yet freed back) */
  size_t blocks_cached;  /* free, in thread caches' lists */
  size_t blocks_free_in_spans; /* free inside spans (central and owned) */
  size_t spans;          /* spans of this class */
} strata_class_stats;

typedef struct strata_stats_t {
  size_t mapped_bytes;         /* address space reserved from the OS */
  size_t resident_bytes;       /* physical memory of the whole process now */
  size_t in_use_bytes;         /* bytes of blocks the program holds (block sizes) */
  size_t large_in_use_bytes;   /* of which blocks that are spans of their own (whole spans) */
  size_t small_span_bytes;     /* pages cut into size-class blocks */
  size_t thread_cache_bytes;   /* free blocks in thread caches */
  size_t in_transit_bytes;     /* freed blocks on their way to their owner */
  size_t span_free_bytes;      /* free blocks inside small spans */
  size_t page_heap_free_bytes; /* free pages still backed by memory */
  size_t decommitted_bytes;    /* free pages not backed: given back to the OS or never touched */
  size_t parked_bytes;         /* pages of partly used spans given back to the OS */
  size_t metadata_bytes;       /* spans, thread caches, page map leaves */
  size_t threads;              /* live thread caches */
  size_t spans_in_use;
  size_t free_spans;
  size_t os_reservations;      /* mmap calls for heap memory */
  size_t decommit_calls;       /* madvise calls */
  size_t remote_frees;         /* blocks freed by a thread that did not own them */
  size_t remote_batches;       /* batches those travelled in */
  size_t page_heap_lock_contended;
  size_t central_lock_contended;
  double fragmentation;        /* 1 - in_use / (mapped - decommitted) */
  strata_class_stats classes[STRATA_NUM_SIZE_CLASSES];
  /* Heap profiling (docs/profiling.md). A sampled block is a span of its
   * own: its pages count in large_in_use_bytes. */
  size_t profile_sampled_bytes;  /* bytes requested by live sampled blocks */
  size_t profile_samples;        /* live sampled blocks */
  size_t profile_samples_total;  /* samples taken since the start */
} strata_stats_t;

STRATA_API void strata_stats(strata_stats_t* out);

/* A sink for text: called with pieces of the report (not NUL-terminated). */
typedef void (*strata_write_fn)(void* context, const char* text, size_t length);

/* Prints the statistics as a readable table, then as one line of JSON.
 * write == NULL prints to stderr. Never allocates. */
STRATA_API void strata_print_stats(strata_write_fn write, void* context);
STRATA_API void strata_print_stats_json(strata_write_fn write, void* context);

/* ---- Configuration ----------------------------------------------------------
 * Each option is also read once from its STRATA_* environment variable at
 * the first allocation; docs/configuration.md lists them. */
typedef enum strata_option {
  STRATA_OPTION_THREAD_CACHE_BYTES = 0, /* STRATA_THREAD_CACHE_BYTES, bytes per thread */
  STRATA_OPTION_DECAY_MS = 1,           /* STRATA_DECAY_MS, 0 = give pages back at once */
  STRATA_OPTION_BACKGROUND_THREAD = 2,  /* STRATA_BACKGROUND_THREAD, 0/1 */
  STRATA_OPTION_HUGE_PAGES = 3,         /* STRATA_HUGE_PAGES, 0/1 */
  STRATA_OPTION_CHECK = 4,              /* STRATA_CHECK, 0/1 (only before the first allocation) */
  STRATA_OPTION_VERBOSE = 5,            /* STRATA_VERBOSE, 0/1 */
  STRATA_OPTION_SHOW_STATS = 6,         /* STRATA_SHOW_STATS, 0/1: print statistics at exit */
  STRATA_OPTION_PROFILE_SAMPLE = 7      /* STRATA_PROFILE_SAMPLE, mean bytes between heap samples, 0 = off */
} strata_option;

/* Returns 0, or EINVAL for an unknown option or a value out of range, or
 * EBUSY for an option that can no longer change (checking mode). */
STRATA_API int strata_option_set(strata_option option, long value);
/* Returns the option's value, or -1 for an unknown option. */
STRATA_API long strata_option_get(strata_option option);

/* ---- Heap profiling ----------------------------------------------------------
 * Allocations are sampled, one per STRATA_PROFILE_SAMPLE bytes on average
 * (512 KiB by default; 0 turns sampling off), with their call stacks.
 * Writes a heap profile of the samples so far to `path`, in the format that
 * `google-pprof` and `go tool pprof` read (docs/profiling.md). Returns 0, or
 * -1 with errno set (EINVAL for a NULL or empty path, or what open(2) or
 * write(2) reported). Never allocates. */
STRATA_API int strata_profile_dump(const char* path);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_STRATA_H */
