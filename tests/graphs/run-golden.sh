#!/bin/bash
# run-golden.sh SCHEDGRAPH DIR: golden tests of the CLI's input handling.
#
# For every DIR/reject-NAME.json: `schedgraph FILE -o OUT` must exit 1,
# print `schedgraph: FILE: <message>` on stderr with the substring in
# DIR/reject-NAME.err, and not create OUT. For every DIR/accept-NAME.json:
# exit 0 with a summary. Plus the environment cases (a directory, a missing
# path), usage errors (exit 2) and --help/--version (exit 0).
set -u
sg=$1
dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
total=0

fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# expect_reject NAME FILE SUBSTRING
expect_reject() {
  local name=$1 file=$2 want=$3
  total=$((total + 1))
  rm -f "$tmp/out.json"
  "$sg" "$file" -o "$tmp/out.json" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  local err
  err=$(cat "$tmp/stderr")
  if [ $rc -ne 1 ]; then
    fail "$name: exit $rc, want 1 (stderr: $err)"
  elif [ -e "$tmp/out.json" ]; then
    fail "$name: $tmp/out.json was written"
  elif [ "$(wc -l <"$tmp/stderr")" -ne 1 ]; then
    fail "$name: want one line on stderr, got: $err"
  elif [[ "$err" != "schedgraph: $file: "* ]]; then
    fail "$name: stderr does not start with 'schedgraph: $file: ': $err"
  elif [[ "$err" != *"$want"* ]]; then
    fail "$name: stderr lacks '$want': $err"
  else
    echo "ok: $name"
  fi
}

shopt -s nullglob
for f in "$dir"/reject-*.json; do
  name=$(basename "$f" .json)
  if [ ! -f "$dir/$name.err" ]; then
    fail "$name: no $name.err"
    continue
  fi
  expect_reject "$name" "$f" "$(head -n1 "$dir/$name.err")"
done

expect_reject "reject-directory" "$dir" "is a directory"
expect_reject "reject-missing-path" "$tmp/no-such-graph.json" "cannot open: No such file or directory"
mkfifo "$tmp/fifo.json" && expect_reject "reject-fifo" "$tmp/fifo.json" "not a regular file"
mkdir -p "$tmp/ro" && cp "$dir/accept-small.json" "$tmp/ro/g.json" && chmod 000 "$tmp/ro/g.json"
if [ "$(id -u)" != 0 ]; then
  expect_reject "reject-unreadable" "$tmp/ro/g.json" "cannot open: Permission denied"
fi

for f in "$dir"/accept-*.json; do
  name=$(basename "$f" .json)
  total=$((total + 1))
  out=$("$sg" "$f" 2>"$tmp/stderr")
  rc=$?
  nodes=$(grep -c '"op":' "$f") # one per node: the files list one key per line
  if [ $rc -ne 0 ]; then
    fail "$name: exit $rc: $(cat "$tmp/stderr")"
  elif ! grep -q "^nodes: $nodes " <<<"$out"; then
    fail "$name: summary lacks 'nodes: $nodes': $out"
  else
    echo "ok: $name"
  fi
done

# expect_exit NAME CODE STDOUT-SUBSTRING ARGS...
expect_exit() {
  local name=$1 code=$2 want=$3
  shift 3
  total=$((total + 1))
  "$sg" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [ $rc -ne "$code" ]; then
    fail "$name: exit $rc, want $code"
  elif ! grep -qF -- "$want" "$tmp/stdout" "$tmp/stderr"; then
    fail "$name: output lacks '$want'"
  else
    echo "ok: $name"
  fi
}

expect_exit usage-no-graph 2 "no graph file given"
expect_exit usage-unknown-option 2 "unknown option '--frobnicate'" --frobnicate "$dir/accept-small.json"
expect_exit usage-two-graphs 2 "one graph file expected" "$dir/accept-small.json" "$dir/accept-small.json"
expect_exit usage-missing-argument 2 "needs an argument" "$dir/accept-small.json" -o
expect_exit usage-bad-bytes 2 "--bucket-cap: '12Q' is not" --bucket-cap 12Q "$dir/accept-small.json"
expect_exit usage-bad-fraction 2 "--max-peak-increase: 'lots'" --max-peak-increase lots "$dir/accept-small.json"
expect_exit usage-bad-dump 2 "--dump: unknown pass 'nope'" --dump=nope "$dir/accept-small.json"
expect_exit usage-no-threads 2 "--threads: '0' is not a count from 1 to 64" --threads 0 "$dir/accept-small.json"
expect_exit usage-too-many-threads 2 "--threads: '65' is not a count" --threads 65 "$dir/accept-small.json"
expect_exit usage-output-is-input 2 "-o would overwrite the graph" "$dir/accept-small.json" -o "$dir/accept-small.json"
expect_exit usage-two-outputs-one-path 2 "--report would overwrite -o" "$dir/accept-small.json" -o "$tmp/same.json" --report "$tmp/same.json"
# The same file under another spelling or a link (device and inode, not text)
cp "$dir/accept-small.json" "$tmp/g.json" && mkdir -p "$tmp/sub" && ln -s g.json "$tmp/g-link.json" &&
  ln "$tmp/g.json" "$tmp/g-hard.json" && printf '{"hbm_GBps": 3000}\n' >"$tmp/c.json"
expect_exit usage-output-is-input-dotted 2 "-o would overwrite the graph" "$tmp/g.json" -o "$tmp/sub/../g.json"
expect_exit usage-report-is-input-dot 2 "--report would overwrite the graph" "$tmp/g.json" --report "$tmp/./g.json"
expect_exit usage-output-is-input-symlink 2 "-o would overwrite the graph" "$tmp/g.json" -o "$tmp/g-link.json"
expect_exit usage-trace-is-input-hardlink 2 "--trace would overwrite the graph" "$tmp/g.json" --trace "$tmp/g-hard.json"
expect_exit usage-output-is-cluster 2 "-o would overwrite the --cluster file" "$tmp/g.json" --cluster "$tmp/c.json" -o "$tmp/sub/../c.json"
expect_exit usage-two-new-outputs-one-file 2 "--report would overwrite -o" "$tmp/g.json" -o "$tmp/new.json" --report "$tmp/sub/../new.json"
total=$((total + 1))
if cmp -s "$dir/accept-small.json" "$tmp/g.json" && [ ! -e "$tmp/new.json" ]; then
  echo "ok: the input is intact after the refused runs"
else
  fail "the input was overwritten or an output written"
fi
expect_exit help 0 "Usage: schedgraph [OPTIONS] GRAPH.json" --help
expect_exit help-short 0 "Exit status: 0 ok" -h
expect_exit version 0 "schedgraph " --version
expect_exit dump-load 0 "2 ag = all_gather(w_shard)" --dump=load "$dir/accept-small.json"
expect_exit bytes-suffix 0 "nodes: 6" --bucket-cap 64M --max-in-flight 1G "$dir/accept-small.json"

echo "golden: $((total - fails)) of $total passed"
[ $fails -eq 0 ]
