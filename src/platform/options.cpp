#include "platform/options.h"

#include "platform/os.h"

namespace strata::detail {

constinit Options g_options;

namespace {

bool equals(const char* a, const char* b) noexcept {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

void warn_malformed(const char* name, const char* value) noexcept {
  os_write_stderr("strata: warning: ignoring malformed ");
  os_write_stderr(name);
  os_write_stderr("=");
  os_write_stderr(value);
  os_write_stderr(" (using the default)\n");
}

void read_bool(const char* name, bool& target) noexcept {
  const char* value = os_getenv(name);
  if (value == nullptr) return;
  if (equals(value, "1") || equals(value, "true") || equals(value, "on") || equals(value, "yes"))
    target = true;
  else if (equals(value, "0") || equals(value, "false") || equals(value, "off") || equals(value, "no"))
    target = false;
  else
    warn_malformed(name, value);
}

// Digits with an optional K, M or G suffix (binary units); false if malformed.
bool parse_size(const char* text, std::uint64_t& out) noexcept {
  std::uint64_t value = 0;
  const char* p = text;
  if (*p < '0' || *p > '9') return false;
  while (*p >= '0' && *p <= '9') {
    std::uint64_t digit = static_cast<std::uint64_t>(*p - '0');
    if (value > (~std::uint64_t{0} - digit) / 10) return false;
    value = value * 10 + digit;
    ++p;
  }
  int shift = 0;
  if (*p == 'k' || *p == 'K') shift = 10;
  else if (*p == 'm' || *p == 'M') shift = 20;
  else if (*p == 'g' || *p == 'G') shift = 30;
  if (shift != 0) {
    ++p;
    if (*p == 'i' || *p == 'I') ++p;
    if (*p == 'b' || *p == 'B') ++p;
  }
  if (*p != '\0') return false;
  if (shift != 0 && value > (~std::uint64_t{0} >> shift)) return false;
  out = value << shift;
  return true;
}

template <class T>
void read_number(const char* name, T& target, std::uint64_t min, std::uint64_t max) noexcept {
  const char* value = os_getenv(name);
  if (value == nullptr) return;
  std::uint64_t parsed = 0;
  if (!parse_size(value, parsed) || parsed < min || parsed > max) {
    warn_malformed(name, value);
    return;
  }
  target = static_cast<T>(parsed);
}

// A string option copied into a fixed buffer (the environment may change).
void read_text(const char* name, char* target, std::size_t capacity) noexcept {
  const char* value = os_getenv(name);
  if (value == nullptr) return;
  std::size_t n = 0;
  while (value[n] != '\0' && n < capacity) ++n;
  if (n == 0 || n >= capacity) {
    warn_malformed(name, value);
    return;
  }
  for (std::size_t i = 0; i <= n; ++i) target[i] = value[i];
}

}  // namespace

void load_options() noexcept {
  read_bool("STRATA_CHECK", g_options.check);
  read_bool("STRATA_VERBOSE", g_options.verbose);
  read_number("STRATA_THREAD_CACHE_BYTES", g_options.thread_cache_bytes, 64 << 10,
              std::uint64_t{1} << 36);
  read_number("STRATA_DECAY_MS", g_options.decay_ms, 0, std::uint64_t{1} << 40);
  read_bool("STRATA_BACKGROUND_THREAD", g_options.background_thread);
  read_bool("STRATA_HUGE_PAGES", g_options.huge_pages);
  read_bool("STRATA_SHOW_STATS", g_options.show_stats);
  read_number("STRATA_PROFILE_SAMPLE", g_options.profile_sample, 0, std::uint64_t{1} << 40);
  read_bool("STRATA_PROFILE", g_options.profile);
  read_number("STRATA_PROFILE_TOP", g_options.profile_top, 0, 100);
  read_text("STRATA_PROFILE_PATH", g_options.profile_path, sizeof(g_options.profile_path));
}

bool flat_page_map_wanted() noexcept {
  bool flat = true;
  read_bool("STRATA_FLAT_PAGE_MAP", flat);
  return flat;
}

}  // namespace strata::detail
