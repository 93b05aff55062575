#!/usr/bin/env bash
# scripts/soak.sh — run the pools' and the engine's concurrency tests over and
# over, in several builds, with changing seeds, thread counts and CPU sets,
# for minutes or hours, and keep every failure with the command that replays it.
#
# A race that needs one thread preempted at one instruction shows up once in
# hundreds of runs (the thread_cached_pool crash of issue 13 did: 3 to 5 runs
# in 300). This script makes those hundreds of runs, each in a fresh process
# (a process's first allocations are a window of their own), and varies what
# a single CTest run cannot: seeds, the odds of injected delays at the pools'
# hand-over points, thread counts, and `taskset` (one CPU: preemption at the
# delay points; all CPUs: real parallelism).
#
# Usage: scripts/soak.sh [options]             (from anywhere; paths are relative to the repo)
#   --minutes M | --hours H | --seconds S      how long (default 10 minutes); the run in
#                                              progress finishes, nothing new starts after
#   --build NAME=DIR                           a build to test, repeatable; NAME is release,
#                                              asan or tsan (how to judge its output), DIR its
#                                              build directory. Default: release=build-release,
#                                              asan=build-asan, tsan=build-tsan, those that exist
#   --configure                                configure and build missing build directories
#                                              first (cmake + ninja -j2, the commands of
#                                              docs/reliability.md)
#   --jobs "J ..."                             which jobs (default: all of them, listed below)
#   --cpus "C ..."                             CPU sets to cycle through: `all` (no taskset) or a
#                                              taskset list such as 0 or 0,1 (default: "all 0")
#   --threads "T ..."                          thread counts for the engine's stress programs
#                                              (default: "16 32 64")
#   --stress-seconds N                         length of one stress program run (default 5)
#   --seed N                                   first seed (default: from the clock); run k uses
#                                              seed N + k
#   --log-dir DIR                              where logs go (default soak-logs/<date-time>)
#   --keep-passing                             keep the output of passing runs too
#
# Jobs (each run is one fresh process; the seed changes from run to run):
#   pool_ci_shape        tests/pools/pool_concurrent_test, only
#                        ConcurrentPool/3.StressManyThreadsNoObjectHandedOutTwice (the CI crash's
#                        test, alone in its process as CTest runs it: its 16 threads make the
#                        process's first allocations)
#   pool_concurrent      every ConcurrentPool stress and producer/consumer test, shuffled,
#                        --gtest_repeat=3
#   pool_churn           tests/pools/pool_thread_cached_churn_test, shuffled
#   pool_interleavings   tests/pools/pool_interleavings_test with STRATA_POOL_STEPS (delay odds and
#                        seed: yields, sleeps, both, or none in turn) and STRATA_POOL_STRESS (shape:
#                        up to 3 + 2 x per_generation threads at once)
#   pool_per_type        pool_pooled_test, pool_allocator_test and pool_pmr_test, shuffled
#   stress_thread_churn  tests/stress/stress_thread_churn_capi (and _override in release builds)
#   stress_handoff       tests/stress/stress_handoff_capi (and _override)
#   stress_random        tests/stress/stress_random_capi (and _override)
#                        all three with --seconds=<stress-seconds> --threads=<T> --seed=<seed>
#
# Output, in the log directory:
#   runs.tsv        one line per run: time, job, build, cpus, seed, exit code, seconds
#   summary.txt     runs and failures per job and build (rewritten after every run)
#   failures/NNNN.log  the output of a failing run, after a header with its command
#   failures/NNNN.sh   the command that replays it: `bash failures/NNNN.sh [times]` reruns
#                      the same binary, arguments, environment and CPU set, `times` times
#                      (default 1) or until it fails; a schedule-dependent failure may need many
#   passing/        the output of passing runs (--keep-passing only)
# A run fails when it exits non-zero, is killed by a signal, prints a sanitizer report
# (ASan/UBSan/TSan builds fail on the first report anyway) or outlives its time limit
# (timeout, exit code 124: 300 s for a pool job, 3 x stress-seconds + 120 s for a stress
# program, three times that under ASan and ten times under TSan).
#
# For hours, detach it, e.g.:
#   nohup scripts/soak.sh --hours 8 --log-dir /tmp/soak-night > /tmp/soak-night.out 2>&1 &
# and read /tmp/soak-night/summary.txt while it runs. On a shared machine lower its priority
# (nice -n 10 scripts/soak.sh ...).
set -u

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

seconds=600
builds=()
configure=0
jobs_wanted="pool_ci_shape pool_concurrent pool_churn pool_interleavings pool_per_type stress_thread_churn stress_handoff stress_random"
cpu_sets="all 0"
thread_counts="16 32 64"
stress_seconds=5
seed=$(( $(date +%s) % 1000000 ))
log_dir=""
keep_passing=0

usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --minutes) seconds=$(( $2 * 60 )); shift 2 ;;
    --hours) seconds=$(( $2 * 3600 )); shift 2 ;;
    --build) builds+=("$2"); shift 2 ;;
    --configure) configure=1; shift ;;
    --jobs) jobs_wanted="$2"; shift 2 ;;
    --cpus) cpu_sets="$2"; shift 2 ;;
    --threads) thread_counts="$2"; shift 2 ;;
    --stress-seconds) stress_seconds="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --log-dir) log_dir="$2"; shift 2 ;;
    --keep-passing) keep_passing=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "soak.sh: unknown option $1" >&2; usage 2 ;;
  esac
done

configure_build() {  # name dir
  local flags=()
  case "$1" in
    release) flags=(-DCMAKE_BUILD_TYPE=Release) ;;
    asan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=address,undefined) ;;
    tsan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=thread) ;;
    *) echo "soak.sh: unknown build kind $1 (release, asan or tsan)" >&2; exit 2 ;;
  esac
  cmake -S "$repo" -B "$2" -G Ninja "${flags[@]}" -DSTRATA_WERROR=ON > /dev/null || exit 1
  local targets=(pool_concurrent_test pool_thread_cached_churn_test pool_interleavings_test pool_pooled_test
                 pool_allocator_test pool_pmr_test stress_thread_churn_capi stress_handoff_capi stress_random_capi)
  [ "$1" = release ] && targets+=(stress_thread_churn_override stress_handoff_override stress_random_override)
  ninja -C "$2" -j2 "${targets[@]}" || exit 1
}

if [ ${#builds[@]} -eq 0 ]; then
  for kind in release asan tsan; do
    if [ -d "build-$kind" ] || [ $configure = 1 ]; then builds+=("$kind=build-$kind"); fi
  done
fi
[ ${#builds[@]} -gt 0 ] || { echo "soak.sh: no build directory (build-release, build-asan, build-tsan); use --build or --configure" >&2; exit 2; }
if [ $configure = 1 ]; then
  for b in "${builds[@]}"; do configure_build "${b%%=*}" "${b#*=}"; done
fi

[ -n "$log_dir" ] || log_dir="soak-logs/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$log_dir/failures"
[ $keep_passing = 1 ] && mkdir -p "$log_dir/passing"
log_dir="$(cd "$log_dir" && pwd)"
printf 'time\tjob\tbuild\tcpus\tseed\texit\tseconds\n' > "$log_dir/runs.tsv"

# Delay profiles for pool_interleavings (per mille yield, per mille sleep, max µs).
delay_profiles=("yield=500,sleep=0,max_us=0" "yield=0,sleep=50,max_us=300" "yield=300,sleep=20,max_us=200" "yield=0,sleep=0,max_us=0")
shapes=("long=3,spawners=2,generations=25,per_generation=4,ops=500" "long=6,spawners=4,generations=15,per_generation=6,ops=300" "long=1,spawners=8,generations=10,per_generation=8,ops=200")

# Fills `cmd` (argv), `run_env` (NAME=value ...) and `limit` (seconds) for one run;
# returns 1 when the build has no binary for the job.
plan_run() {  # job kind dir seed k
  local job=$1 kind=$2 dir=$3 s=$4 k=$5 program threads
  cmd=(); run_env=(); limit=300
  case "$job" in
    pool_ci_shape)
      cmd=("$dir/tests/pools/pool_concurrent_test" "--gtest_filter=ConcurrentPool/3.StressManyThreadsNoObjectHandedOutTwice") ;;
    pool_concurrent)
      cmd=("$dir/tests/pools/pool_concurrent_test" "--gtest_filter=ConcurrentPool/*.Stress*:ConcurrentPool/*.ProducerConsumer*"
           --gtest_shuffle "--gtest_random_seed=$(( s % 99999 + 1 ))")
      [ "$kind" = release ] && cmd+=(--gtest_repeat=3) ;;
    pool_churn)
      cmd=("$dir/tests/pools/pool_thread_cached_churn_test" --gtest_shuffle "--gtest_random_seed=$(( s % 99999 + 1 ))") ;;
    pool_interleavings)
      cmd=("$dir/tests/pools/pool_interleavings_test" --gtest_shuffle "--gtest_random_seed=$(( s % 99999 + 1 ))")
      run_env=("STRATA_POOL_STEPS=seed=$s,${delay_profiles[$(( k % ${#delay_profiles[@]} ))]}"
               "STRATA_POOL_STRESS=${shapes[$(( (k / ${#delay_profiles[@]}) % ${#shapes[@]} ))]}")
      limit=900 ;;
    pool_per_type)
      local tests=(pool_pooled_test pool_allocator_test pool_pmr_test)
      cmd=("$dir/tests/pools/${tests[$(( k % 3 ))]}" --gtest_shuffle "--gtest_random_seed=$(( s % 99999 + 1 ))") ;;
    stress_thread_churn|stress_handoff|stress_random)
      read -r -a counts <<< "$thread_counts"
      threads=${counts[$(( k % ${#counts[@]} ))]}
      program="${job}_capi"
      # Release builds also have the libc-name variant (whole program on strata): every other run.
      [ "$kind" = release ] && [ $(( k % 2 )) = 1 ] && program="${job}_override"
      cmd=("$dir/tests/stress/$program" "--seconds=$stress_seconds" "--threads=$threads" "--seed=$s")
      limit=$(( stress_seconds * 3 + 120 )) ;;
    *) echo "soak.sh: unknown job $job" >&2; exit 2 ;;
  esac
  # Sanitizers slow the programs down (TSan 5-15x); a limit is there to catch
  # a hang, not a slow machine.
  case "$kind" in asan) limit=$(( limit * 3 )) ;; tsan) limit=$(( limit * 10 )) ;; esac
  [ -x "${cmd[0]}" ]
}

# The words, each quoted for the shell and preceded by a space (nothing for none).
quote_words() { [ $# -gt 0 ] && printf ' %q' "$@"; }

declare -A runs_of fails_of
total=0; failed=0; skipped_missing=""
write_summary() {
  {
    echo "soak from $(date -d "@$start" '+%F %T') to $(date '+%F %T') ($(( $(date +%s) - start )) s), seeds from $seed"
    echo "builds: ${builds[*]}; cpus: $cpu_sets; stress threads: $thread_counts, $stress_seconds s each"
    echo "runs: $total, failures: $failed (failures/*.log, replay with bash failures/NNNN.sh)"
    for key in $(printf '%s\n' "${!runs_of[@]}" | sort); do
      printf '  %-40s runs %6d  failures %d\n' "$key" "${runs_of[$key]}" "${fails_of[$key]:-0}"
    done
    [ -n "$skipped_missing" ] && echo "not built, skipped:$skipped_missing"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  } > "$log_dir/summary.txt"
}

read -r -a job_list <<< "$jobs_wanted"
read -r -a cpu_list <<< "$cpu_sets"
start=$(date +%s)
deadline=$(( start + seconds ))
k=0
echo "soak.sh: ${seconds} s, logs in $log_dir"
while [ "$(date +%s)" -lt "$deadline" ]; do
  for b in "${builds[@]}"; do
    kind="${b%%=*}"; dir="${b#*=}"
    job=${job_list[$(( k % ${#job_list[@]} ))]}
    cpus=${cpu_list[$(( (k / ${#job_list[@]}) % ${#cpu_list[@]} ))]}
    s=$(( seed + k ))
    if ! plan_run "$job" "$kind" "$dir" "$s" "$(( k / ${#job_list[@]} ))"; then
      case "$skipped_missing" in *" $kind:$job"*) ;; *) skipped_missing+=" $kind:$job" ;; esac
      continue
    fi
    prefix=()
    [ "$cpus" != all ] && prefix=(taskset -c "$cpus")
    env_all=("${run_env[@]}")
    [ "$kind" = tsan ] && env_all+=("TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}")
    out="$log_dir/current.log"
    t0=$(date +%s)
    env "${env_all[@]}" timeout -k 10 "$limit" "${prefix[@]}" "${cmd[@]}" > "$out" 2>&1
    rc=$?
    t1=$(date +%s)
    if [ $rc = 0 ] && grep -qE '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|SUMMARY: (Address|Thread|UndefinedBehavior)Sanitizer)' "$out"; then
      rc=99  # a report that did not change the exit code
    fi
    key="$job/$kind"
    runs_of[$key]=$(( ${runs_of[$key]:-0} + 1 ))
    total=$(( total + 1 ))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date '+%F %T')" "$job" "$kind" "$cpus" "$s" "$rc" "$(( t1 - t0 ))" >> "$log_dir/runs.tsv"
    if [ $rc != 0 ]; then
      failed=$(( failed + 1 ))
      fails_of[$key]=$(( ${fails_of[$key]:-0} + 1 ))
      n=$(printf '%04d' "$failed")
      replay="cd $(printf '%q' "$repo") && env$(quote_words "${env_all[@]}") timeout -k 10 $limit$(quote_words "${prefix[@]}" "${cmd[@]}")"
      {
        echo "#!/usr/bin/env bash"
        echo "# soak failure $n: job $job, build $kind, cpus $cpus, seed $s, exit $rc, $(date '+%F %T')"
        echo "# bash $n.sh [times]: rerun up to \`times\` times (default 1), stop at the first failure"
        echo 'for ((i = 1; i <= ${1:-1}; i++)); do'
        echo "  ( $replay ) || { echo \"failed on run \$i\"; exit 1; }"
        echo 'done'
        echo 'echo "passed ${1:-1} run(s)"'
      } > "$log_dir/failures/$n.sh"
      { echo "# $replay"; echo "# exit $rc after $(( t1 - t0 )) s"; cat "$out"; } > "$log_dir/failures/$n.log"
      echo "FAIL $n: $key cpus=$cpus seed=$s exit=$rc -> $log_dir/failures/$n.log"
    elif [ $keep_passing = 1 ]; then
      mv "$out" "$log_dir/passing/$(printf '%06d' "$total")-$job-$kind.log"
    fi
    write_summary
    [ "$(date +%s)" -ge "$deadline" ] && break
  done
  k=$(( k + 1 ))
  if [ $(( k % ${#job_list[@]} )) = 0 ]; then  # a whole cycle of jobs
    [ "$total" -gt "${total_at_cycle:-0}" ] || { echo "soak.sh: nothing to run (binaries missing:$skipped_missing)" >&2; exit 2; }
    total_at_cycle=$total
  fi
done
rm -f "$log_dir/current.log"
write_summary
cat "$log_dir/summary.txt"
[ $failed = 0 ]
