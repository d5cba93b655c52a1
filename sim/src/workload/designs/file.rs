//! A team's own lock design, described in a TOML file: its server calls (commands, or Lua
//! scripts beside the file) with their `KEYS`/`ARGV` templates, how to read each reply, the
//! renewal rule, the wait rule, what the server keeps of a hold, and the fault classes the
//! design must survive. [`DesignFile::load`] reads and checks one; the simulator then runs
//! it as it runs the built-in designs ([`super::custom`]).
//!
//! ```toml
//! name = "compare-and-delete"
//! must_survive = ["none", "client-crash", "exploration"]
//!
//! [acquire]
//! command = ["SET", "{key}", "{token}", "NX", "PX", "{ttl_ms}"]
//! granted = "ok"
//!
//! [release]
//! script = "compare_and_delete.lua"
//! keys = ["{key}"]
//! args = ["{token}"]
//!
//! [hold]
//! value = "{token}"
//! believe = "within-lease"
//! ```
//!
//! Templates: `{key}` (the lock's key, `leasehold:{<name>}`), `{name}`, `{token}` (random,
//! one per hold), `{owner}` (random, one per client process), `{ttl_ms}` (the lease asked
//! for) and `{now_ms}` (the client's own clock).
//!
//! Invariant: a loaded design is self-contained (each script's source is read in), so a
//! run spec that carries it replays without the file; every error names the file, the
//! line and the field, and says what is wrong, and none panics.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A design described by a file, loaded and checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesignFile {
    /// The design's name, for tables and pictures.
    pub name: String,
    /// The fault classes (and `exploration`) the design must survive: a failure there
    /// makes `design check` fail.
    #[serde(default)]
    pub must_survive: Vec<String>,
    /// How a client asks for the lock.
    pub acquire: Call,
    /// How a holder gives it back.
    pub release: Call,
    /// How a holder keeps its lease, if the design renews.
    #[serde(default)]
    pub renew: Option<Renew>,
    /// How a refused client waits before it asks again.
    #[serde(default)]
    pub wait: Wait,
    /// What the server keeps of a live hold under `{key}`.
    pub hold: Hold,
}

/// One server call: a command, or a script with its keys and arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// A command and its arguments, templated (`["SET", "{key}", ...]`).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// A Lua script's path, relative to the design file; read in by [`DesignFile::load`].
    #[serde(default)]
    pub script: Option<String>,
    /// The script's source (filled in from `script` at load; a file may also give it
    /// inline).
    #[serde(default)]
    pub source: Option<String>,
    /// The script's `KEYS`, templated.
    #[serde(default)]
    pub keys: Vec<String>,
    /// The script's `ARGV`, templated.
    #[serde(default)]
    pub args: Vec<String>,
    /// Which reply means success (granted, renewed).
    #[serde(default = "Reply::ok")]
    pub granted: Reply,
    /// Whether a failed acquire's integer reply is the wait, in ms, before the next try
    /// (a script that answers the lock's PTTL when busy).
    #[serde(default)]
    pub busy_reply_is_wait: bool,
}

/// How a reply reads as success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A nil reply.
    Nil,
    /// The integer 1.
    One,
    /// Any integer but 0.
    Nonzero,
}

impl Reply {
    fn ok() -> Self {
        Self::Ok
    }
}

/// The renewal rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Renew {
    /// The renewal call; its `granted` reply means renewed.
    #[serde(flatten)]
    pub call: Call,
    /// Renew every lease / `divide_ttl_by` (3: every third of the lease).
    #[serde(default = "three")]
    pub divide_ttl_by: u32,
    /// Whether the holder stops believing when a renewal is not granted (a lost-lease
    /// signal); without it, the renewals stop and the holder believes on.
    #[serde(default)]
    pub lost_when_refused: bool,
}

fn three() -> u32 {
    3
}

/// The wait rule.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    /// `spin` (jittered exponential backoff) or `pubsub` (a message on `channel`, or the
    /// longest spin nap, whichever first).
    #[serde(default)]
    pub strategy: WaitStrategy,
    /// The channel a release publishes on (pub/sub only), templated.
    #[serde(default)]
    pub channel: Option<String>,
}

/// How a refused client waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitStrategy {
    /// Jittered exponential backoff.
    #[default]
    Spin,
    /// A release message on the wait's channel.
    Pubsub,
}

/// What the server keeps of a live hold under `{key}`: its string value, or a field of
/// its hash (one of the two).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hold {
    /// The key's whole value while the hold lives, templated (`"{token}"`).
    #[serde(default)]
    pub value: Option<String>,
    /// A field of the key's hash while the hold lives, templated (`"{owner}"`).
    #[serde(default)]
    pub field: Option<String>,
    /// How long the holder believes it holds.
    #[serde(default)]
    pub believe: Believe,
}

/// How long a holder believes it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Believe {
    /// Until it sends its release (and, with `renew.lost_when_refused`, until a renewal
    /// is refused).
    #[default]
    UntilRelease,
    /// At most one lease from when it sent the granted acquire, on its own clock: a grant
    /// that took long to answer leaves that much less.
    WithinLease,
}

/// A design file that cannot be used: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {field}: {message}", path.display())]
pub struct DesignFileError {
    /// The file.
    pub path: PathBuf,
    /// The line (1-based; 1 when the file could not be read).
    pub line: usize,
    /// The field (`acquire.command`, or `file` when the file itself is at fault).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The templates a call may use.
pub const TEMPLATES: [&str; 6] = ["key", "name", "token", "owner", "ttl_ms", "now_ms"];

/// The names `must_survive` may use beside the fault classes.
pub const EXPLORATION: &str = "exploration";

impl DesignFile {
    /// Reads, parses and checks the design file at `path`; `classes` are the fault class
    /// names `must_survive` may name (beside [`EXPLORATION`]).
    pub fn load(path: &Path, classes: &[&str]) -> Result<Self, DesignFileError> {
        let fail = |line: usize, field: &str, message: String| DesignFileError {
            path: path.to_owned(),
            line,
            field: field.to_owned(),
            message,
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| fail(1, "file", format!("cannot be read: {e}")))?;
        let mut design: DesignFile = toml::from_str(&text).map_err(|e| {
            let line = e.span().map_or(1, |span| {
                text[..span.start.min(text.len())].matches('\n').count() + 1
            });
            fail(line, &field_of(e.message()), e.message().trim().to_owned())
        })?;
        let at = |table: &str, field: &str| line_of(&text, table, field);
        let dir = path.parent().unwrap_or(Path::new("."));
        for (table, call) in [
            ("acquire", &mut design.acquire),
            ("release", &mut design.release),
        ]
        .into_iter()
        .chain(design.renew.as_mut().map(|r| ("renew", &mut r.call)))
        {
            call.resolve(dir).map_err(|(field, message)| {
                fail(at(table, field), &format!("{table}.{field}"), message)
            })?;
        }
        if design.name.trim().is_empty() {
            return Err(fail(at("", "name"), "name", "is empty".to_owned()));
        }
        match (&design.hold.value, &design.hold.field) {
            (Some(_), None) | (None, Some(_)) => {}
            _ => {
                return Err(fail(
                    at("hold", "value"),
                    "hold",
                    "give exactly one of `value` (the key's string value) or `field` (a field of its hash)".to_owned(),
                ));
            }
        }
        for (field, template) in [
            ("hold.value", &design.hold.value),
            ("hold.field", &design.hold.field),
            ("wait.channel", &design.wait.channel),
        ] {
            if let Some(template) = template {
                check_template(template).map_err(|m| {
                    let (table, key) = field.split_once('.').unwrap_or(("", field));
                    fail(at(table, key), field, m)
                })?;
            }
        }
        if design.wait.strategy == WaitStrategy::Pubsub && design.wait.channel.is_none() {
            return Err(fail(
                at("wait", "strategy"),
                "wait.channel",
                "a pubsub wait needs the channel its release publishes on".to_owned(),
            ));
        }
        if design.renew.as_ref().is_some_and(|r| r.divide_ttl_by == 0) {
            return Err(fail(
                at("renew", "divide_ttl_by"),
                "renew.divide_ttl_by",
                "must be at least 1".to_owned(),
            ));
        }
        for class in &design.must_survive {
            if class != EXPLORATION && !classes.contains(&class.as_str()) {
                return Err(fail(
                    at("", "must_survive"),
                    "must_survive",
                    format!("{class:?} is no fault class; known: {classes:?} and {EXPLORATION:?}"),
                ));
            }
        }
        Ok(design)
    }
}

impl Call {
    /// Checks the call's shape and templates and reads its script in; the field at fault
    /// and what is wrong.
    fn resolve(&mut self, dir: &Path) -> Result<(), (&'static str, String)> {
        match (&self.command, &self.script, &self.source) {
            (Some(words), None, None) => {
                if words.is_empty() {
                    return Err(("command", "is empty".to_owned()));
                }
                if !self.keys.is_empty() || !self.args.is_empty() {
                    return Err((
                        "keys",
                        "a command takes its keys and arguments in `command`".to_owned(),
                    ));
                }
                for word in words {
                    check_template(word).map_err(|m| ("command", m))?;
                }
            }
            (None, Some(script), None) => {
                let file = dir.join(script);
                let source = std::fs::read_to_string(&file)
                    .map_err(|e| ("script", format!("{} cannot be read: {e}", file.display())))?;
                self.source = Some(source);
            }
            (None, None, Some(_)) => {}
            _ => {
                return Err((
                    "command",
                    "give exactly one of `command`, `script` (a file) or `source` (inline Lua)"
                        .to_owned(),
                ));
            }
        }
        for word in self.keys.iter() {
            check_template(word).map_err(|m| ("keys", m))?;
        }
        for word in self.args.iter() {
            check_template(word).map_err(|m| ("args", m))?;
        }
        Ok(())
    }
}

/// Checks that every `{...}` in `text` is a known template.
fn check_template(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("{text:?} opens a template it does not close"));
        };
        let name = &rest[open + 1..open + close];
        if !TEMPLATES.contains(&name) {
            return Err(format!(
                "{text:?} uses {{{name}}}, which is no template; known: {}",
                TEMPLATES.map(|t| format!("{{{t}}}")).join(", ")
            ));
        }
        rest = &rest[open + close + 1..];
    }
    Ok(())
}

/// The field a TOML parse error names (`unknown field `x``, `missing field `x``), or
/// `file`.
fn field_of(message: &str) -> String {
    message
        .split('`')
        .nth(1)
        .filter(|_| message.contains("field"))
        .unwrap_or("file")
        .to_owned()
}

/// The 1-based line of `field` in table `table` (`""`: the top level) of `text`, or of
/// the table's header when the field is not written there, or 1.
fn line_of(text: &str, table: &str, field: &str) -> usize {
    let mut current = "";
    let mut header = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim();
            if current == table {
                header = Some(i + 1);
            }
            continue;
        }
        if current == table
            && line
                .split_once('=')
                .is_some_and(|(key, _)| key.trim() == field)
        {
            return i + 1;
        }
    }
    header.unwrap_or(1)
}

/// Fills `template`'s templates in.
pub fn fill(template: &str, values: &Values<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let name = &rest[open + 1..open + close];
        match name {
            "key" => out.push_str(values.key),
            "name" => out.push_str(values.name),
            "token" => out.push_str(values.token),
            "owner" => out.push_str(values.owner),
            "ttl_ms" => out.push_str(&values.ttl_ms.to_string()),
            "now_ms" => out.push_str(&values.now_ms.to_string()),
            other => {
                out.push('{');
                out.push_str(other);
                out.push('}');
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// What the templates stand for in one call.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// `{key}`.
    pub key: &'a str,
    /// `{name}`.
    pub name: &'a str,
    /// `{token}`.
    pub token: &'a str,
    /// `{owner}`.
    pub owner: &'a str,
    /// `{ttl_ms}`.
    pub ttl_ms: u64,
    /// `{now_ms}`.
    pub now_ms: u64,
}
