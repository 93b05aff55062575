// Recent blocks: turning a thread or a class to listing and back, flushing
// lists to the bits.
#include "frontend/recent_blocks.h"

#include "core/span_blocks.h"
#include "platform/options.h"

namespace strata::detail {

void recent_block_overwritten(const void* block) noexcept {
  report_misuse(block, "double free or write after free (a listed block lost its mark)");
}

namespace {

// Writes `tag` into the page map entries of every span of `cls` the cache
// owns: the current one and those on its lists (every owned span is in
// one of the three).
void retag_class(ThreadCache* cache, std::size_t cls, std::uintptr_t tag) noexcept {
  auto retag = [tag](Span* span) { g_page_map.set_owner_tag(span->first_page, span->page_count, tag); };
  if (Span* span = cache->current[cls]) retag(span);
  for (Span* span = cache->partial[cls].head; span != nullptr; span = span->next) retag(span);
  for (Span* span = cache->sleeping[cls].head; span != nullptr; span = span->next) retag(span);
}

// Gives class `cls`'s recent blocks to their spans' bits. The list is
// detached first: a span that empties or wakes below may lead to
// housekeeping, which flushes too.
void flush_class(ThreadCache* cache, std::size_t cls) noexcept {
  RecentList& list = cache->recent[cls];
  void* block = list.head;
  list.head = nullptr;
  list.count = 0;
  const std::uintptr_t mark = recent_mark();
  while (block != nullptr) {
    const auto* words = static_cast<const std::uintptr_t*>(block);
    if (STRATA_CHECK_DOUBLE_FREE && words[1] != mark) recent_block_overwritten(block);
    void* next = list_next(block);
    // The mark may stay: only a list reads it, and a block's next push
    // writes it again.
    free_owned(cache, g_page_map.lookup(block), block);
    block = next;
  }
}

// A burst: the class stops pushing. A class of few spans gets the plain
// tag back, so that the rest of the burst takes free's fast path; one of
// more than kRetagSpans keeps its listing tags (the burst's frees set bits
// in free's cold part), so that neither this turn nor the next costs a
// walk over its spans.
void turn_to_bits(ThreadCache* cache, std::size_t cls) noexcept {
  const std::uint64_t bit = std::uint64_t{1} << cls;
  cache->listing &= ~bit;
  if (cache->owned_spans[cls] <= kRetagSpans) {
    cache->tagged &= ~bit;
    retag_class(cache, cls, owner_tag_for(cache));
  }
  flush_class(cache, cls);
}

// The class pushes again, its spans tagged first if they are not yet.
void turn_to_listing(ThreadCache* cache, std::size_t cls) noexcept {
  const std::uint64_t bit = std::uint64_t{1} << cls;
  cache->listing |= bit;
  if ((cache->tagged & bit) != 0) return;
  cache->tagged |= bit;
  retag_class(cache, cls, listing_tag_for(cache, cls));
}

// The thread stops listing while it lives on: every tagged class's spans
// back to the plain tag, then stop_listing.
void stop_listing_and_untag(ThreadCache* cache) noexcept {
  for (std::uint64_t classes = cache->tagged; classes != 0; classes &= classes - 1)
    retag_class(cache, static_cast<std::size_t>(__builtin_ctzll(classes)), owner_tag_for(cache));
  stop_listing(cache);
}

}  // namespace

void close_listing_window(ThreadCache* cache) noexcept {
  const std::uint32_t words = cache->window >> 16, blocks = cache->window & 0xffff;
  cache->window = 0;
  for (RecentList& list : cache->recent) list.fills = 0;
  if (blocks < words * kListingBlocksPerWord && !g_options.check) {
    cache->lists = true;
  } else if (cache->lists && blocks >= words * kBitsBlocksPerWord) {
    stop_listing_and_untag(cache);
  }
  if (!cache->lists) return;
  for (std::size_t cls = 1; cls < kNumClasses; ++cls)  // bursts may have turned some back since
    if (may_list(cls) && ((cache->listing >> cls) & 1) == 0) turn_to_listing(cache, cls);
}

namespace {

// The list is full: more frees than mallocs of the class lately. The first
// time in a window its blocks go to the bits and the block starts a new
// list; the second, a burst, the class goes back to bits, and so does the
// block (kListFillsPerWindow).
__attribute__((noinline)) void recent_list_full(ThreadCache* cache, void* block, std::size_t cls,
                                               PageMap::EntryRef entry) noexcept {
  RecentList& list = cache->recent[cls];
  if (list.fills >= kListFillsPerWindow) {
    turn_to_bits(cache, cls);
    // Its span cannot have emptied in the flush: this block is still out.
    return free_owned(cache, entry.span(), block);
  }
  ++list.fills;
  flush_class(cache, cls);
  push_recent(list, block);
}

}  // namespace

void free_to_recent_list(void* block, PageMap::EntryRef entry, ThreadCache* cache, std::uintptr_t cls) noexcept {
  RecentList& list = cache->recent[cls];
  const PageMap::PageClass page = entry.page_class();
  const std::size_t offset = page.page_offset | (reinterpret_cast<std::uintptr_t>(block) & (kPageSize - 1));
  if (__builtin_expect(offset * list.multiple_test >= list.multiple_test, 0))  // is_block_start
    report_misuse(block, "free of an interior pointer");
  if (__builtin_expect(((cache->listing >> cls) & 1) == 0, 0)) return free_owned(cache, entry.span(), block);
  if (__builtin_expect(list.count >= kRecentLimit, 0)) return recent_list_full(cache, block, cls, entry);
  push_recent(list, block);
}

void flush_recent(ThreadCache* cache) noexcept {
  for (std::uint64_t classes = cache->listing; classes != 0; classes &= classes - 1)
    flush_class(cache, static_cast<std::size_t>(__builtin_ctzll(classes)));
}

void stop_listing(ThreadCache* cache) noexcept {
  flush_recent(cache);
  cache->listing = 0;
  cache->tagged = 0;
  cache->lists = false;
  cache->window = 0;
}

}  // namespace strata::detail
