"""What bench/run runs (jobs) and how results become tables.

A job is one program invocation, run once per allocator per repetition.
A table picks result lines by workload and parameters; its rows are
allocators (preloaded ones and the pool rows printed by bench/pools)."""
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
    program: str          # file name in <build>/bench, or an absolute path (a system program)
    args: list
    label: str            # for the progress line and the peak RSS tables
    env: dict = field(default_factory=dict)  # environment of every run (a row's own env wins)
    reps: int = None      # this many repetitions (None: the run's; --reps caps it)
    startup: str = None   # start-up floor program name: bench/run writes its peak RSS lines
    live: bool = True     # prints peak_live_bytes (the peak RSS / live bytes table)
    concurrent: bool = None  # runs two or more threads at a time (None: when --threads > 1)

    def runs_threads_at_once(self):
        """Whether the program's threads run at the same time: their speed then
        depends on how far apart the CPUs are, which bench/run probes before
        and after each run (bench/tools/core_latency.c)."""
        if self.concurrent is not None:
            return self.concurrent
        if "--threads" not in self.args:
            return False
        return int(self.args[self.args.index("--threads") + 1]) > 1


@dataclass
class Column:
    label: str
    metric: str
    match: dict = field(default_factory=dict)
    digits: int = 1
    scale: float = 1.0    # displayed value = value * scale (KiB -> MiB: 1/1024)
    parts: str = "sum"    # lines that differ in a parameter: "sum" or "mean" of them


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
    combine: str = "sum"      # how primary columns make the score: "sum" or "geomean"
    group: str = None         # tables of one group are printed as one table (bulk shapes)
    group_title: str = ""     # the group's title
    subgroup: str = ""        # this table's label inside its group (first column)
    subgroup_by: tuple = ("size", "sizes")  # what a group's tables differ by (column name, plural)
    # A group's chart: the x axis (N, log) and the y axis.
    chart_axes: tuple = ("N blocks per burst (log)", "ns per malloc+free pair")
    flatness: bool = False    # show max/min over the primary columns (ns per pair against N)
    kind: str = "speed"       # "speed" or "memory" (memory: lower is leaner)
    show_rss: bool = True     # add the job's peak RSS column
    text: str = ""            # a paragraph printed above the table
    short: str = ""           # name in charts and summary tables (default: the id)


# Huge pages workload: live set (MiB) and accesses per timed chase.
HUGEPAGE_LIVE_MIB = {False: 512, True: 64}
HUGEPAGE_ACCESSES = {False: 1000000, True: 300000}


# Bulk shapes (issue 10): block counts per burst, pairs per point.
BULK_COUNTS = {False: [25, 100, 400, 1600, 6400, 25600, 100000], True: [25, 400, 6400, 25600]}
BULK_PAIRS = {False: 1000000, True: 50000}
# Block sizes: (1 thread, T threads, cross-thread). 1 KiB blocks at N =
# 100,000 are 100 MiB per thread and cost page faults and cache misses on
# every pair, so they run with 1 thread only; quick mode keeps one or two.
BULK_SIZES = {False: (["16", "64", "1024", "mixed"], ["16", "64", "mixed"], ["64", "mixed"]),
              True: (["16", "mixed"], ["64"], ["64"])}
BULK_REPS = {False: 3, True: 2}
# Jobs whose runs take well under a second and whose repetitions spread
# widely on a shared machine (a slow mode at half speed that every
# allocator falls into now and then: the server's 5 repetitions ranged over
# 2x for strata and tcmalloc alike; for the multi-threaded ones, the far
# placement of the vCPUs, docs/benchmarks.md *Placement*) run more
# repetitions, so that one slow repetition moves the median less: about 2
# minutes more in a full run.
SHORT_REPS = {False: 9, True: 2}
BULK_ORDERS = [("in_order", "in allocation order"), ("reverse", "in reverse order"), ("random", "in random order")]
HANDOFF_CONFIGS = [1, 2, 4]
# Steady live set replaced at random (larson's loop): blocks per thread, and
# operations per point and thread.
STEADY_COUNTS = {False: [1000, 5000, 20000, 100000], True: [1000, 20000]}
STEADY_OPS = {False: 4000000, True: 200000}
# Memory over time: blocks in the cache, idle time after eviction (ms).
EVICTION_BLOCKS = {False: 2000000, True: 100000}
EVICTION_IDLE_MS = {False: 3000, True: 1000}
THREAD_MEMORY_THREADS = {False: 2000, True: 200}
CHURN_THREADS = {False: 400, True: 40}


def _size_arg(size):
    return "0" if size == "mixed" else size


def _size_label(size):
    return "mixed 16-1024 B" if size == "mixed" else f"{size} B"


def bulk_jobs(quick, threads):
    counts = ",".join(str(n) for n in BULK_COUNTS[quick])
    common = ["--counts", counts, "--pairs", str(BULK_PAIRS[quick]), "--chunks", "3" if quick else "5"]
    one, many, cross = BULK_SIZES[quick]
    jobs = []
    # Every run is already the median of its chunks per point: 3 repetitions
    # are enough, and these are the longest jobs of the suite.
    for T, sizes in ([(1, one), (threads, many)] if threads > 1 else [(1, one)]):
        for size in sizes:
            jobs.append(Job(f"bulk_{T}t_{size}", "bulk_free",
                            ["--threads", str(T), "--size", _size_arg(size)] + common,
                            f"bulk {T}T {_size_label(size)}", reps=BULK_REPS[quick]))
    if threads > 1:
        for size in cross:
            jobs.append(Job(f"bulk_cross_{size}", "bulk_free",
                            ["--mode", "cross", "--threads", str(threads), "--size", _size_arg(size)] + common,
                            f"bulk cross-thread {threads}T {_size_label(size)}", reps=BULK_REPS[quick]))
    return jobs


def steady_jobs(quick, threads):
    counts = ",".join(str(n) for n in STEADY_COUNTS[quick])
    return [Job(f"steady_{T}t", "steady_replace",
                ["--threads", str(T), "--counts", counts, "--ops", str(STEADY_OPS[quick])],
                f"steady live set {T}T")
            for T in ([1, threads] if threads > 1 else [1])]


def make_jobs(quick, threads):
    q = quick
    T = str(threads)
    return [
        Job("seed000_set", "seed000_unordered_set",
            ["--passes", "40" if q else "200"], "seed000 unordered_set", reps=SHORT_REPS[q]),
        Job("seed000_new_delete", "seed000_new_delete",
            ["--loops", "200" if q else "1000"], "seed000 new/delete", reps=SHORT_REPS[q]),
        Job("seed002", "seed002_fixed", ["--rounds", "200" if q else "1000"], "seed002 100 B x 10,000",
            reps=SHORT_REPS[q]),
        Job("seed002_lock", "seed002_fixed",
            ["--rounds", "200" if q else "1000", "--lock", "mutex"], "seed002 with a lock", reps=SHORT_REPS[q]),
        Job("seed003", "seed003_producer_consumer",
            ["--objects", "300000" if q else "2000000"], "seed003 producer/consumer", reps=SHORT_REPS[q],
            concurrent=True),
        Job("seed001_st", "seed001_tests",
            ["--test", "st_random", "--rounds", "4" if q else "20"], "seed001 1 thread random", reps=SHORT_REPS[q]),
        Job("seed001_mt", "seed001_tests",
            ["--test", "mt_random", "--threads", T, "--rounds", "4" if q else "20"],
            f"seed001 {T} threads random", reps=SHORT_REPS[q]),
        Job("seed001_fixed", "seed001_tests",
            ["--test", "mt_fixed", "--threads", T, "--rounds", "40" if q else "200"],
            f"seed001 {T} threads fixed", reps=SHORT_REPS[q]),
        Job("seed004_T16", "seed004_size_sweep",
            ["--threads", "16", "--rounds", "2" if q else "10"], "seed004 sweep T=16"),
        Job(f"seed004_T{T}", "seed004_size_sweep",
            ["--threads", T, "--rounds", "4" if q else "40"], f"seed004 sweep T={T}", reps=SHORT_REPS[q]),
        Job("server", "server_larson",
            ["--threads", T, "--seconds", "300" if q else "1500"], f"server T={T}", reps=SHORT_REPS[q]),
        Job("fastpath_immediate", "fastpath_pair",
            ["--pattern", "immediate", "--iters", "2000000" if q else "20000000"], "fast path", reps=SHORT_REPS[q]),
        Job("fastpath_batch100", "fastpath_pair",
            ["--pattern", "batch100", "--iters", "20000" if q else "200000"], "fast path x100", reps=SHORT_REPS[q]),
        # The plain strata row runs with huge pages explicitly off; the row
        # "strata (huge pages)" sets STRATA_HUGE_PAGES=1 (see allocators.py).
        Job("hugepages", "hugepage_live_set",
            ["--mib", str(HUGEPAGE_LIVE_MIB[q]), "--accesses", str(HUGEPAGE_ACCESSES[q])],
            f"huge pages {HUGEPAGE_LIVE_MIB[q]} MiB", env={"STRATA_HUGE_PAGES": "0"}),
    ] + bulk_jobs(q, threads) + steady_jobs(q, threads) + [
        Job("handoff_nxn", "handoff_nxn",
            ["--configs", ",".join(str(n) for n in HANDOFF_CONFIGS), "--objects", "200000" if q else "2000000"],
            "N producers x N consumers", reps=SHORT_REPS[q], concurrent=True),
        Job("small_burst", "small_burst", ["--pairs", "50000" if q else "500000"], "small bursts, byte writes",
            reps=SHORT_REPS[q]),
        Job("thread_churn", "thread_churn",
            ["--slots", str(2 * threads), "--total", str(CHURN_THREADS[q])], "thread churn", reps=SHORT_REPS[q],
            concurrent=True),
        Job("startup_trivial", "startup_trivial", [], "start-up: trivial C program",
            startup="trivial_c", live=False),
        Job("startup_python", "/usr/bin/python3", ["-c", "pass"], "start-up: python3 -c pass",
            startup="python3", live=False),
        Job("thread_memory", "thread_memory", ["--threads", str(THREAD_MEMORY_THREADS[q])],
            f"{THREAD_MEMORY_THREADS[q]} threads alive", concurrent=False),  # idle threads: memory only
        # Mostly idle time (3 s after the eviction): 3 repetitions are enough
        # for a memory figure.
        Job("memory_over_time", "memory_over_time",
            ["--blocks", str(EVICTION_BLOCKS[q]), "--idle-ms", str(EVICTION_IDLE_MS[q])],
            "memory over time (eviction)", reps=1 if q else 3),
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
    ] + bulk_tables(threads, quick) + steady_tables(threads, quick) + new_shape_tables(threads, quick)


def bulk_tables(threads, quick):
    """One table per (threads, order, size): ns per pair at each N (the score
    is their geometric mean); tables of one (threads, order) print together."""
    counts = BULK_COUNTS[bool(quick)]
    one, many, cross = BULK_SIZES[bool(quick)]
    tables = []
    for T, sizes in ([(1, one), (threads, many)] if threads > 1 else [(1, one)]):
        who = "1 thread" if T == 1 else f"{T} threads, each its own bulk"
        for order, order_text in BULK_ORDERS:
            for size in sizes:
                tables.append(Table(
                    f"bulk_{T}t_{order}_{size}", f"Bulk free, {who}: allocate N blocks, free them {order_text}",
                    "bulk_free", {"threads": T, "order": order, "size": size},
                    [Column(f"N={n:,}", "ns_per_pair", {"count": n}, 1) for n in counts],
                    primary=list(range(len(counts))), better="lower", job=f"bulk_{T}t_{size}",
                    combine="geomean", group=f"bulk_{T}t_{order}",
                    group_title=f"Bulk free, {who}: allocate N blocks, free them {order_text} (ns per pair)",
                    subgroup=_size_label(size), flatness=True,
                    short=f"bulk {T}T {order.replace('_', ' ')} {size}"))
    if threads > 1:
        for size in cross:
            tables.append(Table(
                f"bulk_cross_{size}", f"Cross-thread bulk free, {threads} threads",
                "bulk_cross", {"threads": threads, "size": size},
                [Column(f"N={n:,}", "ns_per_pair", {"count": n}, 1) for n in counts] +
                [Column("2 barriers, no malloc (ns)", "barrier_ns_per_round", {}, 0)],
                primary=list(range(len(counts))), better="lower", job=f"bulk_cross_{size}",
                combine="geomean", group="bulk_cross",
                group_title=f"Cross-thread bulk free, {threads} threads: each allocates N blocks, then frees "
                            "a share of the others' blocks (ns per pair per thread)",
                subgroup=_size_label(size), flatness=True, short=f"bulk cross {size}"))
    return tables


def steady_tables(threads, quick):
    """The steady live set replaced at random: ns per operation at each N,
    1 thread and T threads (the score is their geometric mean)."""
    counts = STEADY_COUNTS[bool(quick)]
    return [Table(f"steady_{T}t", "Steady live set replaced at random", "steady_replace", {"threads": T},
                  [Column(f"N={n:,}", "ns_per_op", {"count": n}, 1) for n in counts],
                  primary=list(range(len(counts))), better="lower", job=f"steady_{T}t", combine="geomean",
                  group="steady_replace",
                  group_title="Steady live set replaced at random (larson's loop), N blocks of 8-1000 B per "
                              "thread: ns per free+malloc",
                  subgroup="1 thread" if T == 1 else f"{T} threads", subgroup_by=("threads", "threads"),
                  chart_axes=("N live blocks per thread (log)", "ns per free+malloc"), short=f"steady {T}T")
            for T in ([1, threads] if threads > 1 else [1])]


def new_shape_tables(threads, quick):
    """Issue 10's handoff, burst and churn shapes, and issue 11's memory workloads."""
    T = threads
    idle_s = EVICTION_IDLE_MS[bool(quick)] // 1000
    ranked_after = min(2, idle_s)
    configs = [f"{n}x{n}" for n in HANDOFF_CONFIGS]
    phases = [("main thread", "main"), ("second thread", "thread"), ("main thread again", "main_again")]
    return [
        Table("handoff_nxn", "N producers x N consumers: batches of 64 small blocks (16-256 B) handed over",
              "handoff_nxn", {},
              [Column(f"{c} (ns/object)", "ns_per_object", {"config": c}, 1) for c in configs] +
              [Column(f"{c} (M objects/s)", "mobjects_per_sec", {"config": c}, 2) for c in configs],
              primary=list(range(len(configs))), better="lower", job="handoff_nxn", combine="geomean",
              text="NxN runs N producer and N consumer threads (" +
                   ", ".join(str(2 * n) for n in HANDOFF_CONFIGS) + " threads): on a 2-core machine 2x2 and 4x4 "
                   "oversubscribe the cores. Wall time per object handed over; ranked: the geometric mean of the "
                   "ns per object."),
        Table("small_burst", "Small bursts: 25-1600 blocks of 16/32/64 B written byte by byte, freed half in "
              "order, half in reverse", "small_burst", {},
              [Column(f"{label} (ns/pair)", "ns_per_pair", {"phase": phase}, 1, parts="mean")
               for label, phase in phases],
              primary=[0, 1, 2], better="lower", job="small_burst",
              text="Each column: the mean over 3 sizes x 4 burst lengths of ns per malloc+free pair; the sweep "
                   "runs in the main thread, then in a second thread, then in the main thread again. Ranked: "
                   "the sum of the three."),
        Table("thread_churn", f"Thread churn: {2 * T} threads at a time with random lifetimes, blocks "
              f"exchanged, replaced until {CHURN_THREADS[bool(quick)]} have run", "thread_churn", {},
              [Column("seconds", "seconds", {}, 3), Column("ns/op", "ns_per_op", {}, 1),
               Column("threads/s", "threads_per_sec", {}, 0)],
              primary=[0], better="lower", job="thread_churn"),
        Table("startup_floor", "Start-up floor: peak RSS of a trivial C program and of python3 -c pass",
              "startup_floor", {},
              [Column("trivial C (MiB, wait4)", "launcher_peak_kib", {"program": "trivial_c"}, 2, 1 / 1024),
               Column("trivial C (MiB, /usr/bin/time -f %M)", "time_maxrss_kib", {"program": "trivial_c"}, 2,
                      1 / 1024),
               Column("trivial C, own VmHWM before exit (MiB)", "own_vmhwm_kib", {"program": "trivial_c"}, 2,
                      1 / 1024),
               Column("python3 -c pass (MiB, wait4)", "launcher_peak_kib", {"program": "python3"}, 2, 1 / 1024),
               Column("python3 -c pass (MiB, /usr/bin/time -f %M)", "time_maxrss_kib", {"program": "python3"}, 2,
                      1 / 1024)],
              primary=[0], better="lower", job="startup_trivial", kind="memory", show_rss=False),
        Table("thread_memory", f"Memory per thread: {THREAD_MEMORY_THREADS[bool(quick)]:,} threads alive, "
              "each holding one 1,000 B block", "thread_memory", {},
              [Column("all alive (MiB)", "rss_all_alive_kib", {}, 1, 1 / 1024),
               Column("1 thread alive (MiB)", "rss_one_thread_kib", {}, 1, 1 / 1024),
               Column("per thread (KiB)", "kib_per_thread", {}, 1)],
              primary=[0], better="lower", job="thread_memory", kind="memory"),
        Table("memory_over_time", f"Memory over time: {EVICTION_BLOCKS[bool(quick)]:,} blocks of 16-256 B, "
              f"99% freed at random, then {idle_s} s of light use", "memory_over_time", {},
              [Column("at eviction (MiB)", "rss_at_eviction_mib", {}, 1)] +
              [Column(f"+{k} s (MiB)", "rss_after_mib", {"after_s": k}, 1) for k in range(1, idle_s + 1)] +
              [Column("live after eviction (MiB)", "live_after_mib", {}, 2),
               Column("build (s)", "build_seconds", {}, 2), Column("evict (s)", "evict_seconds", {}, 2)],
              primary=[ranked_after], better="lower", job="memory_over_time", kind="memory",
              text=f"Resident set read from /proc/self/statm every 50 ms; ranked: RSS {ranked_after} s after the "
                   "eviction (strata's default decay period is 1 s). peak RSS is the process's (wait4)."),
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
