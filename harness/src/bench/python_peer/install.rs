//! The Python peers' packages at pinned versions, installed with `python3 -m pip install
//! --target` into the cargo target directory on first use (no virtualenv: the workers run
//! with `PYTHONPATH` on that directory), so a fresh machine with python3, pip and PyPI needs
//! nothing done by hand.
//!
//! Invariant: an install directory is complete or absent. pip writes into a scratch
//! directory beside it, which is renamed into place only after pip succeeded, so a killed
//! install, or two test processes installing at once, never leave a half-installed package
//! for a worker to import. The directory's name carries the versions, so changing a pin
//! installs afresh.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use tokio::sync::OnceCell;

use crate::error::{Error, Result};

/// The Python interpreter the workers run on (CPython 3.11 where the bench was written).
pub const PYTHON: &str = "python3";
/// redis-py's release the bench runs (PyPI `redis`; the latest when pinned).
pub const REDIS_PY_VERSION: &str = "8.2.0";
/// python-redis-lock's release the bench runs (PyPI `python-redis-lock`; the latest when
/// pinned). It imports redis-py, so it runs on [`REDIS_PY_VERSION`] too.
pub const PYTHON_REDIS_LOCK_VERSION: &str = "4.0.1";
/// Directory under the target directory that holds the installs.
const INSTALL_ROOT: &str = "python-peers";
/// pip downloads two small pure-Python wheels: seconds on a working network; minutes mean
/// none.
const INSTALL_LIMIT: Duration = Duration::from_secs(300);
/// `python3 --version` and `python3 -m pip --version` answer in well under a second.
const PROBE_LIMIT: Duration = Duration::from_secs(30);
/// The marker pip's scratch directory gets once pip succeeded.
const COMPLETE: &str = ".complete";

/// This process's install directory, once installed.
static INSTALLED: OnceCell<PathBuf> = OnceCell::const_new();

/// The pinned requirements, as pip takes them.
pub fn requirements() -> [String; 2] {
    [
        format!("redis=={REDIS_PY_VERSION}"),
        format!("python-redis-lock=={PYTHON_REDIS_LOCK_VERSION}"),
    ]
}

/// The directory the workers import the pinned packages from, installing them on first use.
pub async fn packages_dir() -> Result<&'static Path> {
    INSTALLED
        .get_or_try_init(|| async { install(PYTHON, &target_dir()).await })
        .await
        .map(PathBuf::as_path)
}

/// Installs the pinned packages for `python` under `target` unless they are there already.
async fn install(python: &str, target: &Path) -> Result<PathBuf> {
    let root = target.join(INSTALL_ROOT);
    let dir = root.join(format!(
        "redis-{REDIS_PY_VERSION}_python-redis-lock-{PYTHON_REDIS_LOCK_VERSION}"
    ));
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    check_python(python).await?;
    std::fs::create_dir_all(&root)
        .map_err(|err| Error::io(format!("creating {}", root.display()), err))?;
    let scratch = root.join(format!(".installing-{}", std::process::id()));
    // A previous process with the same id was killed mid-install.
    let _ = std::fs::remove_dir_all(&scratch);
    let packages = requirements().join(" ");
    let pip = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
        ])
        .args(["--quiet", "--target"])
        .arg(&scratch)
        .args(requirements())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let failure = match tokio::time::timeout(INSTALL_LIMIT, pip).await {
        Ok(Ok(out)) if out.status.success() => None,
        Ok(Ok(out)) => Some(last_line(&out.stderr, "pip failed")),
        Ok(Err(err)) => Some(err.to_string()),
        Err(_) => Some(format!("no answer within {INSTALL_LIMIT:?}")),
    };
    if let Some(reason) = failure {
        let _ = std::fs::remove_dir_all(&scratch);
        return Err(Error::PythonInstall { packages, reason });
    }
    std::fs::write(scratch.join(COMPLETE), &packages)
        .map_err(|err| Error::io(format!("marking {} complete", scratch.display()), err))?;
    if let Err(err) = std::fs::rename(&scratch, &dir) {
        let _ = std::fs::remove_dir_all(&scratch);
        // Another process finished the same install first: its directory is as good.
        if !dir.join(COMPLETE).is_file() {
            return Err(Error::io(
                format!("moving the install to {}", dir.display()),
                err,
            ));
        }
    }
    Ok(dir)
}

/// Fails with [`Error::NoPython`] unless `python` runs and has pip.
async fn check_python(python: &str) -> Result<()> {
    for (args, what) in [
        (&["--version"][..], python.to_owned()),
        (&["-m", "pip", "--version"][..], format!("{python} -m pip")),
    ] {
        let probe = Command::new(python)
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let reason = match tokio::time::timeout(PROBE_LIMIT, probe).await {
            Ok(Ok(out)) if out.status.success() => continue,
            Ok(Ok(out)) => last_line(&out.stderr, "exited with an error"),
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!("no answer within {PROBE_LIMIT:?}"),
        };
        return Err(Error::NoPython {
            reason: format!("`{what} --version`: {reason}"),
        });
    }
    Ok(())
}

/// The cargo target directory this binary was built into: the nearest ancestor of the
/// executable that holds cargo's `CACHEDIR.TAG` (`target/debug/leasehold-harness`,
/// `target/debug/deps/<test>`), else `CARGO_TARGET_DIR`, else the workspace's `target/`.
fn target_dir() -> PathBuf {
    let built_into = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .find(|dir| dir.join("CACHEDIR.TAG").is_file())
            .map(Path::to_path_buf)
    });
    built_into
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// The last non-empty line of a tool's stderr, where pip and Python put the error itself.
fn last_line(stderr: &[u8], otherwise: &str) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or(otherwise)
        .trim()
        .to_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_interpreter_is_a_typed_error_not_a_panic() {
        let scratch = std::env::temp_dir().join(format!("no-python-{}", std::process::id()));
        let err = install("python3-that-does-not-exist", &scratch)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::NoPython { .. }), "{err}");
        assert!(err.to_string().contains("install python3 and pip"), "{err}");
        assert!(!scratch.exists(), "nothing installed");
    }

    #[tokio::test]
    async fn an_interpreter_without_pip_is_refused_before_installing() {
        use std::os::unix::fs::PermissionsExt;
        // A stand-in interpreter that answers `--version` and has no pip module.
        let fake = std::env::temp_dir().join(format!("python-without-pip-{}", std::process::id()));
        std::fs::write(
            &fake,
            "#!/bin/sh\n[ \"$1\" = --version ] && exit 0\necho 'No module named pip' >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = check_python(fake.to_str().unwrap()).await.unwrap_err();
        std::fs::remove_file(&fake).unwrap();
        assert!(matches!(err, Error::NoPython { .. }), "{err}");
        assert!(err.to_string().contains("No module named pip"), "{err}");
    }

    #[test]
    fn the_target_directory_is_this_build_s() {
        let dir = target_dir();
        assert!(dir.join("CACHEDIR.TAG").is_file(), "{}", dir.display());
    }
}
