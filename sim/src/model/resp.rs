//! Replies as Redis puts them on the wire (RESP2), and their conversion to `redis` types.
//!
//! Invariant: the client never sees a hand-built `RedisError`. Every reply that holds an
//! error is encoded to RESP2 bytes and parsed by `redis::parse_redis_value`, exactly as a
//! real connection would, so error kinds (`NOSCRIPT`, `WRONGTYPE`, ...) are classified by
//! the same code that classifies a real server's replies. An error-free reply maps to the
//! one `redis::Value` that parse yields (a test pins the two ways to agree on any such
//! reply), without the encode and parse that cost the simulator a few per cent.

use redis::{RedisResult, Value};

/// One RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+text` (for example `+OK`).
    Status(String),
    /// `-CODE message`: the text without the leading dash.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$len\r\nbytes`.
    Bulk(Vec<u8>),
    /// `$-1`: the nil bulk string.
    Nil,
    /// `*-1`: the nil array (for example a `WAIT`-less blocking pop that timed out).
    NilArray,
    /// `*n` followed by `n` replies.
    Array(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Self {
        Self::Status("OK".to_owned())
    }

    /// An error reply; `message` must start with its error code (`ERR`, `WRONGTYPE`, ...).
    pub fn error(message: impl Into<String>) -> Self {
        Self::Error(message.into())
    }

    /// A bulk reply from anything byte-like.
    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Self {
        Self::Bulk(bytes.into())
    }

    /// `Some(bytes)` as a bulk, `None` as nil.
    pub fn bulk_or_nil(bytes: Option<Vec<u8>>) -> Self {
        bytes.map_or(Self::Nil, Self::Bulk)
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error(_))
    }

    /// Appends the RESP2 encoding of this reply to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Status(text) => line(out, b'+', sanitize(text).as_bytes()),
            Self::Error(text) => line(out, b'-', sanitize(text).as_bytes()),
            Self::Int(n) => line(out, b':', n.to_string().as_bytes()),
            Self::Bulk(bytes) => {
                line(out, b'$', bytes.len().to_string().as_bytes());
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            Self::Nil => out.extend_from_slice(b"$-1\r\n"),
            Self::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Self::Array(items) => {
                line(out, b'*', items.len().to_string().as_bytes());
                for item in items {
                    item.encode(out);
                }
            }
        }
    }

    /// The reply as the `redis` crate's connection would hand it to the caller: error
    /// replies (also nested ones) become `Err` with the server's error kind.
    pub fn into_result(self) -> RedisResult<Value> {
        match self.into_value() {
            Ok(value) => Ok(value),
            Err(reply) => {
                let mut bytes = Vec::new();
                reply.encode(&mut bytes);
                redis::parse_redis_value(&bytes)?.extract_error()
            }
        }
    }

    /// Whether this reply is, or nests, an error.
    fn holds_error(&self) -> bool {
        match self {
            Self::Error(_) => true,
            Self::Array(items) => items.iter().any(Self::holds_error),
            _ => false,
        }
    }

    /// The `redis::Value` that parsing this reply's encoding gives, if it holds no error;
    /// the reply itself if it does.
    fn into_value(self) -> Result<Value, Self> {
        Ok(match self {
            Self::Status(text) if text == "OK" => Value::Okay,
            Self::Status(text) => Value::SimpleString(sanitize(&text).into_owned()),
            Self::Int(n) => Value::Int(n),
            Self::Bulk(bytes) => Value::BulkString(bytes),
            Self::Nil | Self::NilArray => Value::Nil,
            Self::Array(items) if !items.iter().any(Self::holds_error) => Value::Array(
                items
                    .into_iter()
                    .filter_map(|item| item.into_value().ok())
                    .collect(),
            ),
            error => return Err(error),
        })
    }

    /// A compact, deterministic rendering for traces.
    pub fn render(&self) -> String {
        match self {
            Self::Status(text) => format!("+{text}"),
            Self::Error(text) => format!("-{text}"),
            Self::Int(n) => format!(":{n}"),
            Self::Bulk(bytes) => format!("\"{}\"", String::from_utf8_lossy(bytes).escape_debug()),
            Self::Nil => "(nil)".to_owned(),
            Self::NilArray => "(nil-array)".to_owned(),
            Self::Array(items) => {
                let inner: Vec<String> = items.iter().map(Self::render).collect();
                format!("[{}]", inner.join(","))
            }
        }
    }
}

fn line(out: &mut Vec<u8>, prefix: u8, body: &[u8]) {
    out.push(prefix);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// Redis replaces CR/LF in status and error lines with spaces (they cannot hold newlines).
fn sanitize(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains(['\r', '\n']) {
        std::borrow::Cow::Owned(text.replace(['\r', '\n'], " "))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use redis::{ErrorKind, ServerErrorKind};

    /// Error-free replies: statuses (with CR/LF and "OK"-like texts), integers, bulks
    /// (binary, empty), nils and nested arrays.
    fn error_free() -> impl Strategy<Value = Reply> {
        let leaf = prop_oneof![
            Just(Reply::ok()),
            "[ -~\r\n]{0,12}".prop_map(Reply::Status),
            any::<i64>().prop_map(Reply::Int),
            proptest::collection::vec(any::<u8>(), 0..12).prop_map(Reply::Bulk),
            Just(Reply::Nil),
            Just(Reply::NilArray),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            proptest::collection::vec(inner, 0..5).prop_map(Reply::Array)
        })
    }

    proptest! {
        /// The shortcut for error-free replies gives exactly what the wire gives.
        #[test]
        fn error_free_replies_map_as_they_parse(reply in error_free()) {
            let mut bytes = Vec::new();
            reply.encode(&mut bytes);
            let parsed = redis::parse_redis_value(&bytes).and_then(Value::extract_error);
            prop_assert!(!reply.holds_error());
            prop_assert_eq!(reply.into_result(), parsed);
        }
    }

    #[test]
    fn status_ok_parses_as_okay() {
        assert_eq!(Reply::ok().into_result(), Ok(Value::Okay));
    }

    #[test]
    fn noscript_error_has_noscript_kind() {
        let err = Reply::error("NOSCRIPT No matching script. Please use EVAL.")
            .into_result()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Server(ServerErrorKind::NoScript));
    }

    #[test]
    fn wrongtype_keeps_its_code() {
        let err = Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
            .into_result()
            .unwrap_err();
        assert_eq!(err.code(), Some("WRONGTYPE"));
    }

    #[test]
    fn nil_and_arrays_round_trip() {
        assert_eq!(Reply::Nil.into_result(), Ok(Value::Nil));
        assert_eq!(
            Reply::Array(vec![Reply::Int(1), Reply::bulk("a"), Reply::Nil]).into_result(),
            Ok(Value::Array(vec![
                Value::Int(1),
                Value::BulkString(b"a".to_vec()),
                Value::Nil
            ]))
        );
    }
}
