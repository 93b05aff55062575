#!/usr/bin/env python3
"""Checks that a `bench/run` output directory is complete: REPORT.md with a
table for every workload, a parseable results.jsonl with results from every
workload program, and every chart the report links to (real PNG files)."""
import json
import os
import re
import shutil
import sys

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REQUIRED_SECTIONS = ["## Headline", "## Seed 000: unordered_set", "## Seed 000: new + delete",
                     "## Seed 002: 1000 rounds", "## Seed 002 with a mutex", "## Seed 003",
                     "## Seed 001: 1 thread", "## Seed 001: ", "## Seed 004: size sweep, 16 threads",
                     "## Server-like", "## malloc(32) + free fast path", "## Huge pages:",
                     "## Cost of free-list encoding", "## Start-up floor"]
REQUIRED_CHARTS = ["speedup_summary.png", "rss.png", "seed004_sweep_T16.png", "hugepage_live_set.png"]
REQUIRED_WORKLOADS = ["seed000_unordered_set", "seed000_new_delete", "seed001_tests", "seed002_fixed",
                      "seed003_producer_consumer", "seed004_size_sweep", "server_larson", "fastpath_pair",
                      "hugepage_live_set", "startup_floor"]
HUGE_PAGES_ROW = "strata (huge pages)"
UNENCODED_ROW = "strata (no list encoding)"


def variant_problems(report, rows):
    """strata's variant rows (issue 5): huge pages on in the huge pages
    table; the build without list encoding in the fast-path tables and the
    encoding-cost table, whenever that build was there to run."""
    problems = []
    ran = {(r.get("workload"), r.get("allocator")) for r in rows}
    if ("hugepage_live_set", "strata") in ran and ("hugepage_live_set", HUGE_PAGES_ROW) not in ran:
        problems.append(f"no '{HUGE_PAGES_ROW}' results beside strata in hugepage_live_set")
    if "Transparent huge pages on this machine" not in report:
        problems.append("the huge pages section does not state the machine's transparent huge page mode")
    if any(a == UNENCODED_ROW for _, a in ran):
        if ("fastpath_pair", UNENCODED_ROW) not in ran:
            problems.append(f"no '{UNENCODED_ROW}' results in fastpath_pair")
        section = report.split("## Cost of free-list encoding", 1)[-1].split("\n## ", 1)[0]
        if "| ns per pair, free at once" not in section:
            problems.append("the free-list encoding table has no timed row")
        if shutil.which("valgrind") and "| instructions inside malloc+free per pair" not in section:
            problems.append("the free-list encoding table has no instruction-count row")
    if shutil.which("valgrind"):
        if not any(r.get("workload") == "callgrind_pair" and r.get("metric") == "instructions_inside_per_pair"
                   for r in rows):
            problems.append("no instructions counted inside malloc and free (--toggle-collect)")
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
    workloads, rows = set(), []
    with open(results_path) as f:
        for number, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                problems.append(f"results.jsonl line {number} is not JSON")
                continue
            if row.get("workload") != "_run" and row.get("metric") != "peak_rss":
                for key in ("workload", "allocator", "metric", "value", "unit"):
                    if key not in row:
                        problems.append(f"results.jsonl line {number} lacks '{key}'")
                workloads.add(row.get("workload"))
                rows.append(row)
    problems += [f"no results from {w}" for w in REQUIRED_WORKLOADS if w not in workloads]
    problems += variant_problems(report, rows)
    return problems


if __name__ == "__main__":
    found = main(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
    for p in found:
        print("FAIL:", p)
    print("bench outputs complete" if not found else f"{len(found)} problem(s)")
    sys.exit(1 if found else 0)
