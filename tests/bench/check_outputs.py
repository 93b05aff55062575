#!/usr/bin/env python3
"""Checks that a `bench/run` output directory is complete: REPORT.md with a
table for every workload, a parseable results.jsonl with results from every
workload program (and, for the workloads of issues 10 and 11, every line
they must print), and every chart the report links to (real PNG files)."""
import json
import os
import re
import shutil
import sys

# The job definitions, for the block counts the bulk shapes must cover.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from runner.jobs import BULK_COUNTS  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQUIRED_SECTIONS = ["## Headline", "## Seed 000: unordered_set", "## Seed 000: new + delete",
                     "## Seed 002: 1000 rounds", "## Seed 002 with a mutex", "## Seed 003",
                     "## Seed 001: 1 thread", "## Seed 001: ", "## Seed 004: size sweep, 16 threads",
                     "## Server-like", "## malloc(32) + free fast path", "## Huge pages:",
                     "## Fast path: what strata's features cost",
                     "### Speed: speedup over glibc", "### Memory (lower is leaner)",
                     "## Bulk free, 1 thread: allocate N blocks, free them in allocation order",
                     "## Bulk free, 1 thread: allocate N blocks, free them in reverse order",
                     "## Bulk free, 1 thread: allocate N blocks, free them in random order",
                     "## Bulk shapes at a glance", "## Steady live set replaced at random", "## N producers x N consumers", "## Small bursts",
                     "## Thread churn", "## Start-up floor", "## Memory per thread", "## Memory over time",
                     "## Peak RSS over live bytes, every workload"]
HEADLINE_COLUMNS = ["bulk in order", "bulk reverse", "bulk random", "steady replace", "NxN handoff", "small burst",
                    "thread churn"]
HEADLINE_MEMORY_COLUMNS = ["trivial C program (MiB)", "python3 -c pass (MiB)", "per thread (KiB)",
                           "after eviction", "peak RSS / leanest peer's"]
REQUIRED_CHARTS = ["speedup_summary.png", "rss.png", "seed004_sweep_T16.png", "hugepage_live_set.png",
                   "bulk_1t_in_order.png", "bulk_1t_reverse.png", "bulk_1t_random.png", "handoff_nxn.png",
                   "memory_over_time.png", "startup_floor.png"]
REQUIRED_WORKLOADS = ["seed000_unordered_set", "seed000_new_delete", "seed001_tests", "seed002_fixed",
                      "seed003_producer_consumer", "seed004_size_sweep", "server_larson", "fastpath_pair",
                      "hugepage_live_set", "bulk_free", "handoff_nxn", "small_burst", "thread_churn",
                      "startup_floor", "thread_memory", "memory_over_time", "steady_replace"]
# Workload programs that count their live bytes (every one but the start-up floor).
LIVE_COUNTED = [w for w in REQUIRED_WORKLOADS if w != "startup_floor"]
HUGE_PAGES_ROW = "strata (huge pages)"
UNHARDENED_ROW = "strata (unhardened)"
PROFILING_OFF_ROW = "strata (profiling off)"
BULK_ORDERS = ["in_order", "reverse", "random"]


def variant_problems(report, rows):
    """strata's variant rows: huge pages on in the huge pages table (issue
    5); the unhardened build (issues 5, 13) and profiling off (issue 12) in
    the fast-path tables and the features table, whenever they ran."""
    problems = []
    ran = {(r.get("workload"), r.get("allocator")) for r in rows}
    if ("hugepage_live_set", "strata") in ran and ("hugepage_live_set", HUGE_PAGES_ROW) not in ran:
        problems.append(f"no '{HUGE_PAGES_ROW}' results beside strata in hugepage_live_set")
    if "Transparent huge pages on this machine" not in report:
        problems.append("the huge pages section does not state the machine's transparent huge page mode")
    if ("fastpath_pair", "strata") in ran and ("fastpath_pair", PROFILING_OFF_ROW) not in ran:
        problems.append(f"no '{PROFILING_OFF_ROW}' results in fastpath_pair")
    section = report.split("## Fast path: what strata's features cost", 1)[-1].split("\n## ", 1)[0]
    if any(a in (UNHARDENED_ROW, PROFILING_OFF_ROW) for _, a in ran):
        if any(a == UNHARDENED_ROW for _, a in ran) and ("fastpath_pair", UNHARDENED_ROW) not in ran:
            problems.append(f"no '{UNHARDENED_ROW}' results in fastpath_pair")
        if "| ns per pair, free at once" not in section:
            problems.append("the fast-path features table has no timed row")
        counted = any(w == "callgrind_pair" and a in (UNHARDENED_ROW, PROFILING_OFF_ROW) for w, a in ran)
        if shutil.which("valgrind") and counted and "| instructions inside malloc+free per pair" not in section:
            problems.append("the fast-path features table has no instruction-count row")
        if "## What strata's features cost, workload by workload" not in report:
            problems.append("REPORT.md has no per-workload feature cost table")
    if shutil.which("valgrind"):
        if not any(r.get("workload") == "callgrind_pair" and r.get("metric") == "instructions_inside_per_pair"
                   for r in rows):
            problems.append("no instructions counted inside malloc and free (--toggle-collect)")
    return problems


def _has(rows, workload, metric, **params):
    return any(r.get("workload") == workload and r.get("metric") == metric and
               all(str(r.get(k)) == str(v) for k, v in params.items()) for r in rows)


def new_shape_problems(rows, header):
    """The lines the workloads of issues 10 and 11 must print, with sane
    values: every order and N of the bulk shapes, every NxN configuration,
    the three phases of the small bursts, the start-up floor of both
    programs, the per-thread memory, the RSS time series, and the peak of
    live bytes of every workload program."""
    problems = []
    quick = header.get("quick", False)
    counts = BULK_COUNTS[bool(quick)]
    glibc = [r for r in rows if r.get("allocator") == "glibc"]
    for order in BULK_ORDERS:
        for n in counts:
            if not _has(glibc, "bulk_free", "ns_per_pair", order=order, count=n, threads=1):
                problems.append(f"bulk_free: no 1-thread ns_per_pair for order {order}, N={n}")
    threads = header.get("threads", 1)
    if threads > 1:
        for n in counts:
            if not _has(glibc, "bulk_free", "ns_per_pair", count=n, threads=threads):
                problems.append(f"bulk_free: no {threads}-thread ns_per_pair for N={n}")
            if not _has(glibc, "bulk_cross", "ns_per_pair", count=n):
                problems.append(f"bulk_cross: no ns_per_pair for N={n}")
        if not _has(glibc, "bulk_cross", "barrier_ns_per_round"):
            problems.append("bulk_cross: no barrier_ns_per_round")
    for config in ("1x1", "2x2", "4x4"):
        for metric in ("ns_per_object", "mobjects_per_sec"):
            if not _has(glibc, "handoff_nxn", metric, config=config):
                problems.append(f"handoff_nxn: no {metric} for {config}")
    for phase in ("main", "thread", "main_again"):
        for size in (16, 32, 64):
            if not _has(glibc, "small_burst", "ns_per_pair", phase=phase, size=size, count=1600):
                problems.append(f"small_burst: no ns_per_pair for phase {phase}, {size} B, 1600 blocks")
    for metric in ("seconds", "ns_per_op", "threads_per_sec"):
        if not _has(glibc, "thread_churn", metric):
            problems.append(f"thread_churn: no {metric}")
    for program in ("trivial_c", "python3"):
        if not _has(glibc, "startup_floor", "launcher_peak_kib", program=program):
            problems.append(f"startup_floor: no launcher_peak_kib for {program}")
        if os.path.exists("/usr/bin/time") and not _has(glibc, "startup_floor", "time_maxrss_kib", program=program):
            problems.append(f"startup_floor: no /usr/bin/time figure for {program}")
    if not _has(glibc, "startup_floor", "own_vmhwm_kib", program="trivial_c"):
        problems.append("startup_floor: the trivial program printed no own_vmhwm_kib")
    for metric in ("rss_before_kib", "rss_one_thread_kib", "rss_all_alive_kib", "kib_per_thread"):
        if not _has(glibc, "thread_memory", metric):
            problems.append(f"thread_memory: no {metric}")
    samples = [r for r in glibc if r.get("workload") == "memory_over_time" and r.get("metric") == "rss_sample_mib"]
    if len(samples) < 10 or not any(int(r.get("t_ms", 0)) >= 900 for r in samples):
        problems.append(f"memory_over_time: {len(samples)} RSS samples, none 0.9 s after the eviction")
    for metric in ("rss_at_eviction_mib", "live_after_mib"):
        if not _has(glibc, "memory_over_time", metric):
            problems.append(f"memory_over_time: no {metric}")
    if not _has(glibc, "memory_over_time", "rss_after_mib", after_s=1):
        problems.append("memory_over_time: no RSS 1 s after the eviction")
    for w in LIVE_COUNTED:
        if not _has(glibc, w, "peak_live_bytes"):
            problems.append(f"{w}: no peak_live_bytes line")
    for r in rows:
        if r.get("metric") in ("ns_per_pair", "ns_per_object", "ns_per_op", "peak_live_bytes",
                               "launcher_peak_kib", "rss_all_alive_kib") and not float(r.get("value", 0)) > 0:
            problems.append(f"{r.get('workload')} ({r.get('allocator')}): {r.get('metric')} is {r.get('value')}")
    return problems


def headline_problems(report):
    problems = []
    speed = report.split("### Speed: speedup over glibc", 1)[-1].split("\n### ", 1)[0]
    problems += [f"the speed headline has no column '{c}'" for c in HEADLINE_COLUMNS if c not in speed]
    memory = report.split("### Memory (lower is leaner)", 1)[-1].split("\n## ", 1)[0]
    problems += [f"the memory headline has no column '{c}'" for c in HEADLINE_MEMORY_COLUMNS if c not in memory]
    return problems


def placement_problems(report, rows, header):
    """With two or more CPUs, every run whose threads run at once is probed
    before and after (bench/tools/core_latency.c) and the report says where
    the CPUs were; with one CPU there is nothing to probe."""
    if int(header.get("cores", 1)) < 2:
        return []
    problems = []
    probed = {(r.get("job"), r.get("allocator"), r.get("rep")) for r in rows if r.get("workload") == "core_latency"}
    for job in ("server", "bulk_cross_64", "handoff_nxn", "thread_churn", "seed003"):
        ran = {(r.get("job"), r.get("allocator"), r.get("rep")) for r in rows if r.get("job") == job
               and r.get("workload") != "core_latency"}
        if ran and not ran <= probed:
            problems.append(f"{job}: {len(ran - probed)} run(s) without core_latency probes")
    for r in rows:
        if r.get("workload") == "core_latency" and not (0 < r["value"] < 1e6 and "before" in r and "after" in r):
            problems.append(f"core_latency line without a sane round trip: {r}")
            break
    if "## Placement: how far apart the CPUs were" not in report:
        problems.append("REPORT.md has no placement section")
    return problems


def main(out):
    problems = []
    report_path = os.path.join(out, "REPORT.md")
    if not os.path.isfile(report_path):
        return [f"{report_path} missing"]
    report = open(report_path).read()
    sections = REQUIRED_SECTIONS + (["## Instructions per malloc"] if shutil.which("valgrind") else [])
    problems += [f"REPORT.md has no section '{s}'" for s in sections if s not in report]

    charts = set(re.findall(r"\]\(([^)\s]+\.png)\)", report)) | set(REQUIRED_CHARTS)
    for chart in sorted(charts):
        path = os.path.join(out, chart)
        if not os.path.isfile(path):
            problems.append(f"chart {chart} missing")
        else:
            with open(path, "rb") as f:
                if f.read(8) != PNG_MAGIC or os.path.getsize(path) < 5000:
                    problems.append(f"chart {chart} is not a real PNG")

    results_path = os.path.join(out, "results.jsonl")
    if not os.path.isfile(results_path):
        return problems + [f"{results_path} missing"]
    workloads, rows, header = set(), [], {}
    with open(results_path) as f:
        for number, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                problems.append(f"results.jsonl line {number} is not JSON")
                continue
            if row.get("workload") == "_run":
                header = row
            elif row.get("metric") != "peak_rss":
                for key in ("workload", "allocator", "metric", "value", "unit"):
                    if key not in row:
                        problems.append(f"results.jsonl line {number} lacks '{key}'")
                workloads.add(row.get("workload"))
                rows.append(row)
    problems += [f"no results from {w}" for w in REQUIRED_WORKLOADS if w not in workloads]
    problems += variant_problems(report, rows)
    problems += new_shape_problems(rows, header)
    problems += headline_problems(report)
    problems += placement_problems(report, rows, header)
    return problems


if __name__ == "__main__":
    found = main(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
    for p in found:
        print("FAIL:", p)
    print("bench outputs complete" if not found else f"{len(found)} problem(s)")
    sys.exit(1 if found else 0)
