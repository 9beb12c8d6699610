//! The tool table: the names, argument schemas and result shapes of
//! `@modelcontextprotocol/server-filesystem` (`tools.json` is its
//! `tools/list` answer), and the dispatch of a `tools/call` to the
//! operation that serves it.

use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::edit::{self, Edit};
use super::error::{BadArgument, FsError, ToolError};
use super::paths::{Roots, Target};
use super::walk::Limits;
use super::{list, read, walk, write};

/// The `tools/list` tools, exactly as the reference server lists them.
pub fn tools() -> &'static Value {
    static TOOLS: OnceLock<Value> = OnceLock::new();
    TOOLS.get_or_init(|| {
        // The file is part of the build and checked by a unit test; a
        // parse failure cannot happen at run time.
        serde_json::from_str(include_str!("tools.json")).unwrap_or(Value::Array(Vec::new()))
    })
}

/// What a call is served with.
pub struct Context<'a> {
    /// The roots of this call.
    pub roots: &'a Roots,
    /// The home directory, for `~` in paths.
    pub home: Option<&'a Path>,
    /// Limits of the tree walks.
    pub limits: Limits,
}

/// A successful tool result: text, or one media content block.
enum Output {
    Text(String),
    Media(Value),
}

#[derive(Deserialize)]
struct PathArg {
    path: String,
}

#[derive(Deserialize)]
struct ReadTextArgs {
    path: String,
    tail: Option<f64>,
    head: Option<f64>,
}

#[derive(Deserialize)]
struct ReadManyArgs {
    paths: Vec<String>,
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    edits: Vec<Edit>,
    #[serde(default, rename = "dryRun")]
    dry_run: bool,
}

#[derive(Deserialize)]
struct SizesArgs {
    path: String,
    #[serde(default, rename = "sortBy")]
    sort_by: Option<SortBy>,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum SortBy {
    Name,
    Size,
}

#[derive(Deserialize)]
struct TreeArgs {
    path: String,
    #[serde(default, rename = "excludePatterns")]
    exclude: Vec<String>,
}

#[derive(Deserialize)]
struct MoveArgs {
    source: String,
    destination: String,
}

#[derive(Deserialize)]
struct SearchArgs {
    path: String,
    pattern: String,
    #[serde(default, rename = "excludePatterns")]
    exclude: Vec<String>,
}

/// A `tools/call` that cannot be served as asked.
fn invalid(tool: &str, why: BadArgument) -> ToolError {
    ToolError::Arguments {
        tool: tool.to_string(),
        why,
    }
}

fn args<T: DeserializeOwned>(tool: &str, v: &Value) -> Result<T, ToolError> {
    T::deserialize(v).map_err(|e| invalid(tool, BadArgument::Shape(e)))
}

/// A line count as the reference reads `head`/`tail`: absent or 0 means
/// none; a fraction counts as the next whole line for `head` and is cut
/// for `tail`.
fn lines(
    tool: &str,
    name: &'static str,
    v: Option<f64>,
    round_up: bool,
) -> Result<Option<usize>, ToolError> {
    match v {
        None => Ok(None),
        Some(0.0) => Ok(None),
        Some(n) if n.is_finite() && n > 0.0 => Ok(Some(if round_up {
            n.ceil()
        } else {
            n.trunc().max(1.0)
        } as usize)),
        Some(value) => Err(invalid(tool, BadArgument::NotPositive { name, value })),
    }
}

/// Serve one `tools/call`: the `CallToolResult` value (an error result
/// for a refusal, a failure or bad arguments).
pub fn call(cx: &Context, name: &str, arguments: &Value) -> Value {
    let empty = json!({});
    let arguments = if arguments.is_null() {
        &empty
    } else {
        arguments
    };
    match dispatch(cx, name, arguments) {
        Ok(Output::Text(text)) => json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"content": text},
        }),
        Ok(Output::Media(item)) => json!({
            "content": [item.clone()],
            "structuredContent": {"content": [item]},
        }),
        Err(e) => json!({
            "content": [{"type": "text", "text": e.to_string()}],
            "isError": true,
        }),
    }
}

fn dispatch(cx: &Context, name: &str, a: &Value) -> Result<Output, ToolError> {
    match name {
        "read_file" | "read_text_file" | "read_media_file" | "read_multiple_files" => {
            read_tool(cx, name, a)
        }
        "write_file" | "edit_file" | "create_directory" | "move_file" => write_tool(cx, name, a),
        _ => listing_tool(cx, name, a),
    }
}

/// The tool's path as a target beneath its root.
fn target<'a>(cx: &Context<'a>, p: &str) -> Result<Target<'a>, ToolError> {
    Ok(cx.roots.map(p, cx.home)?)
}

/// A filesystem operation's text as the tool's output.
fn text(r: Result<String, FsError>) -> Result<Output, ToolError> {
    Ok(Output::Text(r?))
}

/// The tools that read files.
fn read_tool(cx: &Context, name: &str, a: &Value) -> Result<Output, ToolError> {
    match name {
        "read_media_file" => {
            let a: PathArg = args(name, a)?;
            Ok(Output::Media(read::media(&target(cx, &a.path)?)?))
        }
        "read_multiple_files" => {
            let a: ReadManyArgs = args(name, a)?;
            if a.paths.is_empty() {
                return Err(invalid(name, BadArgument::NoPaths));
            }
            let parts: Vec<String> = a
                .paths
                .iter()
                .map(|p| {
                    let r = cx.roots.map(p, cx.home).and_then(|t| read::whole(&t));
                    read::one_of_many(p, r)
                })
                .collect();
            Ok(Output::Text(parts.join("\n---\n")))
        }
        _ => {
            let a: ReadTextArgs = args(name, a)?;
            let head = lines(name, "head", a.head, true)?;
            let tail = lines(name, "tail", a.tail, false)?;
            let t = target(cx, &a.path)?;
            text(match (head, tail) {
                (Some(_), Some(_)) => Err(FsError::HeadAndTail),
                (_, Some(n)) => read::tail(&t, n),
                (Some(n), _) => read::head(&t, n),
                (None, None) => read::whole(&t),
            })
        }
    }
}

/// The tools that write.
fn write_tool(cx: &Context, name: &str, a: &Value) -> Result<Output, ToolError> {
    match name {
        "write_file" => {
            let a: WriteArgs = args(name, a)?;
            let t = target(cx, &a.path)?;
            text(
                write::replace(&t, a.content.as_bytes())
                    .map(|()| format!("Successfully wrote to {}", a.path)),
            )
        }
        "edit_file" => {
            let a: EditArgs = args(name, a)?;
            let t = target(cx, &a.path)?;
            text((|| {
                if !a.dry_run {
                    t.writable()?;
                }
                let content = read::whole(&t)?;
                let (modified, diff) =
                    edit::edit(&content, &a.edits, &t.shown().to_string_lossy())?;
                if !a.dry_run {
                    write::replace(&t, modified.as_bytes())?;
                }
                Ok(diff)
            })())
        }
        "create_directory" => {
            let a: PathArg = args(name, a)?;
            let t = target(cx, &a.path)?;
            text(
                write::create_dir(&t)
                    .map(|()| format!("Successfully created directory {}", a.path)),
            )
        }
        _ => {
            let a: MoveArgs = args(name, a)?;
            let from = target(cx, &a.source)?;
            let to = target(cx, &a.destination)?;
            text(
                write::move_entry(&from, &to)
                    .map(|()| format!("Successfully moved {} to {}", a.source, a.destination)),
            )
        }
    }
}

/// The tools that list, search and describe.
fn listing_tool(cx: &Context, name: &str, a: &Value) -> Result<Output, ToolError> {
    match name {
        "list_directory" => {
            let a: PathArg = args(name, a)?;
            text(list::list(&target(cx, &a.path)?))
        }
        "list_directory_with_sizes" => {
            let a: SizesArgs = args(name, a)?;
            let by_size = a.sort_by == Some(SortBy::Size);
            text(list::list_with_sizes(&target(cx, &a.path)?, by_size))
        }
        "directory_tree" => {
            let a: TreeArgs = args(name, a)?;
            text(walk::tree(&target(cx, &a.path)?, &a.exclude, cx.limits))
        }
        "search_files" => {
            let a: SearchArgs = args(name, a)?;
            text(walk::search(
                &target(cx, &a.path)?,
                &a.pattern,
                &a.exclude,
                cx.limits,
            ))
        }
        "get_file_info" => {
            let a: PathArg = args(name, a)?;
            text(list::info(&target(cx, &a.path)?))
        }
        "list_allowed_directories" => {
            let dirs: Vec<String> = cx
                .roots
                .list
                .iter()
                .map(|r| {
                    let p = r.path.display().to_string();
                    if r.read_only {
                        format!("{p} (read-only)")
                    } else {
                        p
                    }
                })
                .collect();
            Ok(Output::Text(format!(
                "Allowed directories:\n{}",
                dirs.join("\n")
            )))
        }
        other => Err(ToolError::UnknownTool(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error result's text of `name` called with `arguments` and no
    /// roots.
    fn refusal(name: &str, arguments: Value) -> String {
        let roots = Roots { list: Vec::new() };
        let cx = Context {
            roots: &roots,
            home: None,
            limits: Limits::default(),
        };
        let r = call(&cx, name, &arguments);
        assert_eq!(r["isError"], true, "{r}");
        r["content"][0]["text"]
            .as_str()
            .expect("a text")
            .to_string()
    }

    #[test]
    fn refusals_read_as_the_reference_servers() {
        assert_eq!(
            refusal("read_text_file", json!({"path": "a", "head": -1})),
            "MCP error -32602: Input validation error: Invalid arguments for tool read_text_file: head must be a positive number (got -1)"
        );
        assert_eq!(
            refusal("read_multiple_files", json!({"paths": []})),
            "MCP error -32602: Input validation error: Invalid arguments for tool read_multiple_files: At least one file path must be provided"
        );
        assert!(
            refusal("write_file", json!({"path": "a"})).starts_with(
                "MCP error -32602: Input validation error: Invalid arguments for tool write_file: missing field `content`"
            )
        );
        assert_eq!(
            refusal("no_such_tool", json!({})),
            "MCP error -32602: Tool no_such_tool not found"
        );
        assert_eq!(
            refusal("list_directory", json!({"path": "/a"})),
            FsError::NoRoots.to_string()
        );
    }

    #[test]
    fn the_table_lists_every_tool_with_a_schema() {
        let names: Vec<&str> = tools()
            .as_array()
            .expect("an array")
            .iter()
            .map(|t| {
                assert!(t["inputSchema"].is_object(), "{t}");
                t["name"].as_str().expect("a name")
            })
            .collect();
        assert_eq!(
            names,
            [
                "read_file",
                "read_text_file",
                "read_media_file",
                "read_multiple_files",
                "write_file",
                "edit_file",
                "create_directory",
                "list_directory",
                "list_directory_with_sizes",
                "directory_tree",
                "move_file",
                "search_files",
                "get_file_info",
                "list_allowed_directories",
            ]
        );
    }
}
