#!/bin/bash
# git's normal work on a repository in the root: commit, branch, merge,
# tag, diff, status, gc, clone.
set -euo pipefail
cd "$1"
export HOME="$1/home" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
git init -q -b main repo && cd repo
git config user.email ci@example.com && git config user.name ci
echo a > f && git add f && git commit -qm one
git checkout -qb feature && echo b >> f && git commit -qam two
git checkout -q main && git merge -q feature
git log --oneline > /dev/null && git status --porcelain > /dev/null
git diff HEAD~1 > /dev/null && git tag v1 && git gc -q
git clone -q . ../clone && git -C ../clone log -1 > /dev/null
echo done
