"""The differential reading of what rootfence emits: FILE holds lines the
relay emitted (the envelope fuzz target writes them with
ROOTFENCE_FUZZ_EMIT=FILE, and serde_json's normal form of each to
FILE.serde); each line is read by Python's json, Python's universal
newlines, pydantic's reader (tests/peers/readers.py), JSON.parse and
node's readline (tests/peers/readers.js), and every reading must be
serde_json's.

Usage (with the test peers' Python, which has pydantic):
    tests/peers/.venv/bin/python scripts/differential.py [--messages] FILE
With --messages, each line must also be a JSON-RPC message the MCP SDK's
own parser accepts (what a host receives).
"""

import json
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(path, messages):
    with open(path + ".serde") as f:
        want = f.read().splitlines()
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")[:-1]
    py = json.loads(subprocess.check_output([sys.executable, os.path.join(root, "tests/peers/readers.py"), path]))
    js = json.loads(subprocess.check_output(["node", os.path.join(root, "tests/peers/readers.js"), path]))
    readers = {
        "Python json": py["json"],
        "Python universal newlines": py["universal"],
        "pydantic (the SDK's reader)": py["jiter"],
        "JSON.parse": js["parse"],
        "node readline": js["readline"],
    }
    bad = 0
    for name, got in readers.items():
        if len(got) != len(want):
            print("%s reads %d lines where serde reads %d" % (name, len(got), len(want)))
            bad += 1
            continue
        for i, (a, b) in enumerate(zip(got, want)):
            if a != b:
                print("%s reads line %d otherwise: %r\n  %s: %s\n  serde: %s" % (name, i, lines[i][:300], name, a[:300], b[:300]))
                bad += 1
                break
    if messages:
        for i, r in enumerate(py["sdk"]):
            if r != "ok":
                print("the SDK's parser refuses line %d: %r (%s)" % (i, lines[i][:300], r))
                bad += 1
                break
    if bad:
        sys.exit(1)
    print("differential: %d emitted lines, each read the same by serde_json and %d other readers" % (len(want), len(readers)))


if __name__ == "__main__":
    args = sys.argv[1:]
    messages = "--messages" in args
    main([a for a in args if a != "--messages"][0], messages)
