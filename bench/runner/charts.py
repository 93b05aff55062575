"""PNG charts (matplotlib, Agg backend). Every chart has labelled axes with
units, a legend or labelled bars, and glibc as the visible reference."""
import os

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # bench/run already warned
    plt = None

from .tables import PRELOAD_ORDER

COLOURS = {"glibc": "#7f7f7f", "tcmalloc": "#1f77b4", "jemalloc": "#ff7f0e",
           "mimalloc": "#2ca02c", "strata": "#d62728",
           "strata (huge pages)": "#ff9896", "strata (unhardened)": "#ff9896",
           "strata (profiling off)": "#c49c94"}
POOL_COLOURS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
SHORT = {"seed000_unordered_set": "000 set ops", "seed000_new_delete": "000 new/delete",
         "seed002_fixed": "002 100B x10k", "seed002_locked": "002 + lock",
         "seed003_producer_consumer": "003 prod/cons", "seed001_st_random": "001 1T random",
         "seed001_mt_random": "001 MT random", "seed001_mt_fixed": "001 MT fixed",
         "server_larson": "server", "fastpath_pair": "fast path",
         "callgrind_pair": "instr/pair", "hugepage_live_set": "huge pages",
         "handoff_nxn": "NxN handoff", "small_burst": "small burst", "thread_churn": "thread churn",
         "startup_floor": "start-up floor", "thread_memory": "memory per thread",
         "memory_over_time": "memory after eviction"}


def _colour(name, index):
    return COLOURS.get(name, POOL_COLOURS[index % len(POOL_COLOURS)])


def _save(fig, out, file_name):
    fig.tight_layout()
    fig.savefig(os.path.join(out, file_name), dpi=110)
    plt.close(fig)
    return file_name


def _label_bars(ax, bars, fmt="{:.2f}", tops=None):
    """Writes each bar's value just above it (or at `tops`), on a white box that
    keeps it readable over a whisker."""
    for i, bar in enumerate(bars):
        h = bar.get_height()
        if h > 0:
            top = tops[i] if tops else h
            ax.annotate(fmt.format(h), (bar.get_x() + bar.get_width() / 2, top), ha="center",
                        va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points", zorder=5,
                        bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))


def relative_bars(out, key, table, rows):
    """One workload: each row's score relative to glibc's, with the min-max of
    the repetitions as error bars."""
    glibc = next((r for r in rows if r.name == "glibc" and r.score), None)
    rows = [r for r in rows if r.score]
    if not glibc or not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4.2))
    values = [r.score / glibc.score for r in rows]
    low = [v - min(r.score_reps) / glibc.score for v, r in zip(values, rows)]
    high = [max(r.score_reps) / glibc.score - v for v, r in zip(values, rows)]
    bars = ax.bar(range(len(rows)), values, color=[_colour(r.name, i) for i, r in enumerate(rows)],
                  yerr=[low, high], capsize=3, ecolor="black")
    # One preempted repetition on a loaded machine can put a whisker 10x above
    # every bar; clip the axis so the medians stay readable, and say so.
    top = 1.6 * max(max(values), 1.0)
    clipped = any(v + h > top for v, h in zip(values, high))
    ax.set_ylim(0, top)
    # Labels above the whisker; on the bar itself when the whisker reaches the
    # top of the axis (a label there would collide with the frame).
    _label_bars(ax, bars, tops=[v + h if v + h < 0.9 * top else v for v, h in zip(values, high)])
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="glibc = 1.0")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r.name for r in rows], rotation=20 if len(rows) > 5 else 0, ha="right" if len(rows) > 5 else "center", fontsize=9)
    if table.kind == "memory":
        ax.set_ylabel("memory relative to glibc (lower is leaner)")
    elif table.better == "lower":
        ax.set_ylabel("time relative to glibc (lower is better)")
    else:
        ax.set_ylabel("throughput relative to glibc (higher is better)")
    ax.set_xlabel("allocator (bars: median of repetitions; whiskers: min-max"
                  + (", some clipped at the top of the axis)" if clipped else ")"))
    ax.set_title(table.title, fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    return _save(fig, out, f"{key}.png")


def callgrind_bars(out, table, rows):
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(rows) + 2), 4.6))
    width = 0.8 / max(1, len(table.columns))
    colours = ["#4c72b0", "#dd8452", "#8fa8d6", "#f0b48c"]
    for j, column in enumerate(table.columns):
        values = [r.cells[j].median if r.cells[j] else 0 for r in rows]
        bars = ax.bar([i + j * width for i in range(len(rows))], values, width, label=column.label,
                      color=colours[j % len(colours)])
        _label_bars(ax, bars, "{:.0f}")
    ax.axhline(40, color="#d62728", linestyle=":", linewidth=1, label="strata target: 40")
    ax.set_xticks([i + width * (len(table.columns) - 1) / 2 for i in range(len(rows))])
    ax.set_xticklabels([r.name.replace(" (", "\n(") for r in rows], fontsize=9)
    ax.set_ylabel("instructions per malloc+free pair")
    ax.set_xlabel("allocator (32-byte blocks, valgrind --tool=callgrind; whole loop = call + PLT + malloc + free)")
    ax.set_title(table.title, fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, out, "callgrind_pair.png")


def summary(out, headline):
    """The speed headline as a chart: one group per headline column, one bar
    per preloaded allocator; a column no allocator has a figure for is left
    out (a pool-only table has no glibc row and no speedup)."""
    columns = [(label, values) for label, values in headline if any(values.get(n) for n in PRELOAD_ORDER)]
    names = [n for n in PRELOAD_ORDER if any(v.get(n) for _, v in columns)]
    if not columns or not names:
        return None
    fig, ax = plt.subplots(figsize=(max(9, 0.7 * len(columns) + 2), 5.2))
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        values = [v.get(name) or 0 for _, v in columns]
        ax.bar([i + j * width for i in range(len(columns))], values, width, label=name, color=_colour(name, j))
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    top = max(v.get(n) or 0 for _, v in columns for n in names)
    ax.set_ylim(0, 1.18 * top)  # room for the legend above the tallest bar
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(columns))])
    ax.set_xticklabels([label for label, _ in columns], rotation=30, ha="right", fontsize=9)
    ax.set_ylabel("speedup over glibc (x, higher is better)")
    ax.set_xlabel("workload (the headline table's columns)")
    ax.set_title("Speedup over glibc malloc per workload (median of repetitions)", fontsize=11)
    ax.legend(ncol=len(names), fontsize=8, loc="upper left")
    return _save(fig, out, "speedup_summary.png")


def _median_by(lines, key_fn):
    import statistics
    groups = {}
    for l in lines:
        groups.setdefault(key_fn(l), []).append(float(l["value"]))
    return {k: statistics.median(v) for k, v in groups.items()}


def bulk_group(out, group, members, lines):
    """One group of tables (a bulk group: threads and order; the steady live
    set): a subplot per table (block size, thread count), its metric against
    N on a log axis, one line per preloaded allocator (median of
    repetitions), so that the reader sees where each curve bends."""
    fig, axes = plt.subplots(1, len(members), figsize=(4.2 * len(members) + 1, 4.0), squeeze=False)
    handles = {}
    x_label, y_label = members[0][0].chart_axes
    for ax, (table, rows) in zip(axes[0], members):
        metric = table.columns[0].metric
        mine = [l for l in lines if l.get("workload") == table.workload and l.get("metric") == metric
                and all(str(l.get(k)) == str(v) for k, v in table.match.items())]
        medians = _median_by(mine, lambda l: (l["allocator"], int(l["count"])))
        top = 0
        for j, name in enumerate(n for n in PRELOAD_ORDER if any(k[0] == n for k in medians)):
            counts = sorted(c for a, c in medians if a == name)
            values = [medians[(name, c)] for c in counts]
            line, = ax.plot(counts, values, marker="o", markersize=3.5, color=_colour(name, j), label=name,
                            linewidth=2.2 if name == "strata" else 1.3)
            handles[name] = line
            if name != "glibc":
                top = max(top, max(values))
        ax.set_xscale("log")
        # glibc can be many times slower at large N: keep the other curves
        # readable and let glibc's leave the axis (said in the x label).
        glibc_top = max((v for (a, _), v in medians.items() if a == "glibc"), default=0)
        clipped = glibc_top > 1.6 * top > 0
        ax.set_ylim(0, 1.6 * top if clipped else 1.1 * max(top, glibc_top))
        ax.set_title(table.subgroup, fontsize=10)
        ax.set_xlabel(x_label + ("; glibc above the axis" if clipped else ""), fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(y_label)
    fig.suptitle(members[0][0].group_title, fontsize=10)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=len(handles), fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(os.path.join(out, f"{group}.png"), dpi=100)
    plt.close(fig)
    return f"{group}.png"


def column_bars(out, key, table, rows, indices, ylabel):
    """Absolute values of some columns, grouped by column, one bar per
    preloaded allocator (median, min-max whiskers)."""
    rows = [r for r in rows if r.name in PRELOAD_ORDER]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(indices) + 3), 4.4))
    width = 0.8 / len(rows)
    for j, r in enumerate(rows):
        cells = [r.cells[i] for i in indices]
        values = [c.median if c else 0 for c in cells]
        low = [c.median - c.low if c else 0 for c in cells]
        high = [c.high - c.median if c else 0 for c in cells]
        bars = ax.bar([i + j * width for i in range(len(indices))], values, width, label=r.name,
                      color=_colour(r.name, j), yerr=[low, high], capsize=2, ecolor="black")
        _label_bars(ax, bars, "{:.1f}")
    ax.set_xticks([i + width * (len(rows) - 1) / 2 for i in range(len(indices))])
    ax.set_xticklabels([table.columns[i].label for i in indices], fontsize=9)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("bars: median of repetitions; whiskers: min-max")
    ax.set_title(table.title, fontsize=10)
    ax.legend(fontsize=8, ncol=len(rows))
    return _save(fig, out, f"{key}.png")


def memory_timeline(out, table, lines):
    """RSS against time since the eviction, one line per preloaded allocator
    (its median repetition: the one whose last sample is the median), with
    the live bytes after the eviction as a reference line. Repetitions are
    not averaged sample by sample: their build and eviction take different
    times, so their samples do not line up before the eviction."""
    import statistics
    samples = [l for l in lines if l.get("workload") == "memory_over_time" and l.get("metric") == "rss_sample_mib"]
    if not samples:
        return None
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for j, name in enumerate(n for n in PRELOAD_ORDER if any(l["allocator"] == n for l in samples)):
        runs = {}
        for l in samples:
            if l["allocator"] == name:
                runs.setdefault(l.get("rep", 0), []).append((int(l["t_ms"]), float(l["value"])))
        ranked = sorted(runs.values(), key=lambda run: max(run)[1])  # by the last sample's RSS
        run = sorted(ranked[(len(ranked) - 1) // 2])
        ax.plot([t / 1000 for t, _ in run], [v for _, v in run], color=_colour(name, j), label=name,
                linewidth=2.2 if name == "strata" else 1.3)
    live = [float(l["value"]) for l in lines if l.get("workload") == "memory_over_time"
            and l.get("metric") == "live_after_mib"]
    peak = [float(l["value"]) for l in lines if l.get("workload") == "memory_over_time"
            and l.get("metric") == "peak_live_bytes"]
    if live:
        ax.axhline(statistics.median(live), color="black", linestyle="--", linewidth=1,
                   label=f"live bytes after eviction ({statistics.median(live):.1f} MiB)")
    if peak:
        ax.axhline(statistics.median(peak) / 1048576, color="black", linestyle=":", linewidth=0.8,
                   label="live bytes before eviction")
    ax.axvline(0, color="#555555", linewidth=0.8)
    ax.set_xlabel("seconds since the end of the eviction (before 0: building the cache, then evicting)")
    ax.set_ylabel("resident set (MiB)")
    ax.set_ylim(bottom=0)
    ax.set_title(table.title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out, "memory_over_time.png")


def sweep_lines(out, threads, speedup):
    fig, ax = plt.subplots(figsize=(8, 4.6))
    for j, (name, per_size) in enumerate(speedup.items()):
        sizes = sorted(per_size)
        ax.plot(sizes, [per_size[s] for s in sizes], marker="o", label=name, color=_colour(name, j),
                linewidth=2.2 if name == "strata" else 1.4)
    ax.axhline(4.62, color="#555555", linestyle=":", linewidth=1, label="seed 004 average (4.62x)")
    ax.set_xscale("log", base=2)
    sizes = sorted({s for v in speedup.values() for s in v})
    ax.set_xticks(sizes)
    ax.set_xticklabels([f"{s}" for s in sizes])
    ax.set_xlabel("block size (bytes)")
    ax.set_ylabel("speedup over glibc (x)")
    ax.set_title(f"Seed 004 size sweep: {threads} threads x 10,000 malloc/free per size", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out, f"seed004_sweep_T{threads}.png")


def rss_bars(out, lines, jobs):
    """Peak RSS of every job, one bar per preloaded allocator (horizontal,
    log scale: from a 1 MiB start-up program to a 500 MiB live set)."""
    from .tables import median_peak_rss
    groups = [(j.label, {n: median_peak_rss(lines, j.id, n) for n in PRELOAD_ORDER}) for j in jobs]
    groups = [(label, g) for label, g in groups if any(g.values())]
    names = [n for n in PRELOAD_ORDER if any(g.get(n) for _, g in groups)]
    if not groups or not names:
        return None
    height = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(10, max(5, 0.32 * len(groups) * len(names) / 2.2 + 1.5)))
    for j, name in enumerate(names):
        values = [g.get(name) or 0 for _, g in groups]
        ax.barh([i + j * height for i in range(len(groups))], values, height, label=name, color=_colour(name, j))
    ax.set_xscale("log")
    top = max(v or 0 for _, g in groups for v in g.values())
    ticks = [t for t in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000) if t <= 2 * top]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_yticks([i + height * (len(names) - 1) / 2 for i in range(len(groups))])
    ax.set_yticklabels([label for label, _ in groups], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("peak RSS of the process (MiB, log scale; median of repetitions)")
    ax.set_title("Peak resident memory per workload (lower is leaner)", fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(ncol=len(names), fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.04))
    return _save(fig, out, "rss.png")


def draw(out, built, sweeps, lines, headline, jobs):
    """Draws every chart; returns {key: file name relative to out}."""
    if plt is None:
        return {}
    pictures = {}
    s = summary(out, headline)
    if s:
        pictures["summary"] = s
    groups = {}
    for key, (table, rows) in built.items():
        if table.group:
            groups.setdefault(table.group, []).append((table, rows))
            continue
        if key == "callgrind_pair":
            picture = callgrind_bars(out, table, rows)
        elif key == "memory_over_time":
            picture = memory_timeline(out, table, lines)
        elif key == "handoff_nxn":
            picture = column_bars(out, key, table, rows, table.primary, "wall ns per object handed over")
        elif key == "small_burst":
            picture = column_bars(out, key, table, rows, table.primary, "ns per malloc+free pair (mean of 12 points)")
        elif key == "startup_floor":
            picture = column_bars(out, key, table, rows, [0, 3], "peak RSS (MiB, wait4)")
        else:
            picture = relative_bars(out, key, table, rows)
        if picture:
            pictures[key] = picture
    for group, members in groups.items():
        pictures[f"group_{group}"] = bulk_group(out, group, members, lines)
    for T, (_, speedup, _, _) in sweeps.items():
        if speedup:
            pictures[f"sweep_{T}"] = sweep_lines(out, T, speedup)
    r = rss_bars(out, lines, jobs)
    if r:
        pictures["rss"] = r
    return pictures
