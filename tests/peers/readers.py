"""Read what a host received (a file of the bytes rootfence wrote to it) the
ways Python hosts read it, for rootfence's fail-closed tests:

- `json`: split on "\n" (the SDK's own split), UTF-8 strictly, `json.loads`;
- `universal`: `io.TextIOWrapper(newline=None)` (universal newlines:
  "\r", "\n" and "\r\n" end lines), then `json.loads`;
- `jiter`: pydantic's JSON reader (`pydantic_core.from_json`), which the
  SDK's parser uses;
- `sdk`: the SDK's own parser of a stdout line
  (`mcp.types.jsonrpc_message_adapter.validate_json`): "ok" or the error.

Usage: readers.py FILE. Prints one JSON object: for each reader the list
of the lines' normal forms (see `norm`), or an error for the line.
"""

import io
import json
import struct
import sys

import pydantic_core
from mcp import types


def norm(v):
    """One text per JSON value: every parser that reads the same value
    gives the same text (numbers as their double's bits, strings as their
    UTF-8, object members sorted)."""
    if v is None:
        return "n"
    if v is True:
        return "t"
    if v is False:
        return "f"
    if isinstance(v, (int, float)):
        x = float(v)
        if x == 0:
            x = 0.0
        return "d" + struct.pack(">d", x).hex()
    if isinstance(v, str):
        return "s" + v.encode("utf-8", "surrogatepass").hex()
    if isinstance(v, list):
        return "[" + ",".join(norm(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(sorted(norm(k) + ":" + norm(x) for k, x in v.items())) + "}"
    raise TypeError(type(v))


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def each(lines, read):
    out = []
    for line in lines:
        try:
            out.append(norm(read(line)))
        except Exception as e:  # noqa: BLE001 - reported, compared
            out.append("error: %s" % e)
    return out


def main(path):
    data = open(path, "rb").read()
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    split = []
    for line in raw:
        try:
            split.append(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            split.append("undecodable: %s" % e)
    universal = [l.rstrip("\n") for l in io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape", newline=None)]

    def sdk(line):
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return "ok"

    sdk_results = []
    for line in split:
        try:
            sdk_results.append(sdk(line))
        except Exception as e:  # noqa: BLE001
            sdk_results.append("error: %s" % str(e).splitlines()[0])
    print(
        json.dumps(
            {
                "json": each(split, lambda l: json.loads(l, object_pairs_hook=no_duplicates)),
                "universal": each(universal, lambda l: json.loads(l, object_pairs_hook=no_duplicates)),
                "jiter": each(split, lambda l: pydantic_core.from_json(l)),
                "sdk": sdk_results,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
