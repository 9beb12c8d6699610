"""A small FastMCP server for rootfence's end-to-end tests.

One tool, `add_note`: appends a line to the notes file at `path` (in the
root the host gave it) and returns the file's content.
"""

from pathlib import Path

from fastmcp import FastMCP

mcp = FastMCP("rootfence-notes")


@mcp.tool
def add_note(path: str, text: str) -> str:
    """Append `text` as a line to the file at `path`; return the file."""
    notes = Path(path)
    with notes.open("a") as f:
        f.write(text + "\n")
    return notes.read_text()


if __name__ == "__main__":
    mcp.run(show_banner=False)
