//! Branch marks: while a node records coverage it compiles each script with a mark before
//! every statement that starts a branch ([`crate::model::branches`]), and after each run
//! moves the marks the run set into its coverage.
//!
//! Marks, not a Lua line hook: a hook calls into Rust on every line a script runs, and
//! measured on `explore --seeds 300` it cost half again the wall time (65 s against 38 s);
//! a mark is one table store per branch taken, inside the Lua VM.
//!
//! Invariant: a marked script behaves as its source. Each mark, `MARKS[line]=true;`, sits
//! on the line of the statement it precedes, so every line number (in errors too) stays
//! the same; it writes only the marks table, a global no lock script names; and the script
//! keeps its source's SHA, as the cache is keyed by the source.

use mlua::{Table, Value};

use crate::model::branches;
use crate::model::coverage::LineSet;

/// The global table the marks are set in (`MARKS[line] = true`).
pub const MARKS: &str = "__leasehold_branch_marks";

/// `source` with a mark before each branch, or `None` if it cannot be read as Lua blocks
/// (then it runs unmarked, and compiles or fails to as its source does).
pub fn marked(source: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(source).ok()?;
    let found = branches::branches(text).ok()?;
    let mut out = String::with_capacity(text.len() + found.len() * (MARKS.len() + 12));
    let mut from = 0;
    for branch in found {
        out.push_str(&text[from..branch.at]);
        out.push_str(&format!("{MARKS}[{}]=true; ", branch.line));
        from = branch.at;
    }
    out.push_str(&text[from..]);
    Some(out)
}

/// Adds the lines marked in `marks` to `into` and clears the table for the next run.
pub fn take(marks: &Table, into: &mut LineSet) -> mlua::Result<()> {
    for pair in marks.pairs::<Value, Value>() {
        if let (Value::Integer(line), _) = pair? {
            into.extend(u32::try_from(line).ok());
        }
    }
    marks.clear()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use mlua::Lua;

    use super::*;

    #[test]
    fn a_mark_precedes_each_branch_on_its_own_line() {
        let source = "local x = ARGV\nif x then\n  return 1\nend\nreturn 2\n";
        let text = marked(source.as_bytes()).unwrap();
        assert_eq!(
            text,
            format!(
                "local x = ARGV\nif x then\n  {MARKS}[3]=true; return 1\nend\n{MARKS}[5]=true; return 2\n"
            )
        );
        assert_eq!(text.lines().count(), source.lines().count());
        assert_eq!(marked(b"if x then"), None, "unbalanced: runs unmarked");
    }

    #[test]
    fn a_run_sets_the_marks_of_the_branches_it_took_and_take_clears_them() {
        let lua = Lua::new();
        let marks = lua.create_table().unwrap();
        lua.globals().set(MARKS, &marks).unwrap();
        let source = "local x = ...\nif x > 1 then\n  x = 2\nelseif x > 0 then\n  x = 3\nelse\n  return 0\nend\nreturn x\n";
        let function = lua
            .load(marked(source.as_bytes()).unwrap())
            .into_function()
            .unwrap();
        let ran = |arg: i64| {
            let value: i64 = function.call(arg).unwrap();
            let mut lines = LineSet::default();
            take(&marks, &mut lines).unwrap();
            (
                value,
                (0..12).filter(|l| lines.contains(*l)).collect::<Vec<_>>(),
            )
        };
        assert_eq!(ran(5), (2, vec![3, 9]));
        assert_eq!(ran(1), (3, vec![5, 9]));
        assert_eq!(ran(0), (0, vec![7]));
    }
}
