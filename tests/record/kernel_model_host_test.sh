#!/bin/bash
# The kernel model against this machine's kernel (kernel_model_host_test.cpp), as root and as an
# unprivileged user with `ulimit -l 64`, so that the locked-page accounting (which root is exempt
# from) is compared too. The unprivileged run needs root to switch users; without root only the
# first run happens and the script says so (the accounting is then compared by whoever runs CI
# as root, which the project's CI does).
# usage: kernel_model_host_test.sh TEST_BINARY
set -u
binary=$1
"$binary" || exit 1
if [ "$(id -u)" -ne 0 ]; then
  echo "FAIL: not root: cannot run the unprivileged comparison (run the tests as root, as CI does)"
  exit 1
fi
user=nobody
group=$(id -gn "$user")
( ulimit -l 64 && exec setpriv --reuid="$user" --regid="$group" --clear-groups --inh-caps=-all \
    "$binary" ) || exit 1
echo PASS
