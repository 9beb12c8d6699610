#!/usr/bin/env python3
"""directory_tree and search_files on a 100,000-file tree: `rootfence fs`
against the reference `@modelcontextprotocol/server-filesystem` (the
release in tests/peers), each answering over stdio as a host would call it.

Usage (after tests/peers/install.sh and `cargo build --release --bins`):

    python3 benches/fs_tree.py [--runs N] [--tree DIR]

The tree (100 top directories x 10 subdirectories x 100 files, 1,100
directories, made once under DIR, default /tmp/rootfence-bench-tree):
every file `fNN.txt` or `fNN.rs`. For each server and call, the median
and range of N runs (after one warm-up) in ms, the result's size, and the
server's peak RSS (VmHWM) after the runs. Also `rootfence fs` with
`--max-entries 10000`: the time to stop at the limit with a note.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PEERS = os.path.join(REPO, "tests", "peers")


def make_tree(base):
    stamp = os.path.join(base, ".complete")
    if os.path.exists(stamp):
        return
    for i in range(100):
        for j in range(10):
            d = os.path.join(base, "d%02d" % i, "s%d" % j)
            os.makedirs(d, exist_ok=True)
            for k in range(100):
                ext = "rs" if k % 10 == 0 else "txt"
                with open(os.path.join(d, "f%02d.%s" % (k, ext)), "w") as f:
                    f.write("x")
    open(stamp, "w").close()


class Server:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method, params):
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("server closed its stdout")
            msg = json.loads(line)
            if msg.get("id") == self.next:
                return msg

    def call(self, tool, args):
        t0 = time.perf_counter()
        r = self.request("tools/call", {"name": tool, "arguments": args})
        ms = (time.perf_counter() - t0) * 1000
        res = r.get("result", {})
        text = "".join(c.get("text", "") for c in res.get("content", []))
        if res.get("isError"):
            raise RuntimeError("%s failed: %s" % (tool, text[:200]))
        return ms, text

    def peak_rss_mib(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def close(self):
        self.p.kill()
        self.p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", default="/tmp/rootfence-bench-tree")
    a = ap.parse_args()
    make_tree(a.tree)
    rootfence = os.path.join(REPO, "target", "release", "rootfence")
    node = "/usr/bin/node" if os.path.exists("/usr/bin/node") else "node"
    reference = os.path.join(PEERS, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
    servers = [
        ("rootfence fs", [rootfence, "fs", "--root", a.tree]),
        ("reference", [node, reference, a.tree]),
        ("rootfence fs --max-entries 10000", [rootfence, "fs", "--root", a.tree, "--max-entries", "10000"]),
    ]
    calls = [
        ("directory_tree", {"path": a.tree}),
        ("search_files **/*.rs", {"path": a.tree, "pattern": "**/*.rs"}),
        ("search_files **/f07.txt", {"path": a.tree, "pattern": "**/f07.txt"}),
    ]
    print("| server | call | median ms (range) | result | peak RSS |")
    print("|---|---|---:|---:|---:|")
    for sname, argv in servers:
        for cname, args in calls:
            s = Server(argv)
            tool = cname.split()[0]
            s.call(tool, args)  # warm-up (and the page cache)
            times = []
            size = 0
            for _ in range(a.runs):
                ms, text = s.call(tool, args)
                times.append(ms)
                size = len(text.encode())
            rss = s.peak_rss_mib()
            s.close()
            print(
                "| %s | %s | %.0f (%.0f–%.0f) | %.1f MiB | %.0f MiB |"
                % (sname, cname, statistics.median(times), min(times), max(times), size / 2**20, rss)
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
