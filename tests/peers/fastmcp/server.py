"""A small FastMCP server for rootfence's end-to-end tests.

One tool, `add_note`: asks the host for its roots (through rootfence, which
answers with the roots it enforces), appends a line to notes.txt in the
first one and returns the file's content.
"""

from pathlib import Path
from urllib.parse import unquote, urlparse

from fastmcp import Context, FastMCP

mcp = FastMCP("rootfence-notes")


@mcp.tool
async def add_note(text: str, ctx: Context) -> str:
    """Append `text` to notes.txt in the first root; return the file."""
    roots = await ctx.list_roots()
    if not roots:
        raise ValueError("the host announced no roots")
    root = Path(unquote(urlparse(str(roots[0].uri)).path))
    notes = root / "notes.txt"
    with notes.open("a") as f:
        f.write(text + "\n")
    return notes.read_text()


if __name__ == "__main__":
    mcp.run()
