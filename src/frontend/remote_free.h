// Frees of blocks a thread does not own: the cross-thread free design.
//
// A block freed by a thread that does not own its span is added to the
// freeing thread's outbox, in the parcel for the span's owner (an array of
// pointers: the block itself is not written). A parcel leaves when it holds
// 64 blocks, when its slot is needed for another destination, when the
// outbox's blocks over 1 KiB reach 1 MiB (frontend/outbox.h), or at the
// thread's housekeeping (every 16th allocation slow path) or exit. Leaving
// costs one CAS on the owner's inbox (or one lock acquisition for a span the
// central cache owns). The owner drains its inbox
// with one exchange whenever one of its allocation words runs empty.
//
// Neither side ever touches a span it does not own, so same-thread frees
// need no atomics and remote frees cost one atomic per parcel.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/span.h"
#include "frontend/outbox.h"

namespace strata::detail {

class ThreadCache;

// Queues `block` (of small span `span`) for its owner. `cache` is the
// calling thread's live cache, or nullptr for a thread without one (the
// block is then delivered at once).
void remote_free(ThreadCache* cache, void* block, Span* span) noexcept;

// Everything but the common case (Outbox::add_to_open_parcel), for a
// caller that knows the span's owner and class: `destination` is its cache
// (a page's owner tag, which may be stale: the old owner then forwards the
// block). No cache, no open parcel for this destination, a parcel this
// block fills, or a block over Outbox::kUncountedSize (its bytes are
// counted, and may reach the bound).
void remote_free_slow(ThreadCache* cache, void* block, std::size_t size_class, Destination destination) noexcept;

// A block over Outbox::kUncountedSize for `parcel`, the open parcel of
// `cache` for `destination` (Outbox::open_parcel_with_room): the caller
// found the parcel already, so only the byte count is left (else
// remote_free_slow's rare cases).
void remote_free_counted(ThreadCache* cache, Parcel* parcel, void* block, std::size_t size_class,
                         Destination destination) noexcept;

// Remote frees by threads without a cache (young or exiting threads): each
// is delivered on its own, and counted here for statistics.
extern STRATA_INTERNAL std::atomic<std::uint64_t> g_uncached_remote_frees;

// Delivers a parcel to a destination right away; the parcel then belongs
// to the destination (a thread) or goes back to `cache`'s spares (central).
void deliver(ThreadCache* cache, Destination destination, Parcel* parcel) noexcept;

}  // namespace strata::detail
