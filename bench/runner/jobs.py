"""What bench/run runs (jobs) and how results become tables.

A job is one program invocation, run once per allocator per repetition.
A table picks result lines by workload and parameters; its rows are
allocators (preloaded ones and the pool rows printed by bench/pools)."""
import sys
from dataclasses import dataclass, field

SWEEP_SIZES = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]

# Other names for the same quantity, as printed by the bench/pools programs:
# (workload, their metric) -> the metric the tables use.
METRIC_ALIASES = {
    ("seed000_new_delete", "cycles_per_op"): "cycles_per_pair",
    ("seed000_new_delete", "ns_per_op"): "ns_per_pair",
    ("seed002_fixed", "ns_per_op"): "ns_per_pair",
    ("seed003_producer_consumer", "wall_ns_per_object"): "ns_per_object",
}


@dataclass
class Job:
    id: str
    program: str          # file name in <build>/bench
    args: list
    label: str            # for the progress line
    env: dict = field(default_factory=dict)  # environment of every run (a row's own env wins)


@dataclass
class Column:
    label: str
    metric: str
    match: dict = field(default_factory=dict)
    digits: int = 1


@dataclass
class Table:
    id: str
    title: str
    workload: str
    match: dict               # parameters every line of this table has
    columns: list
    primary: list             # columns whose values are summed into the score
    better: str               # "lower" (time) or "higher" (throughput)
    job: str                  # job whose peak RSS is shown
    seed_text: str = ""       # the seed's published figures, verbatim
    seed_rows: dict = field(default_factory=dict)  # row-name substring -> seed figure
    defaults: dict = field(default_factory=dict)   # value assumed when a line lacks a key


# Huge pages workload: live set (MiB) and accesses per timed chase.
HUGEPAGE_LIVE_MIB = {False: 512, True: 64}
HUGEPAGE_ACCESSES = {False: 1000000, True: 300000}


def make_jobs(quick, threads):
    q = quick
    T = str(threads)
    return [
        Job("seed000_set", "seed000_unordered_set",
            ["--passes", "40" if q else "200"], "seed000 unordered_set"),
        Job("seed000_new_delete", "seed000_new_delete",
            ["--loops", "200" if q else "1000"], "seed000 new/delete"),
        Job("seed002", "seed002_fixed", ["--rounds", "200" if q else "1000"], "seed002 100 B x 10,000"),
        Job("seed002_lock", "seed002_fixed",
            ["--rounds", "200" if q else "1000", "--lock", "mutex"], "seed002 with a lock"),
        Job("seed003", "seed003_producer_consumer",
            ["--objects", "300000" if q else "2000000"], "seed003 producer/consumer"),
        Job("seed001_st", "seed001_tests",
            ["--test", "st_random", "--rounds", "4" if q else "20"], "seed001 1 thread random"),
        Job("seed001_mt", "seed001_tests",
            ["--test", "mt_random", "--threads", T, "--rounds", "4" if q else "20"],
            f"seed001 {T} threads random"),
        Job("seed001_fixed", "seed001_tests",
            ["--test", "mt_fixed", "--threads", T, "--rounds", "40" if q else "200"],
            f"seed001 {T} threads fixed"),
        Job("seed004_T16", "seed004_size_sweep",
            ["--threads", "16", "--rounds", "2" if q else "10"], "seed004 sweep T=16"),
        Job(f"seed004_T{T}", "seed004_size_sweep",
            ["--threads", T, "--rounds", "4" if q else "40"], f"seed004 sweep T={T}"),
        Job("server", "server_larson",
            ["--threads", T, "--seconds", "300" if q else "1500"], f"server T={T}"),
        Job("fastpath_immediate", "fastpath_pair",
            ["--pattern", "immediate", "--iters", "2000000" if q else "20000000"], "fast path"),
        Job("fastpath_batch100", "fastpath_pair",
            ["--pattern", "batch100", "--iters", "20000" if q else "200000"], "fast path x100"),
        # The plain strata row runs with huge pages explicitly off; the row
        # "strata (huge pages)" sets STRATA_HUGE_PAGES=1 (see allocators.py).
        Job("hugepages", "hugepage_live_set",
            ["--mib", str(HUGEPAGE_LIVE_MIB[q]), "--accesses", str(HUGEPAGE_ACCESSES[q])],
            f"huge pages {HUGEPAGE_LIVE_MIB[q]} MiB", env={"STRATA_HUGE_PAGES": "0"}),
        # The python cases run the interpreter running bench/run (the real
        # binary, not a pyenv shim script, which would add its own process).
        Job("startup", "startup_floor", ["--runs", "2" if q else "3", "--python", sys.executable],
            "start-up floor"),
    ]


def make_tables(threads, quick=False):
    T = str(threads)
    live = HUGEPAGE_LIVE_MIB[bool(quick)]
    phases = [("insert", "insert"), ("erase", "erase"), ("insert again", "insert_again")]
    return [
        Table("seed000_unordered_set", "Seed 000: unordered_set<int> insert / erase / insert again",
              "seed000_unordered_set", {},
              [Column(f"{label} (cycles/op)", "cycles_per_op", {"phase": p, "pass": "median"}, 0)
               for label, p in phases] +
              [Column("first-pass insert (cycles/op)", "cycles_per_op",
                      {"phase": "insert", "pass": "first"}, 0),
               Column("3 phases (ns/op)", "ns_per_op", {"pass": "median"}, 1)],
              primary=[0, 1, 2], better="lower", job="seed000_set", defaults={"pass": "median"},
              seed_text="GCC 10.3 Linux (cycles/op, insert / erase / insert again): glibc 307 / 162 / 176; "
                        "tcmalloc 250 / 116 / 117; pmr::unsynchronized_pool_resource 272 / 210 / 169; "
                        "custom pooled_allocator 199 / 112 / 110.",
              seed_rows={"glibc": "307 / 162 / 176", "tcmalloc": "250 / 116 / 117",
                         "unsynchronized": "272 / 210 / 169", "pooled_allocator": "199 / 112 / 110",
                         "pool_allocator": "199 / 112 / 110 (seed's pooled_allocator)"}),
        Table("seed000_new_delete", "Seed 000: new + delete of an empty class (5000 new, then 5000 delete, x1000)",
              "seed000_new_delete", {},
              [Column("cycles/pair", "cycles_per_pair", {}, 1), Column("ns/pair", "ns_per_pair", {}, 2),
               Column("instructions/pair (callgrind)", "instructions_per_pair", {}, 1)],
              primary=[0], better="lower", job="seed000_new_delete",
              seed_text="cycles per new+delete: glibc 107, tcmalloc 27, class-specific pool 8.",
              seed_rows={"glibc": "107", "tcmalloc": "27", "pool": "8"}),
        Table("seed002_fixed", "Seed 002: 1000 rounds of 10,000 x malloc(100) then free",
              "seed002_fixed", {"lock": "none"},
              [Column("seconds", "seconds", {}, 3), Column("cycles/pair", "cycles_per_pair", {}, 1),
               Column("ns/pair", "ns_per_pair", {}, 2)],
              primary=[0], better="lower", job="seed002", defaults={"lock": "none"},
              seed_text="seconds: Delphi FastMM 0.14, VC2008 malloc 3.854, fixed-size pool (FixedAlloc) 0.0806.",
              seed_rows={"glibc": "3.854 (VC2008 malloc)", "fixed": "0.0806 (FixedAlloc)"}),
        Table("seed002_locked", "Seed 002 with a mutex around every malloc and free",
              "seed002_fixed", {"lock": "mutex"},
              [Column("seconds", "seconds", {}, 3), Column("cycles/pair", "cycles_per_pair", {}, 1),
               Column("ns/pair", "ns_per_pair", {}, 2)],
              primary=[0], better="lower", job="seed002_lock",
              seed_text="seconds: FastMM with multithreading enabled 0.41; FastMM behind a critical section 0.71."),
        Table("seed003_producer_consumer",
              "Seed 003: 2 threads, one allocates 64 B objects, the other frees them",
              "seed003_producer_consumer", {"pinned": False},
              [Column("malloc (cycles)", "alloc_cycles_per_op", {}, 0),
               Column("free (cycles)", "free_cycles_per_op", {}, 0),
               Column("ns/object (wall)", "ns_per_object", {}, 1)],
              primary=[2], better="lower", job="seed003",
              seed_text="Core 2 Duo, per call: Alloc 0.000857 mutex / 0.000573 spinlock / 0.000243 lock-free; "
                        "Free 0.000755 / 0.000551 / 0.000200 (units as printed; only the ratios carry over: "
                        "lock-free about 3.5x faster than mutex).",
              defaults={"pinned": False}),
        Table("seed003_pinned",
              "Seed 003, pinned: producer on CPU 0, consumer on CPU 1 (the concurrent pools)",
              "seed003_producer_consumer", {"pinned": True},
              [Column("alloc (cycles)", "alloc_cycles_per_op", {}, 0),
               Column("free (cycles)", "free_cycles_per_op", {}, 0),
               Column("ns/object (wall)", "ns_per_object", {}, 1)],
              primary=[2], better="lower", job="pool_bench_producer_consumer",
              seed_text="the seed's two-core run: lock-free Alloc 0.28x and Free 0.26x of the mutex pool's time; "
                        "issue 3's goal: lock-free at most 1/4 of the mutex pool per alloc and per free, "
                        "the per-thread-cached pool fastest of all."),
        Table("seed001_st_random", "Seed 001: 1 thread, random sizes 1..8192 B",
              "seed001_tests", {"test": "st_random"},
              [Column("seconds", "seconds", {}, 3), Column("ns/pair", "ns_per_pair", {}, 1)],
              primary=[0], better="lower", job="seed001_st",
              seed_text="Mini-TCMalloc vs malloc (VS2019 x86): about 40x faster at start, 4-6x steady."),
        Table("seed001_mt_random", f"Seed 001: {T} threads, random sizes 1..8192 B",
              "seed001_tests", {"test": "mt_random"},
              [Column("seconds", "seconds", {}, 3), Column("ns/pair", "ns_per_pair", {}, 1)],
              primary=[0], better="lower", job="seed001_mt",
              seed_text="Mini-TCMalloc vs malloc: 10-20x faster under high concurrency."),
        Table("seed001_mt_fixed", f"Seed 001: {T} threads, fixed 16 B",
              "seed001_tests", {"test": "mt_fixed"},
              [Column("seconds", "seconds", {}, 4), Column("ns/pair", "ns_per_pair", {}, 1)],
              primary=[0], better="lower", job="seed001_fixed",
              seed_text="Mini-TCMalloc slightly slower than malloc (bucket lock contention)."),
        Table("server_larson", f"Server-like (larson-style): {T} threads, mixed sizes, cross-thread frees, changing live set",
              "server_larson", {},
              [Column("M mallocs/s", "mallocs_per_sec", {}, 2)],
              primary=[0], better="higher", job="server"),
        Table("fastpath_pair", "malloc(32) + free fast path (timed)",
              "fastpath_pair", {},
              [Column("immediate (cycles/pair)", "cycles_per_pair", {"pattern": "immediate"}, 1),
               Column("100 then free (cycles/pair)", "cycles_per_pair", {"pattern": "batch100"}, 1),
               Column("immediate (ns/pair)", "ns_per_pair", {"pattern": "immediate"}, 2),
               Column("100 then free (ns/pair)", "ns_per_pair", {"pattern": "batch100"}, 2)],
              primary=[0, 1], better="lower", job="fastpath_immediate"),
        Table("hugepage_live_set",
              f"Huge pages: {live} MiB live set of mixed-size blocks, read by a random pointer chase",
              "hugepage_live_set", {},
              [Column("ns/access", "ns_per_access", {}, 1),
               Column("setup: allocate + touch (s)", "setup_seconds", {}, 2),
               Column("in huge pages (MiB)", "huge_page_mib", {}, 0),
               Column("peak RSS / live bytes", "rss_over_live", {}, 2)],
              primary=[0], better="lower", job="hugepages"),
        Table("startup_floor",
              "Start-up floor: peak RSS (KiB) of programs that barely allocate (each run as a child; "
              "python is the interpreter bench/run runs on; the peak RSS column is the largest case)",
              "startup_floor", {},
              [Column("C: malloc(10) + free", "child_peak_rss", {"case": "trivial_c"}, 0),
               Column("C++: new + delete", "child_peak_rss", {"case": "trivial_cxx"}, 0),
               Column("python3 -c pass", "child_peak_rss", {"case": "python_pass"}, 0),
               Column("python3, 1,000-item list", "child_peak_rss", {"case": "python_list"}, 0)],
              primary=[0], better="lower", job="startup",  # ranked by the C program: the floor itself
              seed_text="issue 11's goals: the C program at most 1.3 MB (glibc 0.96, strata 2.61 before), "
                        "python3 -c pass within 0.5 MB of glibc."),
    ]


def callgrind_table():
    return Table("callgrind_pair", "Instructions per malloc(32) + free pair (valgrind --tool=callgrind)",
                 "callgrind_pair", {},
                 [Column("whole loop, free at once (instr/pair)", "instructions_per_pair",
                         {"pattern": "immediate"}, 1),
                  Column("whole loop, 100 then free (instr/pair)", "instructions_per_pair",
                         {"pattern": "batch100"}, 1),
                  Column("inside malloc+free, free at once (instr/pair)", "instructions_inside_per_pair",
                         {"pattern": "immediate"}, 1),
                  Column("inside malloc+free, 100 then free (instr/pair)", "instructions_inside_per_pair",
                         {"pattern": "batch100"}, 1)],
                 primary=[0], better="lower", job="callgrind",
                 seed_text="Reference counts for these two patterns (issue 2): mimalloc 57-115, "
                           "tcmalloc and jemalloc 77-80, glibc 139-190; strata's target is at most 40.",
                 seed_rows={"mimalloc": "57-115", "tcmalloc": "77-80", "jemalloc": "77-80",
                            "glibc": "139-190", "strata": "target <= 40"})
