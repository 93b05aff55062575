"""Which allocators can be preloaded on this machine, and where they live."""
import os
import subprocess
from dataclasses import dataclass, field

# Row name -> (shared object file name, Debian package that provides it).
PEERS = [
    ("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    ("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
    ("mimalloc", "libmimalloc.so.2", "libmimalloc2.0"),
]
PEER_NAMES = [name for name, _, _ in PEERS]
SEARCH_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]

# strata measured again with one feature switched:
# - huge pages on (STRATA_HUGE_PAGES=1, read at start; issue 5), in the
#   large-live-set workload only;
# - heap profiling off (STRATA_PROFILE_SAMPLE=0; issue 12: sampling is on by
#   default, so the plain "strata" row is "profiling on" and this row shows
#   what it costs), in every job;
# - hardening off: a build with -DSTRATA_HARDENED=OFF (no default
#   double-free check, inbox links stored plainly), in every job.
# The variable and the option are harmless before the features exist: the
# rows then measure the same allocator as "strata".
HUGE_PAGES_ROW = "strata (huge pages)"
PROFILING_OFF_ROW = "strata (profiling off)"
UNHARDENED_ROW = "strata (unhardened)"
LEGACY_ROW_NAMES = {"strata (no list encoding)": UNHARDENED_ROW}
FEATURE_ROWS = [(PROFILING_OFF_ROW, "heap profiling (sampling on by default)"),
                (UNHARDENED_ROW, "hardening (the double-free check)")]
HUGE_PAGES_JOBS = ("hugepages",)
# In --quick mode (a smoke test) the feature rows run only in the fast-path
# jobs, and only the unhardened build under callgrind (valgrind runs are the
# slowest part of a quick run).
FAST_PATH_JOBS = ("fastpath_immediate", "fastpath_batch100", "callgrind")
TIMED_FAST_PATH_JOBS = ("fastpath_immediate", "fastpath_batch100")


@dataclass
class Allocator:
    name: str
    preload: str  # "" for glibc (nothing preloaded)
    env: dict = field(default_factory=dict)  # extra environment of its runs
    jobs: tuple = None                       # job ids it runs in (None: all)

    def runs(self, job_id):
        return self.jobs is None or job_id in self.jobs

    @property
    def base(self):
        """The allocator a variant row belongs to ("strata" for both variants)."""
        return self.name.split(" (")[0]


def _find_library(file_name):
    for directory in SEARCH_DIRS:
        path = os.path.join(directory, file_name)
        if os.path.exists(path):
            return path
    try:  # anything else the dynamic linker knows about
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.strip().startswith(file_name + " ") and "=>" in line:
                return line.split("=>")[1].strip()
    except OSError:
        pass
    return None


def discover(strata_library, unencoded_library=None, wanted=None, quick=False):
    """Returns (allocators found, messages about the ones skipped)."""
    hardening_jobs = FAST_PATH_JOBS if quick else None
    profiling_jobs = TIMED_FAST_PATH_JOBS if quick else None
    found, skipped = [Allocator("glibc", "")], []
    for name, file_name, package in PEERS:
        path = _find_library(file_name)
        if path:
            found.append(Allocator(name, path))
        else:
            skipped.append(f"{name}: {file_name} not found (install the Debian package {package})")
    if os.path.exists(strata_library):
        found.append(Allocator("strata", strata_library))
        found.append(Allocator(HUGE_PAGES_ROW, strata_library, {"STRATA_HUGE_PAGES": "1"}, HUGE_PAGES_JOBS))
        found.append(Allocator(PROFILING_OFF_ROW, strata_library, {"STRATA_PROFILE_SAMPLE": "0"}, profiling_jobs))
    else:
        skipped.append(f"strata: {strata_library} not built (see the build messages above)")
    if unencoded_library and os.path.exists(unencoded_library):
        found.append(Allocator(UNHARDENED_ROW, unencoded_library, {}, hardening_jobs))
    elif unencoded_library:
        skipped.append(f"{UNHARDENED_ROW}: {unencoded_library} not built (bench/run builds it with "
                       "-DSTRATA_HARDENED=OFF unless --no-build is given)")
    if wanted:
        found = [a for a in found if a.name in wanted or a.name == "glibc"]
    return found, skipped
