"""A real MCP host for rootfence's end-to-end tests: the Python SDK's
ClientSession, launching `rootfence run ... -- <server>` over stdio.

Usage: host.py SCENARIO.json
The scenario is a JSON object:
  {"command": [...], "roots": [[uri, name], ...] | null,
   "mode": "auto" | "legacy" (optional: the SDK's high-level `Client` in that
           connect mode; "auto" probes `server/discover` and speaks 2026-07-28
           when the server accepts it, and both drive `input_required`
           results through the callbacks; without "mode", a bare
           `ClientSession` with the `initialize` handshake),
   "sampling": {"text": reply, "model": name} (optional),
   "elicitation": {"action": "accept"|"decline"|"cancel", "content": {...}} (optional),
   "steps": [{"call": tool, "args": {...}} | {"roots": [[uri, name], ...]}
             | {"wait_for": tool, "args": {...}, "contains": text, "timeout": s}
             | {"list_tools": true}]}
Prints one JSON object per step on stdout (a call answered with a JSON-RPC
error has its `code`), and a final summary line (with the negotiated
`protocol`, and `logs`: the `notifications/message` the host received, as
{"level", "logger", "data"}, what hosts show in their MCP log view).
`roots: null` means the host declares no roots capability. With
"sampling" / "elicitation" the host declares that capability and answers
with the given reply; the summary counts the callback's calls
(`sampling_calls`, `elicitation_calls`) and lists what each request asked
(`sampling_requests`: maxTokens; `elicitation_requests`: mode and fields).
"""

import json
import sys
import time

import anyio
from mcp import Client, ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client


def text_of(result):
    parts = []
    for c in result.content:
        parts.append(getattr(c, "text", ""))
    return "\n".join(parts)


async def run_steps(session, steps, state, out, counts):
    """Run the scenario's steps on a ClientSession or a Client."""
    for step in steps:
        if "roots" in step:
            state["roots"] = step["roots"]
            await session.send_roots_list_changed()
            out.append({"roots_changed": True})
        elif "list_tools" in step:
            counts["sent"] += 1
            tools = await session.list_tools()
            counts["answered"] += 1
            out.append({"tools": [t.name for t in tools.tools]})
        elif "call" in step:
            counts["sent"] += 1
            try:
                r = await session.call_tool(step["call"], step.get("args", {}))
                counts["answered"] += 1
                out.append({"call": step["call"], "error": bool(r.is_error), "text": text_of(r)})
            except Exception as e:  # a JSON-RPC error response
                counts["answered"] += 1
                out.append({"call": step["call"], "error": True, "text": "rpc error: %s" % e, "code": getattr(e, "code", None)})
        elif "wait_for" in step:
            deadline = time.monotonic() + step.get("timeout", 20)
            while True:
                counts["sent"] += 1
                r = await session.call_tool(step["wait_for"], step.get("args", {}))
                counts["answered"] += 1
                t = text_of(r)
                if step["contains"] in t or time.monotonic() > deadline:
                    out.append({"wait_for": step["wait_for"], "found": step["contains"] in t, "text": t})
                    break
                await anyio.sleep(0.1)


async def main(path):
    with open(path) as f:
        scenario = json.load(f)
    cmd = scenario["command"]
    state = {
        "roots": scenario.get("roots"),
        "roots_calls": 0,
        "sampling_calls": 0,
        "elicitation_calls": 0,
        "sampling_requests": [],
        "elicitation_requests": [],
        "logs": [],
    }
    sampling = scenario.get("sampling")
    elicitation = scenario.get("elicitation")

    async def sample(context, params):
        state["sampling_calls"] += 1
        state["sampling_requests"].append({"maxTokens": params.max_tokens})
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=sampling.get("text", "sampled")),
            model=sampling.get("model", "host-test-model"),
            stop_reason="endTurn",
        )

    async def elicit(context, params):
        state["elicitation_calls"] += 1
        schema = getattr(params, "requested_schema", None) or {}
        fields = sorted((schema.get("properties") or {}).keys()) if isinstance(schema, dict) else []
        state["elicitation_requests"].append({"mode": getattr(params, "mode", None) or "form", "fields": fields})
        return types.ElicitResult(action=elicitation.get("action", "accept"), content=elicitation.get("content"))

    async def list_roots(context):
        state["roots_calls"] += 1
        return types.ListRootsResult(
            roots=[types.Root(uri=u, name=n) for u, n in state["roots"]]
        )

    async def log(params):
        state["logs"].append({"level": str(params.level), "logger": params.logger, "data": params.data})

    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=scenario.get("env"))
    out = []
    counts = {"sent": 0, "answered": 0}
    kwargs = {"logging_callback": log}
    if state["roots"] is not None:
        kwargs["list_roots_callback"] = list_roots
    if sampling is not None:
        kwargs["sampling_callback"] = sample
    if elicitation is not None:
        kwargs["elicitation_callback"] = elicit
    mode = scenario.get("mode")
    if mode is None:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **kwargs) as session:
                init = await session.initialize()
                state["protocol"] = init.protocol_version
                out.append({"initialized": True, "server": init.server_info.name})
                await run_steps(session, scenario["steps"], state, out, counts)
    else:
        async with Client(params, mode=mode, **kwargs) as client:
            state["protocol"] = client.protocol_version
            info = client.server_info
            out.append({"initialized": True, "server": info.name if info else None, "protocol": client.protocol_version})
            await run_steps(client, scenario["steps"], state, out, counts)
    sent, answered = counts["sent"], counts["answered"]
    for o in out:
        print(json.dumps(o))
    print(
        json.dumps(
            {
                "summary": True,
                "sent": sent,
                "answered": answered,
                "roots_calls": state["roots_calls"],
                "sampling_calls": state["sampling_calls"],
                "elicitation_calls": state["elicitation_calls"],
                "sampling_requests": state["sampling_requests"],
                "elicitation_requests": state["elicitation_requests"],
                "protocol": state.get("protocol"),
                "logs": state["logs"],
            }
        )
    )


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
