"""An allocation-heavy Python workload with a deterministic output.

Run by tests/override/run_python_script.sh with and without libstrata.so
preloaded; both runs must print the same lines. With --expect-strata it also
checks that libstrata.so is mapped into this process (and says so on stderr,
so that stdout stays identical between the two runs).
"""
import hashlib
import json
import random
import sys


def expect_strata_mapped():
    with open("/proc/self/maps") as maps:
        mapped = [line.split()[-1] for line in maps if "libstrata" in line]
    if not mapped:
        sys.exit("libstrata.so is not mapped into this process: the preload did not take effect")
    print("libstrata mapped:", sorted(set(mapped))[0], file=sys.stderr)


def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def main():
    if "--expect-strata" in sys.argv:
        expect_strata_mapped()
    rng = random.Random(2024)

    # Many small objects: dicts of strings, growing and shrinking.
    table = {}
    for i in range(300000):
        key = "k%d_%s" % (rng.randrange(100000), "x" * rng.randrange(12))
        table[key] = [i, str(i) * rng.randrange(1, 5), (i, key)]
        if i % 3 == 0:
            table.pop(next(iter(table)))
    print("dict", len(table), digest(sorted(table)[:1000]))

    # Lists of tuples, sorted and sliced; large contiguous buffers.
    rows = [(rng.random(), rng.randrange(1 << 30), "r%d" % i) for i in range(200000)]
    rows.sort()
    print("sorted", len(rows), digest([r[1:] for r in rows[::997]]))

    # Strings and bytes that grow by concatenation and get cut again.
    text = []
    for i in range(20000):
        s = "".join(chr(97 + (i * j) % 26) for j in range(rng.randrange(1, 200)))
        text.append(s.upper() + s[::-1])
    blob = "|".join(text).encode()
    print("text", len(blob), hashlib.sha256(blob).hexdigest()[:16])

    # JSON round trips of nested structures.
    doc = {"items": [{"id": i, "tags": ["t%d" % (i % 17)] * (i % 5), "v": i * 0.5} for i in range(50000)]}
    back = json.loads(json.dumps(doc))
    print("json", len(back["items"]), digest(back["items"][::501]))

    # Sets and bytearrays resized many times.
    s = set()
    for i in range(400000):
        s.add(rng.randrange(1 << 20))
        if i % 5 == 0:
            s.discard(rng.randrange(1 << 20))
    buf = bytearray()
    for i in range(100000):
        buf += bytes([i % 256]) * (i % 37)
        if len(buf) > 1 << 20:
            del buf[: len(buf) // 2]
    print("set", len(s), "bytearray", len(buf), hashlib.sha256(bytes(buf)).hexdigest()[:16])


if __name__ == "__main__":
    main()
