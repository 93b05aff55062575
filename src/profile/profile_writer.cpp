#include "profile/profile_writer.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "platform/options.h"
#include "platform/os.h"
#include "profile/fd_writer.h"
#include "profile/sample_store.h"
#include "profile/sampler.h"
#include "profile/top_report.h"

namespace strata::detail {

namespace {

std::uint64_t rounded(double value) noexcept { return value <= 0 ? 0 : static_cast<std::uint64_t>(value + 0.5); }

// One line per site, with the estimates (unsampled already): the header says
// "heapprofile", which both pprof tools read as counts to take as they are.
void write_site(FdWriter& out, const SiteCounters& site) noexcept {
  out.number(rounded(site.live_objects), 6).text(": ").number(rounded(site.live_estimate), 8).text(" [")
      .number(rounded(site.total_objects), 6).text(": ").number(rounded(site.total_estimate), 8).text("] @");
  for (std::uint32_t i = 0; i < site.stack->depth; ++i)
    out.put(' ').hex(reinterpret_cast<std::uintptr_t>(site.stack->frames[i]));
  out.put('\n');
}

void copy_maps(FdWriter& out) noexcept {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char chunk[1024];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.bytes(chunk, static_cast<std::size_t>(n));
  }
  close(fd);
}

int write_heap_profile(int fd) noexcept {
  FdWriter out(fd);
  {
    LockGuard guard(g_sample_store.mutex());
    std::uint64_t live_count = 0, live_bytes = 0, total_count = 0, total_bytes = 0;
    g_sample_store.for_each_site_locked([&](const SiteCounters& site) {
      live_count += rounded(site.live_objects);
      live_bytes += rounded(site.live_estimate);
      total_count += rounded(site.total_objects);
      total_bytes += rounded(site.total_estimate);
    });
    out.text("heap profile: ").number(live_count, 6).text(": ").number(live_bytes, 8).text(" [")
        .number(total_count, 6).text(": ").number(total_bytes, 8).text("] @ heapprofile\n");
    g_sample_store.for_each_site_locked([&](const SiteCounters& site) { write_site(out, site); });
  }
  out.text("\nMAPPED_LIBRARIES:\n");
  copy_maps(out);
  out.flush();
  return out.ok() ? 0 : out.error();
}

}  // namespace

int dump_heap_profile(const char* path) noexcept {
  if (path == nullptr || *path == '\0') {
    errno = EINVAL;
    return -1;
  }
  ProfilerReentryGuard guard;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  int error = write_heap_profile(fd);
  if (close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    errno = error;
    return -1;
  }
  return 0;
}

namespace {

// "<prefix>.<pid>.heap" into `path` (a fixed buffer: no allocation).
void exit_profile_path(char* path, std::size_t capacity) noexcept {
  std::size_t n = 0;
  auto append = [&](const char* s) {
    while (*s != '\0' && n + 1 < capacity) path[n++] = *s++;
  };
  append(g_options.profile_path);
  append(".");
  char digits[24];
  int d = 0;
  for (auto pid = static_cast<unsigned long>(getpid()); ; pid /= 10) {
    digits[d++] = static_cast<char>('0' + pid % 10);
    if (pid < 10) break;
  }
  while (d > 0 && n + 1 < capacity) path[n++] = digits[--d];
  append(".heap");
  path[n] = '\0';
}

}  // namespace

void write_profile_at_exit() noexcept {
  int saved_errno = errno;
  if (g_options.profile) {
    static char path[sizeof(g_options.profile_path) + 48];
    exit_profile_path(path, sizeof path);
    if (dump_heap_profile(path) == 0) {
      os_write_stderr("strata: heap profile written to ");
      os_write_stderr(path);
      os_write_stderr("\n");
    } else {
      os_write_stderr("strata: could not write the heap profile ");
      os_write_stderr(path);
      os_write_stderr(" (errno ");
      os_write_stderr_u64(static_cast<std::uint64_t>(errno), 10);
      os_write_stderr(")\n");
    }
  }
  if (g_options.profile_top != 0) print_top_sites(2, g_options.profile_top);
  errno = saved_errno;
}

}  // namespace strata::detail
