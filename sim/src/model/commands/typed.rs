//! Typed access to a key's value: one accessor for every aggregate type, answering
//! `WRONGTYPE` when the key holds another type.
//!
//! Invariant: a command never sees a value of a type it did not ask for, and a write that
//! creates an aggregate creates it persistent (no expiry), as Redis does.

use super::WRONGTYPE;
use crate::model::keyspace::{Data, Entry, HashFields, Keyspace, ListItems, ZMembers};
use crate::model::resp::Reply;

/// An aggregate type a key's [`Data`] can hold.
pub(super) trait Typed: Sized {
    /// The type's name, for the (unreachable) error when a value just created is missing.
    const NAME: &'static str;

    /// The value if `data` holds this type.
    fn of(data: &mut Data) -> Option<&mut Self>;

    /// An empty value of this type.
    fn empty() -> Data;
}

/// Implements [`Typed`] for the value type `$ty` held by `Data::$variant`.
macro_rules! typed {
    ($ty:ty, $variant:ident, $name:literal) => {
        impl Typed for $ty {
            const NAME: &'static str = $name;

            fn of(data: &mut Data) -> Option<&mut Self> {
                match data {
                    Data::$variant(value) => Some(value),
                    _ => None,
                }
            }

            fn empty() -> Data {
                Data::$variant(Self::new())
            }
        }
    };
}

typed!(HashFields, Hash, "hash");
typed!(ListItems, List, "list");
typed!(ZMembers, ZSet, "zset");

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
