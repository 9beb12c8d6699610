"""What the popular servers of tests/servers/popular_servers.rs touch outside
their root: each is run unfenced, as its README configures it, by the Python SDK
host (tests/peers/host.py) through one real tool call, under

    strace -f -e trace=%file,execve -o LOG

and every path a call succeeded on is put in a group (an install tree, a
cache, the project's node_modules, the server's own state, ...) with what
was done there: R read (open, stat, readlink, access), W written (opened
for writing, created, removed, renamed), X executed. The roots, /proc,
/sys and /dev are left out.

Usage (after tests/peers/install.sh; strace from `apt-get install strace`):

    tests/peers/.venv/bin/python benches/popular_servers_needs.py [--markdown FILE] [NAME...]

Prints one table per server (and writes them as markdown with --markdown).
"""

import argparse
import http.server
import threading
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO / "tests" / "peers"
HOME = Path((PEERS / "user-home").read_text().strip())
OFFLINE = {
    "UV_OFFLINE": "1",
    "UV_PYTHON_DOWNLOADS": "never",
    "UV_NO_PROGRESS": "1",
    "npm_config_prefer_offline": "true",
    "npm_config_update_notifier": "false",
}


def git(cwd, *args):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(HOME)}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def prepare_git(root):
    app = root / "repos" / "app"
    app.mkdir(parents=True)
    (app / "README.md").write_text("# app\n")
    git(app, "init", "-q")
    git(app, "add", "README.md")
    git(app, "commit", "-qm", "first")
    (app / "notes.txt").write_text("notes\n")


def prepare_vault(root):
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "app.json").write_text("{}")


def servers():
    """name -> (command(root), env(root), prepare(root), steps(root), root name)."""
    r = lambda root, rel: str(root / rel)
    return {
        "mcp-server-sqlite": (
            lambda root: ["uvx", "mcp-server-sqlite", "--db-path", r(root, "data.db")], lambda root: {}, None,
            lambda root: [{"call": "create_table", "args": {"query": "CREATE TABLE t (x TEXT)"}}], "project"),
        "mcp-server-duckdb": (
            lambda root: ["uvx", "mcp-server-duckdb", "--db-path", r(root, "data.db")], lambda root: {}, None,
            lambda root: [{"call": "query", "args": {"query": "CREATE TABLE t (x VARCHAR)"}}], "project"),
        "mcp-server-fetch": (
            lambda root: ["uvx", "mcp-server-fetch", "--allow-private-ips"], lambda root: {}, None,
            lambda root: [{"call": "fetch", "args": {"url": "http://127.0.0.1:%d/page.html" % WEB_PORT}}], "project"),
        "mcp-shell-server": (
            lambda root: ["uvx", "mcp-shell-server"], lambda root: {"ALLOW_COMMANDS": "ls,cat,pwd,grep,wc,touch,find"}, None,
            lambda root: [{"call": "shell_execute", "args": {"command": ["touch", "x.txt"], "directory": str(root)}}], "project"),
        "mcp-alchemy": (
            lambda root: ["uvx", "--from", "mcp-alchemy==2026.10.15.202659", "mcp-alchemy"],
            lambda root: {"DB_URL": "sqlite:///" + r(root, "a.db")}, None,
            lambda root: [{"call": "execute_query", "args": {"query": "CREATE TABLE t (x TEXT)"}}], "project"),
        "desktop-commander": (
            lambda root: ["npx", "-y", "@wonderwhy-er/desktop-commander@0.2.52"], lambda root: {}, None,
            lambda root: [{"call": "write_file", "args": {"path": r(root, "x.txt"), "content": "x"}}], "project"),
        "mcp-server-commands": (
            lambda root: [str(HOME / "src/mcp-server-commands/build/index.js")], lambda root: {}, None,
            lambda root: [{"call": "run_command", "args": {"command": "echo x > x.txt", "workdir": str(root)}}], "project"),
        "obsidian-mcp": (
            lambda root: ["npx", "-y", "obsidian-mcp@1.0.6", str(root)], lambda root: {}, prepare_vault,
            lambda root: [{"call": "create-note", "args": {"vault": "vault", "filename": "n.md", "content": "x"}}], "vault"),
        "git-mcp-server": (
            lambda root: ["node", str(HOME / "src/git-mcp-server/dist/index.js")],
            lambda root: {"MCP_TRANSPORT_TYPE": "stdio", "MCP_LOG_LEVEL": "info", "GIT_BASE_DIR": r(root, "repos"),
                          "LOGS_DIR": r(root, "repos/logs"), "GIT_USERNAME": "Configured Committer",
                          "GIT_EMAIL": "configured@example.com", "GIT_SIGN_COMMITS": "false"},
            prepare_git,
            lambda root: [{"call": "git_set_working_dir", "args": {"path": r(root, "repos/app")}},
                          {"call": "git_add", "args": {"paths": ["notes.txt"]}},
                          {"call": "git_commit", "args": {"message": "notes"}}], "project"),
        "markitdown-mcp": (
            lambda root: ["markitdown-mcp"], lambda root: {},
            lambda root: (root / "doc.html").write_text("<h1>T</h1><p>x</p>"),
            lambda root: [{"call": "convert_to_markdown", "args": {"uri": (root / "doc.html").as_uri()}}], "project"),
        "fastmcp-uv-run-with": (
            lambda root: ["uv", "run", "--with", "fastmcp", "fastmcp", "run", str(HOME / "mcp/notes/server.py")],
            lambda root: {}, None,
            lambda root: [{"call": "add_note", "args": {"path": r(root, "n.txt"), "text": "x"}}], "project"),
    }


class Page(http.server.BaseHTTPRequestHandler):
    """A page for mcp-server-fetch (and no robots.txt)."""

    def do_GET(self):
        body = b"<html><body><article><h1>A page</h1><p>Served on the loopback.</p></article></body></html>"
        self.send_response(200 if self.path == "/page.html" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


WEB = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
WEB_PORT = WEB.server_address[1]


SYSCALL = re.compile(r'^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+|\?)')
PATH_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
WRITE_CALLS = {"mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "rmdir",
               "symlink", "symlinkat", "link", "linkat", "truncate", "utimensat", "chmod", "fchmodat",
               "creat"}


def parse(log, cwd):
    """(path, right) for every call that succeeded."""
    out = []
    cwds = {}
    for line in open(log, errors="replace"):
        m = SYSCALL.match(line)
        if not m:
            continue
        pid, call, args, ret = m.groups()
        if ret == "?" or ret.startswith("-"):
            continue
        paths = PATH_ARG.findall(args)
        if not paths:
            continue
        if call in ("chdir",):
            cwds[pid] = paths[0]
            continue
        right = "R"
        if call == "execve":
            right = "X"
        elif call in WRITE_CALLS:
            right = "W"
        elif call in ("open", "openat", "openat2") and re.search(r"O_(WRONLY|RDWR|CREAT)", args):
            right = "W"
        # The paths a call acts on: symlink's first is only its target.
        if call in ("symlink", "symlinkat"):
            acted = paths[-1:]
        elif call.startswith(("rename", "link")):
            acted = paths[:2]
        else:
            acted = paths[:1]
        for p in acted:
            if not p.startswith("/"):
                p = os.path.join(cwds.get(pid, cwd), p)
            out.append((os.path.normpath(p), right))
    return out


def group(path, root, base, pyenv):
    home = str(HOME)
    if path == root or path.startswith(root + "/"):
        return None
    if path == base or path.startswith(base + "/"):
        return "(the working directory the host started it in)"
    for skip in ("/proc", "/sys", "/dev"):
        if path == skip or path.startswith(skip + "/"):
            return None
    if path.startswith(home + "/") or path == home:
        rel = path[len(home) + 1:]
        parts = rel.split("/") if rel else []
        if not parts:
            return "~"
        rules = [
            ([".cache", "uv"], 3), ([".local", "share", "uv", "tools"], 5), ([".local", "share", "uv"], 4),
            ([".local", "share", "pipx", "venvs"], 5), ([".local", "share", "pipx"], 4), ([".local", "bin"], 3),
            ([".npm", "_npx"], 3), ([".npm"], 2), (["src"], 3), (["mcp"], 2), ([".config"], 2), ([".cache"], 2),
            ([".local"], 3), (["work"], 1),
        ]
        for prefix, depth in rules:
            if parts[:len(prefix)] == prefix:
                g = parts[:depth]
                if g[:1] == ["src"] and len(parts) > 3 and "node_modules" in parts:
                    g = parts[:parts.index("node_modules") + 1]
                return "~/" + "/".join(re.sub(r"^\.tmp.*", ".tmp*", x) for x in g)
        return "~/" + "/".join(parts[:1])
    if pyenv and (path == pyenv or path.startswith(pyenv + "/")):
        parts = path[len(pyenv) + 1:].split("/")
        depth = 3 if parts[0] == "versions" else 1
        return "$PYENV_ROOT/" + "/".join(parts[:depth]) if parts[0] else "$PYENV_ROOT"
    parts = path.strip("/").split("/")
    if parts[0] == "etc":
        return "/" + "/".join(parts[:2])
    if parts[0] in ("usr", "lib", "lib64", "bin", "sbin"):
        return "/" + "/".join(parts[:2])
    if parts[0] == "tmp":
        return "/tmp"
    return "/" + "/".join(parts[:3])


def measure(name, conf, pyenv):
    command, env_of, prepare, steps, root_name = conf
    base = Path(tempfile.mkdtemp(prefix=name + "-strace-", dir=HOME / "work")).resolve()
    root = base / root_name
    root.mkdir()
    if prepare:
        prepare(root)
    log = base / "strace.log"
    path = (HOME / ".rootfence-path").read_text().strip()
    env = {"PATH": path, "HOME": str(HOME), "LANG": "C.UTF-8", **OFFLINE, **env_of(root)}
    scenario = {
        "command": ["strace", "-f", "-qq", "-e", "trace=%file,execve", "-s", "512", "-o", str(log), *command(root)],
        "roots": [[root.as_uri(), "root"]],
        "env": env,
        "steps": steps(root),
    }
    (base / "scenario.json").write_text(json.dumps(scenario))
    run = subprocess.run([str(PEERS / ".venv/bin/python"), str(PEERS / "host.py"), str(base / "scenario.json")],
                         capture_output=True, text=True, cwd=base)
    lines = [json.loads(l) for l in run.stdout.splitlines() if l.strip()]
    calls = [l for l in lines if "call" in l]
    ok = run.returncode == 0 and all(not c["error"] for c in calls)
    rights = defaultdict(set)
    for p, right in parse(log, str(base)):
        g = group(p, str(root), str(base), pyenv)
        if g:
            rights[g].add(right)
    shutil.rmtree(base, ignore_errors=True)
    return ok, (calls[-1]["text"][:200] if calls else run.stderr[-500:]), rights


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    if not shutil.which("strace"):
        sys.exit("strace is needed: apt-get install strace")
    pyenv = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    (HOME / "work").mkdir(exist_ok=True)
    threading.Thread(target=WEB.serve_forever, daemon=True).start()
    confs = servers()
    md = []
    for name in a.names or list(confs):
        ok, said, rights = measure(name, confs[name], pyenv)
        md.append("### %s%s\n" % (name, "" if ok else " (the tool call FAILED: %s)" % said))
        md.append("| outside the root | R W X |\n|---|---|")
        for g in sorted(rights):
            md.append("| `%s` | %s |" % (g, " ".join(r for r in "RWX" if r in rights[g])))
        md.append("")
        print("\n".join(md[-(len(rights) + 4):]), flush=True)
    if a.markdown:
        Path(a.markdown).write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
