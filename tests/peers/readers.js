// Read what a host received (a file of the bytes rootfence wrote to it) the
// ways node hosts read it, for rootfence's fail-closed tests:
// - "parse": split on "\n", UTF-8, JSON.parse;
// - "readline": node's readline (which also ends lines at "\r"), then
//   JSON.parse.
// Usage: node readers.js FILE. Prints one JSON object: for each reader the
// list of the lines' normal forms (as readers.py's `norm`), or an error.
"use strict";
const fs = require("fs");
const readline = require("readline");

function norm(v) {
  if (v === null) return "n";
  if (v === true) return "t";
  if (v === false) return "f";
  if (typeof v === "number") {
    const b = Buffer.alloc(8);
    b.writeDoubleBE(v === 0 ? 0 : v);
    return "d" + b.toString("hex");
  }
  if (typeof v === "string") return "s" + Buffer.from(v, "utf8").toString("hex");
  if (Array.isArray(v)) return "[" + v.map(norm).join(",") + "]";
  return "{" + Object.keys(v).map((k) => norm(k) + ":" + norm(v[k])).sort().join(",") + "}";
}

function each(lines) {
  return lines.map((l) => {
    try {
      return norm(JSON.parse(l));
    } catch (e) {
      return "error: " + e.message;
    }
  });
}

async function main(path) {
  const data = fs.readFileSync(path);
  const text = new TextDecoder("utf-8", { fatal: false }).decode(data);
  const split = text.split("\n");
  if (split.length && split[split.length - 1] === "") split.pop();
  const rl = readline.createInterface({ input: fs.createReadStream(path), crlfDelay: Infinity });
  const lines = [];
  for await (const l of rl) lines.push(l);
  process.stdout.write(JSON.stringify({ parse: each(split), readline: each(lines) }) + "\n");
}

main(process.argv[2]);
