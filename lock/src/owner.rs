//! Who holds a lock: client ids, owner ids and hold ids, as they appear on the server.
//!
//! Identity is explicit and async-friendly — never a thread id, which tasks share. Layout:
//! client = 32 hex digits from the client's [`Entropy`](crate::runtime::Entropy);
//! owner  = `<client>:a:<n>` (fresh per acquire) or `<client>:u:<caller's id>` (reentrant),
//! with `<client>@<name>` in place of `<client>` for a client built with a
//! [name](crate::ClientBuilder::name);
//! hold   = `<attempt: 16 hex digits>:<owner>`, one per acquire call (RedLock: per
//! attempt). The release script reads the client id at bytes 18..=49 of a hold id to
//! address the hand-off, so the widths are fixed.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::runtime::Entropy;

/// `as_str` (with the given doc) and a `Display` that prints exactly the stored id, for each
/// string newtype of this module.
macro_rules! string_ids {
    ($($(#[$doc:meta])* $ty:ident,)+) => {
        $(
            impl $ty {
                $(#[$doc])*
                pub fn as_str(&self) -> &str {
                    &self.0
                }
            }

            impl fmt::Display for $ty {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str(&self.0)
                }
            }
        )+
    };
}

/// Longest accepted caller-chosen owner id in bytes (it is embedded in every hold id).
pub const MAX_OWNER_LEN: usize = 256;

/// Why a caller-chosen owner id is refused, or `None` if it is taken: it must be 1 to
/// [`MAX_OWNER_LEN`] bytes with no control character. The id travels in hold ids, hand-off
/// messages, logs and the CLI's output, where a control character (a newline, an escape)
/// would forge or garble a line; spaces and every printable character are fine (the
/// hand-off message carries the hold id last and whole).
pub(crate) fn refusal(id: &str) -> Option<String> {
    if id.is_empty() || id.len() > MAX_OWNER_LEN {
        return Some(format!("owner id must be 1..={MAX_OWNER_LEN} bytes"));
    }
    let (at, control) = id.char_indices().find(|(_, c)| c.is_control())?;
    Some(format!(
        "owner id contains the control character U+{:04X} ({control:?}) at byte {at}",
        u32::from(control)
    ))
}

/// Longest accepted client name in bytes
/// ([`ClientBuilder::name`](crate::ClientBuilder::name)): every owner and hold id of the
/// client carries it, so it stays short; 64 bytes fit a service and a pod name.
pub const MAX_CLIENT_NAME_LEN: usize = 64;

/// Why a client name is refused, or `None` if it is taken: 1 to [`MAX_CLIENT_NAME_LEN`]
/// printable ASCII characters without space (what `CLIENT SETNAME` accepts) and without
/// `:`, which ends the name inside an owner id.
pub(crate) fn name_refusal(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_CLIENT_NAME_LEN {
        return Some(format!(
            "client name must be 1..={MAX_CLIENT_NAME_LEN} bytes"
        ));
    }
    let (at, bad) = name
        .char_indices()
        .find(|&(_, c)| !c.is_ascii_graphic() || c == ':')?;
    Some(format!(
        "client name {name:?} has {bad:?} at byte {at}: use printable ASCII without space or ':'"
    ))
}

/// The client name an owner id carries (`<client>@<name>:…`), if any.
pub(crate) fn client_name_of(owner: &str) -> Option<&str> {
    let rest = owner.get(CLIENT_ID_LEN..)?.strip_prefix('@')?;
    rest.split(':').next()
}

/// Length of a client id: 32 hex digits.
const CLIENT_ID_LEN: usize = 32;

/// Identifies one [`Client`](crate::Client); random so that two processes never collide.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(String);

impl ClientId {
    /// Draws a fresh id.
    pub(crate) fn random(entropy: &dyn Entropy) -> Self {
        Self(format!(
            "{:016x}{:016x}",
            entropy.next_u64(),
            entropy.next_u64()
        ))
    }
}

/// The party a hold count belongs to. Holds with the same owner re-enter the lock.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner(String);

impl Owner {
    /// A caller-chosen owner, scoped to `client` (two processes choosing the same id never
    /// share a lock). Every acquire with this owner on this client re-enters the lock.
    pub(crate) fn chosen(client: &ClientId, name: Option<&str>, id: &str) -> Self {
        let tag = Tagged(client, name);
        Self(sized(
            tag.len() + 3 + id.len(),
            format_args!("{tag}:u:{id}"),
        ))
    }

    /// An owner used by exactly one acquire call (the default): no re-entry except through
    /// [`Guard::reenter`](crate::Guard::reenter).
    pub(crate) fn fresh(client: &ClientId, name: Option<&str>, counter: &AtomicU64) -> Self {
        let n = counter.fetch_add(1, Ordering::Relaxed);
        let tag = Tagged(client, name);
        Self(sized(tag.len() + 3 + 20, format_args!("{tag}:a:{n}")))
    }

    /// The name of the client this owner belongs to, when it was built with one
    /// ([`ClientBuilder::name`](crate::ClientBuilder::name)).
    pub fn client_name(&self) -> Option<&str> {
        client_name_of(&self.0)
    }
}

/// A client id with its name, as owner ids start: `<client>` or `<client>@<name>`.
struct Tagged<'a>(&'a ClientId, Option<&'a str>);

impl Tagged<'_> {
    fn len(&self) -> usize {
        self.0.0.len() + self.1.map_or(0, |name| 1 + name.len())
    }
}

impl fmt::Display for Tagged<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(name) => write!(f, "{}@{name}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// One acquire call's hold: unique, reused by every retry of that call, which is what makes
/// retried acquires and releases idempotent on the server. Once a release of it may have
/// been sent, a further attempt needs a new id (a RedLock retry takes one per attempt).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HoldId(String);

impl HoldId {
    /// A fresh hold for `owner`.
    pub(crate) fn new(entropy: &dyn Entropy, owner: &Owner) -> Self {
        let attempt = entropy.next_u64();
        Self(sized(
            17 + owner.0.len(),
            format_args!("{attempt:016x}:{owner}"),
        ))
    }
}

/// `text` written into a string of `capacity` bytes, enough for all of it: every acquire
/// call makes an owner and a hold id, and `format!` would grow its buffer on the way.
fn sized(capacity: usize, text: fmt::Arguments<'_>) -> String {
    let mut out = String::with_capacity(capacity);
    // Writing into a `String` cannot fail.
    let _ = fmt::Write::write_fmt(&mut out, text);
    out
}

string_ids! {
    /// The 32 hex digits.
    ClientId,
    /// The id as stored in the lock hash.
    Owner,
    /// The id as stored in the lock hash and the fair queue.
    HoldId,
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(AtomicU64);
    impl Entropy for Fixed {
        fn next_u64(&self) -> u64 {
            self.0.fetch_add(1, Ordering::Relaxed)
        }
    }

    #[test]
    fn an_owner_id_is_refused_for_its_length_or_a_control_character_named() {
        assert_eq!(refusal("worker 7"), None);
        assert_eq!(refusal("ünïcode ✓"), None);
        assert!(refusal("").is_some());
        assert!(refusal(&"x".repeat(MAX_OWNER_LEN + 1)).is_some());
        assert_eq!(
            refusal("worker\n7").as_deref(),
            Some("owner id contains the control character U+000A ('\\n') at byte 6")
        );
        let c1 = refusal("c1\u{85}").unwrap_or_default();
        assert!(c1.contains("U+0085") && c1.contains("byte 2"), "{c1}");
    }

    #[test]
    fn hold_id_embeds_client_id_at_fixed_offset() {
        let entropy = Fixed(AtomicU64::new(u64::MAX - 3));
        let client = ClientId::random(&entropy);
        let owner = Owner::chosen(&client, None, "worker:7");
        let hold = HoldId::new(&entropy, &owner);
        // Lua's string.sub(hold, 18, 49) is bytes 17..49 here.
        assert_eq!(&hold.as_str()[17..49], client.as_str());
        assert!(hold.as_str().ends_with(":u:worker:7"));
        assert_eq!(owner.client_name(), None);
        let named = Owner::chosen(&client, Some("billing@pod-7"), "worker:7");
        let hold = HoldId::new(&entropy, &named);
        assert_eq!(
            &hold.as_str()[17..49],
            client.as_str(),
            "the name comes after the id"
        );
        assert_eq!(named.client_name(), Some("billing@pod-7"));
        let fresh = Owner::fresh(&client, Some("b"), &AtomicU64::new(4));
        assert_eq!(fresh.as_str(), format!("{client}@b:a:4"));
        assert_eq!(fresh.client_name(), Some("b"));
    }

    #[test]
    fn a_client_name_is_printable_ascii_without_space_or_colon() {
        assert_eq!(name_refusal("billing@pod-7"), None);
        assert!(name_refusal("").is_some());
        assert!(name_refusal(&"n".repeat(MAX_CLIENT_NAME_LEN + 1)).is_some());
        for bad in ["two words", "a:b", "tab\t", "é"] {
            assert!(name_refusal(bad).is_some(), "{bad:?}");
        }
    }
}
