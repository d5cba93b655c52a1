//! RedLock fixtures: independent masters in containers and one "process" of clients on them.

use leasehold::Client;
use leasehold_harness::IndependentMasters;

/// Starts `count` independent masters.
pub async fn start(count: usize) -> IndependentMasters {
    super::init_tracing();
    IndependentMasters::start(count)
        .await
        .expect("start the masters")
}

/// One "process": a client per master.
pub async fn process(masters: &IndependentMasters) -> Vec<Client> {
    let mut clients = Vec::new();
    for url in masters.urls() {
        clients.push(Client::connect(&url).await.expect("connect"));
    }
    clients
}
