"""Where the CPUs were while multi-threaded runs ran, and what it changed.

bench/run probes the first two CPUs (bench/tools/core_latency.c: a cache
line's round trip between them) just before and just after every run whose
threads run at once. On a virtual machine the host moves its vCPUs: on the
2-vCPU machines this suite was written on, the round trip was about 60 ns
(near: the vCPUs on cores that share a cache) or about 330 ns (far), and
the cross-thread workloads ran 1.5-4.4x slower in the far
placement. A median over repetitions then mixes two machines. The report's
*Placement* section (report.placement_section) says how many runs each
placement got and compares strata with the best peer within each one."""
from collections import Counter

from . import tables
from .allocators import PEER_NAMES

# A run is near when both of its probes are within this factor of the
# run's smallest probe (near and far differed by 4-6x where it was written).
NEAR_FACTOR = 2.0


def run_of(line):
    """The run a result or probe line belongs to: (job, allocator, rep)."""
    return line.get("job"), line.get("allocator"), line.get("rep", 0)


def classify(lines):
    """({(job, allocator, rep): 'near' | 'far' | 'moved'}, the near limit in
    ns); ({}, None) when no run was probed."""
    probes = [l for l in lines if l.get("workload") == "core_latency" and l.get("metric") == "core_round_trip_ns"]
    if not probes:
        return {}, None
    limit = NEAR_FACTOR * min(min(l["before"], l["after"]) for l in probes)
    state = {}
    for l in probes:
        low, high = sorted((l["before"], l["after"]))
        state[run_of(l)] = \
            "near" if high <= limit else ("far" if low > limit else "moved")
    return state, limit


def vs_best_peer(table, lines, state, wanted):
    """strata's ratio to the best peer over the runs in placement `wanted`,
    and how many of strata's runs that is; (None, n) unless strata and all
    three peers ran in it."""
    subset = [l for l in lines if state.get(run_of(l)) == wanted]
    rows = {r.name: r for r in tables.build(table, subset)}
    strata = rows.get("strata")
    runs = len(strata.score_reps) if strata else 0
    if strata is None or any(rows.get(p) is None or rows[p].score is None for p in PEER_NAMES):
        return None, runs
    return strata.vs_best_peer, runs


def probe_ranges(lines, state):
    """The probes' values (ns) of the near runs and of the far runs."""
    values = {"near": [], "far": [], "moved": []}
    for l in lines:
        if l.get("workload") == "core_latency":
            values[state[run_of(l)]].append(l["value"])
    return values["near"], values["far"]


def runs_of(table, state):
    """How many runs of the table's job were near, far and moved."""
    return Counter(v for (job, _, _), v in state.items() if job == table.job)
