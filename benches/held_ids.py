"""Memory a server can make rootfence hold with the ids of its requests to
the host: the server sends 200 `ping` requests with 512 KiB string ids
while the host never answers; after 4 s, rootfence's peak and current
resident memory (VmHWM, VmRSS) and how many of the requests reached the
host.

Usage: python3 benches/held_ids.py [ROOTFENCE_BINARY]   (default:
target/release/rootfence; run `cargo build --release` first). The server
side is this script itself (`--server`).
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def server():
    def send(m):
        sys.stdout.write(json.dumps(m) + "\n")
        sys.stdout.flush()

    req = json.loads(sys.stdin.readline())
    send({"jsonrpc": "2.0", "id": req["id"], "result": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "held-ids", "version": "1"}}})
    sys.stdin.readline()  # notifications/initialized
    big = "i" * (512 * 1024)
    for n in range(200):
        send({"jsonrpc": "2.0", "id": big + str(n), "method": "ping"})
    while sys.stdin.readline():
        pass


def host(binary):
    root = tempfile.mkdtemp()
    p = subprocess.Popen(
        [binary, "run", "--root", root, "--", sys.executable, os.path.abspath(__file__), "--server"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}})
    p.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    got = [0]

    def reader():
        for _ in p.stdout:
            got[0] += 1

    threading.Thread(target=reader, daemon=True).start()
    time.sleep(4)
    status = open("/proc/%d/status" % p.pid).read().splitlines()
    mem = " ".join(" ".join(l.split()) for l in status if l.startswith(("VmHWM", "VmRSS")))
    print("%s: %d of 200 requests reached the host; %s" % (binary, got[0], mem))
    p.stdin.close()
    p.kill()
    p.wait()


if __name__ == "__main__":
    if "--server" in sys.argv:
        server()
    else:
        host(sys.argv[1] if len(sys.argv) > 1 else "target/release/rootfence")
