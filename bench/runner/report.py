"""Writes REPORT.md: a headline table, then one table per workload."""
import os
from dataclasses import dataclass

from . import charts, placement, tables
from .allocators import PEER_NAMES
from .jobs import SWEEP_SIZES


@dataclass
class Context:
    out: str
    quick: bool
    reps: int
    threads: int
    cores: int
    allocators: list
    skipped: list
    notes: list
    failures: list
    run_id: str
    duration: float
    command: str
    load: tuple = None  # 1-minute load average at start and end (None: not recorded)
    thp: str = None     # transparent huge pages mode: always, madvise, never (None: not recorded)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _num(value, digits):
    if value is None:
        return "–"
    if abs(value) >= 1000 and digits <= 2:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _cell(cell, digits):
    if cell is None:
        return "–"
    if cell.low == cell.high:
        return _num(cell.median, digits)
    return f"{_num(cell.median, digits)} ({_num(cell.low, digits)}–{_num(cell.high, digits)})"


def _ratio(value):
    return "–" if value is None else f"{value:.2f}x"


def _threads_note(threads, cores):
    if threads > cores:
        return f" **{threads} threads on {cores} cores: threads outnumber cores.**"
    return ""


def _row_name(name):
    return f"**{name}**" if name == "strata" else name


def workload_table(table, rows):
    header = ["allocator"] + [c.label for c in table.columns]
    if table.combine == "geomean" and len(table.primary) > 1:
        header.append("geomean")
    header += ["vs glibc", "vs best peer"] + (["peak RSS (MiB)"] if table.show_rss else [])
    has_seed = any(r.seed for r in rows)
    if has_seed:
        header.append("seed figure")
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [_row_name(r.name)] + [_cell(c, col.digits) for c, col in zip(r.cells, table.columns)]
        if table.combine == "geomean" and len(table.primary) > 1:
            cells.append(_num(r.score, 1))
        cells += [_ratio(r.vs_glibc), _ratio(r.vs_best_peer)]
        if table.show_rss:
            cells.append(_num(r.peak_rss_mib, 1))
        if has_seed:
            cells.append(r.seed or "")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def group_table(members):
    """Tables of one group (e.g. one bulk order, every block size) as one
    markdown table: medians only (the ranges are in results.jsonl), the
    geometric mean over N, the ratios and the flatness (max / min over N)."""
    first = members[0][0]
    header = ([first.subgroup_by[0], "allocator"] +
              [c.label for c in first.columns] + ["geomean", "vs glibc", "vs best peer"])
    if first.flatness:
        header.append("flatness (max/min)")
    header.append("peak RSS (MiB)")
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for table, rows in members:
        for i, r in enumerate(rows):
            cells = [table.subgroup if i == 0 else "", _row_name(r.name)]
            cells += [_num(c.median, col.digits) if c else "–" for c, col in zip(r.cells, table.columns)]
            cells += [_num(r.score, 1), _ratio(r.vs_glibc), _ratio(r.vs_best_peer)]
            if first.flatness:
                cells.append(_ratio(r.flatness))
            cells.append(_num(r.peak_rss_mib, 1))
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def sweep_table(speedup, summary, rss, seconds):
    sizes = [s for s in SWEEP_SIZES if any(s in v for v in speedup.values())]
    header = ["allocator"] + [f"{s} B" for s in sizes] + ["average", "best", "peak RSS (MiB)"]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, per_size in speedup.items():
        avg, best, best_size = summary.get(name, (None, None, None))
        label = f"**{name}**" if name == "strata" else name
        cells = [label] + [_ratio(per_size.get(s)) for s in sizes]
        cells += [_ratio(avg), f"{_ratio(best)} at {best_size} B" if best else "–", _num(rss.get(name), 1)]
        out.append("| " + " | ".join(cells) + " |")
    if "glibc" in seconds:
        cells = ["glibc time (ms)"] + [_num(seconds["glibc"].get(s, 0) * 1000, 2) for s in sizes] + ["", "", ""]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def thp_note(thp):
    """What the kernel's transparent huge page mode means for the huge pages table."""
    setting = f"Transparent huge pages on this machine (/sys/kernel/mm/transparent_hugepage/enabled): `{thp}`"
    if thp == "never":
        return (setting + ". **The kernel never backs memory with huge pages here, so the effect of "
                "STRATA_HUGE_PAGES=1 cannot show on this machine**: the two strata rows measure the same thing.")
    if thp == "madvise":
        return (setting + ": only memory marked with MADV_HUGEPAGE gets huge pages, which is what "
                "STRATA_HUGE_PAGES=1 does to strata's 2 MiB-aligned reservations; the other rows run on 4 KiB pages "
                "(unless an allocator marks its own memory). The row \"strata\" runs with STRATA_HUGE_PAGES=0.")
    if thp == "always":
        return (setting + ": the kernel may back any large enough anonymous mapping with huge pages, so every "
                "allocator can get some; STRATA_HUGE_PAGES=1 marks strata's reservations and fills them in address "
                "order. The row \"strata\" runs with STRATA_HUGE_PAGES=0.")
    return setting + " (not readable: the kernel may lack transparent huge pages)."


def _cost(with_, without, better):
    """What a feature costs, in percent: positive when strata with the
    feature is slower (or uses more memory, or has less throughput) than
    the row without it."""
    if with_ is None or without is None or with_ <= 0 or without <= 0:
        return None
    return 100 * ((with_ / without) if better == "lower" else (without / with_)) - 100


def _overlap(a, b):
    """True when two lists of repetition values overlap (min-max). Single
    values (instruction counts, which are exact) never do."""
    if len(a) < 2 and len(b) < 2:
        return False
    return bool(a) and bool(b) and min(a) <= max(b) and min(b) <= max(a)


def _cost_text(cost, noisy):
    if cost is None:
        return "–"
    return f"{cost:+.1f}%" + (" (within min–max)" if noisy else "")


def fast_path_costs(built, skipped):
    """The fast-path measurements (instruction counts and timed pairs) of
    strata against its feature rows: profiling off, hardening off."""
    from .allocators import FEATURE_ROWS, UNHARDENED_ROW
    md = ["## Fast path: what strata's features cost", "",
          "The row \"strata\" is the default: the default double-free check (issue 13; since the free bits, "
          "one branch in free), the encoded links of blocks waiting in an inbox, and sampled heap profiling "
          "(issue 12). \"strata (unhardened)\" is the same source built with `-DSTRATA_HARDENED=OFF` (by bench/run, "
          "in `<build dir>-unhardened`): neither the check nor the encoding. \"strata (profiling off)\" runs "
          "the default build with `STRATA_PROFILE_SAMPLE=0`. Instruction counts are exact (valgrind "
          "--tool=callgrind, not affected by load); *inside malloc+free* counts only instructions executed inside "
          "`malloc` and `free` and what they call, *whole loop* adds the call and the PLT jump (the loop's own "
          "instructions subtracted). Times are medians (min–max); a difference within the ranges is not "
          "measurable in this run. Cost: how much more the default pays than the row without the feature.", ""]
    measures = []  # (label, table id, column label, digits)
    for pattern in ("free at once", "100 then free"):
        measures.append((f"instructions inside malloc+free per pair, {pattern}", "callgrind_pair",
                         f"inside malloc+free, {pattern} (instr/pair)", 1))
    for pattern in ("free at once", "100 then free"):
        measures.append((f"instructions per pair, whole loop, {pattern}", "callgrind_pair",
                         f"whole loop, {pattern} (instr/pair)", 1))
    measures.append(("ns per pair, free at once (timed)", "fastpath_pair", "immediate (ns/pair)", 2))
    measures.append(("ns per pair, 100 then free (timed)", "fastpath_pair", "100 then free (ns/pair)", 2))
    lines = []
    for label, key, column_label, digits in measures:
        if key not in built:
            continue
        table, rows = built[key]
        index = next((i for i, c in enumerate(table.columns) if c.label == column_label), None)
        by_name = {r.name: r for r in rows}
        if index is None or "strata" not in by_name:
            continue
        on = by_name["strata"].cells[index]
        cells = [label, _cell(on, digits)]
        any_variant = False
        for variant, _ in FEATURE_ROWS:
            off = by_name[variant].cells[index] if variant in by_name else None
            if off is None or on is None:
                cells += [_cell(off, digits), "–"]
                continue
            any_variant = True
            noisy = on.low != on.high and on.low <= off.high and off.low <= on.high
            cells += [_cell(off, digits), _cost_text(_cost(on.median, off.median, "lower"), noisy)]
        if any_variant:
            lines.append("| " + " | ".join(cells) + " |")
    if not lines:
        reason = next((s for s in skipped if s.startswith(UNHARDENED_ROW) or s.startswith("strata:")), None)
        md.append("Not measured in this run" + (f": {reason}." if reason else
                                                 " (no fast-path results for strata and its feature rows)."))
        return md + [""]
    md += ["| measure (malloc(32) + free) | strata (default) | profiling off | cost of profiling | "
           "unhardened | cost of hardening |", "|---|---|---|---|---|---|"] + lines + [""]
    return md


def group_label(group):
    """"bulk_2t_in_order" -> "bulk 2T in order"."""
    words = group.split("_")
    return " ".join(w[:-1] + "T" if w[:-1].isdigit() and w.endswith("t") else w for w in words)


def _short(table):
    return table.short or charts.SHORT.get(table.id, table.id)


def _score_of(rows, name):
    row = next((r for r in rows if r.name == name), None)
    return (row.score, row.score_reps) if row and row.score else (None, [])


def _units(built):
    """The units the feature-cost table compares: ungrouped tables one by
    one, grouped tables (bulk shapes) as one unit per group, scored by the
    geometric mean of their tables' scores (per repetition too)."""
    units, seen = [], set()
    for key, (t, rows) in built.items():
        if t.group is None:
            units.append((_short(t), t.better, t.kind, [(t, rows)]))
        elif t.group not in seen:
            seen.add(t.group)
            members = [(m, r) for m, r in built.values() if m.group == t.group]
            units.append((group_label(t.group) + f" (geomean over {t.subgroup_by[1]} and N)", t.better, t.kind,
                          members))
    return units


def _unit_score(members, name):
    scores, reps = [], []
    for _, rows in members:
        score, score_reps = _score_of(rows, name)
        if score is None:
            return None, []
        scores.append(score)
        reps.append(score_reps)
    if len(members) == 1:
        return scores[0], reps[0]
    per_rep = [tables.geometric_mean(list(v)) for v in zip(*reps)] if len({len(r) for r in reps}) == 1 else []
    return tables.geometric_mean(scores), per_rep


def feature_costs(built):
    """Every workload's ranked figure for strata and for each feature row,
    with the feature's cost in percent."""
    from .allocators import FEATURE_ROWS
    names = {r.name for _, rows in built.values() for r in rows}
    variants = [(v, what) for v, what in FEATURE_ROWS if v in names]
    if "strata" not in names or not variants:
        return []
    md = ["## What strata's features cost, workload by workload", "",
          "Each workload's ranked figure (median over repetitions) for the default strata and for the rows with "
          "one feature switched off: " + "; ".join(f"*{v}*: {what}" for v, what in variants) + ". Cost: how much "
          "slower (or more memory, or less throughput) the default is than the row without the feature; "
          "\"within min–max\" means the repetitions of the two rows overlap, so the difference is not "
          "measurable in this run. The last line is the geometric mean over the workloads.", ""]
    header = ["workload", "strata"]
    for v, _ in variants:
        header += [v.replace("strata ", ""), "cost"]
    md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    ratios = {v: [] for v, _ in variants}
    for label, better, kind, members in _units(built):
        on, on_reps = _unit_score(members, "strata")
        if on is None:
            continue
        cells = [label, _num(on, 2 if on < 100 else 1)]
        shown = False
        for v, _ in variants:
            off, off_reps = _unit_score(members, v)
            cost = _cost(on, off, better)
            if cost is not None:
                shown = True
                ratios[v].append(1 + cost / 100)
            cells += [_num(off, 2 if off and off < 100 else 1), _cost_text(cost, _overlap(on_reps, off_reps))]
        if shown:
            md.append("| " + " | ".join(cells) + " |")
    geo = ["**geometric mean**", ""]
    for v, _ in variants:
        g = tables.geometric_mean(ratios[v])
        geo += ["", "–" if g is None else f"{100 * g - 100:+.1f}%"]
    md += ["| " + " | ".join(geo) + " |", ""]
    return md


def pool_ratio_lines(table, rows):
    """Seed 003's measure: each concurrent pool's time per alloc and per free
    over the mutex pool's (medians of this run)."""
    by_name = {r.name: r for r in rows}
    mutex = by_name.get("strata::concurrent_pool<mutex>")
    if mutex is None:
        return []
    out = ["| pool | alloc / mutex's | free / mutex's |", "|---|---|---|"]
    for r in rows:
        if r is mutex:
            continue
        ratios = []
        for i in (0, 1):
            a, m = r.cells[i], mutex.cells[i]
            ratios.append(f"{a.median / m.median:.2f}" if a and m and m.median else "–")
        out.append(f"| {r.name} | {ratios[0]} | {ratios[1]} |")
    return ["Time per call relative to the mutex pool (1/4 = 0.25 is seed 003's ratio and issue 3's goal "
            "for the lock-free pool):", ""] + out + [""]


# Headline, speed: (label, keys). A key is a table id or a group id; several
# keys (or a group) give the geometric mean of their speedups over glibc.
def headline_columns(threads):
    columns = [("set ops", ["seed000_unordered_set"]), ("new/delete", ["seed000_new_delete"]),
               ("100 B x 10k", ["seed002_fixed"]), ("producer/consumer", ["seed003_producer_consumer"]),
               ("1T random", ["seed001_st_random"]), ("MT random", ["seed001_mt_random"]),
               ("MT fixed", ["seed001_mt_fixed"]), ("sweep T=16 avg", ["seed004_T16"]),
               ("server", ["server_larson"]), ("instr/pair", ["callgrind_pair"]),
               ("bulk in order", ["bulk_1t_in_order"]), ("bulk reverse", ["bulk_1t_reverse"]),
               ("bulk random", ["bulk_1t_random"])]
    if threads > 1:
        columns += [(f"bulk {threads}T", [f"bulk_{threads}t_in_order", f"bulk_{threads}t_reverse",
                                          f"bulk_{threads}t_random"]),
                    ("cross-thread bulk", ["bulk_cross"])]
    columns += [("steady replace", ["steady_replace"]),
                ("NxN handoff", ["handoff_nxn"]), ("small burst", ["small_burst"]),
                ("thread churn", ["thread_churn"])]
    return columns


def headline_values(built, sweeps, threads):
    """[(label, {allocator: speedup over glibc})] for the speed headline."""
    out = []
    for label, keys in headline_columns(threads):
        if keys == ["seed004_T16"]:
            if 16 in sweeps:
                out.append((label, {n: v[0] for n, v in sweeps[16][2].items()}))
            continue
        members = [rows for t, rows in built.values() if t.id in keys or t.group in keys]
        if not members:
            continue
        names = {r.name for rows in members for r in rows}
        values = {}
        for n in names:
            per = [next((r.vs_glibc for r in rows if r.name == n), None) for rows in members]
            if all(v for v in per):
                values[n] = tables.geometric_mean(per)
        out.append((label, values))
    return out


def memory_headline(built, lines, jobs, names):
    """[(label, {allocator: value}, digits)] for the memory headline (lower is leaner)."""
    out = []

    def column(key, index, label, digits):
        if key in built:
            t, rows = built[key]
            values = {r.name: r.cells[index].median for r in rows if r.cells[index]}
            if values:
                out.append((label, values, digits))

    column("startup_floor", 0, "trivial C program (MiB)", 2)
    column("startup_floor", 3, "python3 -c pass (MiB)", 1)
    if "thread_memory" in built:
        t = built["thread_memory"][0]
        count = t.title.split(": ")[1].split(" threads")[0]
        column("thread_memory", 0, f"{count} threads alive (MiB)", 1)
        column("thread_memory", 2, "per thread (KiB)", 1)
    if "memory_over_time" in built:
        t, rows = built["memory_over_time"]
        label = t.columns[t.primary[0]].label.replace(" (MiB)", "")
        column("memory_over_time", t.primary[0], f"RSS {label} after eviction (MiB)", 1)
        live = next((c.median for r in rows for c, col in zip(r.cells, t.columns)
                     if col.metric == "live_after_mib" and c), None)
        if live is not None and out and out[-1][0].startswith("RSS"):
            out[-1] = (out[-1][0].replace("(MiB)", f"(MiB; {live:.1f} live)"), out[-1][1], out[-1][2])
    ratio = tables.peak_rss_over_live(lines, jobs, names)
    large = _large_live_jobs(lines)
    if ratio:
        out.append((f"peak RSS / live, workloads with {LARGE_LIVE_MIB}+ MiB live (geomean)",
                    {n: tables.geometric_mean([v[n] for j, v in ratio.items() if n in v and j in large])
                     for n in names}, 2))
    leanest = peak_rss_over_leanest(lines, jobs, names)
    if leanest:
        out.append(("peak RSS / leanest peer's (geomean)", leanest, 2))
    return out


def peak_rss_over_leanest(lines, jobs, names):
    """Per allocator: the geometric mean over jobs of its peak RSS over the
    smallest peak RSS of glibc, tcmalloc, jemalloc and mimalloc (issue 11)."""
    ratios = {n: [] for n in names}
    for job in jobs:
        peers = [tables.median_peak_rss(lines, job.id, p) for p in ("glibc", "tcmalloc", "jemalloc", "mimalloc")]
        peers = [p for p in peers if p]
        if not peers:
            continue
        for n in names:
            mine = tables.median_peak_rss(lines, job.id, n)
            if mine:
                ratios[n].append(mine / min(peers))
    return {n: tables.geometric_mean(v) for n, v in ratios.items() if v}


def rss_over_live_section(lines, jobs, names):
    ratio = tables.peak_rss_over_live(lines, jobs, names)
    if not ratio:
        return []
    shown = [n for n in names if any(n in v for v in ratio.values())]
    large = _large_live_jobs(lines)
    md = ["## Peak RSS over live bytes, every workload", "",
          "Each workload program counts the bytes it has requested and not yet freed, and prints their peak "
          "(`peak_live_bytes`; docs/benchmarks.md says how each counts). Cell: the process's peak RSS (wait4) "
          "over that peak, median over repetitions. Workloads with little live memory are dominated by the "
          "fixed cost of a process (libraries, stacks, the allocator's start-up), so their geometric mean is "
          f"taken only over the workloads with at least {LARGE_LIVE_MIB} MiB live. Below 1.00: the program "
          "never wrote most of its blocks (seed 001 and 004 only call malloc and free) and the allocator "
          "keeps its metadata outside them, so their pages were never faulted in. Last line: the geometric "
          "mean over every workload of each allocator's peak RSS over the smallest of glibc, tcmalloc, "
          "jemalloc and mimalloc for that workload (issue 11's measure).", "",
          "| workload | peak live (MiB) | " + " | ".join(_row_name(n) for n in shown) + " |",
          "|---|---|" + "---|" * len(shown)]
    for job in jobs:
        if job.id in ratio:
            md.append(f"| {job.label} | {_num(large.get(job.id, _live_mib(lines, job.id)), 2)} | " +
                      " | ".join(_num(ratio[job.id].get(n), 2) for n in shown) + " |")
    md.append(f"| **geometric mean, {LARGE_LIVE_MIB}+ MiB live** | | " + " | ".join(
        _num(tables.geometric_mean([v[n] for j, v in ratio.items() if n in v and j in large]), 2)
        for n in shown) + " |")
    leanest = peak_rss_over_leanest(lines, jobs, shown)
    md.append("| **peak RSS / leanest peer's** | | " + " | ".join(_ratio(leanest.get(n)) for n in shown) + " |")
    return md + [""]


LARGE_LIVE_MIB = 1


def _live_mib(lines, job_id):
    """Median over runs of a job's peak live bytes, in MiB (None if not printed)."""
    import statistics
    values = [float(l["value"]) for l in lines if l.get("job") == job_id and l.get("metric") == "peak_live_bytes"]
    return statistics.median(values) / 1048576 if values else None


def _large_live_jobs(lines):
    """{job id: peak live MiB} of the jobs with at least LARGE_LIVE_MIB MiB live."""
    jobs = {l.get("job") for l in lines if l.get("metric") == "peak_live_bytes"}
    live = {j: _live_mib(lines, j) for j in jobs}
    return {j: v for j, v in live.items() if v and v >= LARGE_LIVE_MIB}


def bulk_summary(built, threads):
    """Issue 10's goals at a glance: per allocator, the geometric mean of
    the ratio to the best peer for every bulk group, the worst ratio, and
    the worst flatness (max/min of ns per pair over N) of any bulk table."""
    groups = []
    for t, _ in built.values():
        if t.group and t.group.startswith("bulk") and t.group not in groups:
            groups.append(t.group)
    if not groups:
        return []
    names = [n for n in tables.PRELOAD_ORDER if any(r.name == n for t, rows in built.values()
                                                    if t.group in groups for r in rows)]
    labels = {g: group_label(g).replace("bulk ", "") for g in groups}
    md = ["## Bulk shapes at a glance", "",
          "Per group (threads, order): the geometric mean over block sizes of *vs best peer* (above 1.00x: "
          "faster than the best of tcmalloc, jemalloc and mimalloc, on the geometric mean over N); then, over "
          "every bulk table, the worst *vs best peer*, the worst single point of a 1-thread table (one N of one "
          "size and order) against the fastest peer at that N (multi-threaded points are too noisy on a shared "
          "machine to be read one by one), and the worst flatness (max/min of the ns per pair over N; issue 10's goal: "
          "at most 1.5x; at large N with 1 KiB or mixed blocks every allocator pays cache and TLB misses, so "
          "compare the curves with the best peer's). Charts: ns per pair against N.", "",
          "| allocator | " + " | ".join(labels[g] for g in groups) +
          " | worst vs best peer | worst 1T point vs best peer | worst flatness |",
          "|---|" + "---|" * (len(groups) + 3)]
    for n in names:
        cells, worst, points, flat = [], [], [], []
        for g in groups:
            for t, rows in built.values():
                if t.group != g:
                    continue
                row = next((r for r in rows if r.name == n), None)
                peers = [r for r in rows if r.name in PEER_NAMES]
                if row is None or t.match.get("threads") != 1:
                    continue
                for i in t.primary:
                    best = [p.cells[i].median for p in peers if p.cells[i]]
                    if best and row.cells[i] and row.cells[i].median > 0:
                        points.append(min(best) / row.cells[i].median)
            per = [next((r for r in rows if r.name == n), None) for t, rows in built.values() if t.group == g]
            ratios = [r.vs_best_peer for r in per if r and r.vs_best_peer]
            worst += ratios
            flat += [r.flatness for r in per if r and r.flatness]
            cells.append(_ratio(tables.geometric_mean(ratios)))
        md.append(f"| {_row_name(n)} | " + " | ".join(cells) + f" | {_ratio(min(worst) if worst else None)} | "
                  f"{_ratio(min(points) if points else None)} | {_ratio(max(flat) if flat else None)} |")
    return md + [""]


def placement_section(built, lines):
    """Where the CPUs were during the multi-threaded runs (runner/placement.py),
    and strata against the best peer within each placement."""
    state, limit = placement.classify(lines)
    if not state:
        return []
    near, far = placement.probe_ranges(lines, state)
    spread = lambda values: f"{min(values):.0f}–{max(values):.0f} ns" if values else "none"
    moved = sum(1 for v in state.values() if v == "moved")
    md = ["## Placement: how far apart the CPUs were during multi-threaded runs", "",
          "Before and after every run whose threads run at once, bench/tools/core_latency timed a cache "
          "line's round trip between the first two CPUs. A run is *near* when both probes were within "
          f"{placement.NEAR_FACTOR:.0f}x of the run's smallest probe (here up to {limit:.0f} ns), *far* when "
          "both were above, *moved* when they disagree. On a virtual machine the host places and moves the "
          "vCPUs; threads that hand memory to each other run several times slower far apart, with every "
          "allocator, so a median that mixes placements mixes two machines (docs/benchmarks.md, *Placement*). "
          f"This run: {len(near)} runs near ({spread(near)}), {len(far)} far ({spread(far)}), {moved} moved.", "",
          "Per table: its runs in each placement (all allocators), and strata's *vs best peer* over all runs "
          "(the tables' figure) and over the runs of one placement only (in brackets: strata's runs in it; – "
          "when strata or a peer had none there).", "",
          "| table | near / far / moved runs | strata vs best peer | near only | far only |",
          "|---|---|---|---|---|"]
    for t, rows in built.values():
        runs = placement.runs_of(t, state)
        if t.kind != "speed" or not runs:
            continue
        strata = next((r for r in rows if r.name == "strata"), None)
        cells = []
        for wanted in ("near", "far"):
            ratio, count = placement.vs_best_peer(t, lines, state, wanted)
            cells.append("–" if ratio is None else f"{_ratio(ratio)} ({count})")
        md.append(f"| {_short(t)} | {runs['near']} / {runs['far']} / {runs['moved']} | "
                  f"{_ratio(strata.vs_best_peer if strata else None)} | {cells[0]} | {cells[1]} |")
    return md + [""]


def _reps_text(reps, lines, jobs):
    """'5 repetitions', and the jobs that ran another count (from the lines)."""
    ran = {}
    for l in lines:
        if l.get("metric") == "peak_rss" and "rep" in l:
            ran[l["job"]] = max(ran.get(l["job"], 0), l["rep"] + 1)
    others = {}
    for j in jobs:
        if ran.get(j.id, reps) != reps:
            others.setdefault(ran[j.id], []).append(j.label)
    text = f"{reps} repetitions"
    if others:
        counts = sorted(others.items(), reverse=True)
        text += " (" + "; ".join(f"{n} for {', '.join(labels)}" for n, labels in counts) + ")"
    return text


def write(ctx, lines, table_defs, jobs):
    built = {}
    for t in table_defs:
        rows = tables.build(t, lines)
        if rows:
            built[t.id] = (t, rows)
    sweep_threads = sorted({int(l["threads"]) for l in lines if l.get("workload") == "seed004_size_sweep"
                            and "threads" in l and l.get("metric") == "seconds"}, reverse=True)
    sweeps = {T: tables.sweep(lines, T) for T in sweep_threads}
    ran_jobs = [j for j in jobs if any(l.get("job") == j.id for l in lines)]
    names = [n for n in tables.PRELOAD_ORDER if any(l.get("allocator") == n for l in lines)]
    headline = headline_values(built, sweeps, ctx.threads)

    pictures = charts.draw(ctx.out, built, sweeps, lines, headline, ran_jobs)

    md = ["# strata benchmark report", ""]
    md.append(f"Run {ctx.run_id}, `{ctx.command}`, {'quick mode, ' if ctx.quick else ''}"
              f"{_reps_text(ctx.reps, lines, ran_jobs)} per allocator, interleaved; took {ctx.duration:.0f} s.  ")
    load = f"; load average {ctx.load[0]:.1f} at start, {ctx.load[1]:.1f} at end" if ctx.load else ""
    md.append(f"Machine: {cpu_model()}, {ctx.cores} cores, Linux {os.uname().release}{load}.  ")
    if ctx.load and max(ctx.load) > ctx.cores:
        md.append(f"\n**The machine was busy (load above {ctx.cores}, the number of cores): expect wide "
                  "min–max ranges, and trust only differences larger than them.**\n")
    md.append("Allocators: " + ", ".join(f"{a.name} ({a.preload or 'system malloc'})" for a in ctx.allocators) + ".")
    if ctx.threads > ctx.cores:
        md.append(f"\n**--threads {ctx.threads} is more than the {ctx.cores} cores: threads outnumber cores.**")
    for s in ctx.skipped:
        md.append(f"\n**Skipped** {s}.")
    for n in ctx.notes:
        md.append(f"\nNote: {n}.")
    for f in ctx.failures:
        md.append(f"\n**Failed run**: {f}")
    md += ["", "How to read: every cell is the median over repetitions with (min–max). "
           "*vs glibc* and *vs best peer* divide the reference's median by the row's "
           "(for throughput, the row's by the reference's): above 1.00x the row is faster than glibc (in memory "
           "tables: uses less memory), or than the best of tcmalloc/jemalloc/mimalloc. Cycles are rdtsc "
           "(reference) cycles. Peak RSS is the whole process's maximum resident set (wait4). Seed figures were "
           "measured on other machines, often 32-bit or Windows: compare ratios, not absolute values. "
           "Details: docs/benchmarks.md.", ""]

    # Headline tables: speed (speedup over glibc) and memory.
    md += ["## Headline", "", "### Speed: speedup over glibc (higher is better)", "",
           "Preloaded allocators, one figure per workload (its ranked metric; for a group of tables such as the "
           "bulk shapes, the geometric mean of their speedups), and the geometric mean. Pool rows and strata's "
           "feature rows are in the workload tables below.", ""]
    header = ["allocator"] + [c[0] for c in headline] + ["geomean"]
    md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for n in names:
        values = [c[1].get(n) for c in headline]
        if all(v is None for v in values):
            continue
        md.append("| " + " | ".join([_row_name(n)] + [_ratio(v) for v in values] +
                                    [_ratio(tables.geometric_mean(values))]) + " |")
    md.append("")
    if "summary" in pictures:
        md += [f"![speedup over glibc per workload]({pictures['summary']})", ""]
    memory = memory_headline(built, lines, ran_jobs, names)
    if memory:
        md += ["### Memory (lower is leaner)", "",
               "Peak RSS of the start-up programs (wait4), resident memory with all threads alive and per "
               "thread, the resident set after a cache of small objects was 99% evicted, and over every "
               "workload the peak RSS over the live bytes and over the leanest peer's peak RSS (geometric "
               "means).", "",
               "| allocator | " + " | ".join(label for label, _, _ in memory) + " |",
               "|---|" + "---|" * len(memory)]
        for n in names:
            md.append(f"| {_row_name(n)} | " + " | ".join(_num(v.get(n), d) for _, v, d in memory) + " |")
        md.append("")

    done_groups = set()
    for key, (t, rows) in built.items():
        if t.group:
            if t.group in done_groups:
                continue
            done_groups.add(t.group)
            members = [(m, r) for m, r in built.values() if m.group == t.group]
            md += [f"## {t.group_title}", ""]
            threads = {str(l.get("threads")) for l in lines if l.get("workload") == t.workload and "threads" in l}
            note = "".join(_threads_note(int(x), ctx.cores) for x in threads if x.isdigit() and x != "1")
            if note:
                md += [note.strip(), ""]
            flatness = ("; *flatness*: the largest ns per pair over N divided by the smallest (1.00x: flat)"
                        if t.flatness else "")
            md += ["Medians over repetitions (the min–max ranges are in results.jsonl); *geomean*: over N, "
                   f"the figure the ratios compare{flatness}.", "", group_table(members), ""]
            chart = pictures.get(f"group_{t.group}")
            if chart:
                md += [f"![{t.group_title}]({chart})", ""]
            continue
        md += [f"## {t.title}", ""]
        if t.seed_text:
            md += [f"Seed figures: {t.seed_text}", ""]
        if t.text:
            md += [t.text, ""]
        threads = {str(l.get("threads")) for l in lines if l.get("workload") == t.workload and "threads" in l}
        note = "".join(_threads_note(int(x), ctx.cores) for x in threads
                       if x.isdigit() and t.workload != "seed004_size_sweep" and t.kind != "memory")
        if note:
            md += [note.strip(), ""]
        if key == "hugepage_live_set":
            md += [thp_note(ctx.thp), "",
                   "Columns: time per access of the random chase (ranked), time to allocate and write the "
                   "live set (including replacing half of it), the heap backed by huge pages at the end "
                   "(AnonHugePages of /proc/self/smaps_rollup) and the peak resident set over the bytes "
                   "requested (VmHWM / live bytes: above 1.00 is allocator overhead).", ""]
        if key == "startup_floor":
            md += [startup_note(lines), ""]
        md += [workload_table(t, rows), ""]
        if key == "seed003_pinned":
            md += pool_ratio_lines(t, rows)
        if key in pictures:
            md += [f"![{t.title}]({pictures[key]})", ""]

    md += bulk_summary(built, ctx.threads)
    md += placement_section(built, lines)
    md += feature_costs(built)
    md += fast_path_costs(built, ctx.skipped)

    for T, (seconds, speedup, summary, rss) in sweeps.items():
        md += [f"## Seed 004: size sweep, {T} threads x 10,000 malloc/free per size: speedup over glibc", ""]
        md += ["Seed figures (16 threads, Ubuntu 20.04, GCC -O3): 4.62x faster than malloc on average, "
               "7.37x at best; 2-5x for 8-128 B, 5-6x for 256 B-1 KiB, 7x for 2 KiB.", ""]
        if T > ctx.cores:
            md += [_threads_note(T, ctx.cores).strip(), ""]
        md += [sweep_table(speedup, summary, rss, seconds), ""]
        if f"sweep_{T}" in pictures:
            md += [f"![seed 004 size sweep, {T} threads]({pictures[f'sweep_{T}']})", ""]

    md += rss_over_live_section(lines, ran_jobs, names)
    if "rss" in pictures:
        md += ["## Peak RSS", "", f"![peak RSS per workload]({pictures['rss']})", ""]
    md += ["## Charts", ""] + [f"- [{os.path.basename(p)}]({p})" for p in pictures.values()]
    md += ["", "Raw results: results.jsonl (one JSON object per line; the first line describes the run).", ""]
    path = os.path.join(ctx.out, "REPORT.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    return path


def startup_note(lines):
    """How the start-up figures were taken, and whether any sat at the
    launcher's floor (then the program's own peak was not larger)."""
    floors = [l.get("floor_kib") for l in lines if l.get("metric") == "launcher_peak_kib" and l.get("floor_kib")]
    at_floor = sorted({l["allocator"] for l in lines if l.get("metric") == "launcher_peak_kib"
                       and l.get("floor_kib") and l["value"] <= l["floor_kib"]})
    text = ("*wait4*: bench/tools/launch.c forks, execs the program with the allocator preloaded and reads "
            "ru_maxrss; the figure is the larger of the program's own peak and the launcher's floor (its child's "
            "resident set just before exec")
    if floors:
        text += f", {min(floors) / 1024:.2f}–{max(floors) / 1024:.2f} MiB in this run"
    text += ("), so every figure above the floor is exact. */usr/bin/time -f %M*: `LD_PRELOAD=<lib> "
             "/usr/bin/time -f %M <program>`, as a shell user types it (the allocator is loaded into time too); "
             "same wait4 measure, with time's own pages as the floor. *Own VmHWM*: the trivial program reads "
             "its own peak from /proc/self/status just before it returns, so it misses the pages touched on the "
             "way out (exit handlers, library destructors).")
    if at_floor:
        text += f" **At the launcher's floor (the program's peak was not larger): {', '.join(at_floor)}.**"
    return text
