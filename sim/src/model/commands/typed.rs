//! Typed access to a key's value: one accessor for every aggregate type, answering
//! `WRONGTYPE` when the key holds another type.
//!
//! Invariant: a command never sees a value of a type it did not ask for, and a write that
//! creates an aggregate creates it persistent (no expiry), as Redis does.

use super::WRONGTYPE;
use crate::model::keyspace::{Data, Entry, HashFields, Keyspace, ListItems, ZMembers};
use crate::resp::Reply;

/// An aggregate type a key's [`Data`] can hold.
pub(super) trait Typed: Sized {
    /// The type's name, for the (unreachable) error when a value just created is missing.
    const NAME: &'static str;

    /// The value if `data` holds this type.
    fn of(data: &mut Data) -> Option<&mut Self>;

    /// An empty value of this type.
    fn empty() -> Data;
}

impl Typed for HashFields {
    const NAME: &'static str = "hash";

    fn of(data: &mut Data) -> Option<&mut Self> {
        match data {
            Data::Hash(fields) => Some(fields),
            _ => None,
        }
    }

    fn empty() -> Data {
        Data::Hash(Self::new())
    }
}

impl Typed for ListItems {
    const NAME: &'static str = "list";

    fn of(data: &mut Data) -> Option<&mut Self> {
        match data {
            Data::List(items) => Some(items),
            _ => None,
        }
    }

    fn empty() -> Data {
        Data::List(Self::new())
    }
}

impl Typed for ZMembers {
    const NAME: &'static str = "zset";

    fn of(data: &mut Data) -> Option<&mut Self> {
        match data {
            Data::ZSet(members) => Some(members),
            _ => None,
        }
    }

    fn empty() -> Data {
        Data::ZSet(Self::new())
    }
}

/// The live value under `key` as a `T`: `Ok(None)` when absent, `Err` with `WRONGTYPE` when
/// it holds another type.
pub(super) fn lookup<'k, T: Typed>(
    ks: &'k mut Keyspace,
    key: &[u8],
    now: i64,
) -> Result<Option<&'k mut T>, Reply> {
    match ks.get_mut(key, now) {
        None => Ok(None),
        Some(entry) => T::of(&mut entry.data)
            .map(Some)
            .ok_or_else(|| Reply::error(WRONGTYPE)),
    }
}

/// The live value under `key` as a `T`, created empty (and persistent) when absent.
pub(super) fn lookup_or_create<'k, T: Typed>(
    ks: &'k mut Keyspace,
    key: &[u8],
    now: i64,
) -> Result<&'k mut T, Reply> {
    if lookup::<T>(ks, key, now)?.is_none() {
        ks.insert(
            key.to_vec(),
            Entry {
                data: T::empty(),
                expires_at: None,
            },
        );
    }
    // The key was just checked or created as a `T`: the error cannot happen.
    lookup(ks, key, now)?.ok_or_else(|| Reply::error(format!("ERR internal: {} vanished", T::NAME)))
}
