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

# strata measured a second time with one feature switched, in the jobs where
# that feature shows (issue 5): huge pages on (STRATA_HUGE_PAGES=1, read at
# start) in the large-live-set workload, and a build without free-list
# encoding (-DSTRATA_HARDENED=OFF) in the fast-path measurements.
HUGE_PAGES_ROW = "strata (huge pages)"
UNENCODED_ROW = "strata (no list encoding)"
HUGE_PAGES_JOBS = ("hugepages",)
FAST_PATH_JOBS = ("fastpath_immediate", "fastpath_batch100", "callgrind")


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


def discover(strata_library, unencoded_library=None, wanted=None):
    """Returns (allocators found, messages about the ones skipped)."""
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
    else:
        skipped.append(f"strata: {strata_library} not built (see the build messages above)")
    if unencoded_library and os.path.exists(unencoded_library):
        found.append(Allocator(UNENCODED_ROW, unencoded_library, {}, FAST_PATH_JOBS))
    elif unencoded_library:
        skipped.append(f"{UNENCODED_ROW}: {unencoded_library} not built (bench/run builds it with "
                       "-DSTRATA_HARDENED=OFF unless --no-build is given)")
    if wanted:
        found = [a for a in found if a.name in wanted or a.name == "glibc"]
    return found, skipped
