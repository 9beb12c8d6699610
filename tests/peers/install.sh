#!/bin/sh
# Install the MCP servers rootfence's tests launch, from the lockfiles in
# this directory, and fill the caches from which `npx -y <package>@<locked
# version>` and `uvx <tool>` run with no network (the sandbox's default
# policy has none):
#
#   node_modules/       npm servers, and undici (node's proxy agent before
#                       node 24) (package-lock.json)
#   .npm-cache/         npm cache; _npx/<hash> holds each npx-launched server
#   .venv/              the Python SDK host and uv (requirements.lock)
#   .venv-servers/      mcp-server-time, mcp-server-git and mcp-server-fetch
#                       (servers.lock)
#   fastmcp/.venv/      the FastMCP server project's environment (fastmcp/uv.lock)
#   .uv-cache/          uv cache holding the `uvx` environments of
#                       mcp-server-time and mcp-server-git (servers.lock)
#
# Idempotent: quick when everything is already installed (each part keeps a
# stamp of the lockfiles it was made from). Needs network (the npm registry,
# PyPI) only when something is missing.
set -eu
cd "$(dirname "$0")"
here=$(pwd)
cache="$here/.npm-cache"
uv_cache="$here/.uv-cache"
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
want=$(cksum package.json package-lock.json | cksum | cut -d' ' -f1)

if ! stamp_ok node_modules/.rootfence-stamp "$want"; then
    npm ci --cache "$cache" --no-audit --no-fund --loglevel=error
    echo "$want" > node_modules/.rootfence-stamp
fi

# npx keeps what it installs in <cache>/_npx/<first 16 hex digits of the
# sha512 of the package spec>. Install the locked tree there for each
# server the tests launch with npx, so npx finds the package installed and
# installs nothing. The first is installed with `npm ci`; the others share
# its files through hard links (only package.json is npx's to rewrite, and
# each has its own).
first=""
for pkg in server-filesystem server-memory server-sequential-thinking server-everything; do
    name="@modelcontextprotocol/$pkg"
    version=$(node -p "require('./package-lock.json').packages['node_modules/$name'].version")
    spec="$name@$version"
    hash=$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(process.argv[1]).digest("hex").slice(0, 16))' "$spec")
    npx_dir="$cache/_npx/$hash"
    if ! stamp_ok "$npx_dir/.rootfence-stamp" "$want"; then
        rm -rf "$npx_dir"
        mkdir -p "$npx_dir"
        cp package.json package-lock.json "$npx_dir/"
        if [ -z "$first" ]; then
            (cd "$npx_dir" && npm ci --cache "$cache" --prefer-offline --no-audit --no-fund --loglevel=error)
        else
            cp -al "$first/node_modules" "$npx_dir/node_modules"
        fi
        # npx looks the package's manifest up before it looks in _npx: cache it.
        npm cache add "$spec" --cache "$cache" --loglevel=error
        echo "$want" > "$npx_dir/.rootfence-stamp"
    fi
    [ -n "$first" ] || first="$npx_dir"
    echo "tests/peers: npx cache $cache: $spec"
done

# A virtual environment at $1 holding the pinned requirements file $2.
venv_from() {
    v_want=$(cksum "$2" | cut -d' ' -f1)
    if [ ! -x "$1/bin/python" ] || ! stamp_ok "$1/.rootfence-stamp" "$v_want"; then
        rm -rf "$1"
        "${PYTHON:-python3}" -m venv "$1"
        "$1/bin/pip" install --quiet --disable-pip-version-check -r "$2"
        echo "$v_want" > "$1/.rootfence-stamp"
    fi
}

# The Python MCP SDK, the host of the end-to-end tests, and uv.
venv_from .venv requirements.lock
echo "tests/peers: python host: $here/.venv/bin/python"
# Python MCP servers installed the pip way (console scripts in a venv).
venv_from .venv-servers servers.lock
echo "tests/peers: python servers: $here/.venv-servers/bin"

uv="$here/.venv/bin/uv"
# The FastMCP project's environment, from its uv.lock, made the way its
# users make it (`uv sync`), on the same Python as the venvs above.
fm_want=$(cksum fastmcp/pyproject.toml fastmcp/uv.lock | cksum | cut -d' ' -f1)
if [ ! -x fastmcp/.venv/bin/python ] || ! stamp_ok fastmcp/.venv/.rootfence-stamp "$fm_want"; then
    rm -rf fastmcp/.venv
    UV_CACHE_DIR="$uv_cache" "$uv" sync --quiet --frozen --no-progress \
        --project fastmcp --python "$(command -v "${PYTHON:-python3}")"
    echo "$fm_want" > fastmcp/.venv/.rootfence-stamp
fi
echo "tests/peers: fastmcp project: $here/fastmcp (.venv)"

# uvx keeps the environments it makes in its cache. Run each tool once, the
# way the tests do (same interpreter, found on the same PATH; versions held
# to servers.lock), so that the sandboxed, offline uvx finds its
# environment there.
uvx_want=$(cksum servers.lock | cut -d' ' -f1)-$("$uv" --version | cut -d' ' -f2)
if ! stamp_ok "$uv_cache/.rootfence-uvx-stamp" "$uvx_want"; then
    for tool in mcp-server-time mcp-server-git; do
        env -u VIRTUAL_ENV -u UV_PYTHON PATH=/usr/local/bin:/usr/bin:/bin \
            UV_CACHE_DIR="$uv_cache" UV_CONSTRAINT="$here/servers.lock" \
            UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1 \
            UV_PYTHON_INSTALL_DIR="$here/.uv-python" \
            "$here/.venv/bin/uvx" "$tool" --help > /dev/null
    done
    echo "$uvx_want" > "$uv_cache/.rootfence-uvx-stamp"
fi
echo "tests/peers: uvx cache: $uv_cache (mcp-server-time, mcp-server-git)"
