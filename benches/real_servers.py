"""Time to the first tool call of the real servers
tests/servers/real_servers.rs launches, direct and through `rootfence run`.

For each configuration, from the moment the host (the Python SDK's
ClientSession) spawns the command to the answer of its first tool call
(the `initialize` handshake included), in three modes:

  direct      the server command itself
  fenced      rootfence run --root ROOT -- <server>, the host declaring ROOT
  host-roots  rootfence run -- <server>, the host declaring ROOT (rootfence
              starts the server before the host has told its roots, then
              relaunches it with them); not for server-filesystem, which
              needs its directory at start
  remembered  host-roots as a host launches the same config again: the
              same paths every run and rootfence's cache kept, so that
              rootfence answers initialize as the server did last time and
              starts the server once, under the host's roots

The direct runs get the variables rootfence's runtime profiles set
(offline npm and uv), so that both sides read the same caches the same
way. Each run has a fresh root and home (at the same paths for
`remembered`); one warm-up run per configuration and mode is not counted.

The configurations marked "(pyenv)" are the user of
tests/servers/popular_servers.rs (its home where tests/peers/user-home
says): uv from its standalone installer in ~/.local/bin, the
machine's pyenv Python on the PATH through its shims, the caches in that
home; they time spawn to the answer of the first `tools/list` (no tool
call), direct and fenced only. A launch that fails says why in its cell.

Usage (after tests/peers/install.sh and `cargo build --release --bins`):

    tests/peers/.venv/bin/python benches/real_servers.py [--runs N]
        [--rootfence PATH] [--modes direct,fenced,host-roots] [NAME...]

Prints one line per configuration: the median and the range, in ms.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO / "tests" / "peers"
PATH = "/usr/local/bin:/usr/bin:/bin"
OFFLINE = {
    "npm_config_prefer_offline": "true",
    "npm_config_update_notifier": "false",
    "npm_config_audit": "false",
    "npm_config_fund": "false",
    "UV_OFFLINE": "1",
    "UV_PYTHON_DOWNLOADS": "never",
    "UV_NO_PROGRESS": "1",
}
MEMORY_POLICY = (
    'version = 1\n[env]\npass = ["PATH", "HOME", "LANG", "LC_*", "TZ", "TERM", '
    '"USER", "LOGNAME", "MEMORY_FILE_PATH"]\n'
)


def locked(name):
    lock = json.loads((PEERS / "package-lock.json").read_text())
    return lock["packages"]["node_modules/" + name]["version"]


def npx(name, *args):
    return ["npx", "-y", "%s@%s" % (name, locked(name)), *args]


def node(name, *args):
    return [shutil.which("node", path=PATH), str(PEERS / "node_modules" / name / "dist/index.js"), *args]


NPM = {"npm_config_cache": str(PEERS / ".npm-cache")}
UV = {"UV_CACHE_DIR": str(PEERS / ".uv-cache")}
FS = "@modelcontextprotocol/server-filesystem"
THINK = "@modelcontextprotocol/server-sequential-thinking"
MEM = "@modelcontextprotocol/server-memory"
EVERY = "@modelcontextprotocol/server-everything"
FM = PEERS / "fastmcp"
THOUGHT = {"thought": "one step", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}


USER = Path((PEERS / "user-home").read_text().strip())


def user_path():
    return (USER / ".rootfence-path").read_text().strip()


def configurations():
    """name -> (server(root), env, tool, args(root), policy, needs_root[, user]).

    `user`: run as the user of tests/servers/popular_servers.rs (its home
    and PATH);
    a tool of None times `tools/list`."""
    return {
        "filesystem npx": (lambda r: npx(FS, r), NPM, "read_text_file", lambda r: {"path": r + "/hello.txt"}, None, True),
        "filesystem node": (lambda r: node(FS, r), NPM, "read_text_file", lambda r: {"path": r + "/hello.txt"}, None, True),
        "sequential-thinking npx": (lambda r: npx(THINK), NPM, "sequentialthinking", lambda r: THOUGHT, None, False),
        "sequential-thinking node": (lambda r: node(THINK), NPM, "sequentialthinking", lambda r: THOUGHT, None, False),
        "memory npx": (lambda r: npx(MEM), NPM, "read_graph", lambda r: {}, MEMORY_POLICY, False),
        "memory node": (lambda r: node(MEM), NPM, "read_graph", lambda r: {}, MEMORY_POLICY, False),
        "everything npx": (lambda r: npx(EVERY), NPM, "echo", lambda r: {"message": "hi"}, None, False),
        "time venv": (lambda r: [str(PEERS / ".venv-servers/bin/mcp-server-time")], UV, "get_current_time", lambda r: {"timezone": "UTC"}, None, False),
        "time uvx": (lambda r: [str(PEERS / ".venv/bin/uvx"), "mcp-server-time"], UV, "get_current_time", lambda r: {"timezone": "UTC"}, None, False),
        "git venv": (lambda r: [str(PEERS / ".venv-servers/bin/mcp-server-git")], UV, "git_status", lambda r: {"repo_path": r}, None, False),
        "git uvx": (lambda r: [str(PEERS / ".venv/bin/uvx"), "mcp-server-git"], UV, "git_status", lambda r: {"repo_path": r}, None, False),
        "fastmcp venv python": (lambda r: [str(FM / ".venv/bin/python"), str(FM / "server.py")], UV, "add_note", lambda r: {"path": r + "/n.txt", "text": "x"}, None, False),
        "fastmcp run": (lambda r: [str(FM / ".venv/bin/fastmcp"), "run", str(FM / "server.py")], UV, "add_note", lambda r: {"path": r + "/n.txt", "text": "x"}, None, False),
        "fastmcp uv --directory": (lambda r: [str(PEERS / ".venv/bin/uv"), "--directory", str(FM), "run", "server.py"], UV, "add_note", lambda r: {"path": r + "/n.txt", "text": "x"}, None, False),
        "uvx fetch (pyenv)": (lambda r: ["uvx", "mcp-server-fetch"], {}, None, lambda r: {}, None, False, True),
        "uv run --with (pyenv)": (lambda r: ["uv", "run", "--with", "fastmcp", "fastmcp", "run", str(USER / "mcp/notes/server.py")], {}, None, lambda r: {}, None, False, True),
    }


def fresh(fixed=None):
    if fixed is None:
        base = Path(tempfile.mkdtemp(prefix="rootfence-bench-")).resolve()
    else:
        # The same paths every run (as a host config's are), new content.
        base = fixed
        subprocess.run(["rm", "-rf", str(base)])
        base.mkdir(parents=True)
    root, home = base / "project", base / "home"
    root.mkdir()
    home.mkdir()
    (root / "hello.txt").write_text("hello")
    (home / ".gitconfig").write_text("[user]\n\tname = B\n\temail = b@example.com\n")
    env = {"PATH": PATH, "HOME": str(home)}
    subprocess.run(["git", "init", "-q"], cwd=root, env=env, check=True)
    subprocess.run(["git", "add", "hello.txt"], cwd=root, env=env, check=True)
    subprocess.run(["git", "commit", "-qm", "one"], cwd=root, env=env, check=True)
    return base, root, home


async def first_call(command, env, root, tool, args):
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)

    async def list_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=root.as_uri(), name="project")])

    with open(os.devnull, "w") as devnull:
        start = time.perf_counter()
        async with stdio_client(params, errlog=devnull) as (read, write):
            async with ClientSession(read, write, list_roots_callback=list_roots) as session:
                await session.initialize()
                if tool is None:
                    await session.list_tools()
                    took = time.perf_counter() - start
                    return took
                r = await session.call_tool(tool, args)
                took = time.perf_counter() - start
                if r.is_error:
                    raise RuntimeError("%s failed: %s" % (tool, r.content))
    return took


def one(rootfence, mode, conf, name):
    server, extra, tool, args, policy, _ = conf[:6]
    user = len(conf) > 6 and conf[6]
    fixed = None
    if mode == "remembered":
        fixed = Path(tempfile.gettempdir()).resolve() / ("rootfence-bench-fixed-" + name.replace(" ", "-"))
    if user:
        (USER / "work").mkdir(exist_ok=True)
        base = Path(tempfile.mkdtemp(prefix="bench-", dir=USER / "work")).resolve()
        root, home = base / "project", USER
        root.mkdir()
    else:
        base, root, home = fresh(fixed)
    env = {"PATH": user_path() if user else PATH, "HOME": str(home), "LANG": "C.UTF-8", **extra}
    if mode == "remembered":
        # rootfence's cache of initialize answers outlives the run (the
        # user's ~/.cache); every path is the same from run to run.
        env["XDG_CACHE_HOME"] = str(fixed) + "-cache"
    env["MEMORY_FILE_PATH"] = str(root / "memory.jsonl")
    command = server(str(root))
    if mode == "direct":
        env.update(OFFLINE)
    else:
        pre = [rootfence, "run"]
        if policy:
            (base / "policy.toml").write_text(policy)
            pre += ["--policy", str(base / "policy.toml")]
        if mode == "fenced":
            pre += ["--root", str(root)]
        command = pre + ["--"] + command
    try:
        return anyio.run(first_call, command, env, root, tool, args(str(root)))
    finally:
        if fixed is None:
            subprocess.run(["rm", "-rf", str(base)])


def error_text(e):
    """The innermost message of an exception (group)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return "%s: %s" % (type(e).__name__, e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rootfence", default=str(REPO / "target/release/rootfence"))
    ap.add_argument("--modes", default="direct,fenced,host-roots,remembered")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    modes = a.modes.split(",")
    confs = configurations()
    names = a.names or list(confs)
    print("%-32s" % "configuration" + "".join("%22s" % m for m in modes))
    for name in names:
        conf = confs[name]
        cells = []
        for mode in modes:
            if mode in ("host-roots", "remembered") and (conf[5] or len(conf) > 6):
                cells.append("%22s" % "-")
                continue
            try:
                one(a.rootfence, mode, conf, name)  # warm-up
            except Exception as e:  # the launch fails: say why, time nothing
                cells.append("%22s" % "fails")
                print("# %s, %s: %s" % (name, mode, error_text(e)), file=sys.stderr)
                continue
            ms = sorted(one(a.rootfence, mode, conf, name) * 1000 for _ in range(a.runs))
            cells.append("%22s" % ("%.0f (%.0f-%.0f)" % (statistics.median(ms), ms[0], ms[-1])))
        print("%-32s" % name + "".join(cells), flush=True)


if __name__ == "__main__":
    sys.exit(main())
