//! Pub/sub delivery on both sides: a subscriber on the real server and the same
//! subscription in the model, on every channel the scripts publish on.
//!
//! Invariant: after a step, [`Subscriber::delivered`] returns exactly the messages that
//! step published. The server writes a published message to the subscriber's connection
//! while it runs the publishing command, before that command's reply; a `PING` sent on the
//! subscriber's connection after the reply is answered after the messages, so once its
//! answer is in, every message of the step has been received, in order.

use std::fmt;

use futures::{FutureExt, StreamExt};
use leasehold_sim::model::Node;
use redis::aio::PubSub;

use crate::calls::channels;
use crate::canon::{Tolerance, text_agrees};

/// The model's id for the test's subscription.
const MODEL_SUBSCRIPTION: u64 = 1;

/// A published message: channel and payload.
#[derive(Clone, PartialEq)]
pub struct Message {
    channel: Vec<u8>,
    payload: Vec<u8>,
}

impl Message {
    fn new(channel: &[u8], payload: &[u8]) -> Self {
        Self {
            channel: channel.to_vec(),
            payload: payload.to_vec(),
        }
    }
}

impl Message {
    /// Same channel, and payloads that agree as text (`canon::text_agrees`).
    fn agrees(&self, other: &Self, tolerance: Tolerance) -> bool {
        self.channel == other.channel && text_agrees(&self.payload, &other.payload, tolerance)
    }
}

/// Whether both sides delivered the same messages in the same order.
pub fn deliveries_agree(real: &[Message], model: &[Message], tolerance: Tolerance) -> bool {
    real.len() == model.len() && real.iter().zip(model).all(|(r, m)| r.agrees(m, tolerance))
}

/// Channel and payload as text: every channel and payload here is ASCII.
impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = String::from_utf8_lossy;
        write!(f, "{:?} <- {:?}", text(&self.channel), text(&self.payload))
    }
}

/// The real server's subscriber.
pub struct Subscriber {
    pubsub: PubSub,
}

impl Subscriber {
    /// Subscribes to every channel on the server at `url`.
    pub async fn subscribe(url: &str) -> Self {
        let client = redis::Client::open(url).unwrap();
        let mut pubsub = client.get_async_pubsub().await.unwrap();
        for channel in channels() {
            pubsub.subscribe(&channel).await.unwrap();
        }
        Self { pubsub }
    }

    /// The messages received since the last call, in order.
    pub async fn delivered(&mut self) -> Vec<Message> {
        let _: redis::Value = self.pubsub.ping().await.unwrap();
        let mut messages = Vec::new();
        while let Some(Some(msg)) = self.pubsub.on_message().next().now_or_never() {
            messages.push(Message::new(
                msg.get_channel_name().as_bytes(),
                msg.get_payload_bytes(),
            ));
        }
        messages
    }
}

/// Subscribes the model's side to the same channels (a fresh model per case).
pub fn subscribe_model(model: &mut Node) {
    for channel in channels() {
        model.subscribe(channel.as_bytes(), MODEL_SUBSCRIPTION);
    }
}

/// What the model delivers to the subscriber of `published`: the messages on its channels.
pub fn model_delivered(model: &Node, published: &[(Vec<u8>, Vec<u8>)]) -> Vec<Message> {
    published
        .iter()
        .filter(|(channel, _)| model.subscribers_of(channel).contains(&MODEL_SUBSCRIPTION))
        .map(|(channel, payload)| Message::new(channel, payload))
        .collect()
}
