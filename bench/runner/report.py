"""Writes REPORT.md: a headline table, then one table per workload."""
import os
from dataclasses import dataclass

from . import charts, tables
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
    if abs(value) >= 1000 and digits <= 1:
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


def workload_table(table, rows):
    header = ["allocator"] + [c.label for c in table.columns] + \
             ["vs glibc", "vs best peer", "peak RSS (MiB)"]
    has_seed = any(r.seed for r in rows)
    if has_seed:
        header.append("seed figure")
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        name = f"**{r.name}**" if r.name == "strata" else r.name
        cells = [name] + [_cell(c, col.digits) for c, col in zip(r.cells, table.columns)]
        cells += [_ratio(r.vs_glibc), _ratio(r.vs_best_peer), _num(r.peak_rss_mib, 1)]
        if has_seed:
            cells.append(r.seed or "")
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


def _difference(with_, without, digits):
    if with_ is None or without is None:
        return "–"
    diff = with_ - without
    percent = f" ({100 * diff / without:+.1f}%)" if without else ""
    return f"{diff:+.{digits}f}{percent}"


def encoding_cost(built, skipped):
    """Table "Cost of free-list encoding": strata (links stored XOR a
    per-process secret, the default) against the same allocator built with
    -DSTRATA_HARDENED=OFF, in the fast-path measurements."""
    from .allocators import UNENCODED_ROW
    md = ["## Cost of free-list encoding", "",
          "strata stores each free-list link XOR a per-process secret so that an overflow cannot steer the "
          "next allocation (issue 5). The row \"strata (no list encoding)\" is the same source built with "
          "`-DSTRATA_HARDENED=OFF` (by bench/run, in `<build dir>-unhardened`). Instruction counts are exact "
          "(valgrind --tool=callgrind, not affected by load); *inside malloc+free* counts only instructions "
          "executed inside `malloc` and `free` and what they call (`--toggle-collect=malloc --toggle-collect=free`), "
          "*whole loop* adds the call and the PLT jump (the loop's own instructions subtracted). "
          "Times are medians (min–max) of the timed fast-path runs: trust a time difference only when it is "
          "larger than the ranges.", ""]
    measures = []  # (label, table id, column label, digits)
    for pattern, label in (("free at once", "free at once"), ("100 then free", "100 then free")):
        measures.append((f"instructions inside malloc+free per pair, {label}", "callgrind_pair",
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
        if index is None or "strata" not in by_name or UNENCODED_ROW not in by_name:
            continue
        on, off = by_name["strata"].cells[index], by_name[UNENCODED_ROW].cells[index]
        difference = _difference(on.median if on else None, off.median if off else None, digits)
        if on and off and on.low != on.high and on.low <= off.high and off.low <= on.high:
            difference += ", within the min–max ranges: not measurable in this run"
        lines.append("| " + " | ".join([label, _cell(on, digits), _cell(off, digits), difference]) + " |")
    if not lines:
        reason = next((s for s in skipped if s.startswith(UNENCODED_ROW) or s.startswith("strata:")), None)
        md.append("Not measured in this run" + (f": {reason}." if reason else
                                                 " (no fast-path results for both strata builds)."))
        return md + [""]
    md += ["| measure (malloc(32) + free) | strata, encoded links (default) | strata, no list encoding | "
           "cost of encoding |", "|---|---|---|---|"] + lines + [""]
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


# Headline: the one figure per workload a reader compares first.
HEADLINE = [("seed000_unordered_set", "set ops"), ("seed000_new_delete", "new/delete"),
            ("seed002_fixed", "100 B x 10k"), ("seed003_producer_consumer", "producer/consumer"),
            ("seed001_mt_random", "MT random"), ("seed001_mt_fixed", "MT fixed"),
            ("seed004_T16", "sweep T=16 avg"), ("server_larson", "server"),
            ("callgrind_pair", "instr/pair")]


def write(ctx, lines, table_defs):
    built = {}
    for t in table_defs:
        rows = tables.build(t, lines)
        if rows:
            built[t.id] = (t, rows)
    sweep_threads = sorted({int(l["threads"]) for l in lines if l.get("workload") == "seed004_size_sweep"
                            and "threads" in l}, reverse=True)
    sweeps = {T: tables.sweep(lines, T) for T in sweep_threads}

    pictures = charts.draw(ctx.out, built, sweeps, lines)

    md = ["# strata benchmark report", ""]
    md.append(f"Run {ctx.run_id}, `{ctx.command}`, {'quick mode, ' if ctx.quick else ''}"
              f"{ctx.reps} repetitions per allocator, interleaved; took {ctx.duration:.0f} s.  ")
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
           "(for throughput, the row's by the reference's): above 1.00x the row is faster than glibc, or than the best of "
           "tcmalloc/jemalloc/mimalloc. Cycles are rdtsc (reference) cycles. Peak RSS is the whole "
           "process's maximum resident set (wait4). Seed figures were measured on other machines, often "
           "32-bit or Windows: compare ratios, not absolute values. Details: docs/benchmarks.md.", ""]

    # Headline table: speedup over glibc per workload.
    md += ["## Headline: speedup over glibc (higher is better)", "",
           "Preloaded allocators, one figure per workload (its ranked metric), and the geometric mean. "
           "Pool rows are in the workload tables below.", ""]
    # Preloaded allocators only: a pool row exists in one or two workloads, and
    # a geometric mean over one column would read as a summary it is not.
    names = [n for n in tables.PRELOAD_ORDER
             if any(r.name == n for _, rows in built.values() for r in rows)]
    columns = []
    for key, label in HEADLINE:
        if key == "seed004_T16" and 16 in sweeps:
            summary = sweeps[16][2]
            columns.append((label, {n: v[0] for n, v in summary.items()}))
        elif key in built:
            columns.append((label, {r.name: r.vs_glibc for r in built[key][1]}))
    header = ["allocator"] + [c[0] for c in columns] + ["geomean"]
    md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for n in names:
        values = [c[1].get(n) for c in columns]
        if all(v is None for v in values):
            continue
        label = f"**{n}**" if n == "strata" else n
        md.append("| " + " | ".join([label] + [_ratio(v) for v in values] +
                                    [_ratio(tables.geometric_mean(values))]) + " |")
    md.append("")
    if "summary" in pictures:
        md += [f"![speedup over glibc per workload]({pictures['summary']})", ""]

    for key, (t, rows) in built.items():
        md += [f"## {t.title}", ""]
        if t.seed_text:
            md += [f"Seed figures: {t.seed_text}", ""]
        threads = {str(l.get("threads")) for l in lines if l.get("workload") == t.workload and "threads" in l}
        note = "".join(_threads_note(int(x), ctx.cores) for x in threads if x.isdigit() and t.workload != "seed004_size_sweep")
        if note:
            md += [note.strip(), ""]
        if key == "hugepage_live_set":
            md += [thp_note(ctx.thp), "",
                   "Columns: time per access of the random chase (ranked), time to allocate and write the "
                   "live set (including replacing half of it), the heap backed by huge pages at the end "
                   "(AnonHugePages of /proc/self/smaps_rollup) and the peak resident set over the bytes "
                   "requested (VmHWM / live bytes: above 1.00 is allocator overhead).", ""]
        md += [workload_table(t, rows), ""]
        if key == "seed003_pinned":
            md += pool_ratio_lines(t, rows)
        if key in pictures:
            md += [f"![{t.title}]({pictures[key]})", ""]

    md += encoding_cost(built, ctx.skipped)

    for T, (seconds, speedup, summary, rss) in sweeps.items():
        md += [f"## Seed 004: size sweep, {T} threads x 10,000 malloc/free per size: speedup over glibc", ""]
        md += ["Seed figures (16 threads, Ubuntu 20.04, GCC -O3): 4.62x faster than malloc on average, "
               "7.37x at best; 2-5x for 8-128 B, 5-6x for 256 B-1 KiB, 7x for 2 KiB.", ""]
        if T > ctx.cores:
            md += [_threads_note(T, ctx.cores).strip(), ""]
        md += [sweep_table(speedup, summary, rss, seconds), ""]
        if f"sweep_{T}" in pictures:
            md += [f"![seed 004 size sweep, {T} threads]({pictures[f'sweep_{T}']})", ""]

    if "rss" in pictures:
        md += ["## Peak RSS", "", f"![peak RSS per workload]({pictures['rss']})", ""]
    md += ["## Charts", ""] + [f"- [{os.path.basename(p)}]({p})" for p in pictures.values()]
    md += ["", "Raw results: results.jsonl (one JSON object per line; the first line describes the run).", ""]
    path = os.path.join(ctx.out, "REPORT.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    return path
