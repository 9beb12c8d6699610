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
#   bin/rootfence-envfilter
#                       runs a command under a seccomp filter reproducing an
#                       environment (Docker's default profile, Ubuntu's
#                       AppArmor user-namespace restriction, a kernel
#                       without Landlock, user namespaces refused); built
#                       from envfilter.c with gcc
#   ~/rootfence-tests/user
#                       the home of the user tests/servers/popular_servers.rs
#                       plays: popular servers installed as their READMEs
#                       say (popular/), and the same user's bun, pnpm,
#                       deno, pipx and cargo with a server run by each
#                       (launchers/); where each keeps things is below.
#                       Outside the checkout, so that the cases' projects
#                       lie where users' do wherever the checkout is (a
#                       server may refuse a directory under /tmp, or under
#                       a hidden one); its path is written to user-home
#   ~/.cache/rootfence-tests/cargo-tools
#                       rust-mcp-filesystem, `cargo install`-ed once per
#                       machine (outside the checkout: a fresh clone reuses it)
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
# PyPI, crates.io) only when something is missing.
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

# ---- A user's home with popular MCP servers installed as their READMEs say
#
# $home is the home directory of the user tests/servers/popular_servers.rs plays:
# uv from its standalone installer (~/.local/bin/{uv,uvx}), the machine's
# pyenv Python on the PATH (its shims), and each server installed the way
# its README tells users to:
#
#   ~/.local/share/uv/tools  `uv tool install` of mcp-server-sqlite and
#                        mcp-server-duckdb (run by `uvx <tool>`)
#   ~/.cache/uv          uvx environments of mcp-shell-server,
#                        mcp-server-fetch and mcp-alchemy, and the `uv run --with fastmcp`
#                        environment of ~/mcp/notes/server.py
#   ~/.npm/_npx          `npx -y` installs of Desktop Commander and obsidian-mcp
#   ~/.local/share/pipx  `pipx install markitdown-mcp` (~/.local/bin/markitdown-mcp)
#   ~/src/<project>      projects laid out as a clone is after `npm install`:
#                        mcp-server-commands (its `#!` build/index.js) and
#                        git-mcp-server (dist/index.js), each with its
#                        node_modules (only registries are reachable: the
#                        published tarball stands in for the clone, and it
#                        ships its build)
#
# Versions are held by popular/: python-mcp1.lock for the servers written
# for the MCP SDK 1 (sqlite, duckdb: SDK 2 removed what they import;
# mcp-shell-server asks for SDK 1),
# python.lock for the other Python servers, the package-lock.json files for
# every npm package. Every path is the one a
# user's home has, so the tests see the defaults (no UV_CACHE_DIR, no
# npm_config_cache).
#
# The home is one per machine, shared by its checkouts (a fresh clone
# reuses it, as the cargo tools below): in the user's own home rather than
# the checkout, which may lie under /tmp (obsidian-mcp refuses a vault
# there, as it does one under /var or under any hidden directory, so not
# ~/.cache either).
home="$HOME/rootfence-tests/user"
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
if [ ! -x "$pyenv_root/shims/python3" ]; then
    echo "tests/peers: pyenv is required (its shims/python3 is not in $pyenv_root): install pyenv and a Python 3.10+ with it, or set PYENV_ROOT" >&2
    exit 1
fi
user_path="$home/.local/bin:$home/.cargo/bin:$pyenv_root/shims:$pyenv_root/bin:/usr/local/bin:/usr/bin:/bin"
# The user's environment: HOME, PATH, and this machine's settings for
# reaching the registries (certificates, proxies), as the user's shell has
# them.
as_user() {
    set -- HOME="$home" PATH="$user_path" LANG=C.UTF-8 PYENV_ROOT="$pyenv_root" \
        npm_config_update_notifier=false "$@"
    for v in SSL_CERT_FILE SSL_CERT_DIR NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE PIP_CERT \
        HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy; do
        eval "[ -z \"\${$v+x}\" ] || set -- $v=\"\$$v\" \"\$@\""
    done
    env -i "$@"
}
pop_want=$(cd popular && find . -type f | LC_ALL=C sort | xargs cksum | cksum | cut -d' ' -f1)-$("$uv" --version | cut -d' ' -f2)-layout2
if ! stamp_ok "$home/.rootfence-stamp" "$pop_want"; then
    rm -rf "$home"
    mkdir -p "$home/.local/bin" "$home/src" "$home/mcp/notes"
    printf '[user]\n\tname = Home User\n\temail = home@example.com\n[init]\n\tdefaultBranch = main\n' > "$home/.gitconfig"
    # uv's standalone installer puts the two binaries in ~/.local/bin.
    cp "$here/.venv/bin/uv" "$here/.venv/bin/uvx" "$home/.local/bin/"

    # uvx: run each tool once as its README launches it (the interpreter
    # is the pyenv python3 uv finds on the PATH), versions held to
    # python.lock. The servers read stdin: /dev/null ends them.
    # The servers written for the MCP SDK 1 are broken by its version 2
    # (which `uvx <tool>` resolves today): their users keep an installed
    # tool (`uv tool install`, ~/.local/share/uv/tools), which `uvx <tool>`
    # runs.
    for tool in mcp-server-sqlite mcp-server-duckdb; do
        as_user UV_CONSTRAINT="$here/popular/python-mcp1.lock" UV_PYTHON_DOWNLOADS=never \
            UV_NO_PROGRESS=1 uv tool install --quiet "$tool" > /dev/null
    done
    for line in "python-mcp1.lock mcp-shell-server" \
        "python.lock mcp-server-fetch --help" \
        "python.lock --from mcp-alchemy==2026.10.15.202659 --refresh-package mcp-alchemy mcp-alchemy"; do
        lock=${line%% *}
        args=${line#* }
        # shellcheck disable=SC2086
        as_user UV_CONSTRAINT="$here/popular/$lock" UV_PYTHON_DOWNLOADS=never \
            UV_NO_PROGRESS=1 DB_URL=sqlite:// uvx $args < /dev/null > /dev/null 2>&1 || true
        tool=${args%% --help}
        tool=${tool##* }
        as_user UV_OFFLINE=1 uvx --from "$tool" python -c "import sys" \
            || { echo "tests/peers: uvx $args did not install $tool" >&2; exit 1; }
    done

    # `fastmcp install claude-desktop server.py` writes this command.
    cp popular/fastmcp-notes/server.py "$home/mcp/notes/server.py"
    as_user UV_CONSTRAINT="$here/popular/python.lock" UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1 \
        uv run --quiet --with fastmcp python -c "import fastmcp" > /dev/null

    # pipx, with the user's pyenv Python.
    py=$(as_user python3 -c 'import sys, os; print(os.path.realpath(sys.executable))')
    as_user "$here/.venv/bin/pipx" install --quiet --python "$py" \
        --pip-args="--constraint $here/popular/python.lock --disable-pip-version-check" \
        markitdown-mcp==0.0.1a8 > /dev/null

    # npx: the locked tree where `npx -y <package>@<version>` looks
    # (see the npx cache above), in the default cache, ~/.npm.
    npm_home="$home/.npm"
    first=""
    for name in @wonderwhy-er/desktop-commander obsidian-mcp; do
        version=$(node -p "require('./popular/npx/package-lock.json').packages['node_modules/$name'].version")
        spec="$name@$version"
        hash=$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(process.argv[1]).digest("hex").slice(0, 16))' "$spec")
        npx_dir="$npm_home/_npx/$hash"
        mkdir -p "$npx_dir"
        cp popular/npx/package.json popular/npx/package-lock.json "$npx_dir/"
        if [ -z "$first" ]; then
            # Puppeteer (a dependency of Desktop Commander) downloads a
            # browser when installed: not from a registry, and not used by
            # the tools the tests call.
            (cd "$npx_dir" && as_user PUPPETEER_SKIP_DOWNLOAD=1 npm ci --prefer-offline \
                --no-audit --no-fund --loglevel=error)
            first="$npx_dir"
        else
            cp -al "$first/node_modules" "$npx_dir/node_modules"
        fi
        as_user npm cache add "$spec" --loglevel=error
    done

    # Projects, as cloned and built (their build ships in the tarball; the
    # build tools are dev dependencies, not installed).
    for project in commands git-mcp-server; do
        lock="$here/popular/$project/package-lock.json"
        name=$(node -p "require('$lock').packages[''].name")
        version=$(node -p "require('$lock').packages[''].version")
        dir="$home/src/$(basename "$name")"
        mkdir -p "$dir"
        tarball=$(cd "$home/src" && as_user npm pack --silent "$name@$version")
        tar -xzf "$home/src/$tarball" -C "$dir" --strip-components=1 --no-same-owner
        rm "$home/src/$tarball"
        cp "$lock" "$dir/"
        (cd "$dir" && as_user npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error)
    done
    echo "$pop_want" > "$home/.rootfence-stamp"
fi

# ---- The same user's package runners, and a server launched by each
#
# launchers/ holds their lockfiles (a stamp of its own: changing it does
# not rebuild the home above). Where each launcher keeps things:
#
#   ~/.local/lib/node_modules  bun, pnpm and deno from the npm registry
#                        (launchers/tools), as `npm install -g --prefix
#                        ~/.local` lays them out; their commands linked in
#                        ~/.local/bin
#   ~/.bun/install/cache bun's cache: the packages, and .bunx-<uid>/<spec>,
#                        where `bunx <spec>` installs and finds the server
#                        (@modelcontextprotocol/server-memory,
#                        launchers/bunx/bun.lock)
#   ~/.local/share/pnpm/store, ~/.cache/pnpm
#                        pnpm's store and cache (dlx/ holds what `pnpm dlx
#                        @modelcontextprotocol/server-filesystem` installed)
#   ~/.cache/deno        deno's cache: the npm packages `deno run -A
#                        npm:@modelcontextprotocol/server-filesystem` runs
#   ~/.local/share/pipx/.cache
#                        `pipx run --spec mcp-server-git==...` environments
#                        (pipx itself `pip install --user`-ed, ~/.local/bin/pipx);
#                        pipx drops one 14 days after it was made: remade
#                        here when older than 7
#   ~/.npm/_npx          `npx -y mcp-server-sqlite-npx` (sqlite3's native
#                        addon built from source by node-gyp at install:
#                        its prebuilt binaries are not on a registry)
#   ~/.cargo/bin         `cargo install --locked rust-mcp-filesystem`
#                        (built once per machine, in ~/.cache/rootfence-tests,
#                        then copied)
#
# pnpm dlx and deno resolve the dependencies of the pinned package
# themselves, at install time (neither takes a lockfile for a one-off run);
# the other launchers install from the lockfiles here.
l_want=$(cd launchers && find . -type f | LC_ALL=C sort | xargs cksum | cksum | cut -d' ' -f1)-$(cksum servers.lock requirements.lock | cksum | cut -d' ' -f1)
pipx_cache="$home/.local/share/pipx/.cache"
if [ -d "$pipx_cache" ] && [ -n "$(find "$pipx_cache" -mindepth 1 -maxdepth 1 -type d -ctime +7)" ]; then
    rm -f "$home/.rootfence-launchers-stamp"
fi
if ! stamp_ok "$home/.rootfence-launchers-stamp" "$l_want"; then
    l_start=$(date +%s)
    rm -rf "$home/.local/lib/node_modules" "$home/.bun" "$home/.cache/pnpm" \
        "$home/.local/share/pnpm" "$home/.cache/deno" "$home/.local/share/pipx/.cache" \
        "$home/.cargo"
    # bun, pnpm and deno, from the npm registry.
    mkdir -p "$home/.local/lib"
    cp launchers/tools/package.json launchers/tools/package-lock.json "$home/.local/lib/"
    (cd "$home/.local/lib" && as_user npm ci --no-audit --no-fund --loglevel=error)
    rm "$home/.local/lib/package.json" "$home/.local/lib/package-lock.json"
    for cmd in bun bunx deno pnpm pnpx; do
        ln -sf "$(readlink -f "$home/.local/lib/node_modules/.bin/$cmd")" "$home/.local/bin/$cmd"
    done

    # bunx: the locked tree where `bunx <spec>` installs it.
    spec="@modelcontextprotocol/server-memory@$(node -p "require('./launchers/bunx/package.json').dependencies['@modelcontextprotocol/server-memory']")"
    # bunx uses .bunx-<uid> only when it is private (mode 0700, as bunx
    # makes it); else it installs in a temporary directory, from the network.
    bunx_home="$home/.bun/install/cache/.bunx-$(id -u)"
    bunx_dir="$bunx_home/$spec"
    mkdir -p "$bunx_dir"
    chmod 700 "$bunx_home"
    cp launchers/bunx/package.json launchers/bunx/bun.lock "$bunx_dir/"
    (cd "$bunx_dir" && as_user bun install --frozen-lockfile --silent)
    [ "$(stat -c %a "$bunx_home")" = 700 ] \
        || { echo "tests/peers: $bunx_home is not private (mode 0700): bunx would not use it" >&2; exit 1; }

    # pnpm dlx and deno: run once as the tests do (stdin /dev/null ends
    # the server), in the home. A package.json in a directory above the
    # home would be taken by deno for the project's (and the server run
    # from its node_modules): DENO_NO_PACKAGE_JSON keeps deno to its cache,
    # as in a user's real home.
    (cd "$home" && as_user pnpm dlx @modelcontextprotocol/server-filesystem@2026.8.31 "$home" \
        < /dev/null > /dev/null 2>&1) || true
    [ -n "$(find "$home/.cache/pnpm/dlx" -mindepth 2 -maxdepth 2 -name pkg 2>/dev/null)" ] \
        || { echo "tests/peers: pnpm dlx did not install @modelcontextprotocol/server-filesystem in $home/.cache/pnpm/dlx" >&2; exit 1; }
    (cd "$home" && as_user DENO_NO_UPDATE_CHECK=1 DENO_NO_PACKAGE_JSON=1 deno run -A \
        npm:@modelcontextprotocol/server-filesystem@2026.8.31 "$home" < /dev/null > /dev/null 2>&1) || true
    (cd / && as_user DENO_NO_UPDATE_CHECK=1 deno run -A --cached-only \
        npm:@modelcontextprotocol/server-filesystem@2026.8.31 "$home" < /dev/null > /dev/null 2>&1) \
        || { echo "tests/peers: deno did not cache npm:@modelcontextprotocol/server-filesystem" >&2; exit 1; }

    # pipx the way its README installs it for a user, then `pipx run`.
    as_user PIP_CONSTRAINT="$here/requirements.lock" PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --user \
        --disable-pip-version-check pipx > /dev/null
    as_user PIP_CONSTRAINT="$here/servers.lock" pipx run --spec mcp-server-git==2026.10.19 \
        mcp-server-git --help > /dev/null

    # npx, with a native addon built here by node-gyp against this node's
    # headers (sqlite3's prebuilt binaries and node's header tarball are
    # not on a registry).
    version=$(node -p "require('./launchers/npx-native/package-lock.json').packages['node_modules/mcp-server-sqlite-npx'].version")
    spec="mcp-server-sqlite-npx@$version"
    hash=$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(process.argv[1]).digest("hex").slice(0, 16))' "$spec")
    npx_dir="$home/.npm/_npx/$hash"
    rm -rf "$npx_dir"
    mkdir -p "$npx_dir"
    cp launchers/npx-native/package.json launchers/npx-native/package-lock.json "$npx_dir/"
    node_prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
    [ -f "$node_prefix/include/node/common.gypi" ] || {
        echo "tests/peers: node's headers are not in $node_prefix/include/node: node-gyp needs them to build sqlite3 (install node with its headers, as NodeSource's and the official builds ship them)" >&2
        exit 1
    }
    # JOBS=max: node-gyp's make on every core (the build is most of this
    # part's time: 87 s on one job, 74 s on two).
    (cd "$npx_dir" && as_user npm_config_build_from_source=true npm_config_nodedir="$node_prefix" \
        JOBS=max npm ci --no-audit --no-fund --loglevel=error)
    as_user npm cache add "$spec" --loglevel=error
    echo "tests/peers: launchers installed in $(($(date +%s) - l_start))s"
    echo "$l_want" > "$home/.rootfence-launchers-stamp"
fi

# A Rust MCP server, `cargo install`-ed (its own Cargo.lock, --locked):
# a debug build (what the tests need of it is where it lives and what it
# touches, not its speed: two and a half minutes on two busy cores for 218
# crates, against six for a release build), built once per machine, in
# this machine's cache rather than the checkout, so that a fresh clone (as
# CI's) does not build it again, and copied into the home's ~/.cargo/bin.
cargo_tools="${XDG_CACHE_HOME:-$HOME/.cache}/rootfence-tests/cargo-tools"
c_want="rust-mcp-filesystem-0.4.5-debug"
if ! stamp_ok "$cargo_tools/.rootfence-stamp" "$c_want"; then
    c_start=$(date +%s)
    rm -rf "$cargo_tools"
    cargo install --quiet --locked --debug --root "$cargo_tools" rust-mcp-filesystem --version 0.4.5
    echo "$c_want" > "$cargo_tools/.rootfence-stamp"
    echo "tests/peers: cargo install rust-mcp-filesystem took $(($(date +%s) - c_start))s"
fi
if ! cmp -s "$cargo_tools/bin/rust-mcp-filesystem" "$home/.cargo/bin/rust-mcp-filesystem"; then
    mkdir -p "$home/.cargo/bin"
    cp "$cargo_tools/bin/rust-mcp-filesystem" "$home/.cargo/bin/"
fi

# The user's PATH, and where the home is, for the tests.
echo "$user_path" > "$home/.rootfence-path"
echo "$home" > "$here/user-home"
echo "tests/peers: a user's home with popular servers: $home (PATH=$user_path)"

# The unprivileged user the escape suites run rootfence as.
if [ "$(id -u)" = 0 ] && ! id -u rootfence-test > /dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin rootfence-test
fi
if id -u rootfence-test > /dev/null 2>&1; then
    echo "tests/peers: unprivileged test user: rootfence-test ($(id -u rootfence-test))"
fi

# bubblewrap, to run rootfence inside another sandbox (tests/sandbox/environments.rs).
if ! command -v bwrap > /dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap > /dev/null \
            || { apt-get update -q > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap > /dev/null; }
    else
        echo "tests/peers: bubblewrap (bwrap) is missing: install it (apt-get install bubblewrap)" >&2
        exit 1
    fi
fi
echo "tests/peers: bubblewrap: $(command -v bwrap)"

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

