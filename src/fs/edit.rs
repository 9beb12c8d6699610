//! `edit_file`: the reference server's edit rules (exact text first, then
//! line by line ignoring surrounding whitespace, keeping the indentation)
//! and its git-style diff (jsdiff's `createTwoFilesPatch`: an `Index:`
//! header, 4 lines of context, hunks closer than 8 lines merged).

use similar::{ChangeTag, TextDiff};

use super::error::FsError;

/// One replacement.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Edit {
    /// Text to search for.
    #[serde(rename = "oldText")]
    pub old_text: String,
    /// Text to put in its place.
    #[serde(rename = "newText")]
    pub new_text: String,
}

fn normalize(s: &str) -> String {
    s.replace("\r\n", "\n")
}

fn indent_of(s: &str) -> &str {
    &s[..s.len() - s.trim_start().len()]
}

/// `content` with the edits applied in order, or the first edit whose
/// text is not found.
pub fn apply(content: &str, edits: &[Edit]) -> Result<String, FsError> {
    let mut modified = content.to_string();
    for edit in edits {
        let old = normalize(&edit.old_text);
        let new = normalize(&edit.new_text);
        if modified.contains(&old) {
            modified = modified.replacen(&old, &new, 1);
            continue;
        }
        let old_lines: Vec<&str> = old.split('\n').collect();
        let mut lines: Vec<String> = modified.split('\n').map(str::to_string).collect();
        let mut found = false;
        if lines.len() >= old_lines.len() {
            for i in 0..=(lines.len() - old_lines.len()) {
                let window = &lines[i..i + old_lines.len()];
                if !old_lines
                    .iter()
                    .zip(window)
                    .all(|(o, c)| o.trim() == c.trim())
                {
                    continue;
                }
                let first_indent = indent_of(&lines[i]).to_string();
                let replaced: Vec<String> = new
                    .split('\n')
                    .enumerate()
                    .map(|(j, line)| {
                        if j == 0 {
                            return format!("{first_indent}{}", line.trim_start());
                        }
                        let old_indent = old_lines.get(j).map(|l| indent_of(l)).unwrap_or("");
                        let new_indent = indent_of(line);
                        if !old_indent.is_empty() && !new_indent.is_empty() {
                            let extra = new_indent
                                .chars()
                                .count()
                                .saturating_sub(old_indent.chars().count());
                            format!("{first_indent}{}{}", " ".repeat(extra), line.trim_start())
                        } else {
                            line.to_string()
                        }
                    })
                    .collect();
                lines.splice(i..i + old_lines.len(), replaced);
                modified = lines.join("\n");
                found = true;
                break;
            }
        }
        if !found {
            return Err(FsError::NoMatch {
                old_text: edit.old_text.clone(),
            });
        }
    }
    Ok(modified)
}

/// The unified diff of `old` and `new` as jsdiff prints it for
/// `createTwoFilesPatch(path, path, old, new, "original", "modified")`.
pub fn unified_diff(old: &str, new: &str, path: &str) -> String {
    let mut out = format!(
        "Index: {path}\n{}\n--- {path}\toriginal\n+++ {path}\tmodified\n",
        "=".repeat(67)
    );
    let diff = TextDiff::from_lines(old, new);
    for group in diff.grouped_ops(4) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (os, oe) = (first.old_range().start, last.old_range().end);
        let (ns, ne) = (first.new_range().start, last.new_range().end);
        let start = |s: usize, len: usize| if len == 0 { s } else { s + 1 };
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            start(os, oe - os),
            oe - os,
            start(ns, ne - ns),
            ne - ns
        ));
        for op in &group {
            for change in diff.iter_changes(op) {
                let sign = match change.tag() {
                    ChangeTag::Equal => ' ',
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                };
                let value = change.value();
                out.push(sign);
                out.push_str(value.strip_suffix('\n').unwrap_or(value));
                out.push('\n');
                if !value.ends_with('\n') {
                    out.push_str("\\ No newline at end of file\n");
                }
            }
        }
    }
    out
}

/// Edit the text, and give the diff fenced as the reference server does
/// (more backticks than the diff holds in a row). Returns the new text
/// and the fenced diff.
pub fn edit(content: &str, edits: &[Edit], shown: &str) -> Result<(String, String), FsError> {
    let original = normalize(content);
    let modified = apply(&original, edits)?;
    let diff = unified_diff(&original, &modified, shown);
    let mut ticks = 3;
    while diff.contains(&"`".repeat(ticks)) {
        ticks += 1;
    }
    let fence = "`".repeat(ticks);
    Ok((modified, format!("{fence}diff\n{diff}{fence}\n\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected texts printed by jsdiff 8.0.4 (the reference server's diff).
    #[test]
    fn diff_as_jsdiff_prints_it() {
        let head = "Index: /p/f\n===================================================================\n--- /p/f\toriginal\n+++ /p/f\tmodified\n";
        assert_eq!(
            unified_diff(
                "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n",
                "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\nk\n",
                "/p/f"
            ),
            format!("{head}@@ -1,9 +1,9 @@\n a\n b\n c\n d\n-e\n+E\n f\n g\n h\n i\n")
        );
        assert_eq!(
            unified_diff("a\nb", "a\nc", "/p/f"),
            format!(
                "{head}@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
            )
        );
        assert_eq!(unified_diff("a\nb", "a\nb", "/p/f"), head);
        assert_eq!(
            unified_diff("", "x\n", "/p/f"),
            format!("{head}@@ -0,0 +1,1 @@\n+x\n")
        );
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new = old.replace("2\n3", "X\n3").replace("19\n", "Y\n");
        assert_eq!(
            unified_diff(&old, &new, "/p/f"),
            format!(
                "{head}@@ -1,6 +1,6 @@\n 1\n-2\n+X\n 3\n 4\n 5\n 6\n@@ -15,6 +15,6 @@\n 15\n 16\n 17\n 18\n-19\n+Y\n 20\n"
            )
        );
    }

    #[test]
    fn edits_exact_then_by_lines_keeping_indentation() {
        let e = |o: &str, n: &str| Edit {
            old_text: o.into(),
            new_text: n.into(),
        };
        assert_eq!(apply("a b a", &[e("a", "x")]).expect("exact"), "x b a");
        let text = "fn f() {\n    let x = 1;\n    let y = 2;\n}\n";
        let out = apply(
            text,
            &[e("let x = 1;\nlet y = 2;", "let x = 3;\nlet y = 4;")],
        )
        .expect("by lines");
        assert_eq!(out, "fn f() {\n    let x = 3;\nlet y = 4;\n}\n");
        assert!(matches!(
            apply(text, &[e("nothing", "x")]),
            Err(FsError::NoMatch { .. })
        ));
    }
}
