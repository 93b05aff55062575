"""Which allocators can be preloaded on this machine, and where they live."""
import os
import subprocess
from dataclasses import dataclass

# Row name -> (shared object file name, Debian package that provides it).
PEERS = [
    ("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    ("jemalloc", "libjemalloc.so.2", "libjemalloc2"),
    ("mimalloc", "libmimalloc.so.2", "libmimalloc2.0"),
]
PEER_NAMES = [name for name, _, _ in PEERS]
SEARCH_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]


@dataclass
class Allocator:
    name: str
    preload: str  # "" for glibc (nothing preloaded)


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


def discover(strata_library, wanted=None):
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
    else:
        skipped.append(f"strata: {strata_library} not built (see the build messages above)")
    if wanted:
        found = [a for a in found if a.name in wanted or a.name == "glibc"]
    return found, skipped
