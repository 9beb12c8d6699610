#!/usr/bin/env bash
# Run the README's main-job command (the first command of "The two
# commands") exactly as written, pipe it a short MCP session, and check the
# answers: the handshake, a read inside the root served, and reads outside
# it (a path outside, a symbolic link out of the root) refused with the
# path named.
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=$(awk '/^## The two commands/{s=1} s && /^    [^ ]/{sub(/^    /, ""); print; exit}' README.md)
if [ -z "$cmd" ]; then
    echo "check-main-job: no command found under \"## The two commands\" in README.md" >&2
    exit 1
fi
echo "main job: $cmd"
# A symbolic link out of the root, made for the check and removed after.
link=.check-main-job-link
ln -sfn /etc/hostname "$link"
trap 'rm -f "$link"' EXIT
session=$(cat <<JSON
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ci","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/etc/hostname"}}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"README.md","head":1}}}
{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"$link"}}}
JSON
)
err=$(mktemp)
# The session is written before the command has built and started: on a
# fresh machine the host's side is closed long before the server answers,
# and everything written before must still be answered.
# rootfence remembers the places it let a server write (here the checkout,
# the root) in its state directory, and takes nothing from them at later
# launches: the check keeps that record of its own, so the tests that run
# servers from the checkout afterwards start from the user's.
state=$(mktemp -d)
out=$( { printf '%s\n' "$session"; sleep 3; } | XDG_STATE_HOME="$state" bash -c "$cmd" 2>"$err" || true)
rm -rf "$state"
fail() { echo "check-main-job: $1" >&2; echo "--- output:" >&2; echo "$out" >&2; echo "--- stderr:" >&2; tail -20 "$err" >&2; exit 1; }
grep -q '"id":1,.*"serverInfo"' <<<"$out" || fail "no initialize result"
grep -q '"id":2,.*"isError":true' <<<"$out" || fail "the read outside the root was not refused"
grep -q '"id":2,.*Access denied - path outside allowed directories: /etc/hostname' <<<"$out" || fail "the refusal does not name the path and why"
grep -q '"id":3,.*# rootfence' <<<"$out" || fail "the read inside the root did not work"
grep -q '"id":3,.*"isError"' <<<"$out" && fail "the read inside the root was refused"
grep -q "\"id\":4,.*Access denied - $link: a symbolic link in the path leads outside" <<<"$out" || fail "the link out of the root was not refused"
rm -f "$err"
echo "main job: handshake answered, read inside the root served, reads outside it (a path, a link) refused"
