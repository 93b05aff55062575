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
           "strata (huge pages)": "#ff9896", "strata (no list encoding)": "#ff9896"}
POOL_COLOURS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"]
SHORT = {"seed000_unordered_set": "000 set ops", "seed000_new_delete": "000 new/delete",
         "seed002_fixed": "002 100B x10k", "seed002_locked": "002 + lock",
         "seed003_producer_consumer": "003 prod/cons", "seed001_st_random": "001 1T random",
         "seed001_mt_random": "001 MT random", "seed001_mt_fixed": "001 MT fixed",
         "server_larson": "server", "fastpath_pair": "fast path",
         "callgrind_pair": "instr/pair", "hugepage_live_set": "huge pages"}


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
    if table.better == "lower":
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


def summary(out, built):
    keys = [k for k in built if k != "fastpath_pair"]
    names = [n for n in PRELOAD_ORDER if any(r.name == n for k in keys for r in built[k][1])]
    if not keys or not names:
        return None
    fig, ax = plt.subplots(figsize=(max(9, 1.1 * len(keys) + 2), 4.8))
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        values = []
        for k in keys:
            row = next((r for r in built[k][1] if r.name == name), None)
            values.append(row.vs_glibc if row and row.vs_glibc else 0)
        ax.bar([i + j * width for i in range(len(keys))], values, width, label=name, color=_colour(name, j))
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(keys))])
    ax.set_xticklabels([SHORT.get(k, k) for k in keys], rotation=25, ha="right", fontsize=9)
    ax.set_ylabel("speedup over glibc (x, higher is better)")
    ax.set_xlabel("workload (seed number first)")
    ax.set_title("Speedup over glibc malloc per workload (median of repetitions)", fontsize=11)
    ax.legend(ncol=len(names), fontsize=8, loc="upper left")
    return _save(fig, out, "speedup_summary.png")


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


def rss_bars(out, built, sweeps):
    groups = []  # (label, {allocator: MiB})
    for k, (t, rows) in built.items():
        if k == "callgrind_pair":
            continue
        groups.append((SHORT.get(k, k), {r.name: r.peak_rss_mib for r in rows}))
    for T, (_, _, _, rss) in sweeps.items():
        groups.append((f"004 sweep T={T}", rss))
    names = [n for n in PRELOAD_ORDER if any(n in g for _, g in groups)]
    if not groups or not names:
        return None
    fig, ax = plt.subplots(figsize=(max(9, 1.1 * len(groups) + 2), 4.8))
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        values = [g.get(name) or 0 for _, g in groups]
        ax.bar([i + j * width for i in range(len(groups))], values, width, label=name, color=_colour(name, j))
    ax.set_yscale("log")
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(groups))])
    ax.set_xticklabels([g for g, _ in groups], rotation=25, ha="right", fontsize=9)
    ax.set_ylabel("peak RSS of the process (MiB, log scale)")
    ax.set_xlabel("workload")
    ax.set_title("Peak resident memory per workload (median of repetitions, lower is better)", fontsize=11)
    ax.legend(ncol=len(names), fontsize=8, loc="upper left")
    return _save(fig, out, "rss.png")


def draw(out, built, sweeps, lines):
    """Draws every chart; returns {key: file name relative to out}."""
    if plt is None:
        return {}
    pictures = {}
    s = summary(out, built)
    if s:
        pictures["summary"] = s
    for key, (table, rows) in built.items():
        picture = callgrind_bars(out, table, rows) if key == "callgrind_pair" else relative_bars(out, key, table, rows)
        if picture:
            pictures[key] = picture
    for T, (_, speedup, _, _) in sweeps.items():
        if speedup:
            pictures[f"sweep_{T}"] = sweep_lines(out, T, speedup)
    r = rss_bars(out, built, sweeps)
    if r:
        pictures["rss"] = r
    return pictures
