// Recent blocks: a thread's own frees of a class kept as a list, newest
// first, threaded through the blocks, for a program that replaces a live
// set at random (larson, servers: free one block, allocate another).
//
// Bits alone serve bursts best (a free sets a bit and never touches the
// block), but a live set replaced at random leaves every span sparse: each
// free reads and writes its span's line (a cache miss once the spans of
// 40 classes and the program's own data share L1), a refill yields a word
// of a handful of blocks (a slow path and a mispredicted branch every few
// mallocs), and malloc hands out blocks nobody touched for long. A thread
// whose allocation words keep coming out sparse (a window of them, below)
// turns *listing*: it re-tags its spans' pages of every class up to 1 KiB
// with its address plus the class (core/ownership.h), so that its own frees
// of them miss the free fast path's compare and, in free's cold part, push
// the block here (free_to_recent_list: the block's line, which the program
// just used, instead of the span's); a malloc that finds the class's
// allocation word empty takes the newest block (warm) before it takes a
// word. The bit path's instructions do not change: a thread that does not
// list pays nothing in malloc or free but the window's count per word.
//
// A list that reaches its limit goes to its spans' bits, and the class
// keeps listing: a live set replaced at random fills a list now and then
// (its frees and mallocs of a class are a random walk). A second fill
// within the thread's window is a burst (more frees than mallocs): it
// turns the class back, so the rest of the burst sets bits: its spans get
// the plain tag back and its frees take the fast path, unless the thread
// owns more than kRetagSpans of them; those keep their listing tags and
// the burst's frees set bits in free's cold part, so that turning back and,
// at the window's end, listing again cost O(1) (retagging every span of a
// class at each turn was a walk over them all: 8.5 % of a 1,000,000-block
// live set's time, growing with the heap).
//
// While the class lists, its blocks count as out in their spans (as the
// allocation word's do): the list is flushed to the bits at thread exit,
// on strata_release_free_memory and at every scavenge (once a decay
// period), so an idle thread's spans can still empty.
//
// Misuse: the block's link is encoded (core/free_list.h), and while it is
// listed its second word holds a mark, the secret list key, which a pop
// checks and clears (STRATA_CHECK_DOUBLE_FREE, on by default). A block freed
// twice while listed is on the list twice: the pop that gives it out the
// second time finds its mark cleared, and a flush finds its bit set; both
// report it, before the block is handed out twice. A write into a listed
// block's first two words is reported at its pop. Not caught: a block freed
// while listed and again after its list went to the bits, if the class
// lists again by then (the second free pushes it; the bits path would have
// seen its bit). A free of an interior pointer is caught from the page
// map's class word, as a remote free's is.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/diagnostics.h"
#include "core/free_list.h"
#include "core/ownership.h"
#include "core/page_map.h"
#include "core/size_classes.h"
#include "core/span_blocks.h"
#include "frontend/thread_cache.h"
#include "profile/sampler.h"

namespace strata::detail {

// Blocks a class's list holds at most: one more goes to the bits with them
// (recent_list_full).
inline constexpr std::uint32_t kRecentLimit = 64;

// Times a class's list may fill in one window of the thread's (its blocks
// going to the bits) before the next fill turns the class back to bits.
// Turning back at the first fill, a live set of 5,000 blocks replaced at
// random (steady_replace) had a tenth of its classes on bits at any time:
// 12 % of its frees and mallocs took the bit path, and free's and malloc's
// fast-path branches went both ways (0.34 mispredicted branches per
// operation, callgrind's simulator; 0.11 with one fill forgiven, 0.04 with
// three). The server-like workload's shrinking phases fill lists over and
// over: three cost it 2.5 % more allocator instructions, one 0.5-1.2 %.
inline constexpr std::uint32_t kListFillsPerWindow = 1;

// Spans of a class a burst's turn back to bits retags at most (above).
inline constexpr std::uint32_t kRetagSpans = 32;

// The mark a listed block carries in its second word: the list key itself.
inline std::uintptr_t recent_mark() noexcept { return g_list_key; }

// A listed block's mark is gone: it was freed twice (its first pop cleared
// the mark) or written after it was freed.
[[noreturn]] void recent_block_overwritten(const void* block) noexcept;

// Pushes `block` onto `list` (not full): its link encoded with the list
// key, its mark in the second word (STRATA_CHECK_DOUBLE_FREE).
inline void push_recent(RecentList& list, void* block) noexcept {
  auto* words = static_cast<std::uintptr_t*>(block);
  const std::uintptr_t mark = recent_mark();
  words[0] = encode_link(reinterpret_cast<std::uintptr_t>(list.head), mark);
  if (STRATA_CHECK_DOUBLE_FREE) words[1] = mark;
  list.head = block;
  ++list.count;
}

// The class's list, found by the offset of its allocation word (what
// malloc's fast path holds): no class to scale.
inline RecentList& recent_at(ThreadCache* cache, std::uintptr_t offset) noexcept {
  return *reinterpret_cast<RecentList*>(reinterpret_cast<char*>(cache) + offsetof(ThreadCache, recent) + offset -
                                        kWordsOffset);
}

// The newest recent block of the class whose word is at `offset`, taken,
// or nullptr: none, or heap profiling's next sampling point falls on this
// allocation (the word path then counts and samples it, allocate_slow), or
// a word cut for a sample left the sampled allocation to this class.
// Each block is counted for sampling as it is taken: counted in advance,
// as a word's blocks are, the list's blocks would hide bytes from the
// other paths, and samples would fall on their allocations more often
// (a site that reuses freed blocks: half its samples, in tests/profile).
inline void* take_recent(ThreadCache* cache, std::uintptr_t offset) noexcept {
  RecentList& list = recent_at(cache, offset);
  void* block = list.head;
  if (block == nullptr) return nullptr;
  const std::int64_t left = t_bytes_until_sample - static_cast<std::int64_t>(word_at(cache, offset).size);
  if (left < 0 || list.sample_pending != 0) return nullptr;
  auto* words = static_cast<std::uintptr_t*>(block);
  const std::uintptr_t mark = recent_mark();
  if (STRATA_CHECK_DOUBLE_FREE) {
    if (__builtin_expect(words[1] != mark, 0)) recent_block_overwritten(block);
    words[1] = 0;
  }
  list.head = reinterpret_cast<void*>(encode_link(words[0], mark));
  --list.count;
  t_bytes_until_sample = left;
  return block;
}

// Classes that may list: those of malloc's fast path (larger blocks would
// hold too many bytes on a list; every class has the mark's second word).
inline constexpr bool may_list(std::size_t cls) noexcept {
  return class_size(cls) >= 2 * sizeof(void*) && class_size(cls) <= 1024;
}

// A thread starts listing when the whole allocation words (all that their
// span word held) of its last kListingWindowWords refills held fewer than
// kListingBlocksPerWord blocks on average: its spans are sparse. It stops
// when a window's words hold kBitsBlocksPerWord or more, and at each
// window's end a listing thread lists again the classes bursts turned back
// to bits since. bench/run's server-like workload takes words of about 12
// blocks (70 % of its blocks small, few spans: their lines stay in the
// cache, and listing costs it instructions and misses on writes), fewer
// while its live set shrinks; a live set of 5,000 blocks of 8-1000 B
// replaced at random, about 8; of 20,000, about 6. While a thread lists,
// its words come mostly from lists flushed to the bits, whose blocks
// cluster: a live set replaced at random stops and starts again every few
// windows (each time its spans retagged and its lists flushed), which costs
// it less than listing for good costs the server (0.88 of its throughput).
inline constexpr std::uint32_t kListingWindowWords = 256;
inline constexpr std::uint32_t kListingBlocksPerWord = 9;
inline constexpr std::uint32_t kBitsBlocksPerWord = 12;

void close_listing_window(ThreadCache* cache) noexcept;

// An allocation word of `blocks` blocks was taken: all that its span word
// held (`whole`), or not (cut to a page, or to reused blocks, or never-used
// blocks handed out a page, or 16 KiB, at a time, tail included: not
// counted).
// One add: the window's blocks in the low half of `window`, its words in
// the high half.
inline void count_word_for_listing(ThreadCache* cache, std::uint32_t blocks, bool whole) noexcept {
  if (!whole) return;
  cache->window += (std::uint32_t{1} << 16) + blocks;
  if (cache->window >= kListingWindowWords << 16) close_listing_window(cache);
}

// The tag `cache` gives its spans of class `cls` now.
inline std::uintptr_t own_tag(const ThreadCache* cache, std::size_t cls) noexcept {
  return ((cache->tagged >> cls) & 1) != 0 ? listing_tag_for(cache, cls) : owner_tag_for(cache);
}

// Gives every class's recent blocks back to their spans' bits (the classes
// keep listing).
void flush_recent(ThreadCache* cache) noexcept;

// Flushes, and no class lists any more (thread exit: the spans' tags are
// rewritten as they leave).
void stop_listing(ThreadCache* cache) noexcept;

}  // namespace strata::detail
