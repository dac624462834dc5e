#!/bin/bash
# run-determinism.sh SCHEDGRAPH GRAPHGEN DATA_DIR: the same graph and options
# give byte-identical plans, traces and reports (the report's `passes`
# timings aside) and the same summary (its `graph:` and `passes:` lines
# aside) across runs, working directories, path spellings (relative,
# absolute, `./`, `..`, a symbolic link) and thread counts (--threads 1, 3
# and 17, and the default pool, one thread per processor as
# g_get_num_processors() counts them, which follows the CPU affinity: one
# CPU under `taskset -c 0`), on every sample graph of DATA_DIR and on a
# graphgen graph large enough for every pass's parallel paths (the bucket
# pass's layouts copy nodes in chunks from 16384 nodes). A copy of the
# graph under another name gives a plan with the same hash that differs
# only in its `graph` line.
set -u
sg=$(realpath "$1") gg=$(realpath "$2") data=$(realpath "$3")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 total=0
fail () { echo "FAIL: $*"; fails=$((fails + 1)); }

# run TAG DIR GRAPH [PREFIX...]: from DIR, outputs to $tmp/TAG.* ($opts: more
# options)
opts=""
run () {
  local tag=$1 dir=$2 graph=$3
  shift 3
  # shellcheck disable=SC2086
  (cd "$dir" && "$@" "$sg" $opts "$graph" -o "$tmp/$tag.plan.json" --report "$tmp/$tag.report.json" \
     --trace "$tmp/$tag.trace.json" >"$tmp/$tag.out" 2>"$tmp/$tag.err") ||
    { fail "$tag: schedgraph exit $?: $(head -2 "$tmp/$tag.err")"; return 1; }
  python3 - "$tmp/$tag.report.json" <<'PY' || fail "$tag: report"
import json, sys
r = json.load(open(sys.argv[1]))
del r["passes"]
json.dump(r, open(sys.argv[1] + ".cmp", "w"), sort_keys=False, indent=0)
PY
  grep -v -e '^graph: ' -e '^passes: ' "$tmp/$tag.out" >"$tmp/$tag.out.cmp"
}

same () { # REF TAG LABEL
  total=$((total + 1))
  local what
  for what in plan.json trace.json report.json.cmp out.cmp; do
    if ! cmp -s "$tmp/$1.$what" "$tmp/$2.$what"; then
      fail "$3: the ${what%.cmp} differs"
      diff "$tmp/$1.$what" "$tmp/$2.$what" | head -6
      return
    fi
  done
  echo "ok: $3"
}

taskset_ok=0
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null && [ "$(nproc)" -gt 1 ]; then
  taskset_ok=1
else
  echo "note: one CPU only (or no taskset): the thread-count case runs at one count"
fi

mkdir -p "$tmp/elsewhere/deeper" "$tmp/link"
"$gg" --target-nodes 21000 --dp 2 -o "$tmp/gen_fsdp2_21k.json" || fail "graphgen"
graphs=$(ls "$data"/*.json | grep -v -e peer_order -e peer_results -e limits-)
for g in $graphs "$tmp/gen_fsdp2_21k.json"; do
  n=$(basename "$g" .json)
  dir=$(dirname "$g")
  ln -sf "$g" "$tmp/link/$n.json"
  run "$n.ref" "$dir" "./$n.json" || continue
  run "$n.again" "$dir" "$n.json" && same "$n.ref" "$n.again" "$n: a second run"
  run "$n.abs" "$tmp/elsewhere" "$g" && same "$n.ref" "$n.abs" "$n: another directory, absolute path"
  run "$n.dots" "$tmp/elsewhere/deeper" "$(realpath --relative-to="$tmp/elsewhere/deeper" "$dir")/../$(basename "$dir")/$n.json" &&
    same "$n.ref" "$n.dots" "$n: a relative path with .."
  run "$n.link" "$tmp" "link/$n.json" && same "$n.ref" "$n.link" "$n: through a symbolic link"
  if [ $taskset_ok -eq 1 ]; then
    run "$n.cpu0" "$dir" "$n.json" taskset -c 0 && same "$n.ref" "$n.cpu0" "$n: one CPU (taskset -c 0)"
    run "$n.cpus" "$dir" "$n.json" taskset -c 0-"$(($(nproc) - 1))" &&
      same "$n.ref" "$n.cpus" "$n: every CPU"
  fi
  # --threads: the passes' pool, one thread to more than there are CPUs
  for t in 1 3 17; do
    opts="--threads $t"
    run "$n.t$t" "$dir" "$n.json" && same "$n.ref" "$n.t$t" "$n: --threads $t"
  done
  opts=""
  # another file name: the plan's hash holds, only its `graph` line differs
  cp "$g" "$tmp/copy-of-$n.json"
  total=$((total + 1))
  if run "$n.copy" "$tmp" "copy-of-$n.json"; then
    h1=$(sed -n 's/^"hash":"\(.*\)",$/\1/p' "$tmp/$n.ref.plan.json")
    h2=$(sed -n 's/^"hash":"\(.*\)",$/\1/p' "$tmp/$n.copy.plan.json")
    if [ -z "$h1" ] || [ "$h1" != "$h2" ]; then
      fail "$n: a copy under another name: hash $h1 vs $h2"
    elif [ "$(diff "$tmp/$n.ref.plan.json" "$tmp/$n.copy.plan.json" | grep -c '^[<>]')" -ne 2 ]; then
      fail "$n: a copy under another name: more than the graph line differs"
    else
      echo "ok: $n: a copy under another name: the same hash $h1"
    fi
  fi
done
echo "determinism: $((total - fails)) of $total passed"
[ $fails -eq 0 ]
