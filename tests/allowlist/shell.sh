#!/bin/bash
# A shell's normal work: pipelines, subshells, jobs, traps, coreutils,
# archives, links, modes, temporary files.
set -euo pipefail
cd "$1"
mkdir -p work && cd work
echo hello > a.txt
tr a-z A-Z < a.txt > b.txt
grep -q HELLO b.txt
[ "$(seq 1 100 | awk '{s += $1} END {print s}')" = 5050 ]
sed -i 's/HELLO/BYE/' b.txt
find . -type f | sort | xargs wc -c > /dev/null
tar czf ../w.tgz . && mkdir -p ../x && tar xzf ../w.tgz --no-same-owner -C ../x
cp -r --preserve=mode,timestamps ../x ../y && mv ../y ../z && ln -sf ../z link && readlink link > /dev/null
chmod 600 a.txt && touch -d '2020-01-01' a.txt && stat -c %a a.txt > /dev/null
t=$(mktemp) && echo tmp > "$t" && rm "$t"
(sleep 0.1; echo sub > sub.txt) & wait
trap 'true' EXIT
ulimit -a > /dev/null
date > /dev/null; id > /dev/null; uname -a > /dev/null; ls -la > /dev/null
exec 3> fd3; echo x >&3; exec 3>&-
while read -r line; do :; done < a.txt
echo done
