// Sampled blocks are spans of their own (as in tcmalloc): a block chosen for
// sampling is served by a dedicated span from the page heap, state kLarge,
// one block at the span's start, and span->sample points at its record.
//
// So a free of a sampled block never touches the small-block fast path: its
// pages' owner tag is 0, it falls into deallocate_slow, whose large-block
// branch calls release_sampled before the span goes back to the page heap.
// This holds whichever thread frees it, and through realloc.
//
// Cost: at least one 8 KiB page per live sample. At the default interval
// (2 MiB) a program of tiny blocks has about one sample per 2 MiB of live
// memory, i.e. 8 KiB / 2 MiB = 0.4 % more memory at most; larger
// blocks waste less (a sampled block rounds up to whole pages).
#pragma once

#include <cstddef>

#include "profile/stack_capture.h"

namespace strata::detail {

struct Span;
struct Sample;

// Serves a sampled allocation: `requested_size` bytes asked by the program,
// aligned to `alignment` (0: no particular alignment; up to the page size
// any alignment holds, larger ones go through the page heap's aligned
// allocation), `usable_size` the size the block would have had unsampled
// (usable_size() reports it, so that programs see no difference),
// `counted_bytes` the bytes the sampling countdown counted for it (the
// class size for a small request, the request itself for a page heap one:
// the sample stands for 1 / (1 - exp(-counted_bytes / interval))
// allocations), `site` where the program called the allocator's entry point
// (stack_capture.h). `zeroed`: the first requested_size bytes read as zero.
// Returns nullptr when the page heap cannot serve it (the caller then serves
// the request unsampled, which fails the same way or not).
void* allocate_sampled(std::size_t requested_size, std::size_t alignment, std::size_t usable_size,
                       std::size_t counted_bytes, CallSite site, bool zeroed = false) noexcept;

// The block of `span` (kLarge, span->sample set) is being freed: forgets the
// sample. The caller then gives the span back to the page heap.
void release_sampled(Span* span) noexcept;

// The usable size the sampled block of `span` reports.
std::size_t sampled_usable_size(const Span* span) noexcept;

// A sampled large block grew or shrank in place (realloc): its usable size
// is its span's again. The sample keeps the size of the allocation it
// recorded.
void sampled_block_resized(Span* span) noexcept;

}  // namespace strata::detail
