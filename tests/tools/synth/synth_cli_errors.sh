#!/usr/bin/env bash
# pt-synth's option errors for --cpus/--timeslice: exit 2 (usage), the message naming the option,
# and no archive left behind.
#   synth_cli_errors.sh PT_SYNTH BINARY
set -u
synth=$1 binary=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
expect() {  # MESSAGE ARGS...
  local message=$1; shift
  "$synth" -o "$dir/x.ptar" --binary "$binary" --instructions 1000 "$@" >/dev/null 2>"$dir/err"
  local rc=$?
  if [[ $rc -ne 2 ]] || ! grep -qF -e "$message" "$dir/err" || [[ -e $dir/x.ptar ]]; then
    echo "FAIL [$*]: exit $rc, stderr: $(cat "$dir/err")"; fail=1
  else
    echo "ok [$*]: $(cat "$dir/err")"
  fi
}
expect "--cpus must be between 1 and 1024" --cpus 0
expect "--cpus must be between 1 and 1024" --cpus 2000
expect "--timeslice needs --cpus N" --timeslice 5
expect "--timeslice must be > 0" --cpus 2 --timeslice 0
expect "--cpus needs --timing cyc or mtc" --cpus 2 --timing tsc
expect "--cpus needs --timing cyc or mtc" --cpus 2 --timing none
exit $fail
