#include "profile/top_report.h"

#include <dlfcn.h>

#include "platform/mutex.h"
#include "profile/fast_math.h"
#include "profile/fd_writer.h"
#include "profile/sample_store.h"
#include "profile/sampler.h"

namespace strata::detail {

namespace {

// Frames shown per site: enough to tell the callers apart.
constexpr std::uint32_t kFramesShown = 8;

struct TopSite {
  double live_bytes;
  double live_objects;
  double allocated_bytes;
  const StackTrace* stack;  // interned stacks are never freed
  std::uint32_t depth;
  void* frames[kFramesShown];
};

// A copy of the winners, taken under the store's lock and symbolized after
// it (static: too large for a small thread stack; guarded by g_report_mutex).
constinit Mutex g_report_mutex;
TopSite g_top[kMaxTopSites];

const char* base_name(const char* path) noexcept {
  const char* base = path;
  for (const char* p = path; *p != '\0'; ++p)
    if (*p == '/') base = p + 1;
  return base;
}

void print_frame(FdWriter& out, void* address) noexcept {
  auto pc = reinterpret_cast<std::uintptr_t>(address);
  Dl_info info{};
  // pc - 1: a return address may be the first byte after its function.
  out.text("        ");
  if (dladdr(reinterpret_cast<void*>(pc - 1), &info) != 0 && info.dli_fname != nullptr) {
    if (info.dli_sname != nullptr) {
      out.text(info.dli_sname).text("+").hex(pc - reinterpret_cast<std::uintptr_t>(info.dli_saddr));
    } else {
      out.hex(pc - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
    }
    out.text("  (").text(base_name(info.dli_fname)).text(")\n");
  } else {
    out.hex(pc).text("\n");
  }
}

}  // namespace

void print_top_sites(int fd, std::uint32_t count) noexcept {
  if (count == 0) return;
  if (count > kMaxTopSites) count = kMaxTopSites;
  ProfilerReentryGuard guard;
  LockGuard report_guard(g_report_mutex);
  const double interval = static_cast<double>(sampling_interval_of_samples());
  std::uint32_t found = 0;
  double total_live = 0, total_objects = 0;
  std::uint64_t live_samples = 0;
  {
    LockGuard store_guard(g_sample_store.mutex());
    g_sample_store.for_each_stack_locked([](StackTrace& stack) {
      stack.report_bytes = stack.report_objects = 0;
    });
    // Live bytes and objects per stack (all its size ranges).
    g_sample_store.for_each_site_locked([&](const SiteCounters& site) {
      if (site.live_count == 0) return;
      auto* stack = const_cast<StackTrace*>(site.stack);
      stack->report_bytes += site.live_estimate;
      stack->report_objects += site.live_objects;
      total_live += site.live_estimate;
      total_objects += site.live_objects;
      live_samples += site.live_count;
    });
    // Keep the `count` largest, in order (insertion into a short array).
    g_sample_store.for_each_stack_locked([&](const StackTrace& stack) {
      if (stack.report_bytes <= 0) return;
      std::uint32_t at = found < count ? found : count;
      while (at > 0 && g_top[at - 1].live_bytes < stack.report_bytes) {
        if (at < count) g_top[at] = g_top[at - 1];
        --at;
      }
      if (at >= count) return;
      TopSite& top = g_top[at];
      top.live_bytes = stack.report_bytes;
      top.live_objects = stack.report_objects;
      top.allocated_bytes = 0;
      top.stack = &stack;
      top.depth = stack.depth < kFramesShown ? stack.depth : kFramesShown;
      for (std::uint32_t f = 0; f < top.depth; ++f) top.frames[f] = stack.frames[f];
      if (found < count) ++found;
    });
    // Allocated bytes of the winners (all size ranges of their stacks).
    g_sample_store.for_each_site_locked([&](const SiteCounters& site) {
      if (site.total_count == 0) return;
      for (std::uint32_t i = 0; i < found; ++i) {
        if (g_top[i].stack != site.stack) continue;
        g_top[i].allocated_bytes += site.total_estimate;
        break;
      }
    });
  }

  FdWriter out(fd);
  out.text("strata: top ").number(found).text(" call sites by live bytes (sampled every ")
      .size(interval).text(" on average: ").number(live_samples).text(" live samples, estimated ")
      .size(total_live).text(" in ").number(static_cast<std::uint64_t>(total_objects + 0.5))
      .text(" objects)\n");
  for (std::uint32_t i = 0; i < found; ++i) {
    const TopSite& top = g_top[i];
    out.text("  #").number(i + 1).text("  ").size(top.live_bytes).text(" in use, ")
        .number(static_cast<std::uint64_t>(top.live_objects + 0.5)).text(" objects (")
        .fixed(total_live > 0 ? 100.0 * top.live_bytes / total_live : 0.0, 1).text(" %); ")
        .size(top.allocated_bytes).text(" allocated in all\n");
    for (std::uint32_t f = 0; f < top.depth; ++f) print_frame(out, top.frames[f]);
  }
  out.flush();
}

}  // namespace strata::detail
