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
                     "## Server-like", "## malloc(32) + free fast path"]
REQUIRED_CHARTS = ["speedup_summary.png", "rss.png", "seed004_sweep_T16.png"]
REQUIRED_WORKLOADS = ["seed000_unordered_set", "seed000_new_delete", "seed001_tests", "seed002_fixed",
                      "seed003_producer_consumer", "seed004_size_sweep", "server_larson", "fastpath_pair"]


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
    workloads = set()
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
    problems += [f"no results from {w}" for w in REQUIRED_WORKLOADS if w not in workloads]
    return problems


if __name__ == "__main__":
    found = main(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
    for p in found:
        print("FAIL:", p)
    print("bench outputs complete" if not found else f"{len(found)} problem(s)")
    sys.exit(1 if found else 0)
