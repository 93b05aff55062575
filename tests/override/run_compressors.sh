#!/usr/bin/env bash
# Multi-threaded compressors round trip: xz -T2 and zstd -T2 compress a
# generated file with strata; the result must equal the compression without
# strata byte for byte, and decompress (with and without strata) to the input.
source "$(dirname "$0")/preload_common.sh"
require_command xz xz-utils
require_command zstd zstd
require_command python3 python3

# 8 MB of mixed text and noise: compressible, but not trivially.
python3 - "$WORK/input.bin" <<'PY'
import random, sys
rng = random.Random(42)
words = [''.join(rng.choice('abcdefghij') for _ in range(rng.randint(2, 9))) for _ in range(5000)]
with open(sys.argv[1], 'wb') as f:
    for block in range(8):
        text = ' '.join(rng.choice(words) for _ in range(120000)).encode()
        f.write(text[: 768 * 1024])
        f.write(rng.randbytes(256 * 1024))
PY

round_trip() {
  local name="$1" compress="$2" decompress="$3"
  # shellcheck disable=SC2086
  $compress <"$WORK/input.bin" >"$WORK/plain.$name"
  # shellcheck disable=SC2086
  run_preloaded_with_proof $compress <"$WORK/input.bin" >"$WORK/strata.$name"
  check_preload_proof "$compress"
  same_output "$compress" "$WORK/plain.$name" "$WORK/strata.$name"
  # shellcheck disable=SC2086
  run_preloaded_with_proof $decompress <"$WORK/strata.$name" >"$WORK/back.bin"
  check_preload_proof "$decompress"
  cmp -s "$WORK/input.bin" "$WORK/back.bin" || fail "$decompress with strata did not restore the input"
  echo "round trip: $compress / $decompress: $(wc -c <"$WORK/input.bin") -> $(wc -c <"$WORK/strata.$name") bytes"
}

round_trip xz "xz -T2 -4 --block-size=2MiB -c" "xz -T2 -d -c"
round_trip zst "zstd -T2 -9 -q -c" "zstd -T2 -d -q -c"
echo "PASS"
