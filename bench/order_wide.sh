#!/bin/sh
# A repository whose logs hold one shell step that changed N files, K file
# steps in each of two other runs, then a fork between those two runs: how
# `git wal order` and `git wal verify --all` scale with the paths a step
# changed (docs/agents-together.md, "One order", Bound). Usage:
#   bench/order_wide.sh N DIR K; cd DIR; /usr/bin/time -v git wal order
set -e
N=${1:-4000}
D=${2:?a directory to create}
K=${3:-40}
W=${GIT_WAL:-git-wal}
[ ! -e "$D" ] || { echo "$D exists: name a new directory" >&2; exit 2; }
mkdir -p "$D"; cd "$D"
export GIT_AUTHOR_NAME=T GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=T GIT_COMMITTER_EMAIL=t@e
git init -q -b main .; echo hi > README; echo go >> .git/info/exclude; git add README; git commit -qm init
$W begin --run a >/dev/null
$W exec --run a -- sh -c "mkdir -p big; i=0; while [ \$i -lt $N ]; do echo \$i > big/f\$i; i=\$((i+1)); done" >/dev/null
$W begin --run c >/dev/null; $W begin --run d >/dev/null
i=0; while [ $i -lt $K ]; do
  echo c$i | $W apply --run c write-file c$i.txt --from - >/dev/null
  echo d$i | $W apply --run d write-file d$i.txt --from - >/dev/null
  i=$((i+1)); done
mkfifo go
$W exec --run d -- sh -c "cat $D/go >/dev/null; echo d > c.txt" >/dev/null &
exec 3>go
$W exec --run c -- sh -c "echo c > c.txt" >/dev/null
exec 3>&-
wait
echo built $D
