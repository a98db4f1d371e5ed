#!/bin/bash
# pt-record installed set-uid root, run by an ordinary user (nobody; the test needs root to
# install the copy and to switch to that user, and fails loudly without it): the traced program
# runs as that user, the archive belongs to that user, -o never follows a symbolic link (a
# dangling one never gets its target created) and cannot create a file where the user may not.
# Runs with --sideband-only so it works on hosts without Intel PT.
# usage: record_setuid.sh PT_RECORD
set -u
pt_record=$1
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (to install a set-uid copy and become nobody)"
user=nobody
uid=$(id -u "$user")
group=$(id -gn "$user")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
install -o root -g root -m 4755 "$pt_record" "$tmp/pt-record"
mkdir "$tmp/user" "$tmp/rootonly"
chown "$user" "$tmp/user"
chmod 755 "$tmp/rootonly"
printf 'keep me\n' > "$tmp/victim"
chmod 644 "$tmp/victim"
as_user() { setpriv --reuid="$user" --regid="$group" --clear-groups "$@"; }

# The program runs as the invoking user; the archive is theirs.
as_user "$tmp/pt-record" --sideband-only -o "$tmp/user/cap.ptar" -- /usr/bin/id -u \
  > "$tmp/user/id.out" 2> "$tmp/user/err" || fail "recording failed: $(cat "$tmp/user/err")"
for _ in $(seq 1 100); do [ -s "$tmp/user/id.out" ] && break; sleep 0.05; done
[ "$(cat "$tmp/user/id.out")" = "$uid" ] || fail "the program ran as uid $(cat "$tmp/user/id.out"), not $uid"
[ "$(stat -c %u "$tmp/user/cap.ptar")" = "$uid" ] || fail "the archive belongs to uid $(stat -c %u "$tmp/user/cap.ptar")"
[ "$(stat -c %a "$tmp/user/cap.ptar")" = 600 ] || fail "archive mode $(stat -c %a "$tmp/user/cap.ptar")"

# -o through a symbolic link to a root-owned file: refused, the file untouched.
ln -s "$tmp/victim" "$tmp/user/link.ptar"
if as_user "$tmp/pt-record" --sideband-only -o "$tmp/user/link.ptar" -- /bin/true 2> "$tmp/err"; then
  fail "recording through a symbolic link succeeded"
fi
grep -q "link.ptar: is a symbolic link; ptscope never writes through one" "$tmp/err" \
  || fail "symbolic link message: $(cat "$tmp/err")"
[ "$(cat "$tmp/victim")" = "keep me" ] || fail "the link's target was overwritten"
[ "$(stat -c %a:%u "$tmp/victim")" = 644:0 ] || fail "the link's target changed: $(stat -c %a:%u "$tmp/victim")"

# A dangling link: its target is not created.
ln -s "$tmp/created-by-root" "$tmp/user/dangling.ptar"
as_user "$tmp/pt-record" --sideband-only -o "$tmp/user/dangling.ptar" -- /bin/true 2> "$tmp/err" \
  && fail "recording through a dangling link succeeded"
[ ! -e "$tmp/created-by-root" ] || fail "the dangling link's target was created"

# Where the user may not write, neither may pt-record.
as_user "$tmp/pt-record" --sideband-only -o "$tmp/rootonly/x.ptar" -- /bin/true 2> "$tmp/err" \
  && fail "pt-record wrote into a directory its user cannot write"
grep -q "rootonly/x.ptar: cannot create: Permission denied" "$tmp/err" \
  || fail "permission message: $(cat "$tmp/err")"
[ ! -e "$tmp/rootonly/x.ptar" ] || fail "the archive was created in $tmp/rootonly"
echo PASS
