// Slow paths of the thread cache: allocation words, the spans a thread owns,
// young threads, thread creation and exit, fork handling.
#include "frontend/thread_cache.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <pthread.h>
#include <sys/single_threaded.h>

#include "backend/background_thread.h"
#include "backend/metadata_pool.h"
#include "backend/page_heap.h"
#include "central/central_cache.h"
#include "core/diagnostics.h"
#include "core/ownership.h"
#include "frontend/misuse.h"
#include "frontend/recent_blocks.h"
#include "frontend/remote_free.h"
#include "platform/options.h"
#include "profile/profile.h"

namespace strata::detail {

namespace {

// A thread stays young (no cache, no spans of its own: one block at a time
// from the central cache) until it has made this many small allocations: a
// thread that holds a few blocks then sleeps (thread-per-connection servers)
// costs no span of its own, and a busy thread pays the central lock only
// this many times.
constexpr std::uint32_t kYoungAllocations = 256;
// ... or this many frees of blocks other threads own: without a cache each
// of those is pushed on its own onto the owner's inbox (an atomic, and a
// chain of cold blocks for the owner to follow), where a cache sends
// parcels of 64 (a consumer thread that never allocates must not stay
// young). Its frees of the central cache's blocks do not count: a young
// thread's own malloc/free pairs, counted as allocations.
constexpr std::uint32_t kYoungRemoteFrees = 64;

// A thread that has taken fewer spans than this is not busy yet: an
// allocation word holds the blocks of one OS page at most (take_free_word).
constexpr std::uint32_t kBusySpans = 64;
// A class over kOwnSpanOver bytes gets a span in a thread only after
// the thread asked for it this many times; until then each block is a span
// of its own (allocate_paged_block).
constexpr std::uint8_t kPagedRequests = 32;
constexpr std::size_t kOwnSpanOver = 2048;

// Allocation slow paths between two housekeeping visits (each reads the
// clock twice): every slow path hands out a whole word, so this is at most
// about a thousand mallocs, and span events visit too.
constexpr std::int32_t kSlowPathsPerHousekeeping = 16;

static_assert(sizeof(ThreadCache) % 4096 == 0, "pool objects must stay page-aligned");
static_assert(offsetof(ThreadCache, words) == kWordsOffset, "word offsets assume this layout");
static_assert(offsetof(ThreadCache, inbox) + sizeof(Inbox) <= 4096, "the hot part fits one OS page");

constinit ThreadCache g_empty_cache;  // new threads: empty words, owns nothing
constinit ThreadCache g_dead_cache;   // threads past their exit hook

constinit Mutex g_registry_mutex;     // guards the registry and cache lifecycle
constinit ThreadCache* g_registry = nullptr;
constinit ThreadCache* g_dead = nullptr;  // LIFO of caches whose thread exited
constinit MetadataPool<ThreadCache> g_cache_pool;
pthread_key_t g_exit_key;

}  // namespace

constinit HotSettings g_hot;

// initial-exec: one %fs-relative load, no __tls_get_addr call.
// t_cache is what the fast paths use; t_live_cache is the thread's own cache
// (nullptr while the thread is young, &g_dead_cache after its exit). In
// checking mode threads stay young for good, so every call is checked.
constinit thread_local ThreadCache* t_cache __attribute__((tls_model("initial-exec"))) = &g_empty_cache;
namespace {
constinit thread_local ThreadCache* t_live_cache __attribute__((tls_model("initial-exec"))) = nullptr;
constinit thread_local std::uint32_t t_young_allocations __attribute__((tls_model("initial-exec"))) = 0;
constinit thread_local std::uint32_t t_young_remote_frees __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace

// --- the spans a cache owns -------------------------------------------------------

namespace {

// An awake span with no block out: kept for reuse while the thread's burst
// bound allows (a burst of frees followed by a burst of mallocs then never
// touches the page heap), else given back. The span is on no list: callers
// take it off the one it was on (or it was current, or asleep).
void span_emptied(ThreadCache* cache, Span* span) noexcept {
  std::size_t cls = span->owner_class;
  verify_empty_span(span);
  // A short span of a class the thread holds several spans of: the class's
  // bursts outgrow its short spans (25 blocks of 1 KiB: two of them, every
  // span event twice per round). From now on its spans are long
  // (pages_wanted), and this one goes to the page heap rather than being
  // kept, since a kept span is taken again before any new one.
  const bool outgrown = span->page_count != class_info(cls).long_pages && cache->owned_spans[cls] >= kLongSpansAfter;
  if (outgrown) cache->long_wanted |= std::uint64_t{1} << cls;
  if (!outgrown && cache->kept_empty_bytes + span->bytes() <= cache->max_kept_bytes * kBurstKeptFactor) {
    span->kept_empty = true;
    span->used_epoch = cache->scavenge_epoch;  // idle from now
    span->idle_since = monotonic_ns();         // for the surplus over max_kept_bytes
    cache->kept_empty_bytes += span->bytes();
    cache->partial[cls].push_back(span);  // spans with live blocks are used first
    return;
  }
  --cache->owned_spans[cls];
  g_page_heap.deallocate(span);
}

// Takes a kept empty span back into use.
void unkeep(ThreadCache* cache, Span* span) noexcept {
  if (!span->kept_empty) return;
  span->kept_empty = false;
  cache->kept_empty_bytes -= span->bytes();
}

// Gives a kept empty span of `spans` to the page heap with the time it was
// kept, so that the page heap's decay counts its idle time already spent.
void give_back_kept_span(ThreadCache* cache, SpanList& spans, Span* span) noexcept {
  unkeep(cache, span);
  spans.remove(span);
  --cache->owned_spans[span->owner_class];
  g_page_heap.deallocate(span, span->idle_since);
}

// An empty span this thread keeps for another class, of the span length
// `cls` wants now (`pages`): a burst of one mix of sizes freed, then another
// allocated, and the pages serve again without a visit to the page heap.
// Made over for `cls`: the owner tags stay (same owner), the blocks start
// over as never used.
Span* reuse_kept_span_of_another_class(ThreadCache* cache, std::size_t cls, std::uint32_t pages) noexcept {
  if (cache->kept_empty_bytes == 0) return nullptr;
  for (std::size_t other = 1; other < kNumClasses; ++other) {
    if (other == cls) continue;
    Span* span = cache->partial[other].tail;
    if (span == nullptr || !span->kept_empty || span->page_count != pages) continue;
    unkeep(cache, span);
    cache->partial[other].remove(span);
    --cache->owned_spans[other];
    format_small_span(span, cls);  // verified when it emptied
    // Tagged with us already: only the class words change (no other thread
    // may free into an empty span), and the tag if one class lists and the
    // other does not (fetched).
    g_page_map.set_page_classes(span->first_page, span->page_count, cls);
    return span;
  }
  return nullptr;
}

// Before a thread takes pages it has not had, it gives the page heap about
// a span's worth of its kept empty spans of other lengths (those of the
// same length are made over instead, above): the page heap then serves the
// new span from memory already backed, adjacent spans coalescing there. A
// thread whose bursts move from one size to another (16, then 32, then 64 B:
// spans of 1, 2 and 4 pages) would otherwise keep the old sizes' spans idle
// while it writes new pages.
void release_kept_spans_of_other_lengths(ThreadCache* cache, std::uint32_t pages) noexcept {
  if (cache->kept_empty_bytes == 0) return;
  std::size_t released = 0;
  for (std::size_t other = 1; other < kNumClasses && released < pages; ++other) {
    SpanList& spans = cache->partial[other];
    // From the back, up to the first span of the wanted length (the next
    // make-over takes that one): a walk as long as what it releases.
    while (released < pages && spans.tail != nullptr && spans.tail->kept_empty && spans.tail->page_count != pages) {
      released += spans.tail->page_count;
      give_back_kept_span(cache, spans, spans.tail);
    }
  }
}

// How many pages the next span `cls` takes from outside the thread's lists
// has: the class's short span while the thread owns fewer than
// kLongSpansAfter spans of it, its long span from then on (a thread that
// holds that many is in a burst of the class, and each span then costs its
// per-span events over twice the blocks; docs/design.md, *Size classes*),
// and always once a short span of the class emptied while the thread held
// that many (long_wanted: span_emptied).
std::uint32_t pages_wanted(const ThreadCache* cache, std::size_t cls) noexcept {
  const SizeClassInfo& info = class_info(cls);
  return cache->owned_spans[cls] >= kLongSpansAfter || ((cache->long_wanted >> cls) & 1) ? info.long_pages : info.span_pages;
}

// Counts a span taken for `cls` from outside its lists, and gives its
// pages the tag the class's spans have (a span comes tagged with the plain
// tag, or with another class's).
Span* fetched(ThreadCache* cache, std::size_t cls, Span* span) noexcept {
  ++cache->owned_spans[cls];
  if (const std::uintptr_t tag = own_tag(cache, cls); g_page_map.owner_tag(span->start()) != tag)
    g_page_map.set_owner_tag(span->first_page, span->page_count, tag);
  return span;
}

// Which of a class's listed spans (a non-empty list) serves next: spans with
// live blocks first (the front); among the empty ones kept at the back, the
// one emptied last: its blocks are the likeliest to be in the caches, and
// the oldest age out (release_idle_surplus). The first emptied would cycle
// a small working set through every span a burst left (1 KiB blocks, 100
// at a time after a burst of 100,000: 18.6 against 10.5 ns per pair).
Span* first_listed_span(const SpanList& partial) noexcept {
  return partial.head->kept_empty ? partial.tail : partial.head;
}

// Takes `span` off the class's list to serve allocations (kept no more).
Span* take_listed_span(ThreadCache* cache, SpanList& partial, Span* span) noexcept {
  partial.remove(span);
  unkeep(cache, span);
  return span;
}

// Sleepers wake_sleeper looks at, from the oldest: a span each.
constexpr std::uint32_t kSleeperLooks = 8;

// Before the thread takes memory it does not hold for `cls`, a sleeping span
// of the class serves if blocks came back to it: among the oldest
// kSleeperLooks, the first with wake_frees free blocks, else the one with
// the most. A sleeper asleep with free blocks holds up to a quarter of them
// free (fewer than wake_frees when it slept, fewer than wake_frees frees
// since), and one asleep drained wakes by itself only when it empties
// (core/span.h, SleepState), so a program whose live set shrinks and grows by
// turns (a server) would otherwise take new pages beside them. The oldest
// have had the longest time to get blocks back. One look when the oldest
// has wake_frees free (one line), at most kSleeperLooks when none has: a
// burst that fills span after span (no frees) pays that per new span (one
// look only, with drained sleepers waking only so, the 2-thread server's
// peak RSS was 1.03x; docs/design.md, *2026-12-07 (session 22)*).
Span* wake_sleeper(ThreadCache* cache, std::size_t cls) noexcept {
  SpanList& asleep = cache->sleeping[cls];
  Span* best = nullptr;
  std::uint32_t best_free = 0, looks = 0;
  for (Span* span = asleep.tail; span != nullptr && looks < kSleeperLooks; span = span->prev, ++looks) {
    const std::uint32_t free = span_free_count(span);
    if (free > best_free) {
      best = span;
      best_free = free;
    }
    if (free >= span_wake_frees(span)) break;
  }
  if (best == nullptr) return nullptr;  // none came back
  asleep.remove(best);
  wake_span(best);
  return best;
}

// Takes a sleeping span of class `cls` off its sleeping list and puts it,
// awake, at the front of the class's list of spans to allocate from.
void wake_onto_list(ThreadCache* cache, std::size_t cls, Span* span) noexcept {
  cache->sleeping[cls].remove(span);
  wake_span(span);
  cache->partial[cls].push(span);
}

// Wakes the class's spans asleep drained that have wake_frees free blocks
// (onto its list, where scavenge and flushes give back their pages without
// a live block): frees alone never wake them before they empty, so a burst
// the program then freed all but a few blocks of would otherwise keep every
// page resident (2,000,000 blocks 99 % freed at random: 249 against 129
// MiB resident 2 s later). A span asleep with free blocks wakes at
// wake_frees by itself. A walk over the class's sleepers: once a decay
// period, and on strata_release_free_memory.
void wake_drained_sleepers(ThreadCache* cache, std::size_t cls) noexcept {
  SpanList& asleep = cache->sleeping[cls];
  for (Span* span = asleep.head; span != nullptr;) {
    Span* next = span->next;
    if (span->sleeping == kAsleepDrained && span_free_count(span) >= span_wake_frees(span))
      wake_onto_list(cache, cls, span);
    span = next;
  }
}

// The next span to allocate class `cls` from: an owned one with free blocks
// (first_listed_span), an owned sleeping one with some, an empty one kept
// for another class, an unowned one, a fresh one.
Span* next_span(ThreadCache* cache, std::size_t cls) noexcept {
  SpanList& partial = cache->partial[cls];
  if (!partial.empty()) return take_listed_span(cache, partial, first_listed_span(partial));
  if (Span* span = wake_sleeper(cache, cls)) return span;
  const std::uint32_t pages = pages_wanted(cache, cls);
  if (Span* span = reuse_kept_span_of_another_class(cache, cls, pages)) return fetched(cache, cls, span);
  if (Span* span = g_central[cls].adopt(cache)) {
    ++cache->stats.spans_adopted;
    ++cache->spans_taken;
    return fetched(cache, cls, span);
  }
  release_kept_spans_of_other_lengths(cache, pages);
  Span* span = g_page_heap.allocate_small(pages, cache->runway);
  if (span == nullptr) return nullptr;
  init_small_span(span, cls, cache);
  ++cache->stats.spans_new;
  ++cache->spans_taken;
  return fetched(cache, cls, span);
}

// A span with too few free blocks to be worth a word sleeps, on the
// thread's sleeping list, until enough come back (span_countdown_hit).
inline void put_to_sleep(ThreadCache* cache, Span* span) noexcept {
  sleep_span(span);
  cache->sleeping[span->owner_class].push(span);
}

// Where the current span's next word is looked for: after the word it gave
// last (the allocation word's, which came from the current span).
inline std::uint32_t next_word_of_current(const ThreadCache* cache, std::size_t cls) noexcept {
  return cache->words[cls].span_word + 1;
}

// Makes `taken` (bits of `span`, the class's current span, `blocks` of
// them) the class's allocation word.
void install_word(ThreadCache* cache, std::size_t cls, Span* span, const TakenWord& taken, std::uint32_t blocks) noexcept {
  count_word_for_listing(cache, blocks, span->free_bits[taken.word] == 0 && !taken.paged_fresh);
  AllocWord& word = cache->words[cls];
  word.bits = taken.bits;
  word.base = taken.base;
  word.span_word = taken.word;
  ++cache->stats.words_taken;
  span->used_epoch = cache->scavenge_epoch;
}

// A word of `span` (the class's current span, worth a word) becomes the
// allocation word, counted against the sampling countdown as refills count
// every word; false, and nothing taken, when a sampling point falls in it
// (allocate_slow cuts the word there).
__attribute__((always_inline)) inline bool take_counted_word(ThreadCache* cache, std::size_t cls, Span* span,
                                                             std::uint32_t start) noexcept {
  TakenWord taken;
  if (!choose_free_word(span, cache->spans_taken < kBusySpans, taken, start)) return false;
  const std::uint32_t blocks = count_bits(taken.bits);
  const std::int64_t bytes = static_cast<std::int64_t>(blocks * class_size(cls));
  if (t_bytes_until_sample < bytes) return false;
  t_bytes_until_sample -= bytes;
  take_word(span, taken, blocks);
  --cache->slow_until_housekeeping;
  install_word(cache, cls, span, taken, blocks);
  return true;
}

// Work that a malloc slow path must do before a word is taken from `span`
// (the class's current span): housekeeping, an inbox to drain, a sample to
// take, parked pages to count back. take_next_word and
// refill_emptied_current leave the word to allocate_slow then.
inline bool slow_path_work_due(const ThreadCache* cache, std::size_t cls, const Span* span) noexcept {
  return cache->slow_until_housekeeping <= 0 || !cache->inbox.empty() ||
         ((cache->sample_pending[cls >> 6] >> (cls & 63)) & 1) != 0 || span->any_parked;
}

// The current span emptied (every block came back) while the class's word
// was empty: the next malloc of the class would take its word from this
// span on a slow path of its own. Taken now, the burst that emptied it costs
// one slow event, not two (a burst of 25 mixed blocks a round: a word ran
// dry every 19 mallocs, its malloc mispredicted 6 % of the time). Left to
// malloc when its slow path has work due (housekeeping, an inbox to drain, a
// sample, parked pages), so that those still happen as often as words are
// taken.
void refill_emptied_current(ThreadCache* cache, std::size_t cls, Span* span) noexcept {
  if (slow_path_work_due(cache, cls, span)) return;
  take_counted_word(cache, cls, span, next_word_of_current(cache, cls));
}

// Makes the class's allocation word non-empty from the current span: its
// next word of free bits (find_free_word), taken in O(1). A span with too
// few free blocks to be worth a slow path (fewer than wake_frees) sleeps
// while other spans have more, and the next span becomes current. Returns
// how many blocks the word holds; 0 when the OS refuses memory.
std::uint32_t refill(ThreadCache* cache, std::size_t cls) noexcept {
  std::uint32_t start = next_word_of_current(cache, cls);
  for (;;) {
    Span* span = cache->current[cls];
    if (span != nullptr) {
      std::uint32_t free = span->capacity - span->countdown;
      if (free >= span_wake_frees(span) || (free != 0 && cache->partial[cls].empty())) {
        TakenWord taken;
        if (!take_free_word(span, taken, cache->spans_taken < kBusySpans, start)) return 0;  // cannot happen: free != 0
        const std::uint32_t blocks = count_bits(taken.bits);
        install_word(cache, cls, span, taken, blocks);
        return blocks;
      }
      put_to_sleep(cache, span);
      cache->current[cls] = nullptr;
    }
    span = next_span(cache, cls);
    if (span == nullptr) return 0;
    cache->current[cls] = span;
    start = kDensestWord;
  }
}

// --- heap profiling: counting allocation words ---------------------------------------

// Gives back the blocks of the class's allocation word from its `keep`-th on
// to the current span: the word ends before the sampled allocation.
void cut_word(ThreadCache* cache, std::size_t cls, std::uint64_t keep) noexcept {
  AllocWord& word = cache->words[cls];
  std::uint64_t kept = 0, rest = word.bits;
  for (std::uint64_t i = 0; i < keep && rest != 0; ++i) {
    kept |= rest & (~rest + 1);  // the lowest bit
    rest &= rest - 1;
  }
  word.bits = kept;
  // The current span: an empty countdown needs no action.
  return_free_bits(cache->current[cls], cache->words[cls].span_word, rest);
}

// Counts a word the slow path just took against the sampling countdown
// (profile/sampler.h), in O(1) unless a sampling point falls inside it: then
// the word is cut before the block at that point, and the malloc that finds
// it empty is the sampled one (sample_pending). Every block handed out by
// the fast path was counted here: frees never refill these words.
void count_for_sampling(ThreadCache* cache, std::size_t cls, std::uint64_t blocks) noexcept {
  const std::uint64_t size = class_size(cls);
  std::uint64_t counted = 0;
  while (counted < blocks) {
    std::int64_t left = t_bytes_until_sample;
    std::uint64_t rest = (blocks - counted) * size;
    if (left >= 0 && static_cast<std::uint64_t>(left) >= rest) {
      t_bytes_until_sample = left - static_cast<std::int64_t>(rest);
      return;
    }
    // The point falls in the block after the `before` ones that fit.
    std::uint64_t before = left <= 0 ? 0 : static_cast<std::uint64_t>(left) / size;
    t_bytes_until_sample = left - static_cast<std::int64_t>(before * size);
    if (sampling_point_in(size)) {
      cut_word(cache, cls, counted + before);
      cache->sample_pending[cls >> 6] |= std::uint64_t{1} << (cls & 63);
      cache->recent[cls].sample_pending = 1;
      return;
    }
    counted += before + 1;  // not sampled (profiling off, a new thread arming): count on
  }
}

bool take_sample_pending(ThreadCache* cache, std::size_t cls) noexcept {
  std::uint64_t bit = std::uint64_t{1} << (cls & 63);
  if ((cache->sample_pending[cls >> 6] & bit) == 0) return false;
  cache->sample_pending[cls >> 6] &= ~bit;
  cache->recent[cls].sample_pending = 0;
  return true;
}

// Puts the blocks still on the allocation word back in the current span
// (thread exit, flushes; the span's countdown may reach 0: the caller looks).
void return_alloc_word(ThreadCache* cache, std::size_t cls) noexcept {
  AllocWord& word = cache->words[cls];
  std::uint64_t bits = word.bits;
  word.bits = 0;
  if (Span* span = cache->current[cls]) return_free_bits(span, cache->words[cls].span_word, bits);
}

// Files the current span as an ordinary partial span (or empty one).
void retire_current(ThreadCache* cache, std::size_t cls) noexcept {
  Span* span = cache->current[cls];
  if (span == nullptr) return;
  cache->current[cls] = nullptr;
  if (span->countdown == 0) return span_emptied(cache, span);
  cache->partial[cls].push(span);
}

}  // namespace

void span_countdown_hit(ThreadCache* cache, Span* span) noexcept {
  if (span->countdown == ~std::uint32_t{0}) countdown_wrapped(span);
  std::size_t cls = span->owner_class;
  if (span->sleeping == kAsleep) {
    // Enough of a full span's blocks came back: it serves allocations again.
    wake_onto_list(cache, cls, span);
    return;
  } else if (span->sleeping == kAsleepDrained) {
    // Every block of a span a burst used up came back: it empties below,
    // straight from the sleeping list (not onto the class's list and off
    // again: a burst freed in order meets this once per span).
    cache->sleeping[cls].remove(span);
    wake_span(span);
  } else if (span == cache->current[cls]) {
    // Every block came back. The current span stays current (its bits feed
    // the next allocation word); any other goes. Blocks still on the word
    // count as out: a current span cannot empty while its word holds any,
    // unless one of them was freed (a double free the bit could not see).
    const AllocWord& word = cache->words[cls];
    if (word.bits != 0) {
      std::uint64_t both = word.bits & span->free_bits[cache->words[cls].span_word];
      std::uint64_t which = static_cast<std::uint64_t>(__builtin_ctzll(both != 0 ? both : word.bits));
      report_misuse(reinterpret_cast<void*>(word.base + which * word.size),
                    "double free (freed again while it waited on its thread's allocation word)");
    }
    refill_emptied_current(cache, cls, span);
    return;
  } else {
    cache->partial[cls].remove(span);  // an awake span other than the current one is listed
  }
  span_emptied(cache, span);
  // A program that only frees still gives memory back on time.
  if (--cache->slow_until_housekeeping < 0) {
    cache->slow_until_housekeeping = kSlowPathsPerHousekeeping;
    housekeeping(cache);
  }
}

// --- receiving blocks other threads freed -------------------------------------------

namespace {

// A block another thread freed, of `span`, which `cache` owns: its bit is
// set, as free_owned does, after a check free_owned cannot make: a block
// on the cache's allocation word is free already. One multiply gives the
// block's place for both. True when the span's countdown ran out (the span
// may have gone back to the page heap or woken up since).
bool receive_owned(ThreadCache* cache, Span* span, void* block) noexcept {
  const BlockPlace place = place_of(span, block);
  const std::size_t cls = span->owner_class;
  const AllocWord& word = cache->words[cls];  // the word's bit first: most often clear, one test
  if (((word.bits >> place.bit) & 1) != 0 && cache->current[cls] == span && place.word == word.span_word)
    block_freed_twice(block);
  if (__builtin_expect(set_free_bit_at(span, place), 0) && STRATA_CHECK_DOUBLE_FREE) {
    block_freed_twice(block);
    return true;
  }
  if (__builtin_expect(count_block_back(span->countdown), 0)) {
    span_countdown_hit(cache, span);
    return true;
  }
  return false;
}

// A block sent to us for a span we no longer own: the sender read the
// page's owner tag before the span changed hands. A live block's span is
// still small and of the same class (it cannot be released while the block
// is out): the block goes on to the new owner. Anything else means the span
// was released meanwhile, so the block was free already when it was sent.
void forward_block(ThreadCache* cache, void* block, Span* span) noexcept {
  if (span == nullptr || span->state != SpanState::kSmall || !span->contains(block) || !starts_a_block(span, block))
    report_misuse(block, "double free (block of a span released while it was sent)");
  remote_free(cache, block, span);
}

// Whether we still own the span of a block of the inbox (its page's owner
// tag says so: the sender may have looked before the span changed hands):
// true with `span` set, or false with the block sent on. Inlined by hand:
// with receive_run beside it GCC called it, and blocks of mixed sizes
// (a lookup each) cost 15 more instructions per pair (callgrind).
__attribute__((always_inline)) inline bool owned_or_forwarded(ThreadCache* cache, void* block, Span*& span) noexcept {
  PageMap::EntryRef entry = g_page_map.entry_ref(block);  // one lookup for the tag and the span
  span = entry.span();
  if (owner_of_tag(entry.owner_tag()) == owner_tag_for(cache)) return true;
  forward_block(cache, block, span);
  return false;
}

// One block of the inbox, sent on its own.
void receive_block(ThreadCache* cache, void* block) noexcept {
  Span* span;
  if (owned_or_forwarded(cache, block, span)) receive_owned(cache, span, block);
}

// The blocks of the parcel from i on that follow each other in one word of
// `span` (owned), block i's next among them: their bits set with one mask,
// checked with it, counted with one subtraction, and stopped short of the
// block that would wake or empty the span. Returns how many it took (0:
// none; the caller takes block i on its own).
__attribute__((noinline)) std::uint32_t receive_run(ThreadCache* cache, Span* span, const Parcel* parcel,
                                                    std::uint32_t i, std::uint32_t count, std::uint64_t size) noexcept {
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(parcel->blocks[i]);
  const BlockPlace place = place_of(span, parcel->blocks[i]);
  const std::uint64_t room = std::min<std::uint64_t>(64 - place.bit, span->capacity - (place.word * 64 + place.bit));
  std::uint32_t n = 1;
  for (std::uintptr_t next = first + size;
       i + n < count && n < room && reinterpret_cast<std::uintptr_t>(parcel->blocks[i + n]) == next; next += size) {
    __builtin_prefetch(reinterpret_cast<void*>(next), 1);  // as the drain does
    ++n;
  }
  // Short of the block that wakes or empties the span: that one takes
  // receive_owned's path, as every span event does.
  if (span->countdown <= n) {
    if (span->countdown < 3) return 0;  // no run of two before it
    n = span->countdown - 1;
  }
  const std::uint64_t mask = (n == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1)) << place.bit;
  const std::size_t cls = span->owner_class;
  const AllocWord& word = cache->words[cls];
  std::uint64_t twice = 0;  // receive_owned's allocation-word test, for a mask (a shared helper
                            // cost that path a shift: 2 instructions per pair, callgrind)
  if ((word.bits & mask) != 0 && cache->current[cls] == span && place.word == word.span_word) twice = word.bits & mask;
  const std::uint64_t old = span->free_bits[place.word];
  if (STRATA_CHECK_DOUBLE_FREE) twice |= old & mask;
  if (__builtin_expect(twice != 0, 0))
    block_freed_twice(reinterpret_cast<void*>(first + (__builtin_ctzll(twice) - place.bit) * size));
  span->free_bits[place.word] = old | mask;
  span->countdown -= n;
  return n;
}

// The blocks of one parcel. Only the page map and the spans are read. The
// blocks themselves are asked for, for writing, a few ahead: they are about
// to be handed out again by this thread, whose program writes them
// (producer and consumer: the lines then move while the drain works, not at
// the first write after malloc). Consecutive blocks on one page (a bulk
// freed in order) share its lookup and owner check: only this thread
// changes its spans' ownership, and within the drain only where a span's
// countdown runs out; the next block then looks its page up again. From
// the second block on a page, a run of blocks that follow each other in
// one span word takes one mask (receive_run): a bulk handed over in order
// costs about 18 instructions a block less (64 B, callgrind), and blocks
// of mixed sizes, which rarely share a page, never test for a run.
void receive_parcel(ThreadCache* cache, const Parcel* parcel) noexcept {
  const std::uint32_t count = parcel->count;  // read once: the parcel is ours now
  std::uintptr_t known_page = 0;              // page of the block before, ours (0: none)
  Span* span = nullptr;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (i + 8 < count) __builtin_prefetch(parcel->blocks[i + 8], 1);
    void* block = parcel->blocks[i];
    const std::uintptr_t page = reinterpret_cast<std::uintptr_t>(block) >> kPageShift;
    if (page != known_page) {
      if (!owned_or_forwarded(cache, block, span)) {
        known_page = 0;
        continue;
      }
      known_page = page;
    } else if (const std::uint64_t size = cache->words[span->owner_class].size;
               i + 1 < count &&
               reinterpret_cast<std::uintptr_t>(parcel->blocks[i + 1]) == reinterpret_cast<std::uintptr_t>(block) + size) {
      if (const std::uint32_t taken = receive_run(cache, span, parcel, i, count, size)) {
        i += taken - 1;
        known_page = 0;  // the run may have ended on another page of the span
        continue;
      }
    }
    if (receive_owned(cache, span, block)) known_page = 0;
  }
}

}  // namespace

void drain_inbox(ThreadCache* cache) noexcept {
  InboxItem item = cache->inbox.take_all();
  while (item != 0) {
    InboxItem next = item_next(item);
    if (item_is_block(item)) {
      ++cache->stats.remote_received;
      receive_block(cache, item_block(item));
    } else {
      Parcel* parcel = item_parcel(item);
      cache->stats.remote_received += parcel->count;
      receive_parcel(cache, parcel);
      release_parcel(cache, parcel);
    }
    item = next;
  }
}

// --- housekeeping: memory goes back on time -------------------------------------------

namespace {

// Once per decay period, at the end of an epoch (an epoch lasts at least a
// period): empty spans kept through the whole epoch (kept before it began) go
// to the page heap with the time they were kept (so its next decay run
// returns their pages), and
// partly used spans that fed no allocation word in it give back the pages
// that hold no live block.
void scavenge(ThreadCache* cache, std::uint64_t now) noexcept {
  std::uint64_t period = g_options.decay_ms * 1000000ull;
  flush_recent(cache);  // an idle thread's recent blocks would keep their spans from emptying
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    wake_drained_sleepers(cache, cls);
    SpanList& spans = cache->partial[cls];
    for (Span* span = spans.tail; span != nullptr && span->kept_empty;) {
      Span* before = span->prev;
      if (span->used_epoch < cache->scavenge_epoch)  // kept a whole period: decays at the next run
        give_back_kept_span(cache, spans, span);
      span = before;
    }
    // Spans that fed no allocation word for a whole period: their pages
    // without a live block go back (a span in use keeps its pages).
    for (Span* span = spans.head; span != nullptr && !span->kept_empty; span = span->next)
      if (span->used_epoch < cache->scavenge_epoch) cache->stats.parked_bytes += park_free_units(span);
    g_central[cls].release_kept_if_idle(now, period);
  }
  g_page_heap.release_runway(cache->runway);  // its pages decay as free pages do
  flush_outbox(cache);
}

// Kept empty spans beyond max_kept_bytes that have been empty for a decay
// period go to the page heap with that age, so its next decay run returns
// their pages (checked four times per period: pages a burst left go back
// 1.25-1.5 periods after it, as the page heap's own free pages do). Within
// max_kept_bytes, kept spans wait for the end of an epoch (scavenge).
void release_idle_surplus(ThreadCache* cache, std::uint64_t now, std::uint64_t period) noexcept {
  for (std::size_t cls = 1; cls < kNumClasses && cache->kept_empty_bytes > cache->max_kept_bytes; ++cls) {
    SpanList& spans = cache->partial[cls];
    for (Span* span = spans.tail; span != nullptr && span->kept_empty;) {
      Span* before = span->prev;
      if (now - span->idle_since >= period) {
        give_back_kept_span(cache, spans, span);
        if (cache->kept_empty_bytes <= cache->max_kept_bytes) break;
      }
      span = before;
    }
  }
}

}  // namespace

void housekeeping(ThreadCache* cache) noexcept {
  g_page_heap.maybe_decay();
  std::uint64_t now = monotonic_ns();
  std::uint64_t period = g_options.decay_ms * 1000000ull;
  if (cache->kept_empty_bytes > cache->max_kept_bytes && now >= cache->next_surplus_check_ns) {
    release_idle_surplus(cache, now, period);
    cache->next_surplus_check_ns = now + period / 4;
  }
  if (now < cache->next_scavenge_ns) return;
  if (cache->next_scavenge_ns != 0) scavenge(cache, now);
  ++cache->scavenge_epoch;
  cache->next_scavenge_ns = now + (period != 0 ? period : 1000000000ull);
}

std::size_t flush_thread_cache(ThreadCache* cache) noexcept {
  flush_outbox(cache);
  drain_inbox(cache);
  flush_recent(cache);
  std::size_t released = 0;
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    if (cache->current[cls] != nullptr) {
      return_alloc_word(cache, cls);
      retire_current(cache, cls);
    }
    wake_drained_sleepers(cache, cls);
    SpanList& spans = cache->partial[cls];
    for (Span* span = spans.head; span != nullptr;) {
      Span* next = span->next;
      if (span->countdown == 0) {
        if (!span->kept_empty) verify_empty_span(span);  // kept ones were verified when they emptied
        unkeep(cache, span);
        spans.remove(span);
        --cache->owned_spans[cls];
        g_page_heap.deallocate(span);
      } else {
        std::size_t parked = park_free_units(span);
        cache->stats.parked_bytes += parked;
        released += parked;
      }
      span = next;
    }
  }
  g_page_heap.release_runway(cache->runway);
  flush_outbox(cache);
  return released;
}

// --- slow paths -----------------------------------------------------------------

namespace {

// A thread without spans of its own: one block from the central cache,
// counted on its own for heap profiling.
void* allocate_from_central(std::size_t cls, std::size_t size, CallSite site, std::size_t alignment) noexcept {
  std::size_t block_size = class_size(cls);
  if (sampling_point_in(block_size)) {
    if (void* block = allocate_sampled(size, alignment, block_size, block_size, site)) return block;
  }
  void* block = g_central[cls].allocate_one(cls);
  if (block == nullptr) errno = ENOMEM;
  return block;
}

// A block over kOwnSpanOver bytes of a class the thread has asked for
// fewer than kPagedRequests times (or of a young thread): a span of its own
// from the page heap, as every block over 32 KiB is. Freed, its pages
// coalesce with their neighbours and serve the next request of any size,
// where a class span (16 blocks: 40-512 KiB for these classes) would stay
// with the thread for its own blocks: a short program that allocates
// buffers of dozens of sizes a few times each (python starting up), or a
// short-lived thread that allocates a few large blocks, held a span per
// size. A class the thread keeps asking for soon gets its span and the
// classes' speed.
void* allocate_paged_block(std::size_t size, CallSite site) noexcept {
  std::size_t pages = (size + kPageSize - 1) >> kPageShift;
  if (sampling_point_in(size)) {  // page heap requests count their own bytes
    if (void* block = allocate_sampled(size, 0, pages << kPageShift, size, site)) return block;
  }
  Span* span = g_page_heap.allocate(pages);
  if (span == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  span->pages_zero = false;
  return span->start();
}

ThreadCache* create_cache() noexcept;

}  // namespace

namespace {

// The end of take_next_word: a word of `span` (the class's current span,
// worth a word) becomes the allocation word, unless a sampling point falls
// in it; the first block is handed out.
__attribute__((always_inline)) inline void* take_word_of(ThreadCache* cache, std::size_t cls, Span* span,
                                                         std::uint32_t start) noexcept {
  if (!take_counted_word(cache, cls, span, start)) return nullptr;
  AllocWord& word = cache->words[cls];
  return take_lowest_block(word, word.bits);
}

// The span switch refill would make, in its common cases: the current span
// (too few free blocks to be worth a word) sleeps and next_span's choice
// from the class's own list becomes current: its front (a span with live
// blocks, awake and worth a word), or, when only empty spans are left, the
// one emptied last. Random frees leave spans sparse, so a server-like
// program switches on about 1 malloc in 16; a burst of 25 blocks of 1 KiB
// empties a span in each round. Through allocate_slow and refill that cost
// 5 more instructions per malloc on the server, 4.7 per pair on the burst
// (docs/design.md, *2026-11-26 (night)* and *2026-11-27*). Anything else
// (no span, parked pages): nullptr, and refill decides. Apart from
// take_next_word, so that its early exits stay without a stack frame.
__attribute__((noinline)) void* switch_span_and_take_word(ThreadCache* cache, std::size_t cls, Span* span) noexcept {
  SpanList& partial = cache->partial[cls];
  if (partial.empty()) return nullptr;
  Span* next = first_listed_span(partial);
  if (next->any_parked || next->capacity - next->countdown < span_wake_frees(next)) return nullptr;
  put_to_sleep(cache, span);
  cache->current[cls] = take_listed_span(cache, partial, next);
  return take_word_of(cache, cls, next, kDensestWord);
}

// The common slow path, kept short: the current span (or, when it has too
// few free blocks left, the next one: switch_span_and_take_word) has a word
// of free blocks worth taking and nothing else is due (no housekeeping, no
// inbox to drain, no sample, the word's bytes do not reach the next
// sampling point). Any of those: nullptr, and allocate_slow does the whole
// work. A leaf function of its own: few registers, no stack frame.
__attribute__((noinline)) void* take_next_word(std::size_t cls) noexcept {
  ThreadCache* cache = t_cache;  // the static caches own no span: current is null
  Span* span = cache->current[cls];
  if (span == nullptr || slow_path_work_due(cache, cls, span)) return nullptr;
  if (span->capacity - span->countdown < span_wake_frees(span)) return switch_span_and_take_word(cache, cls, span);
  return take_word_of(cache, cls, span, next_word_of_current(cache, cls));
}

}  // namespace

namespace {
__attribute__((noinline)) void* allocate_word_from_entry(std::size_t size, std::uintptr_t offset) noexcept {
  if (void* block = take_next_word(class_of_offset(offset))) return block;
  return allocate_slow(class_of_offset(offset), size, STRATA_CALL_SITE);
}
}  // namespace

// Both take the class's newest recent block first (a listing class; none
// otherwise), then a word. The recent block's path makes no call: no
// stack frame.
__attribute__((noinline)) void* allocate_slow_from_entry(std::size_t size, std::uintptr_t offset) noexcept {
  if (void* block = take_recent(t_cache, offset)) return block;
  return allocate_word_from_entry(size, offset);
}

void* allocate_slow_taking_word(std::size_t cls, std::size_t size, CallSite site, std::size_t alignment) noexcept {
  if (void* block = take_recent(t_cache, word_offset(cls))) return block;
  if (void* block = take_next_word(cls)) return block;
  return allocate_slow(cls, size, site, alignment);
}

void* allocate_slow(std::size_t cls, std::size_t size, CallSite site, std::size_t alignment) noexcept {
  ThreadCache* cache = t_live_cache;
  if (cache == nullptr) {
    ensure_initialized();
    if (++t_young_allocations <= kYoungAllocations || g_options.check) {
      if (class_size(cls) > kOwnSpanOver && !g_options.check) return allocate_paged_block(size, site);
      return allocate_from_central(cls, size, site, alignment);
    }
    cache = create_cache();
    if (cache == nullptr) return allocate_from_central(cls, size, site, alignment);
  }
  if (cache == &g_dead_cache) return allocate_from_central(cls, size, site, alignment);
  // The word ran dry where heap profiling cut it: this is the sampled one.
  if (take_sample_pending(cache, cls)) {
    std::size_t block_size = class_size(cls);
    if (void* block = allocate_sampled(size, alignment, block_size, block_size, site)) return block;
  }
  if (class_size(cls) > kOwnSpanOver && cache->paged_requests[cls] < kPagedRequests) {
    ++cache->paged_requests[cls];
    return allocate_paged_block(size, site);
  }
  if (--cache->slow_until_housekeeping < 0) {
    cache->slow_until_housekeeping = kSlowPathsPerHousekeeping;
    housekeeping(cache);
    // Parcels not full yet leave here, not on every slow path: a thread
    // whose refills are frequent sent them a few blocks at a time (a CAS or
    // a central lock each, and the 32-slot scan).
    if (cache->outbox.open_parcels != 0) flush_outbox(cache);
  }
  if (!cache->inbox.empty()) drain_inbox(cache);
  AllocWord& word = cache->words[cls];
  // The drain or housekeeping may have emptied the current span and taken
  // its word already (refill_emptied_current, counted for sampling there).
  if (word.bits == 0) {
    const std::uint32_t blocks = refill(cache, cls);
    if (blocks == 0) {
      errno = ENOMEM;
      return nullptr;
    }
    count_for_sampling(cache, cls, blocks);
  }
  if (word.bits == 0 && take_sample_pending(cache, cls)) {
    // The sampling point fell on this very allocation.
    std::size_t block_size = class_size(cls);
    if (void* block = allocate_sampled(size, alignment, block_size, block_size, site)) return block;
    if (refill(cache, cls) == 0) {  // no memory for the sample: serve it unsampled
      errno = ENOMEM;
      return nullptr;
    }
  }
  return take_lowest_block(word, word.bits);
}

namespace {

// Every other free that misses the fast path: NULL, large blocks, the
// calling thread's young or dead state, blocks of unowned spans, checking
// mode, and every kind of misuse.
__attribute__((noinline)) void deallocate_general(void* block) noexcept {
  if (block == nullptr) return;
  Span* span = g_page_map.lookup(block);
  if (span == nullptr || !span->contains(block))
    report_misuse(block, "free of a pointer strata never returned");
  if (span->state != SpanState::kSmall && span->state != SpanState::kLarge)
    report_misuse(block, "double free (block of a free span)");
  if (span->state == SpanState::kLarge) {
    if (block != span->start()) report_misuse(block, "free of an interior pointer");
    if (span->sample != nullptr) release_sampled(span);  // heap profiling
    return g_page_heap.deallocate(span);
  }
  if (!starts_a_block(span, block)) report_misuse(block, "free of an interior pointer");
  if (g_options.check) checked_free(block, span);
  ThreadCache* cache = current_cache(false);
  if (cache == nullptr && t_live_cache == nullptr && span->owner.load(std::memory_order_relaxed) != nullptr &&
      ++t_young_remote_frees > kYoungRemoteFrees && !g_options.check && initialized())
    cache = create_cache();
  if (cache != nullptr && span->owner.load(std::memory_order_relaxed) == cache) {
    ++cache->stats.frees_slow;
    return free_owned(cache, span, block);
  }
  remote_free(cache, block, span);
}

}  // namespace

__attribute__((noinline)) void deallocate_radix(void* block) noexcept {
  deallocate_at(g_page_map.entry_ref(block), t_cache, block);
}

void deallocate_slow(void* block, PageMap::EntryRef entry, ThreadCache* cache) noexcept {
  // The common case first: a block of a span another thread owns (its
  // page's owner tag is set), freed by a thread whose outbox already holds
  // an open parcel for that owner. A set tag already says what
  // deallocate_general establishes one check at a time (a span strata made,
  // covering the block, small, owned by a thread), and names the owner (the
  // tag is its cache's address: the destination). The page's class and its
  // place in the span (page map) give the block's offset in the span, so
  // its start is checked without reading the span, whose line would miss on
  // nearly every remote free (the owner's drain reads it anyway). A tag
  // that is stale by now sends the block to the previous owner, which
  // forwards it or, if the span is no longer small (a double free racing
  // with its release), reports it (forward_block). Young and exiting
  // threads free through the shared empty and dead caches, whose outboxes
  // never open a parcel: they go on to deallocate_general (which counts a
  // young thread's remote frees), as does every other case.
  const std::uintptr_t tag = owner_of_tag(entry.owner_tag_acquire());
  if (tag != 0) {
    const PageMap::PageClass page = entry.page_class();
    const std::size_t offset = page.page_offset | (reinterpret_cast<std::uintptr_t>(block) & (kPageSize - 1));
    if (__builtin_expect(is_block_start(offset, page.size_class), 1)) {
      if (Parcel* parcel = cache->outbox.open_parcel_with_room(tag); __builtin_expect(parcel != nullptr, 1)) {
        if (page.size_class <= Outbox::kLastUncountedClass) {
          parcel->blocks[parcel->count++] = block;
          return;
        }
        return remote_free_counted(cache, parcel, block, page.size_class, tag);
      }
      if (cache->life == ThreadCache::Life::kAlive) return remote_free_slow(cache, block, page.size_class, tag);
    }
  }
  return deallocate_general(block);
}


// --- thread life ------------------------------------------------------------------

namespace {

void on_thread_exit(void* argument) noexcept {
  auto* cache = static_cast<ThreadCache*>(argument);
  release_thread_cache(cache);
  t_cache = &g_dead_cache;
  t_live_cache = &g_dead_cache;
  LockGuard guard(g_registry_mutex);
  cache->life = ThreadCache::Life::kDead;
  cache->dead_next = g_dead;
  g_dead = cache;
}

ThreadCache* create_cache() noexcept {
  ensure_initialized();
  ThreadCache* cache = nullptr;
  {
    LockGuard guard(g_registry_mutex);
    if (g_dead != nullptr) {  // O(1): thread churn reuses caches, never grows the registry
      cache = g_dead;
      g_dead = cache->dead_next;
      cache->dead_next = nullptr;
    }
    if (cache == nullptr) {
      cache = g_cache_pool.create();
      if (cache == nullptr) return nullptr;
      cache->registry_next = g_registry;
      g_registry = cache;
    }
    cache->life = ThreadCache::Life::kAlive;
  }
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    cache->words[cls].size = class_size(cls);
    cache->recent[cls].multiple_test = class_info(cls).multiple_test;
  }
  cache->spans_taken = 0;  // a reused cache: this thread has taken none yet
  cache->max_kept_bytes = g_options.thread_cache_bytes;
  cache->kept_empty_bytes = 0;
  cache->next_scavenge_ns = 0;
  for (std::uint8_t& asked : cache->paged_requests) asked = 0;
  if (cache->scavenge_epoch == 0) cache->scavenge_epoch = 1;  // spans unused for a whole epoch give pages back
  cache->sample_pending[0] = cache->sample_pending[1] = 0;
  for (RecentList& list : cache->recent) list.sample_pending = 0;
  t_live_cache = cache;
  t_cache = cache;
  drain_inbox(cache);  // a reused cache may have mail for spans now owned elsewhere
  flush_outbox(cache);
  pthread_setspecific(g_exit_key, cache);
  return cache;
}

}  // namespace

ThreadCache* current_cache(bool create) noexcept {
  ThreadCache* cache = t_live_cache;
  if (__builtin_expect(cache != nullptr, 1)) return cache == &g_dead_cache ? nullptr : cache;
  if (!create || g_options.check) return nullptr;
  return create_cache();
}

void release_thread_cache(ThreadCache* cache) noexcept {
  flush_outbox(cache);
  drain_inbox(cache);
  stop_listing(cache);  // abandon below gives the spans the central cache's tag
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    if (cache->current[cls] != nullptr) {
      return_alloc_word(cache, cls);
      cache->partial[cls].push(cache->current[cls]);
      cache->current[cls] = nullptr;
    }
  }
  // Every span goes: awake ones as they are, sleeping ones woken first (the
  // central cache counts blocks out), kept empty ones to the page heap
  // through abandon (no block out).
  for (SpanList& asleep : cache->sleeping) {
    while (Span* span = asleep.pop()) {
      wake_span(span);
      cache->partial[span->size_class].push(span);
    }
  }
  cache->long_wanted = 0;
  for (std::size_t cls = 1; cls < kNumClasses; ++cls) {
    for (Span* span = cache->partial[cls].head; span != nullptr; span = span->next) span->kept_empty = false;
    g_central[cls].abandon(cache->partial[cls]);
    cache->owned_spans[cls] = 0;
  }
  cache->kept_empty_bytes = 0;
  g_page_heap.release_runway(cache->runway);
  // Anything sent to us from now on finds the spans unowned, or is routed by
  // the next thread that takes this cache over.
  drain_inbox(cache);
  flush_outbox(cache);
  release_spare_parcels(cache);
}

std::size_t thread_cache_metadata_bytes() noexcept { return g_cache_pool.raw().mapped_bytes(); }

void visit_caches(void (*visit)(ThreadCache*, void*), void* context) noexcept {
  LockGuard guard(g_registry_mutex);
  for (ThreadCache* c = g_registry; c != nullptr; c = c->registry_next) visit(c, context);
}

// --- process set-up and fork ------------------------------------------------------

namespace {
constinit Mutex g_init_mutex;
// kReady: set up, the fork handlers not registered (the process has had one
// thread so far); kForkReady: both.
constexpr int kNotSetUp = 0, kReady = 1, kForkReady = 2;
std::atomic<int> g_init_state{kNotSetUp};
// Set while this thread initializes: pthread_key_create and pthread_atfork
// may allocate and come back here, and must not wait for themselves.
constinit thread_local bool t_initializing __attribute__((tls_model("initial-exec"))) = false;

// The fork handlers are registered when the process gets its second thread,
// not at the first malloc: registering runs libc code next to fork and reads
// libc's read-only data, 128 KiB of pages a single-threaded program
// otherwise never maps (*Start-up cost* in docs/design.md). While there is
// one thread, no lock of ours can be held by another thread at a fork, and
// the child is an exact copy: nothing for the handlers to do. glibc clears
// __libc_single_threaded in pthread_create before the thread exists and
// then callocs the thread's TLS vector, which comes here while the process
// still runs one thread: no fork can be under way in another thread, so
// none can miss the handlers. (Any slow path of any thread checks too.)
void register_fork_handlers() noexcept {
  LockGuard guard(g_init_mutex);
  if (g_init_state.load(std::memory_order_relaxed) == kForkReady) return;
  t_initializing = true;
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  g_init_state.store(kForkReady, std::memory_order_release);
  t_initializing = false;
}

void initialize() noexcept {
  {
    // Every other thread waits here until the set-up is complete: one that
    // went on earlier would register its cache under g_exit_key before the
    // key exists, i.e. under key 0, another library's key (ASan's), whose
    // destructor then receives a ThreadCache* at thread exit.
    LockGuard guard(g_init_mutex);
    if (g_init_state.load(std::memory_order_relaxed) >= kReady) return;
    t_initializing = true;
    load_options();
    g_page_heap.set_decay(g_options.decay_ms * 1000000ull);
    g_list_key = os_random_u64() | 1;
    g_hot.has_popcnt = os_cpu_has_popcnt();
    if (!g_options.check) __atomic_store_n(&g_hot.fast_size_limit, 1025, __ATOMIC_RELAXED);
    pthread_key_create(&g_exit_key, on_thread_exit);
    g_init_state.store(kReady, std::memory_order_release);
    t_initializing = false;
  }
  start_background_thread_if_wanted();
}
}  // namespace

bool initialized() noexcept { return g_init_state.load(std::memory_order_acquire) >= kReady; }

bool fork_handlers_registered() noexcept {
  return g_init_state.load(std::memory_order_acquire) == kForkReady;
}

void ensure_initialized() noexcept {
  const int state = g_init_state.load(std::memory_order_acquire);
  if (__builtin_expect(state == kForkReady, 1)) return;
  if (state == kReady && __libc_single_threaded) return;
  if (t_initializing) return;  // nested call from the set-up below
  if (state < kReady) initialize();
  if (!__libc_single_threaded) register_fork_handlers();
}

void fork_prepare() noexcept {
  profile_fork_prepare();
  g_init_mutex.lock();
  g_registry_mutex.lock();
  for (CentralCache& central : g_central) central.mutex().lock();
  g_page_heap.mutex().lock();
  span_pool_mutex().lock();
  parcel_depot_mutex().lock();
  parcel_pool_mutex().lock();
  g_cache_pool.raw().mutex().lock();
}

void fork_parent() noexcept {
  g_cache_pool.raw().mutex().unlock();
  parcel_pool_mutex().unlock();
  parcel_depot_mutex().unlock();
  span_pool_mutex().unlock();
  g_page_heap.mutex().unlock();
  for (CentralCache& central : g_central) central.mutex().unlock();
  g_registry_mutex.unlock();
  g_init_mutex.unlock();
  profile_fork_parent();
}

void fork_child() noexcept {
  g_cache_pool.raw().mutex().reset_after_fork();
  parcel_pool_mutex().reset_after_fork();
  parcel_depot_mutex().reset_after_fork();
  span_pool_mutex().reset_after_fork();
  g_page_heap.mutex().reset_after_fork();
  for (CentralCache& central : g_central) central.mutex().reset_after_fork();
  g_registry_mutex.reset_after_fork();
  g_init_mutex.reset_after_fork();
  profile_fork_child();
  background_thread_after_fork_child();
  // The other threads are gone. Their caches keep what they held (a bounded
  // amount): their words may have been mid-update when fork struck, so they
  // are not walked. Their spans stay owned; blocks freed here wait in their
  // inboxes. Marked kStatic so that they are never handed to a new thread.
  ThreadCache* self = t_live_cache;
  for (ThreadCache* c = g_registry; c != nullptr; c = c->registry_next)
    if (c != self && c->life == ThreadCache::Life::kAlive) c->life = ThreadCache::Life::kStatic;
}

}  // namespace strata::detail
