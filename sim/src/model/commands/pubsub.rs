//! `PUBLISH`, the one pub/sub command a data command context runs (subscribing is a
//! connection's business, handled by the node).
//!
//! Invariant: the reply counts the receivers subscribed when the message is published;
//! delivery happens later, over the network, from the recorded effect.

use std::collections::BTreeSet;

use super::Ctx;
use crate::model::resp::Reply;

/// `PUBLISH channel message`: records the message for delivery and counts its receivers.
pub(super) fn publish(ctx: &mut Ctx<'_>, channel: &[u8], message: &[u8]) -> Reply {
    let receivers = ctx.subscribers.get(channel).map_or(0, BTreeSet::len);
    ctx.effects
        .published
        .push((channel.to_vec(), message.to_vec()));
    Reply::Int(receivers as i64)
}
