# cli-check.sh: what the CLI test scripts share (sourced):
#   check NAME COMMAND...  runs COMMAND, prints "ok: NAME" or "FAIL: NAME"
#   has FILE TEXT          FILE contains TEXT (fixed string)
# The callers end with:  echo "...: $((total - fails)) of $total passed"; [ $fails -eq 0 ]
fails=0
total=0

check() { # NAME CONDITION-COMMAND...
  local name=$1
  shift
  total=$((total + 1))
  if "$@"; then
    echo "ok: $name"
  else
    echo "FAIL: $name"
    fails=$((fails + 1))
  fi
}

has() { grep -qF -- "$2" "$1"; }
