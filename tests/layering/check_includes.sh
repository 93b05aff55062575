#!/usr/bin/env bash
# The tree is the map of the engine: src/ folders are tiers, bottom-up
#   platform -> core -> backend -> profile -> central -> frontend -> api -> override
# and every #include "tier/file.h" in src/ must name the same tier or a lower
# one. Prints each include that points upward and fails if there is any.
# Usage: check_includes.sh <repository root>
set -euo pipefail
root="${1:?usage: check_includes.sh <repository root>}"
tiers=(platform core backend profile central frontend api override)

rank() {  # tier name -> its position, or nothing for a non-tier path
  local i
  for i in "${!tiers[@]}"; do
    if [ "${tiers[$i]}" = "$1" ]; then echo "$i"; return 0; fi
  done
  return 0
}

bad=0
checked=0
for file in "$root"/src/*/*; do
  [ -f "$file" ] || continue
  from_tier="$(basename "$(dirname "$file")")"
  from="$(rank "$from_tier")"
  if [ -z "$from" ]; then
    echo "src/$from_tier is not a known tier: add it to tests/layering/check_includes.sh and docs/design.md"
    bad=1
    continue
  fi
  while IFS= read -r target; do
    to_tier="${target%%/*}"
    to="$(rank "$to_tier")"
    [ -n "$to" ] || continue  # "strata/strata.h" and the like: the public headers
    checked=$((checked + 1))
    if [ "$to" -gt "$from" ]; then
      echo "upward include: ${file#"$root"/} includes \"$target\" ($from_tier -> $to_tier)"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done
echo "checked $checked includes between tiers in src/"
exit "$bad"
