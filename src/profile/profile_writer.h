// The heap profile file: gperftools' legacy text format with Poisson
// sampling, which both `google-pprof` (gperftools' perl pprof) and
// `go tool pprof` read:
//
//   heap profile: <live samples>: <live bytes> [<samples>: <bytes>] @ heap_v2/<interval>
//   <n>: <bytes> [<n>: <bytes>] @ 0x<caller> 0x<its caller> ...      (one line per site and size range)
//   ...
//
//   MAPPED_LIBRARIES:
//   <a copy of /proc/self/maps>
//
// Counts are the samples as taken; the tools unsample each line with
// 1 / (1 - exp(-average size / interval)). The mapped libraries let the
// tools symbolize addresses in position-independent executables and
// shared libraries.
#pragma once

namespace strata::detail {

// Writes a profile to `path`: 0, or -1 with errno set (EINVAL for a null
// path, open(2) or write(2) errors otherwise). Never allocates.
int dump_heap_profile(const char* path) noexcept;

// STRATA_PROFILE=1 / STRATA_PROFILE_TOP=N: what the process writes at exit.
void write_profile_at_exit() noexcept;

}  // namespace strata::detail
