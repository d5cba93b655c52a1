//! Eviction risk: whether a server may evict lock keys when it runs out of memory, as read
//! from its `maxmemory` and `maxmemory-policy` at connect.
//!
//! Lock keys carry TTLs, so once `maxmemory` is reached any policy but `noeviction` may
//! delete a live lock (`volatile-ttl` picks them first), and another owner is then granted
//! it while the first still believes it holds it (issue 34; fencing still orders them). The
//! client cannot prevent that; it reads the settings, warns, counts
//! ([`metrics::EVICTION_RISKS`](crate::metrics::EVICTION_RISKS)) and exposes what it found
//! ([`Client::eviction_risk`](crate::Client::eviction_risk)), and with
//! [`ClientBuilder::refuse_eviction`](crate::ClientBuilder::refuse_eviction) refuses the
//! server instead.
//!
//! Invariant: a server that will not answer `CONFIG GET` (an ACL without `+config|get`, a
//! managed Redis that renames `CONFIG`) never fails a connect unless refusal was asked for;
//! it is recorded as [`EvictionRisk::Unknown`] and warned about once per client.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use redis::{Cmd, RedisResult, Value};

/// The one policy under which Redis never evicts a key.
pub const NO_EVICTION: &str = "noeviction";

/// What an operator runs to make a server safe for locks (and then persists in its
/// configuration file, or the managed service's parameter group).
pub const EVICTION_REMEDY: &str = "CONFIG SET maxmemory-policy noeviction";

/// What a client found about its servers' eviction settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvictionRisk {
    /// No lock key can be evicted: every server checked has no memory limit
    /// (`maxmemory 0`) or the policy `noeviction`.
    Safe {
        /// The policy read (of the last server checked).
        policy: String,
    },
    /// A server may evict live locks: `maxmemory` is set and the policy evicts.
    Evicting {
        /// The server, as `host:port` (or its description for a single node).
        node: String,
        /// Its `maxmemory-policy`, e.g. `volatile-ttl`.
        policy: String,
        /// Its `maxmemory` in bytes.
        maxmemory: u64,
    },
    /// The settings could not be read (the server refused `CONFIG GET`), or the client
    /// was built over a backend of its own and never checked them.
    Unknown {
        /// Why.
        reason: String,
    },
}

impl EvictionRisk {
    /// The policy as shown in messages and the ops CLI: the policy read, or `unknown`.
    pub fn policy(&self) -> &str {
        match self {
            Self::Safe { policy } | Self::Evicting { policy, .. } => policy,
            Self::Unknown { .. } => "unknown",
        }
    }

    /// What a client built without a check reports.
    pub(crate) fn unchecked() -> Self {
        Self::Unknown {
            reason: "not checked: the client was built over a backend of its own".to_owned(),
        }
    }

    /// The worse of two findings: evicting over unknown over safe.
    fn worse(self, other: Self) -> Self {
        let rank = |risk: &Self| match risk {
            Self::Safe { .. } => 0,
            Self::Unknown { .. } => 1,
            Self::Evicting { .. } => 2,
        };
        if rank(&other) > rank(&self) {
            other
        } else {
            self
        }
    }
}

/// `CONFIG GET maxmemory maxmemory-policy` (several parameters at once: Redis 7).
pub(crate) fn config_get() -> Cmd {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("maxmemory").arg("maxmemory-policy");
    cmd
}

/// What `node`'s reply to [`config_get`] says.
pub(crate) fn assess(node: &str, reply: RedisResult<Value>) -> EvictionRisk {
    let value = match reply {
        Ok(value) => value,
        Err(err) => {
            return EvictionRisk::Unknown {
                reason: format!("{node} refused CONFIG GET: {err}"),
            };
        }
    };
    // A map in RESP3, a flat list of name, value, ... in RESP2: both read as a map.
    let (maxmemory, policy) =
        match redis::from_redis_value::<std::collections::HashMap<String, String>>(value) {
            Ok(mut settings) => (
                settings.remove("maxmemory"),
                settings.remove("maxmemory-policy"),
            ),
            Err(err) => (None, Some(format!("unreadable reply: {err}"))),
        };
    match (maxmemory.and_then(|m| m.parse::<u64>().ok()), policy) {
        (Some(maxmemory), Some(policy)) if maxmemory > 0 && policy != NO_EVICTION => {
            EvictionRisk::Evicting {
                node: node.to_owned(),
                policy,
                maxmemory,
            }
        }
        (Some(_), Some(policy)) => EvictionRisk::Safe { policy },
        (_, policy) => EvictionRisk::Unknown {
            reason: format!(
                "{node} answered CONFIG GET without maxmemory/maxmemory-policy ({})",
                policy.unwrap_or_default()
            ),
        },
    }
}

/// The findings of one client, updated at connect and on every Sentinel re-resolution.
#[derive(Debug)]
pub(crate) struct EvictionMonitor {
    risk: Mutex<EvictionRisk>,
    /// Whether the unknown case was logged already (once per client).
    warned_unknown: AtomicBool,
}

impl Default for EvictionMonitor {
    fn default() -> Self {
        Self {
            risk: Mutex::new(EvictionRisk::unchecked()),
            warned_unknown: AtomicBool::new(false),
        }
    }
}

impl EvictionMonitor {
    /// The current finding.
    pub(crate) fn current(&self) -> EvictionRisk {
        self.risk
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records the findings of one check (one per server reached): the worst of them
    /// replaces the current one; a risk is logged and counted.
    pub(crate) fn record(&self, findings: impl IntoIterator<Item = EvictionRisk>) {
        let worst = findings
            .into_iter()
            .reduce(EvictionRisk::worse)
            .unwrap_or_else(EvictionRisk::unchecked);
        match &worst {
            EvictionRisk::Evicting {
                node,
                policy,
                maxmemory,
            } => {
                tracing::warn!(
                    %node,
                    %policy,
                    maxmemory,
                    "maxmemory-policy {policy} may evict live locks once maxmemory is reached; \
                     run `{EVICTION_REMEDY}` on {node}"
                );
                crate::metrics::eviction_risk(known_policy(policy));
            }
            EvictionRisk::Unknown { reason } => {
                if !self.warned_unknown.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        %reason,
                        "cannot read maxmemory-policy: make sure it is noeviction \
                         (`{EVICTION_REMEDY}`), or live locks may be evicted"
                    );
                    crate::metrics::eviction_risk("unknown");
                }
            }
            EvictionRisk::Safe { .. } => {}
        }
        *self.risk.lock().unwrap_or_else(PoisonError::into_inner) = worst;
    }
}

/// The metric label of `policy`: one of the policies Redis and Valkey know, else `other`
/// (labels come from a closed set).
fn known_policy(policy: &str) -> &'static str {
    const POLICIES: [&str; 7] = [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ];
    POLICIES
        .into_iter()
        .find(|known| *known == policy)
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(maxmemory: &str, policy: &str) -> RedisResult<Value> {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        Ok(Value::Array(vec![
            bulk("maxmemory"),
            bulk(maxmemory),
            bulk("maxmemory-policy"),
            bulk(policy),
        ]))
    }

    #[test]
    fn only_a_limit_with_an_evicting_policy_is_a_risk() {
        assert!(matches!(
            assess("n", reply("3145728", "volatile-ttl")),
            EvictionRisk::Evicting { maxmemory: 3_145_728, ref policy, .. } if policy == "volatile-ttl"
        ));
        assert_eq!(
            assess("n", reply("0", "allkeys-lru")).policy(),
            "allkeys-lru"
        );
        assert!(matches!(
            assess("n", reply("0", "allkeys-lru")),
            EvictionRisk::Safe { .. }
        ));
        assert!(matches!(
            assess("n", reply("100", NO_EVICTION)),
            EvictionRisk::Safe { .. }
        ));
        let refused = redis::RedisError::from((redis::ErrorKind::Client, "NOPERM"));
        assert_eq!(assess("n", Err(refused)).policy(), "unknown");
    }

    #[test]
    fn the_worst_finding_wins() {
        let monitor = EvictionMonitor::default();
        monitor.record([
            EvictionRisk::Safe {
                policy: NO_EVICTION.into(),
            },
            assess("b", reply("1", "allkeys-lfu")),
            EvictionRisk::unchecked(),
        ]);
        assert_eq!(monitor.current().policy(), "allkeys-lfu");
        assert_eq!(known_policy("allkeys-lfu"), "allkeys-lfu");
        assert_eq!(known_policy("made-up"), "other");
    }
}
