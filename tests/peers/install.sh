#!/bin/sh
# Install the MCP servers rootfence's tests launch, from package-lock.json,
# and fill an npm cache from which `npx -y <package>@<locked version>` runs
# with no network (the sandbox's default policy has none).
#
# Idempotent: quick when everything is already installed. Needs network
# (the npm registry) only when something is missing.
set -eu
cd "$(dirname "$0")"
here=$(pwd)
cache="$here/.npm-cache"
stamp_of() { cksum package.json package-lock.json | cksum | cut -d' ' -f1; }
want=$(stamp_of)

if [ ! -f node_modules/.rootfence-stamp ] || [ "$(cat node_modules/.rootfence-stamp)" != "$want" ]; then
    npm ci --cache "$cache" --no-audit --no-fund --loglevel=error
    echo "$want" > node_modules/.rootfence-stamp
fi

# npx keeps what it installs in <cache>/_npx/<first 16 hex digits of the
# sha512 of the package spec>. Install the locked tree there, so npx finds
# the package installed and installs nothing.
version=$(node -p 'require("./package-lock.json").packages["node_modules/@modelcontextprotocol/server-filesystem"].version')
spec="@modelcontextprotocol/server-filesystem@$version"
hash=$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(process.argv[1]).digest("hex").slice(0, 16))' "$spec")
npx_dir="$cache/_npx/$hash"
if [ ! -f "$npx_dir/.rootfence-stamp" ] || [ "$(cat "$npx_dir/.rootfence-stamp")" != "$want" ]; then
    rm -rf "$npx_dir"
    mkdir -p "$npx_dir"
    cp package.json package-lock.json "$npx_dir/"
    (cd "$npx_dir" && npm ci --cache "$cache" --prefer-offline --no-audit --no-fund --loglevel=error)
    # npx looks the package's manifest up before it looks in _npx: cache it.
    npm cache add "$spec" --cache "$cache" --loglevel=error
    echo "$want" > "$npx_dir/.rootfence-stamp"
fi
echo "tests/peers: installed; npx cache: $cache ($spec)"

# The Python MCP SDK, the host of the end-to-end tests, from requirements.lock.
py_want=$(cksum requirements.lock | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ ! -f .venv/.rootfence-stamp ] || [ "$(cat .venv/.rootfence-stamp)" != "$py_want" ]; then
    rm -rf .venv
    "${PYTHON:-python3}" -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.lock
    echo "$py_want" > .venv/.rootfence-stamp
fi
echo "tests/peers: python host: $here/.venv/bin/python"
