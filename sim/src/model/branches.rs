//! The branches of a lock script, read off its Lua source: every `if`/`elseif`/`else` arm
//! and every `return` statement, each identified by the line it starts on.
//!
//! Call sites alone hide branches: an arm or an early `return` that calls nothing is never
//! counted. A branch here is identified by the line of the arm's first statement (or of
//! the `return`), and located by that statement's byte offset, where a recording node
//! marks it ([`crate::model::branch_marks`]).
//!
//! Invariant: one branch per line; where two statements that start branches share a line
//! (`if c then return 1 else return 2 end`), the line's mark shows only that the first
//! started, and the branch says so ([`Branch::shares_line`]).

/// What kind of branch starts on a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BranchKind {
    /// The arm after `if … then`.
    If,
    /// The arm after `elseif … then`.
    ElseIf,
    /// The arm after `else`.
    Else,
    /// A `return` statement.
    Return,
}

impl BranchKind {
    /// How the report names the kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::If => "if",
            Self::ElseIf => "elseif",
            Self::Else => "else",
            Self::Return => "return",
        }
    }
}

/// One branch of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    /// 1-based line of the arm's first statement or of the `return`.
    pub line: u32,
    /// What starts there: an arm whose first statement is a `return` is both.
    pub kinds: Vec<BranchKind>,
    /// Byte offset in the source of the first statement on the line that starts a branch.
    pub at: usize,
    /// Whether a second statement starting a branch sits on the same line, so the line's
    /// mark does not show that one ran.
    pub shares_line: bool,
}

/// Why a source could not be read as Lua blocks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StructureError {
    /// A block closed (`end`, `until`) that was never opened, or by the wrong keyword.
    #[error("line {line}: `{word}` closes no open block")]
    Unopened { line: u32, word: &'static str },
    /// Blocks still open at the end of the source.
    #[error("{open} block(s) still open at the end, the last opened on line {line}")]
    Unclosed { open: usize, line: u32 },
    /// A string or long comment that never ends.
    #[error("line {line}: unterminated string or comment")]
    Unterminated { line: u32 },
}

/// A word (name, keyword or number) or any other symbol, with its line and byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Token<'a> {
    text: &'a str,
    line: u32,
    at: usize,
}

/// The tokens of `source` that matter for its structure: words and symbols, with comments
/// (`--`, `--[[ ]]`, `--[==[ ]==]`) and strings (`'…'`, `"…"`, `[[…]]`) dropped (a string
/// still counts as code on its line).
fn tokens(source: &str) -> Result<Vec<Token<'_>>, StructureError> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1u32);
    while i < bytes.len() {
        let b = bytes[i];
        let start = i;
        match b {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b if b.is_ascii_whitespace() => i += 1,
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i += 2;
                if let Some(level) = long_bracket(bytes, i) {
                    i = long_end(bytes, i, level, &mut line)?;
                } else {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                }
            }
            b'\'' | b'"' => {
                let at = line;
                i = quoted_end(bytes, i, &mut line)?;
                out.push(Token {
                    text: "\"",
                    line: at,
                    at: start,
                });
            }
            b'[' if long_bracket(bytes, i).is_some() => {
                let level = long_bracket(bytes, i).unwrap_or_default();
                let at = line;
                i = long_end(bytes, i, level, &mut line)?;
                out.push(Token {
                    text: "\"",
                    line: at,
                    at: start,
                });
            }
            b if b.is_ascii_alphanumeric() || b == b'_' => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                out.push(Token {
                    text: &source[start..i],
                    line,
                    at: start,
                });
            }
            _ => {
                // One byte per symbol is enough: only words carry structure. Step over a
                // whole UTF-8 character so slicing stays on boundaries.
                i += source[i..].chars().next().map_or(1, char::len_utf8);
                out.push(Token {
                    text: &source[start..i],
                    line,
                    at: start,
                });
            }
        }
    }
    Ok(out)
}

/// The level of a long bracket `[==[` opening at `i` (the number of `=`), if one does.
fn long_bracket(bytes: &[u8], i: usize) -> Option<usize> {
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    let level = bytes[i + 1..].iter().take_while(|b| **b == b'=').count();
    (bytes.get(i + 1 + level) == Some(&b'[')).then_some(level)
}

/// The index just past the long bracket of `level` opened at `i`, counting its newlines.
fn long_end(bytes: &[u8], i: usize, level: usize, line: &mut u32) -> Result<usize, StructureError> {
    let at = *line;
    let close: Vec<u8> = [b"]".as_slice(), &vec![b'='; level], b"]"].concat();
    let mut j = i + level + 2;
    while j < bytes.len() {
        if bytes[j..].starts_with(&close) {
            return Ok(j + close.len());
        }
        if bytes[j] == b'\n' {
            *line += 1;
        }
        j += 1;
    }
    Err(StructureError::Unterminated { line: at })
}

/// The index just past the quoted string opened at `i`, skipping escapes (`\` before a
/// newline continues the string onto the next line).
fn quoted_end(bytes: &[u8], i: usize, line: &mut u32) -> Result<usize, StructureError> {
    let quote = bytes[i];
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => {
                if bytes.get(j + 1) == Some(&b'\n') {
                    *line += 1;
                }
                j += 2;
            }
            b'\n' => break,
            b if b == quote => return Ok(j + 1),
            _ => j += 1,
        }
    }
    Err(StructureError::Unterminated { line: *line })
}

/// A block opened and not yet closed: the keyword that opened it and its line.
type Open = (&'static str, u32);

/// Every branch of `source`, in line order, one per line.
///
/// Blocks are tracked as Lua nests them: `function`, `if`, `do` (also the `do` of `for`
/// and `while`) and `repeat` open one; `end` closes all but `repeat`, which `until`
/// closes. An arm's first statement is the token after `then` or `else`; an arm that
/// holds nothing (`else end`) has no line to run and is no branch.
pub fn branches(source: &str) -> Result<Vec<Branch>, StructureError> {
    let tokens = tokens(source)?;
    let mut open: Vec<Open> = Vec::new();
    let mut found: Vec<Branch> = Vec::new();
    let mut add = |token: &Token<'_>, kind: BranchKind| match found.last_mut() {
        Some(last) if last.line == token.line => {
            last.kinds.push(kind);
            last.shares_line |= last.at != token.at;
        }
        _ => found.push(Branch {
            line: token.line,
            kinds: vec![kind],
            at: token.at,
            shares_line: false,
        }),
    };
    // The kind of arm the next token starts, if it starts one.
    let mut arm: Option<BranchKind> = None;
    // Whether the `then` about to come belongs to an `elseif`.
    let mut in_elseif = false;
    for token in &tokens {
        if let Some(kind) = arm.take()
            && !matches!(token.text, "end" | "else" | "elseif")
        {
            add(token, kind);
        }
        match token.text {
            "function" => open.push(("function", token.line)),
            "if" => open.push(("if", token.line)),
            "do" => open.push(("do", token.line)),
            "repeat" => open.push(("repeat", token.line)),
            "elseif" => in_elseif = true,
            "then" => {
                arm = Some(if in_elseif {
                    BranchKind::ElseIf
                } else {
                    BranchKind::If
                });
                in_elseif = false;
            }
            "else" => arm = Some(BranchKind::Else),
            "return" => add(token, BranchKind::Return),
            "end" => match open.pop() {
                Some((opener, _)) if opener != "repeat" => {}
                _ => {
                    return Err(StructureError::Unopened {
                        line: token.line,
                        word: "end",
                    });
                }
            },
            "until" => match open.pop() {
                Some(("repeat", _)) => {}
                _ => {
                    return Err(StructureError::Unopened {
                        line: token.line,
                        word: "until",
                    });
                }
            },
            _ => {}
        }
    }
    if let Some((_, line)) = open.last() {
        return Err(StructureError::Unclosed {
            open: open.len(),
            line: *line,
        });
    }
    for branch in &mut found {
        branch.kinds.sort_unstable();
        branch.kinds.dedup();
    }
    Ok(found)
}

/// Line `line` of `source`, trimmed and without a trailing `--` comment: the short text a
/// report shows for a branch or call site.
pub fn code_line(source: &str, line: u32) -> Option<String> {
    let text = source
        .lines()
        .nth(usize::try_from(line).ok()?.checked_sub(1)?)?;
    Some(
        text.split("--")
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn lines(source: &str) -> Vec<(u32, Vec<BranchKind>)> {
        branches(source)
            .unwrap()
            .into_iter()
            .map(|b| (b.line, b.kinds))
            .collect()
    }

    /// The line of `lock/scripts/<script>.lua` that contains `code`.
    fn line_of(script: &leasehold::script::LuaScript, code: &str) -> u32 {
        let index = script.source().lines().position(|l| l.contains(code));
        u32::try_from(index.unwrap() + 1).unwrap()
    }

    #[test]
    fn arms_start_at_their_first_statement_and_comments_and_strings_hide_keywords() {
        use BranchKind::*;
        let source = "\
-- if this is a comment then return end
local s = 'if x then return'
--[[ else
return ]] local t = [==[ end ]] return ]==]
if a then
  x = 1
elseif b then
  return 2
else
end
for i = 1, 2 do
  while c do
    if d then return 1 else return 2 end
  end
end
local function f()
  repeat z() until e
  return \"then\"
end
return f()
";
        assert_eq!(
            lines(source),
            vec![
                (6, vec![If]),
                (8, vec![ElseIf, Return]),
                (13, vec![If, Else, Return]),
                (18, vec![Return]),
                (20, vec![Return]),
            ]
        );
        let one_liner = branches(source).unwrap();
        assert!(one_liner[2].shares_line, "two returns start on line 13");
        assert!(
            !one_liner[1].shares_line,
            "line 8's arm starts with its return"
        );
        assert_eq!(&source[one_liner[1].at..][..8], "return 2");
    }

    #[test]
    fn unbalanced_blocks_are_refused() {
        assert_eq!(
            branches("if a then\nx()\n"),
            Err(StructureError::Unclosed { open: 1, line: 1 })
        );
        assert_eq!(
            branches("x()\nend\n"),
            Err(StructureError::Unopened {
                line: 2,
                word: "end"
            })
        );
        assert_eq!(
            branches("local s = [[\nopen"),
            Err(StructureError::Unterminated { line: 1 })
        );
    }

    #[test]
    fn renew_has_its_extend_guards_early_returns_and_tail() {
        use BranchKind::*;
        let renew = &leasehold::script::scripts().renew;
        let found = lines(renew.source());
        let expected = [
            (line_of(renew, "    lock_at = now_ms + ttl"), vec![If]),
            (
                line_of(renew, "PEXPIREAT', KEYS[2], string.format"),
                vec![If],
            ),
            (line_of(renew, "  return 1"), vec![Return]),
            (line_of(renew, "return lone == ARGV[1]"), vec![If, Return]),
            (line_of(renew, "  return 0"), vec![If, Return]),
            (
                line_of(renew, "redis.call('HSET', KEYS[1], field"),
                vec![If],
            ),
            (line_of(renew, "return extend()"), vec![Return]),
        ];
        assert_eq!(found, expected);
    }

    #[test]
    fn semaphore_resize_has_its_idle_return_loop_break_and_hand_offs() {
        use BranchKind::*;
        let resize = &leasehold::script::scripts().semaphore_resize;
        let found = lines(resize.source());
        for (code, kinds) in [
            ("return math.max(", vec![Return]),
            ("redis.call('DEL', size)\n  return 0", vec![If]),
            ("    break", vec![If]),
            ("redis.call('ZADD', permits", vec![If]),
            ("redis.call('PEXPIREAT', permits", vec![If]),
            ("redis.call('PEXPIREAT', size, live)", vec![If]),
            ("return 1", vec![Return]),
        ] {
            let first = code.lines().next().unwrap();
            let line = line_of(resize, first);
            assert!(
                found.contains(&(line, kinds.clone())),
                "{code:?} at line {line}: {found:?}"
            );
        }
        // The idle path: the arm's DEL, then its `return 0` on the next line.
        let idle = line_of(resize, "  return 0");
        assert!(found.contains(&(idle, vec![Return])));
        // The `else` arm of the last expiry check deletes the size.
        let last_else = found.iter().filter(|(_, k)| k == &vec![Else]).count();
        assert_eq!(last_else, 1, "{found:?}");
        assert_eq!(found.len(), 10, "{found:?}");
    }

    #[test]
    fn every_lock_script_reads_as_balanced_blocks() {
        for script in crate::model::coverage::lock_scripts() {
            let found = branches(script.source()).unwrap();
            assert!(!found.is_empty(), "{}", script.name());
            assert!(
                found.iter().all(|b| !b.shares_line),
                "{}: a branch shares its line",
                script.name()
            );
        }
    }

    #[test]
    fn a_code_line_drops_its_comment() {
        assert_eq!(
            code_line("a()\n  return x -- why\n", 2),
            Some("return x".to_owned())
        );
        assert_eq!(code_line("a()\n", 0), None);
        assert_eq!(code_line("a()\n", 3), None);
    }
}
