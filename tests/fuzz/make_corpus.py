#!/usr/bin/env python3
"""Writes the seed corpus (tests/fuzz/corpus/): one small input per scenario.

Each input is a list of operations in the byte format of operations.hpp:
head byte = kind + 16 * thread + 128 (switch to that thread), then the slot
byte, then the parameters.
Re-run after changing the format:  python3 tests/fuzz/make_corpus.py
"""
import os
import random

(MALLOC, CALLOC, REALLOC, REALLOC_ZERO, ALIGNED, FREE, FREE_SIZED, TOUCH, POOL, STATS, RELEASE,
 THREAD_EXIT) = range(12)
HERE = os.path.dirname(os.path.abspath(__file__))


def head(kind, thread):
    return bytes([kind + 16 * thread + 128])


def size_bytes(range_byte, value):
    return bytes([range_byte, value & 0xFF, (value >> 8) & 0xFF])


def tiny(n): return size_bytes(0, n)           # 0..128
def small(n): return size_bytes(14, n)         # ..4096
def medium(n): return size_bytes(23, n)        # (n * 5) % 300001
def large(n): return size_bytes(28, n)         # 256 KiB + n * 16
def edge(power, delta): return size_bytes(29, power + (delta << 8))  # 2^power - 1 + delta


def op(kind, thread, slot, *params):
    return head(kind, thread) + bytes([slot]) + b"".join(params)


def scenario_small_churn():
    out = b""
    for i in range(40):
        out += op(MALLOC, 0, i % 16, tiny(i * 3))
        if i % 3 == 0:
            out += op(FREE, 0, (i * 7) % 16)
    return out


def scenario_cross_thread():
    out = b""
    for i in range(24):
        out += op(MALLOC, 1, i, small(i * 97))
    for i in range(24):
        out += op(FREE, 2 + i % 2, i)
    return out


def scenario_realloc_chain():
    out = op(MALLOC, 0, 0, tiny(1))
    for step, sz in enumerate([tiny(17), small(300), small(4000), medium(30000), large(100), tiny(5), large(2000)]):
        out += op(REALLOC, step % 4, 0, sz) + op(TOUCH, 0, 0)
    return out + op(REALLOC_ZERO, 1, 0) + op(FREE, 2, 0)


def scenario_aligned():
    out = b""
    for i in range(21):
        out += op(ALIGNED, i % 4, i, bytes([i]), small(i * 190))
    for i in range(21):
        out += op(FREE_SIZED, (i + 1) % 4, i, bytes([(i * 13) % 256]))
    return out


def scenario_calloc_reuse():
    out = b""
    for i in range(16):
        out += op(MALLOC, 0, i, small(1000 + i))
    for i in range(16):
        out += op(FREE, 0, i)
    for i in range(16):
        out += op(CALLOC, 0, i, bytes([i]), small(1000 + i))
    return out


def scenario_power_of_two_edges():
    out = b""
    for p in range(23):
        for d in range(3):
            out += op(MALLOC, p % 4, (p * 3 + d) % 48, edge(p, d))
    return out


def scenario_large_spans():
    out = b""
    for i in range(8):
        out += op(MALLOC, i % 2, i, large(i * 5000))
    for i in range(0, 8, 2):
        out += op(FREE, 3, i)
    for i in range(8):
        out += op(REALLOC, 0, i, large(i * 9000 + 1))
    return out


def scenario_pools():
    out = b""
    for i in range(30):  # all three resources, several threads, then cross-thread frees
        out += op(POOL, i % 4, i, bytes([i % 3, i % 13]), small(i * 130) if i % 5 else medium(i * 900))
    for i in range(0, 30, 2):
        out += op(FREE, (i + 2) % 4, i)
    for i in range(30):
        out += op(POOL, (i + 1) % 4, i, bytes([(i + 1) % 3, 4]), tiny(i * 4))
    return out


def scenario_stats_threads():
    """Statistics against the model while blocks are cached, in transit
    between threads, in pools and in large spans: every thread allocates
    enough to get a cache of its own, frees the others' blocks, and the
    statistics are compared after every phase."""
    out = b""
    for rnd in range(22):  # 264 small mallocs per thread: past the young threshold (256)
        for t in range(4):
            for i in range(12):
                slot = t * 12 + i
                size = tiny(i * 11) if i % 3 else small(i * 333 + rnd)
                out += op(MALLOC, t, slot, size)
            out += op(STATS, t, 0)
        for t in range(4):  # each thread frees the next thread's blocks
            for i in range(0, 12, 2):
                out += op(FREE, t, ((t + 1) % 4) * 12 + i)
            out += op(STATS, t, 0)
    for i in range(8):
        out += op(POOL, i % 4, 40 + i, bytes([3 + i % 5, 4]), tiny(40))
        out += op(MALLOC, (i + 1) % 4, i, large(i * 700))
    out += op(STATS, 0, 0)
    out += op(RELEASE, 1, 0, bytes([0])) + op(STATS, 2, 0)
    out += op(THREAD_EXIT, 2, 0, bytes([0])) + op(STATS, 0, 0)
    out += op(THREAD_EXIT, 3, 0, bytes([0])) + op(STATS, 1, 0)
    for i in range(48):
        out += op(FREE, i % 4, i)
    return out + op(STATS, 0, 0) + op(RELEASE, 0, 0, bytes([1])) + op(STATS, 0, 0)


def scenario_stats_profile_requests():
    """Requests heap profiling once recorded as something else than the
    program asked: realloc to 0 (recorded as 1) and aligned_alloc with an
    alignment of 16 or less and a smaller size (recorded as the alignment).
    fuzz.differential_all_sampled samples every block, so the check sees
    every such record."""
    out = b""
    for i in range(24):
        out += op(MALLOC, 0, i, tiny(i + 1)) + op(REALLOC_ZERO, 0, i)
        out += op(ALIGNED, 0, 24 + i, bytes([i % 5]), tiny(i % 16))
    return out + op(STATS, 0, 0)


def scenario_random(seed):
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(rng.randrange(64, 600)))


def main():
    corpus = os.path.join(HERE, "corpus")
    os.makedirs(corpus, exist_ok=True)
    scenarios = {
        "small_churn": scenario_small_churn(),
        "cross_thread": scenario_cross_thread(),
        "realloc_chain": scenario_realloc_chain(),
        "aligned": scenario_aligned(),
        "calloc_reuse": scenario_calloc_reuse(),
        "power_of_two_edges": scenario_power_of_two_edges(),
        "large_spans": scenario_large_spans(),
        "pools": scenario_pools(),
        "stats_threads": scenario_stats_threads(),
        "stats_profile_requests": scenario_stats_profile_requests(),
    }
    for seed in range(5):
        scenarios["random_%d" % seed] = scenario_random(seed)
    for name, data in scenarios.items():
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)
    print("wrote %d inputs to %s" % (len(scenarios), corpus))


if __name__ == "__main__":
    main()
