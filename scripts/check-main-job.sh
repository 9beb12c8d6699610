#!/usr/bin/env bash
# Run the README's main-job command (the first command of "The two
# commands") exactly as written, pipe it a short MCP session, and check the
# answers: the handshake, and a read outside the root refused by the kernel.
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=$(awk '/^## The two commands/{s=1} s && /^    [^ ]/{sub(/^    /, ""); print; exit}' README.md)
if [ -z "$cmd" ]; then
    echo "check-main-job: no command found under \"## The two commands\" in README.md" >&2
    exit 1
fi
echo "main job: $cmd"
session=$(cat <<'JSON'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ci","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"path":"/etc/hostname"}}}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read","arguments":{"path":"README.md"}}}
JSON
)
out=$( { printf '%s\n' "$session"; sleep 3; } | bash -c "$cmd" 2>/tmp/check-main-job.err || true)
fail() { echo "check-main-job: $1" >&2; echo "--- output:" >&2; echo "$out" >&2; echo "--- stderr:" >&2; tail -20 /tmp/check-main-job.err >&2; exit 1; }
grep -q '"id":1,.*"serverInfo"' <<<"$out" || fail "no initialize result"
grep -q '"id":2,.*"isError":true' <<<"$out" || fail "the read outside the root was not refused"
grep -Eq '"id":2,.*(Permission denied|No such file)' <<<"$out" || fail "the refusal does not come from the kernel"
grep -q '"id":3,.*# rootfence' <<<"$out" || fail "the read inside the root did not work"
echo "main job: handshake answered, read outside the root refused, read inside it served"
