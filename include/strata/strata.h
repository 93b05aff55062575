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

#ifdef __cplusplus
}
#endif

#endif /* STRATA_STRATA_H */
