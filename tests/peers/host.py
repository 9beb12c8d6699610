"""A real MCP host for rootfence's end-to-end tests: the Python SDK's
ClientSession, launching `rootfence run ... -- <server>` over stdio.

Usage: host.py SCENARIO.json
The scenario is a JSON object:
  {"command": [...], "roots": [[uri, name], ...] | null,
   "steps": [{"call": tool, "args": {...}} | {"roots": [[uri, name], ...]}
             | {"wait_for": tool, "args": {...}, "contains": text, "timeout": s}
             | {"list_tools": true}]}
Prints one JSON object per step on stdout, and a final summary line.
`roots: null` means the host declares no roots capability.
"""

import json
import sys
import time

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client


def text_of(result):
    parts = []
    for c in result.content:
        parts.append(getattr(c, "text", ""))
    return "\n".join(parts)


async def main(path):
    with open(path) as f:
        scenario = json.load(f)
    cmd = scenario["command"]
    state = {"roots": scenario.get("roots"), "roots_calls": 0}

    async def list_roots(context):
        state["roots_calls"] += 1
        return types.ListRootsResult(
            roots=[types.Root(uri=u, name=n) for u, n in state["roots"]]
        )

    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=scenario.get("env"))
    out = []
    sent = 0
    answered = 0
    async with stdio_client(params) as (read, write):
        kwargs = {}
        if state["roots"] is not None:
            kwargs["list_roots_callback"] = list_roots
        async with ClientSession(read, write, **kwargs) as session:
            init = await session.initialize()
            out.append({"initialized": True, "server": init.server_info.name})
            for step in scenario["steps"]:
                if "roots" in step:
                    state["roots"] = step["roots"]
                    await session.send_roots_list_changed()
                    out.append({"roots_changed": True})
                elif "list_tools" in step:
                    sent += 1
                    tools = await session.list_tools()
                    answered += 1
                    out.append({"tools": [t.name for t in tools.tools]})
                elif "call" in step:
                    sent += 1
                    try:
                        r = await session.call_tool(step["call"], step.get("args", {}))
                        answered += 1
                        out.append({"call": step["call"], "error": bool(r.is_error), "text": text_of(r)})
                    except Exception as e:  # a JSON-RPC error response
                        answered += 1
                        out.append({"call": step["call"], "error": True, "text": "rpc error: %s" % e})
                elif "wait_for" in step:
                    deadline = time.monotonic() + step.get("timeout", 20)
                    while True:
                        sent += 1
                        r = await session.call_tool(step["wait_for"], step.get("args", {}))
                        answered += 1
                        t = text_of(r)
                        if step["contains"] in t or time.monotonic() > deadline:
                            out.append({"wait_for": step["wait_for"], "found": step["contains"] in t, "text": t})
                            break
                        await anyio.sleep(0.1)
    for o in out:
        print(json.dumps(o))
    print(json.dumps({"summary": True, "sent": sent, "answered": answered, "roots_calls": state["roots_calls"]}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
