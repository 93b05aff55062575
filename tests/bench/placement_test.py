#!/usr/bin/env python3
"""bench/runner/placement.py on made-up result lines: how runs are told
near, far or moved from their two probes, and that the ratio to the best
peer within one placement uses that placement's runs only."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from runner import placement  # noqa: E402
from runner.jobs import Column, Table  # noqa: E402

PEERS = ["tcmalloc", "jemalloc", "mimalloc"]


def probe(job, allocator, rep, before, after):
    return {"workload": "core_latency", "allocator": allocator, "metric": "core_round_trip_ns",
            "value": max(before, after), "before": before, "after": after, "unit": "ns", "rep": rep, "job": job}


def result(job, allocator, rep, ns):
    return {"workload": "toy", "allocator": allocator, "metric": "ns_per_op", "value": ns, "unit": "ns",
            "rep": rep, "job": job}


TABLE = Table("toy", "toy", "toy", {}, [Column("ns", "ns_per_op")], primary=[0], better="lower", job="toy")


class Classify(unittest.TestCase):
    def test_runs_are_near_far_or_moved_against_twice_the_smallest_probe(self):
        lines = [probe("toy", "strata", 0, 60, 70),    # both within 2 x 60
                 probe("toy", "strata", 1, 300, 330),  # both above
                 probe("toy", "strata", 2, 65, 310),   # one each side
                 probe("toy", "glibc", 0, 119, 120)]   # at the limit: near
        state, limit = placement.classify(lines)
        self.assertEqual(limit, 120)
        self.assertEqual(state[("toy", "strata", 0)], "near")
        self.assertEqual(state[("toy", "strata", 1)], "far")
        self.assertEqual(state[("toy", "strata", 2)], "moved")
        self.assertEqual(state[("toy", "glibc", 0)], "near")
        self.assertEqual(placement.runs_of(TABLE, state), {"near": 2, "far": 1, "moved": 1})
        near, far = placement.probe_ranges(lines, state)
        self.assertEqual(sorted(near), [70, 120])
        self.assertEqual(far, [330])

    def test_no_probes_no_placement(self):
        self.assertEqual(placement.classify([result("toy", "strata", 0, 10)]), ({}, None))


class WithinOnePlacement(unittest.TestCase):
    def lines(self):
        """Rep 0 near, rep 1 far, for everyone; strata is slow far away,
        the peers are slow near."""
        lines = []
        for rep, rtt, strata_ns, peer_ns in ((0, 60, 10.0, 20.0), (1, 320, 40.0, 30.0)):
            for name, ns in [("strata", strata_ns)] + [(p, peer_ns + i) for i, p in enumerate(PEERS)]:
                lines += [probe("toy", name, rep, rtt, rtt), result("toy", name, rep, ns)]
        return lines

    def test_each_placement_compares_its_own_runs(self):
        lines = self.lines()
        state, _ = placement.classify(lines)
        ratio, runs = placement.vs_best_peer(TABLE, lines, state, "near")
        self.assertAlmostEqual(ratio, 20.0 / 10.0)
        self.assertEqual(runs, 1)
        ratio, runs = placement.vs_best_peer(TABLE, lines, state, "far")
        self.assertAlmostEqual(ratio, 30.0 / 40.0)
        self.assertEqual(runs, 1)

    def test_a_placement_without_every_peer_gives_no_ratio(self):
        lines = [l for l in self.lines() if not (l["allocator"] == "mimalloc" and l["rep"] == 1)]
        state, _ = placement.classify(lines)
        self.assertEqual(placement.vs_best_peer(TABLE, lines, state, "far"), (None, 1))
        self.assertIsNotNone(placement.vs_best_peer(TABLE, lines, state, "near")[0])


if __name__ == "__main__":
    unittest.main()
