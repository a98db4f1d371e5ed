#!/bin/bash
# Issue 24, the writer side: every tool that writes a .ptar (pt-record, pt-emulate, pt-synth)
#  - never writes through a symbolic link at -o, and never creates a dangling link's target;
#  - on a full file system (a small tmpfs, mounted for real in a private mount namespace) says so
#    clearly, keeps what it wrote as a readable archive that does not claim to be complete, and
#    leaves no empty file when not even the header fitted;
#  - in attach mode, leaves the target running when the capture fails.
# Needs root (mount, unshare); fails loudly without it.
# usage: output_faults.sh PT_RECORD PT_EMULATE PT_SYNTH ARCHIVE_DUMP LONG_RUNNING
set -u
pt_record=$1 pt_emulate=$2 pt_synth=$3 dump=$4 long_running=$5
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (to mount a small tmpfs)"
tmp=$(mktemp -d)
target=
cleanup() { [ -n "$target" ] && kill -KILL "$target" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# -o through symbolic links.
printf 'keep me\n' > "$tmp/victim"
ln -s "$tmp/victim" "$tmp/link.ptar"
ln -s "$tmp/not-there" "$tmp/dangling.ptar"
for name in link dangling; do
  for tool in record emulate synth; do
    case $tool in
      record) cmd=("$pt_record" --sideband-only -o "$tmp/$name.ptar" -- /bin/true) ;;
      emulate) cmd=("$pt_emulate" --full -o "$tmp/$name.ptar" -- /bin/true) ;;
      synth) cmd=("$pt_synth" -o "$tmp/$name.ptar" --binary /bin/true --instructions 1000) ;;
    esac
    "${cmd[@]}" > /dev/null 2> "$tmp/err" && fail "pt-$tool wrote through $name.ptar"
    grep -q "$name.ptar: is a symbolic link; ptscope never writes through one" "$tmp/err" \
      || fail "pt-$tool, $name.ptar: $(cat "$tmp/err")"
  done
done
[ "$(cat "$tmp/victim")" = "keep me" ] || fail "a symbolic link's target was overwritten"
[ ! -e "$tmp/not-there" ] || fail "a dangling link's target was created"

# A full file system.
cat > "$tmp/enospc.sh" <<'INNER'
set -u
pt_record=$1 pt_emulate=$2 pt_synth=$3 dump=$4 long_running=$5 dir=$6
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/small"
mount -t tmpfs -o size=12k tmpfs "$dir/small" || fail "cannot mount a tmpfs"
full_message="No space left on device (the file system is full: free space or write elsewhere)"
readable_incomplete() {  # ARCHIVE WHAT
  "$dump" "$1" > "$dir/dump.txt" 2>&1 || fail "$2: the archive does not read back: $(cat "$dir/dump.txt")"
  grep -qx "complete 0" "$dir/dump.txt" || fail "$2: the archive claims to be complete"
}

# pt-emulate: the program finishes, writing its archive does not: what fitted stays.
"$pt_emulate" --full -o "$dir/small/e.ptar" -- /bin/true 2> "$dir/err" && fail "pt-emulate succeeded on a full disk"
grep -q "e.ptar: write failed: $full_message" "$dir/err" || fail "pt-emulate: $(cat "$dir/err")"
readable_incomplete "$dir/small/e.ptar" pt-emulate
rm -f "$dir/small/e.ptar"

# pt-synth.
"$pt_synth" -o "$dir/small/s.ptar" --binary /bin/true --instructions 300000 > /dev/null 2> "$dir/err" \
  && fail "pt-synth succeeded on a full disk"
grep -q "s.ptar: write failed: $full_message" "$dir/err" || fail "pt-synth: $(cat "$dir/err")"
readable_incomplete "$dir/small/s.ptar" pt-synth
rm -f "$dir/small/s.ptar"

# pt-emulate attached to a running process: the capture fails, the process runs on, unharmed.
"$long_running" &
target=$!
sleep 0.1
"$pt_emulate" --full -p "$target" -o "$dir/small/a.ptar" 2> "$dir/err" && fail "pt-emulate -p succeeded on a full disk"
grep -q "a.ptar: write failed: $full_message" "$dir/err" || fail "pt-emulate -p: $(cat "$dir/err")"
readable_incomplete "$dir/small/a.ptar" "pt-emulate -p"
before=$(awk '{print $14}' "/proc/$target/stat")
sleep 0.3
state=$(awk '{print $3}' "/proc/$target/stat")
after=$(awk '{print $14}' "/proc/$target/stat")
case $state in R|S) ;; *) fail "the attached process is in state $state after the failed capture" ;; esac
[ "$after" -gt "$before" ] || fail "the attached process does not run after the failed capture"

# Not even the header fits: no archive (not an empty file) is left, and pt-record says why.
rm -f "$dir/small/a.ptar"
dd if=/dev/zero of="$dir/small/fill" bs=1k count=64 2> /dev/null
"$pt_record" --sideband-only -o "$dir/small/r.ptar" -- /bin/true 2> "$dir/err" && fail "pt-record succeeded on a full disk"
grep -q "r.ptar: write failed: $full_message" "$dir/err" || fail "pt-record: $(cat "$dir/err")"
[ ! -e "$dir/small/r.ptar" ] || fail "pt-record left $(stat -c %s "$dir/small/r.ptar") bytes behind"
# ...and in attach mode the target runs on.
"$pt_record" --sideband-only -p "$target" -o "$dir/small/p.ptar" 2> "$dir/err" && fail "pt-record -p succeeded on a full disk"
kill -0 "$target" || fail "pt-record -p killed its target"
state=$(awk '{print $3}' "/proc/$target/stat")
case $state in R|S) ;; *) fail "the attached process is in state $state after pt-record failed" ;; esac
kill -KILL "$target"
umount "$dir/small"
echo PASS
INNER
unshare -m --propagation private bash "$tmp/enospc.sh" "$pt_record" "$pt_emulate" "$pt_synth" \
  "$dump" "$long_running" "$tmp" || exit 1
echo PASS
