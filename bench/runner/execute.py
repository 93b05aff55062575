"""Runs one benchmark process (through bench/tools/launch.c, which measures
its peak RSS with wait4) and counts instructions under callgrind."""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field


@dataclass
class RunResult:
    ok: bool
    rows: list = field(default_factory=list)  # parsed JSON lines
    peak_rss_kib: int = 0
    floor_kib: int = 0   # the launcher's floor under peak_rss_kib (see bench/tools/launch.c)
    seconds: float = 0.0
    stderr: str = ""
    error: str = ""


def _environment(allocator_name, preload, extra=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    if allocator_name:
        env["STRATA_BENCH_ALLOCATOR"] = allocator_name
    else:
        env.pop("STRATA_BENCH_ALLOCATOR", None)
    env.update(extra or {})
    return env


def time_maxrss(command, allocator_name, preload, env=None, timeout=120):
    """Peak RSS (KiB) of `command` as `/usr/bin/time -f %M` reports it, run
    the way a shell user types it: `LD_PRELOAD=<lib> /usr/bin/time -f %M cmd`,
    so the allocator is loaded into time(1) as well (time's own pages, with
    the allocator's, are the floor under the child's figure). None if
    /usr/bin/time is missing or the run failed."""
    if not os.path.exists("/usr/bin/time"):
        return None
    with tempfile.NamedTemporaryFile(mode="r", suffix=".time") as out:
        try:
            done = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name] + command,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=_environment(allocator_name, preload, env), timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = out.read().strip().splitlines()
    if done.returncode != 0 or not text or not text[-1].strip().isdigit():
        return None
    return int(text[-1].strip())


def run(launcher, command, allocator_name, preload, env=None, timeout=300):
    """Runs `command` with `preload` (may be empty) and the extra environment
    `env` through the launcher, which reports the program's peak RSS (see
    bench/tools/launch.c), and parses the program's JSON lines."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r", suffix=".rss") as rss_file:
        start = time.monotonic()
        process = subprocess.Popen([launcher, preload, rss_file.name] + command, stdout=out, stderr=err,
                                   env=_environment(allocator_name, "", env), start_new_session=True)
        # A hung run is killed with its whole process group (launcher + program).
        timer = threading.Timer(timeout, lambda: os.killpg(process.pid, signal.SIGKILL))
        timer.start()
        try:
            process.wait()
        finally:
            timer.cancel()
        elapsed = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        text = rss_file.read().strip()
    numbers = [int(f) for f in text.split() if f.lstrip("-").isdigit()]
    result = RunResult(ok=process.returncode == 0, peak_rss_kib=max(numbers[0], 0) if numbers else 0,
                       floor_kib=max(numbers[1], 0) if len(numbers) > 1 else 0,
                       seconds=elapsed, stderr=stderr)
    if not result.ok:
        result.error = f"exit code {process.returncode}: {stderr.strip()[-400:]}"
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                result.rows.append(json.loads(line))
            except json.JSONDecodeError:
                result.error += f" bad JSON line: {line[:120]}"
    return result


def core_round_trip_ns(probe):
    """The first two CPUs' distance now: bench/tools/core_latency's median
    round trip of a cache line in ns, or None (one CPU, or no probe)."""
    try:
        done = subprocess.run([probe], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in done.stdout.splitlines():
        try:
            return float(json.loads(line)["value"])
        except (ValueError, KeyError):
            continue
    return None


_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def callgrind_instructions(command, preload, env=None, inside=()):
    """Instructions executed by `command` under callgrind, or None: all of
    them, or with `inside` (function names) only those executed inside these
    functions and what they call (--toggle-collect)."""
    full = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + \
        [f"--toggle-collect={name}" for name in inside] + command
    env = _environment("", preload, env)
    try:
        done = subprocess.run(full, capture_output=True, text=True, env=env, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _COLLECTED.search(done.stderr)
    return int(match.group(1)) if match and done.returncode == 0 else None
