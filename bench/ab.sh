#!/usr/bin/env bash
# A/B of whole trees against the memory floor in one run (docs/performance.md): bench/floor.sh on every TREE (a copy
# of the project, e.g. `git archive REV | tar -x -C TREE`), one collective at a time, the trees in turn within it
# (their order reversed every other collective, so drift over the run falls on each alike), then a table of every
# size's time and ratio to the floor per tree. Usage: bash bench/ab.sh OUTDIR TREE...  (NPS, OPS, SIZES, REPS,
# REGISTER, ALGO, DTYPE, STEP_TIMEOUT as bench/floor.sh takes them; NPS one rank count)
set -u
out=${1:?usage: bench/ab.sh OUTDIR TREE...}
shift
[ $# -ge 1 ] || { echo "usage: bench/ab.sh OUTDIR TREE..."; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
trees=()
for t in "$@"; do
  [ -f "$t/bench/floor.sh" ] || { echo "ab.sh: $t is not a copy of the project (no bench/floor.sh)"; exit 2; }
  trees+=("$(cd "$t" && pwd)")
done
k=0
for op in ${OPS:-all_reduce all_gather reduce_scatter broadcast all_to_all}; do
  order=("${trees[@]}")
  if [ $((k % 2)) = 1 ]; then order=(); for ((i=${#trees[@]}-1; i>=0; i--)); do order+=("${trees[i]}"); done; fi
  for t in "${order[@]}"; do
    echo "=== $(basename "$t"): $op"
    (cd "$t" && OPS=$op bash bench/floor.sh "$out/$(basename "$t")")
  done
  k=$((k + 1))
done
python3 "$here/bench/ab_table.py" "$out" "${trees[@]}"
