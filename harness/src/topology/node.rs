//! A handle on one Redis or Sentinel process in its own container: its address, connections,
//! and the faults a test injects — pause/unpause, kill/start, cut/restore, and (for a node
//! started with clock control) wall-clock offsets, jumps and drift. Invariant: the node
//! keeps its IP through every fault, so URLs, Sentinel state and cluster gossip stay valid.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use testcontainers::core::{Mount, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use crate::error::{Error, Result};
use crate::topology::clock_library::{CLOCK_DIR, LIBRARY_PATH};
use crate::topology::docker::docker;
use crate::topology::image::{RedisImage, SERVER_PATH, clock_image};
use crate::topology::network::{HARNESS_LABEL, Network, RUN_LABEL, run_id};
use crate::topology::node_clock::NodeClock;
use crate::topology::wait;

/// Port of every data node (each node has its own IP, so all can use the default).
pub const REDIS_PORT: u16 = 6379;
/// Port of every Sentinel.
pub const SENTINEL_PORT: u16 = 26379;

/// Log line after which redis-server accepts commands.
pub(crate) const REDIS_READY_LOG: &str = "Ready to accept connections";
/// Sentinel never prints the line above; it prints this once its config is loaded and it serves.
pub(crate) const SENTINEL_READY_LOG: &str = "+monitor master";

/// Generous bound for a container to log readiness; ~1 s idle, several on a loaded CI box.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound for a restarted node to answer PING (an AOF replay of test data takes milliseconds).
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);
/// Connect/response timeouts of harness-made connections: a healthy node on the local bridge
/// answers in well under a millisecond, so seconds only trip on a paused or cut node.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// See [`CONNECT_TIMEOUT`].
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// What to run in a new node container.
#[derive(Debug)]
pub(crate) struct NodeSpec {
    /// Role-and-index suffix of the container name, e.g. `master0`.
    pub role: String,
    /// Arguments to redis-server.
    pub args: Vec<String>,
    pub port: u16,
    pub ready_log: &'static str,
    /// Files written into the container before it starts: (absolute path, contents).
    pub files: Vec<(String, Vec<u8>)>,
    /// Whether the node's wall clock can be moved ([`Node::set_clock_offset`]).
    pub clock_control: bool,
}

/// One Redis server (or Sentinel) in a container on its topology's private network.
///
/// Dropping the node removes its container (and, with the last node, the network).
pub struct Node {
    // Field order is drop order: the container must be gone before the network is removed.
    container: ContainerAsync<GenericImage>,
    name: String,
    ip: IpAddr,
    port: u16,
    cut: AtomicBool,
    /// The node's movable wall clock, if it was started with clock control.
    clock: Option<NodeClock>,
    network: Arc<Network>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.name)
            .field("addr", &self.addr())
            .finish()
    }
}

impl Node {
    /// Creates and starts a container and waits for its readiness log line.
    pub(crate) async fn launch(
        network: &Arc<Network>,
        image: &RedisImage,
        spec: NodeSpec,
    ) -> Result<Node> {
        let name = format!("{}-{}", network.name(), spec.role);
        // Only the locally built image holds the clock library.
        let built;
        let image = if spec.clock_control {
            built = clock_image().await?;
            &built
        } else {
            image
        };
        let mut request = GenericImage::new(image.name.as_str(), image.tag.as_str())
            .with_entrypoint(SERVER_PATH)
            .with_wait_for(WaitFor::message_on_stdout(spec.ready_log))
            .with_cmd(spec.args)
            .with_network(network.name())
            .with_container_name(&name)
            .with_label(HARNESS_LABEL, network.name())
            .with_label(RUN_LABEL, run_id())
            .with_startup_timeout(STARTUP_TIMEOUT);
        for (path, contents) in spec.files {
            request = request.with_copy_to(path, contents);
        }
        let clock = spec
            .clock_control
            .then(|| NodeClock::create(&name))
            .transpose()?;
        if let Some(clock) = &clock {
            request = request
                .with_mount(Mount::bind_mount(
                    clock.host_dir().to_string_lossy(),
                    CLOCK_DIR,
                ))
                .with_env_var("LD_PRELOAD", LIBRARY_PATH);
        }
        let container = request
            .start()
            .await
            .map_err(|err| Error::container(&name, err))?;
        let ip = container
            .get_bridge_ip_address()
            .await
            .map_err(|err| Error::container(&name, err))?;
        tracing::debug!(node = %name, %ip, "node started");
        Ok(Node {
            container,
            name,
            ip,
            port: spec.port,
            cut: AtomicBool::new(false),
            clock,
            network: Arc::clone(network),
        })
    }

    /// Container name (`<network>-<role><index>`), unique on the Docker host.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Docker container id.
    pub fn container_id(&self) -> &str {
        self.container.id()
    }

    /// Name of the topology's Docker network.
    pub fn network(&self) -> &str {
        self.network.name()
    }

    /// The node's address on its network, reachable from the host; stable for the node's life.
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// Port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `ip:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port)
    }

    /// `redis://ip:port`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// A redis-rs client for this node.
    pub fn client(&self) -> Result<redis::Client> {
        redis::Client::open(self.url()).map_err(|err| Error::redis(self.url(), err))
    }

    /// A multiplexed connection with [`CONNECT_TIMEOUT`] and [`RESPONSE_TIMEOUT`].
    pub async fn connection(&self) -> Result<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        self.client()?
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|err| Error::redis(self.url(), err))
    }

    /// Runs one command on a fresh connection (harness bookkeeping, not a hot path).
    pub async fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T> {
        let mut connection = self.connection().await?;
        command
            .query_async(&mut connection)
            .await
            .map_err(|err| Error::redis(self.url(), err))
    }

    /// Freezes every process of the node (SIGSTOP-like, via the cgroup freezer): connections
    /// stay open, commands hang until [`Node::unpause`].
    pub async fn pause(&self) -> Result<()> {
        self.freezer("pause", self.container.pause()).await
    }

    /// Thaws a paused node; queued commands then run.
    pub async fn unpause(&self) -> Result<()> {
        self.freezer("unpause", self.container.unpause()).await
    }

    /// Logs the freezer operation `verb` on this node, then awaits `call`, Docker's answer.
    async fn freezer(
        &self,
        verb: &str,
        call: impl Future<Output = Result<(), testcontainers::TestcontainersError>>,
    ) -> Result<()> {
        tracing::debug!(node = %self.name, "{verb}");
        call.await.map_err(|err| self.container_error(err))
    }

    /// SIGKILLs the server (no shutdown save, no AOF flush beyond what fsync policy did) and
    /// waits until the container has stopped. The container and its data directory remain.
    pub async fn kill(&self) -> Result<()> {
        tracing::debug!(node = %self.name, "kill");
        docker(&["kill", "--signal", "KILL", self.container_id()]).await?;
        wait::until(
            &format!("{} to stop", self.name),
            RESTART_TIMEOUT,
            || async {
                let running = self
                    .container
                    .is_running()
                    .await
                    .map_err(|err| self.container_error(err))?;
                Ok((!running).then_some(()))
            },
        )
        .await
    }

    /// Starts a killed node at its old IP and, unless it is cut, waits until it answers PING
    /// (so a persisted dataset has been loaded).
    pub async fn start(&self) -> Result<()> {
        let cut = self.cut.load(Ordering::SeqCst);
        if !cut {
            // A stopped container gives its address back to Docker; pin it before starting.
            self.network.disconnect(self.container_id()).await?;
            self.network.connect(self.container_id(), self.ip).await?;
        }
        tracing::debug!(node = %self.name, cut, "start");
        self.container
            .start()
            .await
            .map_err(|err| self.container_error(err))?;
        if cut { Ok(()) } else { self.wait_ready().await }
    }

    /// [`Node::kill`] then [`Node::start`].
    pub async fn restart(&self) -> Result<()> {
        self.kill().await?;
        self.start().await
    }

    /// Crashes the server process in place and lets it start again after `down`: `DEBUG
    /// CRASH-AND-RECOVER` closes every connection without saving, sleeps `down`, and execs
    /// the server anew with its command line (what a supervisor restarting a crashed server
    /// does). Unlike [`Node::kill`] + [`Node::start`] the container keeps running, so the
    /// node is back after `down` plus the server's start-up (milliseconds), not a container
    /// start (~1.5 s). Waits until it answers PING; returns the server's run ids before and
    /// after, which differ when a new process really took over.
    pub async fn crash_and_recover(&self, down: Duration) -> Result<(String, String)> {
        tracing::debug!(node = %self.name, ?down, "crash and recover");
        let before = self.run_id().await?;
        let crash = redis::cmd("DEBUG")
            .arg("CRASH-AND-RECOVER")
            .arg(down.as_millis().to_string())
            .clone();
        // The server closes the connection instead of replying: an error here is the crash.
        if let Ok(reply) = self.query::<redis::Value>(&crash).await {
            return Err(Error::UnexpectedReply {
                addr: self.url(),
                reply: format!("{reply:?} to DEBUG CRASH-AND-RECOVER (it should have crashed)"),
            });
        }
        self.wait_ready().await?;
        Ok((before, self.run_id().await?))
    }

    /// The server process's run id (new at every start).
    async fn run_id(&self) -> Result<String> {
        let info: String = self.query(redis::cmd("INFO").arg("server")).await?;
        info_field(&info, "run_id")
            .map(str::to_owned)
            .ok_or_else(|| Error::UnexpectedReply {
                addr: self.url(),
                reply: "INFO server without a run_id".to_owned(),
            })
    }

    /// Disconnects the node from its network: every peer and the host lose it (in-flight
    /// connections hang, new ones time out) while the process keeps running.
    pub async fn cut(&self) -> Result<()> {
        tracing::debug!(node = %self.name, "cut");
        self.network.disconnect(self.container_id()).await?;
        self.cut.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Reconnects a cut node at its old IP.
    pub async fn restore(&self) -> Result<()> {
        tracing::debug!(node = %self.name, "restore");
        self.network.connect(self.container_id(), self.ip).await?;
        self.cut.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Sets the node's wall clock `ms` milliseconds ahead of real time (negative: behind);
    /// `TIME`, key expiry and everything else the server derives from the wall clock follow
    /// at once. Fails for a node started without clock control.
    pub fn set_clock_offset(&self, ms: i64) -> Result<()> {
        tracing::debug!(node = %self.name, ms, "set clock offset");
        self.clock()?.set_ms(ms)
    }

    /// Moves the node's wall clock by `ms` milliseconds from its current offset.
    pub fn jump_clock(&self, ms: i64) -> Result<()> {
        tracing::debug!(node = %self.name, ms, "jump clock");
        self.clock()?.jump_ms(ms)
    }

    /// Makes the node's wall clock run `ppm` parts per million fast (negative: slow) from
    /// now on, continuing from where it is (no jump); 0 stops the drift and keeps the offset
    /// it reached. Keys then expire at the drifted rate: at +300 000 ppm a key set with
    /// `PX t` is gone after t/1.3 of real time.
    pub fn set_clock_drift(&self, ppm: i64) -> Result<()> {
        tracing::debug!(node = %self.name, ppm, "set clock drift");
        self.clock()?.set_drift_ppm(ppm)
    }

    /// Sets the node's wall clock back to real time: no offset, no drift.
    pub fn reset_clock(&self) -> Result<()> {
        tracing::debug!(node = %self.name, "reset clock");
        self.clock()?.reset()
    }

    /// The node's current clock offset in milliseconds, drift so far included (0 without
    /// clock control).
    pub fn clock_offset(&self) -> i64 {
        self.clock.as_ref().map_or(0, NodeClock::offset_ms)
    }

    /// The node's clock drift rate in parts per million (0 without clock control).
    pub fn clock_drift_ppm(&self) -> i64 {
        self.clock.as_ref().map_or(0, NodeClock::drift_ppm)
    }

    fn clock(&self) -> Result<&NodeClock> {
        self.clock.as_ref().ok_or_else(|| Error::NoClockControl {
            node: self.name.clone(),
        })
    }

    /// Waits until the node answers PING with PONG (not LOADING, not refused).
    pub async fn wait_ready(&self) -> Result<()> {
        wait::until(
            &format!("{} to answer PING", self.name),
            RESTART_TIMEOUT,
            || async {
                let pong: String = self.query(&redis::cmd("PING")).await?;
                Ok((pong == "PONG").then_some(()))
            },
        )
        .await
    }

    /// Everything the server has logged so far (stdout), for diagnosing a failed test.
    pub async fn logs(&self) -> Result<String> {
        let bytes = self
            .container
            .stdout_to_vec()
            .await
            .map_err(|err| self.container_error(err))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A testcontainers failure on this node, named for it.
    fn container_error(&self, source: testcontainers::TestcontainersError) -> Error {
        Error::container(&self.name, source)
    }
}

/// The value of `field` in an INFO reply (`field:value` lines), trimmed.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}
