#!/bin/sh
# Install the MCP servers rootfence's tests launch, from the lockfiles in
# this directory, and fill the caches from which `npx -y <package>@<locked
# version>` and `uvx <tool>` run with no network (the sandbox's default
# policy has none):
#
#   node_modules/       npm servers (package-lock.json)
#   .npm-cache/         npm cache; _npx/<hash> holds each npx-launched server
#   .venv/              the Python SDK host and uv (requirements.lock)
#   .venv-servers/      mcp-server-time and mcp-server-git (servers.lock)
#   fastmcp/.venv/      the FastMCP server project's environment (fastmcp/uv.lock)
#   .uv-cache/          uv cache holding the `uvx` environments of
#                       mcp-server-time and mcp-server-git (servers.lock)
#   bin/rootfence-envfilter
#                       runs a command under a seccomp filter reproducing an
#                       environment (Docker's default profile, Ubuntu's
#                       AppArmor user-namespace restriction, a kernel
#                       without Landlock, user namespaces refused); built
#                       from envfilter.c with gcc
#   bin/apparmor_parser an AppArmor parser that knows the `userns` rule
#                       (AppArmor 4): the system's, or Debian's apparmor
#                       package of a release that has it, unpacked in
#                       .apparmor/ with the C library it was built against
#
# Run as root (as CI does), it also creates the unprivileged user the escape
# suites run rootfence as (rootfence-test).
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

# The unprivileged user the escape suites run rootfence as.
if [ "$(id -u)" = 0 ] && ! id -u rootfence-test > /dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin rootfence-test
fi
if id -u rootfence-test > /dev/null 2>&1; then
    echo "tests/peers: unprivileged test user: rootfence-test ($(id -u rootfence-test))"
fi

# The environment filter helper.
mkdir -p bin
ef_want=$(cksum envfilter.c | cut -d' ' -f1)
if [ ! -x bin/rootfence-envfilter ] || ! stamp_ok bin/.envfilter-stamp "$ef_want"; then
    gcc -O2 -Wall -Wextra -Werror -o bin/rootfence-envfilter envfilter.c
    echo "$ef_want" > bin/.envfilter-stamp
fi
echo "tests/peers: environment filters: $here/bin/rootfence-envfilter"

# An AppArmor parser that knows `userns` (AppArmor 4.0 and later), to check
# the profile `rootfence doctor --apparmor` prints.
knows_userns() {
    printf 'abi <abi/4.0>,\nprofile t /t flags=(unconfined) {\n  userns,\n}\n' > bin/.userns-probe
    "$1" -Q -K bin/.userns-probe > /dev/null 2>&1
}
aa=.apparmor
aa_release=trixie
if [ -x /usr/sbin/apparmor_parser ] && knows_userns /usr/sbin/apparmor_parser; then
    ln -sf /usr/sbin/apparmor_parser bin/apparmor_parser
elif [ ! -x bin/apparmor_parser ] || ! stamp_ok "$aa/.rootfence-stamp" "$aa_release"; then
    # Debian's apparmor package of a release with AppArmor 4, with that
    # release's C library (its parser needs a newer glibc than this one
    # may have), unpacked here and run through that library's loader.
    rm -rf "$aa" bin/apparmor_parser
    mkdir -p "$aa/lists/partial" "$aa/debs"
    echo "deb http://deb.debian.org/debian $aa_release main" > "$aa/sources.list"
    apt_aa() {
        apt-get -q -o Dir::Etc::sourcelist="$here/$aa/sources.list" \
            -o Dir::Etc::sourceparts=/dev/null -o Dir::State::Lists="$here/$aa/lists" \
            -o Dir::Cache="$here/$aa/cache" -o APT::Sandbox::User=root "$@"
    }
    apt_aa update > /dev/null
    (cd "$aa/debs" && apt_aa download apparmor libc6 > /dev/null)
    for deb in "$aa"/debs/*.deb; do dpkg-deb -x "$deb" "$aa/root"; done
    loader=$(find "$here/$aa/root" -name 'ld-linux*.so.*' | head -n 1)
    libdir=$(dirname "$loader")
    cat > bin/apparmor_parser <<PARSER
#!/bin/sh
# Debian $aa_release's apparmor_parser, run with its own C library.
exec "$loader" --library-path "$libdir" "$here/$aa/root/usr/sbin/apparmor_parser" \\
    --config-file=/dev/null --base "$here/$aa/root/etc/apparmor.d" \\
    -I "$here/$aa/root/etc/apparmor.d" "\$@"
PARSER
    chmod 755 bin/apparmor_parser
    knows_userns bin/apparmor_parser
    echo "$aa_release" > "$aa/.rootfence-stamp"
fi
echo "tests/peers: AppArmor parser: $here/bin/apparmor_parser ($(bin/apparmor_parser --version | head -n 1))"

