#include "backend/page_heap.h"

#include "platform/options.h"
#include "backend/metadata_pool.h"
#include "core/page_map.h"
#include "platform/os.h"

namespace strata::detail {

constinit PageHeap g_page_heap;

std::uint64_t monotonic_ns() noexcept { return os_monotonic_coarse_ns(); }

namespace {

constinit MetadataPool<Span> g_span_pool;

// Spans visited per decay run on the allocation path: the bound on its cost.
constexpr std::size_t kDecaySpansPerRun = 256;

// --- the treap of large free spans, keyed by (page_count, first_page) -----

bool key_less(const Span* a, const Span* b) noexcept {
  return a->page_count != b->page_count ? a->page_count < b->page_count
                                        : a->first_page < b->first_page;
}

Span* rotate_right(Span* t) noexcept {
  Span* l = t->left;
  t->left = l->right;
  l->right = t;
  return l;
}

Span* rotate_left(Span* t) noexcept {
  Span* r = t->right;
  t->right = r->left;
  r->left = t;
  return r;
}

Span* treap_insert(Span* t, Span* s) noexcept {
  if (t == nullptr) {
    s->left = s->right = nullptr;
    return s;
  }
  if (key_less(s, t)) {
    t->left = treap_insert(t->left, s);
    if (t->left->priority > t->priority) t = rotate_right(t);
  } else {
    t->right = treap_insert(t->right, s);
    if (t->right->priority > t->priority) t = rotate_left(t);
  }
  return t;
}

Span* treap_merge(Span* a, Span* b) noexcept {
  if (a == nullptr) return b;
  if (b == nullptr) return a;
  if (a->priority > b->priority) {
    a->right = treap_merge(a->right, b);
    return a;
  }
  b->left = treap_merge(a, b->left);
  return b;
}

Span* treap_erase(Span* t, Span* s) noexcept {
  if (t == nullptr) return nullptr;
  if (t == s) {
    Span* merged = treap_merge(t->left, t->right);
    s->left = s->right = nullptr;
    return merged;
  }
  if (key_less(s, t)) t->left = treap_erase(t->left, s);
  else t->right = treap_erase(t->right, s);
  return t;
}

// Smallest span with at least `pages` pages; the lowest address among equals.
Span* treap_lower_bound(Span* t, std::size_t pages) noexcept {
  Span* best = nullptr;
  while (t != nullptr) {
    if (t->page_count >= pages) {
      best = t;
      t = t->left;
    } else {
      t = t->right;
    }
  }
  return best;
}

std::uint32_t priority_for(PageId page) noexcept {
  return static_cast<std::uint32_t>((page * 0x9e3779b97f4a7c15ull) >> 32);
}

template <class F>
void treap_for_each(Span* t, F&& f) noexcept {
  if (t == nullptr) return;
  treap_for_each(t->left, f);
  Span* right = t->right;  // f may not restructure, but read before the call anyway
  f(t);
  treap_for_each(right, f);
}

}  // namespace

Span* new_span() noexcept { return g_span_pool.create(); }
void delete_span(Span* span) noexcept { g_span_pool.destroy(span); }
std::size_t span_metadata_bytes() noexcept { return g_span_pool.raw().mapped_bytes(); }
Mutex& span_pool_mutex() noexcept { return g_span_pool.raw().mutex(); }

// --- filing free spans -------------------------------------------------------

void PageHeap::file_free_locked(Span* span) noexcept {
  span->state = SpanState::kFree;
  span->size_class = 0;
  span->owner.store(nullptr, std::memory_order_relaxed);
  span->priority = priority_for(span->first_page);
  if (span->page_count <= kMaxListPages && !g_options.huge_pages) {
    lists_[span->page_count].push(span);
    nonempty_[span->page_count >> 6] |= std::uint64_t{1} << (span->page_count & 63);
    span->in_treap = false;
  } else {
    large_root_ = treap_insert(large_root_, span);
    span->in_treap = true;
  }
  stats_.free_bytes += span->bytes();
  if (span->decommitted) stats_.decommitted_bytes += span->bytes();
  else decay_push_locked(span);
  ++stats_.free_spans;
}

void PageHeap::unfile_free_locked(Span* span) noexcept {
  if (!span->in_treap) {
    SpanList& list = lists_[span->page_count];
    list.remove(span);
    if (list.empty()) nonempty_[span->page_count >> 6] &= ~(std::uint64_t{1} << (span->page_count & 63));
  } else {
    large_root_ = treap_erase(large_root_, span);
    span->in_treap = false;
  }
  stats_.free_bytes -= span->bytes();
  if (span->decommitted) stats_.decommitted_bytes -= span->bytes();
  if (span->in_decay_queue) decay_remove_locked(span);
  --stats_.free_spans;
  span->state = SpanState::kDetached;
}

// --- decay: free pages go back to the OS after a while -------------------------

void PageHeap::decay_push_locked(Span* span) noexcept {
  span->decay_next = nullptr;
  span->decay_prev = decay_tail_;
  if (decay_tail_) decay_tail_->decay_next = span; else decay_head_ = span;
  decay_tail_ = span;
  span->in_decay_queue = true;
}

void PageHeap::decay_remove_locked(Span* span) noexcept {
  if (span->decay_prev) span->decay_prev->decay_next = span->decay_next; else decay_head_ = span->decay_next;
  if (span->decay_next) span->decay_next->decay_prev = span->decay_prev; else decay_tail_ = span->decay_prev;
  span->decay_next = span->decay_prev = nullptr;
  span->in_decay_queue = false;
}

void PageHeap::decommit_locked(Span* span) noexcept {
  os_decommit(span->start(), span->bytes());
  ++stats_.decommit_calls;
  span->decommitted = true;
  span->pages_zero = true;
  stats_.decommitted_bytes += span->bytes();
  if (span->in_decay_queue) decay_remove_locked(span);
}

// Visits up to `max_spans` queued spans from the oldest: old enough ones are
// decommitted, younger ones move to the back (the queue is only roughly
// ordered: a split remainder keeps its older timestamp).
std::size_t PageHeap::decay_locked(std::uint64_t now_ns, std::uint64_t min_age_ns,
                                   std::size_t max_spans) noexcept {
  std::size_t released = 0, visited = 0, queued = stats_.free_spans;
  while (decay_head_ != nullptr && (max_spans == 0 || visited < max_spans) && visited < queued) {
    Span* span = decay_head_;
    ++visited;
    if (min_age_ns == 0 || now_ns - span->free_since >= min_age_ns) {
      released += span->bytes();
      decommit_locked(span);
    } else {
      decay_remove_locked(span);
      decay_push_locked(span);
    }
  }
  return released;
}

void PageHeap::set_decay(std::uint64_t decay_ns) noexcept {
  decay_ns_.store(decay_ns, std::memory_order_relaxed);
  next_decay_at_ns_.store(0, std::memory_order_relaxed);
}

void PageHeap::after_change_locked() noexcept {
  std::uint64_t decay = decay_ns_.load(std::memory_order_relaxed);
  if (decay == 0) {
    if (decay_head_ != nullptr) decay_locked(0, 0, 0);
    return;
  }
  std::uint64_t now = monotonic_ns();
  if (now < next_decay_at_ns_.load(std::memory_order_relaxed)) return;
  // Run four times per decay period: a page goes back at most 1.25 decay
  // periods after it became free, while the heap is in use at all. A run
  // that leaves aged spans behind (a burst of frees scattered thousands of
  // spans that cannot coalesce) makes the next one due at once: each run
  // stays bounded, and the backlog drains at the pace of the slow paths.
  decay_locked(now, decay, kDecaySpansPerRun);
  bool backlog = decay_head_ != nullptr && now - decay_head_->free_since >= decay;
  next_decay_at_ns_.store(backlog ? now : now + decay / 4, std::memory_order_relaxed);
}

void PageHeap::maybe_decay() noexcept {
  std::uint64_t due = next_decay_at_ns_.load(std::memory_order_relaxed);
  if (monotonic_ns() < due) return;
  if (!mutex_.try_lock()) return;  // someone is in the heap: they will do it
  after_change_locked();
  mutex_.unlock();
}

void PageHeap::insert_free_locked(Span* span, std::uint64_t free_since) noexcept {
  // Neighbours merge only when filed (kFree): a stale page map entry may
  // point at a recycled Span object that is being split right now.
  span->state = SpanState::kDetached;
  span->free_since = free_since != 0 ? free_since : monotonic_ns();
  // Merge with the span just before: its last page maps to it.
  if (Span* before = g_page_map.lookup_page(span->first_page - 1);
      before != nullptr && before->state == SpanState::kFree &&
      before->first_page + before->page_count == span->first_page && before != span) {
    unfile_free_locked(before);
    before->page_count += span->page_count;
    before->pages_zero = before->pages_zero && span->pages_zero;
    before->decommitted = before->decommitted && span->decommitted;
    before->fully_mapped = false;
    // The younger of the two: no page goes back before it was free a period.
    if (span->free_since > before->free_since) before->free_since = span->free_since;
    delete_span(span);
    span = before;
  }
  // Merge with the span just after: its first page maps to it.
  if (Span* after = g_page_map.lookup_page(span->first_page + span->page_count);
      after != nullptr && after->state == SpanState::kFree &&
      after->first_page == span->first_page + span->page_count && after != span) {
    unfile_free_locked(after);
    span->page_count += after->page_count;
    span->pages_zero = span->pages_zero && after->pages_zero;
    span->decommitted = span->decommitted && after->decommitted;
    span->fully_mapped = false;
    if (after->free_since > span->free_since) span->free_since = after->free_since;
    delete_span(after);
  }
  map_ends_locked(span);
  file_free_locked(span);
}

// --- finding and cutting -----------------------------------------------------

Span* PageHeap::find_free_locked(std::size_t pages) noexcept {
  if (g_options.huge_pages) {
    // Address order first: a list span (filed before the option changed)
    // only when the treap has nothing.
    if (Span* span = treap_lower_bound(large_root_, pages)) return span;
  }
  if (pages <= kMaxListPages) {
    for (std::size_t word = pages >> 6; word < 3; ++word) {
      std::uint64_t bits = nonempty_[word];
      if (word == (pages >> 6)) bits &= ~std::uint64_t{0} << (pages & 63);
      if (bits != 0) {
        std::size_t n = (word << 6) + static_cast<std::size_t>(__builtin_ctzll(bits));
        if (n <= kMaxListPages) return lists_[n].head;
      }
    }
  }
  return treap_lower_bound(large_root_, pages);
}

Span* PageHeap::split_front_locked(Span* span, std::size_t pages) noexcept {
  if (span->page_count == pages) return nullptr;
  Span* rest = new_span();
  if (rest == nullptr) return nullptr;  // keep the whole span: wasteful, never wrong
  rest->first_page = span->first_page + pages;
  rest->page_count = span->page_count - pages;
  rest->pages_zero = span->pages_zero;
  rest->decommitted = span->decommitted;
  rest->free_since = span->free_since;
  span->page_count = pages;
  return rest;
}

void PageHeap::map_ends_locked(Span* span) noexcept {
  g_page_map.set(span->first_page, span);
  g_page_map.set(span->first_page + span->page_count - 1, span);
}

void PageHeap::map_whole_locked(Span* span) noexcept {
  if (!span->fully_mapped) {
    g_page_map.set_range(span->first_page, span->page_count, span);
    span->fully_mapped = true;
  }
}

// No free span fits: the next `pages` of the fresh rest become one,
// reserving first when the rest is short.
Span* PageHeap::grow_locked(std::size_t pages) noexcept {
  if (fresh_pages_ < pages && !reserve_locked(pages)) return nullptr;
  if (!release_fresh_locked(pages)) return nullptr;
  return find_free_locked(pages);
}

// The next `pages` of the fresh rest become a free span (merging with a
// free span right below them).
bool PageHeap::release_fresh_locked(std::size_t pages) noexcept {
  Span* span = new_span();
  if (span == nullptr) return false;
  span->first_page = fresh_first_;
  span->page_count = pages;
  span->pages_zero = true;
  fresh_first_ += pages;
  fresh_pages_ -= pages;
  insert_free_locked(span);
  return true;
}

bool PageHeap::reserve_locked(std::size_t pages) noexcept {
  std::size_t wanted = pages << kPageShift;
  std::size_t bytes = (wanted + kReservationBytes - 1) & ~(kReservationBytes - 1);
  if (bytes < wanted) return false;
  // Reserve ahead (address space only: MAP_NORESERVE, nothing is touched),
  // growing with the heap so a large heap needs few mappings; fall back to
  // the bare need when the OS (or RLIMIT_AS) refuses the larger one.
  std::size_t ahead = next_growth_bytes_ > bytes ? next_growth_bytes_ : bytes;
  void* memory = os_map(ahead, kReservationBytes);
  if (memory == nullptr && ahead > bytes) {
    ahead = bytes;
    memory = os_map(ahead, kReservationBytes);
  }
  if (memory == nullptr) return false;
  // Huge pages when asked for. Otherwise the system's THP mode decides,
  // except for the first reservation: with THP "always" its first touch would
  // make a whole 2 MiB resident, and a small process never needs more than a
  // few of its pages (a big heap loses nothing: later reservations follow
  // the system).
  if (g_options.huge_pages) os_advise_hugepage(memory, ahead);
  else if (stats_.reservations == 0) os_advise_no_hugepage(memory, ahead);
  if (next_growth_bytes_ < (std::size_t{64} << 20)) next_growth_bytes_ *= 2;
  PageId first = page_of(memory);
  std::size_t count = ahead >> kPageShift;
  if (!g_page_map.ensure(first, count, g_options.huge_pages)) {
    os_unmap(memory, ahead);
    return false;
  }
  stats_.mapped_bytes += ahead;
  ++stats_.reservations;
  // The older rest is free memory like any other now (without a Span for
  // it, only address space is lost).
  if (fresh_pages_ != 0 && !release_fresh_locked(fresh_pages_)) fresh_pages_ = 0;
  fresh_first_ = first;
  fresh_pages_ = count;
  return true;
}

Span* PageHeap::allocate(std::size_t pages, std::size_t align_pages, SpanState state) noexcept {
  if (pages == 0) pages = 1;
  std::size_t search = pages + align_pages - 1;
  if (search < pages || search > (std::size_t{1} << (kAddressBits - kPageShift))) return nullptr;
  LockGuard guard(mutex_);
  return allocate_locked(pages, align_pages, state);
}

Span* PageHeap::allocate_locked(std::size_t pages, std::size_t align_pages, SpanState state) noexcept {
  std::size_t search = pages + align_pages - 1;
  Span* span = find_free_locked(search);
  if (span == nullptr) span = grow_locked(search);
  if (span == nullptr) return nullptr;
  return take_free_locked(span, pages, align_pages, state);
}

Span* PageHeap::take_free_locked(Span* span, std::size_t pages, std::size_t align_pages, SpanState state) noexcept {
  unfile_free_locked(span);
  // Cut off a misaligned front, then the unused tail; both go back free.
  if (std::size_t misalign = span->first_page & (align_pages - 1); misalign != 0) {
    std::size_t skip = align_pages - misalign;
    Span* rest = split_front_locked(span, skip);
    if (rest == nullptr) {
      insert_free_locked(span);
      return nullptr;
    }
    insert_free_locked(span);
    span = rest;
  }
  if (Span* rest = split_front_locked(span, pages)) {
    map_ends_locked(rest);
    file_free_locked(rest);
  }
  return hand_out_locked(span, state);
}

Span* PageHeap::hand_out_locked(Span* span, SpanState state) noexcept {
  span->state = state;
  span->decommitted = false;
  span->next = span->prev = nullptr;
  span->in_list = false;
  map_whole_locked(span);
  if (state == SpanState::kSmall) link_small_locked(span);
  ++stats_.in_use_spans;
  stats_.in_use_bytes += span->bytes();
  after_change_locked();
  return span;
}

// --- runways: each thread's new spans side by side -----------------------------

Span* PageHeap::allocate_small(std::size_t pages, Span*& runway) noexcept {
  LockGuard guard(mutex_);
  // Resident free pages that fit come first, as for any request: reusing
  // them costs no memory. Pages never touched (or given back) are what the
  // runway holds: the thread's next spans follow each other there, where
  // threads carving a free run by turns would interleave theirs.
  Span* fit = find_free_locked(pages);
  if (fit != nullptr && !fit->pages_zero) return take_free_locked(fit, pages, 1, SpanState::kSmall);
  if (runway == nullptr || runway->page_count < pages) {
    if (runway != nullptr) release_runway_locked(runway);  // may merge with fit
    runway = take_runway_locked(pages);
    if (runway == nullptr) return allocate_locked(pages, 1, SpanState::kSmall);  // the OS refused that much
  }
  Span* span = runway;
  if (runway->page_count == pages) {
    runway = nullptr;
  } else {
    Span* rest = split_front_locked(span, pages);
    if (rest == nullptr) return allocate_locked(pages, 1, SpanState::kSmall);  // no Span object for the rest
    rest->state = SpanState::kDetached;
    map_ends_locked(rest);  // as a free span's: neighbours freed beside it see it is no free span
    runway = rest;
  }
  count_runway_locked(span, -1);
  return hand_out_locked(span, SpanState::kSmall);
}

// A new runway for spans of `pages` pages, max(kRunwayPages, 4 * pages)
// long: the front of the shortest free run that fits (pages never touched,
// as a rule: allocate_small took a resident one), else pages the heap grows
// by. Only the pages carved from it are touched.
Span* PageHeap::take_runway_locked(std::size_t pages) noexcept {
  const std::size_t wanted = pages * 4 > kRunwayPages ? pages * 4 : kRunwayPages;
  Span* span = find_free_locked(pages);
  if (span == nullptr) span = grow_locked(wanted);
  if (span == nullptr) return nullptr;
  unfile_free_locked(span);  // kDetached: spans freed beside it do not merge with it
  if (span->page_count > wanted) {
    if (Span* rest = split_front_locked(span, wanted)) {
      map_ends_locked(rest);
      file_free_locked(rest);
    }
  }
  map_ends_locked(span);
  count_runway_locked(span, +1);
  return span;
}

void PageHeap::release_runway(Span*& runway) noexcept {
  if (runway == nullptr) return;
  LockGuard guard(mutex_);
  release_runway_locked(runway);
  after_change_locked();
}

void PageHeap::release_runway_locked(Span*& runway) noexcept {
  count_runway_locked(runway, -1);
  insert_free_locked(runway, runway->free_since);
  runway = nullptr;
}

void PageHeap::count_runway_locked(const Span* span, int sign) noexcept {
  std::size_t bytes = span->bytes();
  std::size_t unbacked = span->pages_zero ? bytes : 0;  // fresh or given back: not resident
  if (sign > 0) {
    runway_bytes_ += bytes;
    runway_unbacked_bytes_ += unbacked;
  } else {
    runway_bytes_ -= bytes;
    runway_unbacked_bytes_ -= unbacked;
  }
}

void PageHeap::deallocate(Span* span, std::uint64_t free_since) noexcept {
  LockGuard guard(mutex_);
  // Owner tags of a small span's pages must not outlive it (a span reused
  // as fully mapped keeps its entries).
  if (span->state == SpanState::kSmall) {
    g_page_map.set_owner_tag(span->first_page, span->page_count, 0);
    unlink_small_locked(span);
  }
  stats_.in_use_bytes -= span->bytes();
  --stats_.in_use_spans;
  // Pages a partly used span gave back (parked units) read as zero now, but
  // not all of them: the span as a whole is neither zero nor decommitted.
  span->pages_zero = false;
  span->decommitted = false;
  span->countdown = 0;
  span->parked_units = 0;
  span->any_parked = false;
  insert_free_locked(span, free_since);
  after_change_locked();
}

void PageHeap::link_small_locked(Span* span) noexcept {
  span->small_prev = nullptr;
  span->small_next = small_spans_;
  if (small_spans_ != nullptr) small_spans_->small_prev = span;
  small_spans_ = span;
  small_span_bytes_.fetch_add(span->bytes(), std::memory_order_relaxed);
}

void PageHeap::unlink_small_locked(Span* span) noexcept {
  if (span->small_prev) span->small_prev->small_next = span->small_next; else small_spans_ = span->small_next;
  if (span->small_next) span->small_next->small_prev = span->small_prev;
  span->small_next = span->small_prev = nullptr;
  small_span_bytes_.fetch_sub(span->bytes(), std::memory_order_relaxed);
}

void PageHeap::visit_small_spans(void (*visit)(const Span*, void*), void* context) noexcept {
  LockGuard guard(mutex_);
  for (Span* span = small_spans_; span != nullptr; span = span->small_next) visit(span, context);
}

bool PageHeap::try_grow(Span* span, std::size_t pages) noexcept {
  LockGuard guard(mutex_);
  if (pages <= span->page_count) return true;
  std::size_t extra = pages - span->page_count;
  Span* after = g_page_map.lookup_page(span->first_page + span->page_count);
  if (after == nullptr || after->state != SpanState::kFree ||
      after->first_page != span->first_page + span->page_count || after->page_count < extra)
    return false;
  unfile_free_locked(after);
  Span* rest = split_front_locked(after, extra);
  if (after->page_count != extra) {  // could not split: give it back untouched
    file_free_locked(after);
    return false;
  }
  if (rest != nullptr) {
    map_ends_locked(rest);
    file_free_locked(rest);
  }
  g_page_map.set_range(after->first_page, after->page_count, span);
  span->page_count += extra;
  stats_.in_use_bytes += extra << kPageShift;
  delete_span(after);
  return true;
}

void PageHeap::shrink(Span* span, std::size_t pages) noexcept {
  LockGuard guard(mutex_);
  if (pages == 0 || pages >= span->page_count) return;
  Span* rest = split_front_locked(span, pages);
  if (rest == nullptr) return;
  stats_.in_use_bytes -= rest->bytes();
  rest->pages_zero = false;
  rest->decommitted = false;
  insert_free_locked(rest);
}

std::size_t PageHeap::decommit_free(std::uint64_t now_ns, std::uint64_t min_age_ns,
                                   std::size_t max_spans) noexcept {
  LockGuard guard(mutex_);
  return decay_locked(now_ns, min_age_ns, max_spans);
}

PageHeapStats PageHeap::stats() noexcept {
  LockGuard guard(mutex_);
  PageHeapStats copy = stats_;
  copy.fresh_bytes = fresh_pages_ << kPageShift;
  // Runways are free pages set aside for one thread: free, and not backed
  // where never touched.
  copy.free_bytes += runway_bytes_;
  copy.decommitted_bytes += runway_unbacked_bytes_;
  copy.runway_bytes = runway_bytes_;
  copy.small_span_bytes = small_span_bytes_.load(std::memory_order_relaxed);
  copy.lock_contended = mutex_.contended_count();
  return copy;
}

const char* PageHeap::validate() noexcept {
  LockGuard guard(mutex_);
  std::size_t free_bytes = 0, free_spans = 0;
  const char* problem = nullptr;
  auto check = [&](Span* s) {
    if (problem) return;
    ++free_spans;
    free_bytes += s->bytes();
    if (s->state != SpanState::kFree) problem = "a filed span is not in state kFree";
    else if (g_page_map.lookup_page(s->first_page) != s) problem = "first page of a free span does not map to it";
    else if (g_page_map.lookup_page(s->first_page + s->page_count - 1) != s) problem = "last page of a free span does not map to it";
    else if (Span* b = g_page_map.lookup_page(s->first_page - 1);
             b && b->state == SpanState::kFree && b->first_page + b->page_count == s->first_page)
      problem = "two adjacent free spans were not coalesced";
  };
  for (std::size_t n = 1; n <= kMaxListPages; ++n) {
    bool bit = (nonempty_[n >> 6] >> (n & 63)) & 1;
    if (bit != !lists_[n].empty()) return "non-empty bitmap disagrees with a list";
    for (Span* s = lists_[n].head; s != nullptr; s = s->next) {
      if (s->page_count != n) return "a span sits in the list of another length";
      check(s);
    }
  }
  treap_for_each(large_root_, [&](Span* s) {
    if (s->page_count <= kMaxListPages && !g_options.huge_pages) problem = "a short span sits in the large treap";
    if (!s->in_treap) problem = "a treap span is not marked as such";
    if (s->left && !key_less(s->left, s)) problem = "treap order broken (left)";
    if (s->right && !key_less(s, s->right)) problem = "treap order broken (right)";
    check(s);
  });
  if (problem) return problem;
  if (free_bytes != stats_.free_bytes) return "free byte count disagrees with the spans";
  if (free_spans != stats_.free_spans) return "free span count disagrees with the spans";
  return nullptr;
}

}  // namespace strata::detail
