"""Turns raw result lines into table rows: medians, min-max, ratios, RSS.

Every figure here comes from the lines of this one run: ratios compare
allocators measured interleaved in the same run, never stored numbers."""
import math
import statistics
from dataclasses import dataclass, field

from .allocators import PEER_NAMES
from .jobs import METRIC_ALIASES

PRELOAD_ORDER = ["glibc", "tcmalloc", "jemalloc", "mimalloc", "strata"]


@dataclass
class Cell:
    median: float
    low: float
    high: float


@dataclass
class Row:
    name: str
    cells: list                      # Cell or None per column
    score: float = None              # median of the per-rep primary sum
    score_reps: list = field(default_factory=list)
    vs_glibc: float = None           # > 1: faster (or higher throughput) than glibc
    vs_best_peer: float = None       # > 1: better than the best of tcmalloc/jemalloc/mimalloc
    peak_rss_mib: float = None
    seed: str = ""
    flatness: float = None           # max / min of the primary columns' medians


def row_order(names):
    """Preloaded allocators, then strata's variant rows ("strata (...)"),
    then pool rows."""
    preloaded = [n for n in PRELOAD_ORDER if n in names]
    variants = sorted(n for n in names if n.startswith("strata (") and n not in PRELOAD_ORDER)
    return preloaded + variants + sorted(n for n in names if n not in PRELOAD_ORDER and n not in variants)


def _matches(line, wanted, defaults):
    return all(str(line.get(k, defaults.get(k))) == str(v) for k, v in wanted.items())


def _advantage(score, reference, better):
    """How many times better `score` is than `reference`."""
    if score is None or reference is None or score <= 0 or reference <= 0:
        return None
    return reference / score if better == "lower" else score / reference


def _metric(line):
    return METRIC_ALIASES.get((line.get("workload"), line.get("metric")), line.get("metric"))


# Keys that tell samples of one quantity apart rather than name a quantity.
_SAMPLE_KEYS = {"value", "rep", "inner_rep", "job", "peak_rss_kib", "floor_kib", "wall_seconds", "rounds"}


def _column_values(row_lines, column, defaults):
    """{rep: value} of one column. Within one run, lines that differ only in
    their value (a program repeating a measurement) are samples: their median
    is taken. Lines that differ in a parameter (e.g. the three phases of
    seed 000 for an ns column over all phases) are parts: they are summed."""
    samples = {}  # rep -> identity -> [values]
    for l in row_lines:
        if _metric(l) == column.metric and _matches(l, column.match, defaults):
            identity = tuple(sorted((k, str(v)) for k, v in l.items() if k not in _SAMPLE_KEYS))
            samples.setdefault(l.get("rep", 0), {}).setdefault(identity, []).append(float(l["value"]))
    combine = (lambda values: sum(values) / len(values)) if column.parts == "mean" else sum
    return {rep: combine([statistics.median(v) * column.scale for v in parts.values()])
            for rep, parts in samples.items()}


def build(table, lines):
    """Rows of one Table from all result lines of the run."""
    mine = [l for l in lines if l.get("workload") == table.workload
            and _matches(l, table.match, table.defaults)]
    rows = []
    for name in row_order({l["allocator"] for l in mine}):
        row_lines = [l for l in mine if l["allocator"] == name]
        reps = sorted({l.get("rep", 0) for l in row_lines})
        per_column = []  # per column: {rep: value}
        for column in table.columns:
            per_column.append(_column_values(row_lines, column, table.defaults))
        cells = [Cell(statistics.median(v.values()), min(v.values()), max(v.values())) if v else None
                 for v in per_column]
        score_reps = []
        for rep in reps:
            parts = [per_column[i].get(rep) for i in table.primary]
            if all(p is not None for p in parts):
                score_reps.append(geometric_mean(parts) if table.combine == "geomean" else sum(parts))
        runs = {(l.get("job"), l.get("rep")): l.get("peak_rss_kib") for l in row_lines}
        rss = [kib for kib in runs.values() if kib]
        seed = next((text for key, text in table.seed_rows.items() if key in name), "")
        row = Row(name, cells, statistics.median(score_reps) if score_reps else None,
                  score_reps, peak_rss_mib=statistics.median(rss) / 1024 if rss else None, seed=seed)
        primary = [cells[i].median for i in table.primary if cells[i] is not None and cells[i].median > 0]
        if table.flatness and len(primary) > 1:
            row.flatness = max(primary) / min(primary)
        rows.append(row)
    add_ratios(rows, table.better)
    return rows


def add_ratios(rows, better):
    by_name = {r.name: r for r in rows}
    glibc = by_name.get("glibc")
    peers = [r for r in rows if r.name in PEER_NAMES and r.score is not None]
    best_peer = None
    if peers:
        pick = min if better == "lower" else max
        best_peer = pick(peers, key=lambda r: r.score)
    for r in rows:
        r.vs_glibc = _advantage(r.score, glibc.score if glibc else None, better)
        r.vs_best_peer = _advantage(r.score, best_peer.score if best_peer else None, better)


def sweep(lines, threads):
    """Seed 004: {allocator: {size: median seconds}}, speedups over glibc,
    their average and best, and peak RSS per allocator."""
    mine = [l for l in lines if l.get("workload") == "seed004_size_sweep"
            and str(l.get("threads")) == str(threads) and l.get("metric") == "seconds"]
    seconds = {}
    for name in row_order({l["allocator"] for l in mine}):
        per_size = {}
        for l in mine:
            if l["allocator"] == name:
                per_size.setdefault(int(l["size"]), []).append(float(l["value"]))
        seconds[name] = {size: statistics.median(v) for size, v in sorted(per_size.items())}
    speedup = {}
    glibc = seconds.get("glibc", {})
    for name, per_size in seconds.items():
        speedup[name] = {s: glibc[s] / t for s, t in per_size.items() if s in glibc and t > 0}
    summary = {}
    for name, per_size in speedup.items():
        values = list(per_size.values())
        if values:
            summary[name] = (statistics.mean(values), max(values), max(per_size, key=per_size.get))
    rss = {}
    for name in seconds:
        runs = {(l.get("job"), l.get("rep")): l.get("peak_rss_kib") for l in mine if l["allocator"] == name}
        values = [v for v in runs.values() if v]
        rss[name] = statistics.median(values) / 1024 if values else None
    return seconds, speedup, summary, rss


def geometric_mean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def peak_rss_over_live(lines, jobs, names):
    """Peak RSS over the peak of live bytes, per job and allocator: {job id:
    {allocator: median over repetitions}} (each repetition: that run's wait4
    peak RSS over the live bytes the program itself counted)."""
    rss = {}   # (job, allocator, rep) -> KiB
    live = {}  # (job, allocator, rep) -> bytes
    for l in lines:
        key = (l.get("job"), l.get("allocator"), l.get("rep", 0))
        if l.get("metric") == "peak_rss" and l.get("value"):
            rss[key] = float(l["value"])
        elif l.get("metric") == "peak_live_bytes" and l.get("value"):
            live[key] = max(live.get(key, 0.0), float(l["value"]))
    table = {}
    for job in jobs:
        for name in names:
            ratios = [rss[k] * 1024 / live[k] for k in live
                      if k[0] == job.id and k[1] == name and k in rss and live[k] > 0]
            if ratios:
                table.setdefault(job.id, {})[name] = statistics.median(ratios)
    return table


def median_peak_rss(lines, job_id, name):
    values = [float(l["value"]) for l in lines if l.get("metric") == "peak_rss" and l.get("job") == job_id
              and l.get("allocator") == name and l.get("value")]
    return statistics.median(values) / 1024 if values else None
