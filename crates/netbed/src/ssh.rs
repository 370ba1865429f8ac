//! The ssh tier: a temporary key pair, an sshd per client namespace with a host key of its
//! own, and the ssh client configuration that reaches them from the server namespace with
//! host keys checked.
//!
//! Everything lives in one temporary directory (`ringside-netbed-<pid>-*`, mode 0700):
//!
//! ```text
//!   id_ed25519, id_ed25519.pub   the client's identity
//!   authorized_keys              id_ed25519.pub, for root on every client
//!   known_hosts                  each client's address and host key
//!   ssh_config                   Host client0, client1, …
//!   client<k>/                   ssh_host_ed25519_key(.pub), sshd_config, sshd.pid,
//!                                sshd.log (its -e output: stdout and stderr)
//! ```

use std::fs::{self, DirBuilder, File};
use std::net::Ipv4Addr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::cmd::{self, pause, wait_until};
use crate::error::{Error, Result};

/// The start of the temporary directory's name, followed by the pid and a dash, so that
/// one a killed run left can be told from the live ones.
pub(crate) const TEMP_PREFIX: &str = "ringside-netbed-";
/// How long `ssh-keygen` may take.
const KEYGEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an sshd may take to say it listens.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the login that proves an sshd serves may take.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a killed sshd may take to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// `ConnectTimeout` in the client configuration, in seconds.
const CONNECT_TIMEOUT_S: u32 = 5;
/// What sshd says on stderr (`-e`) once its socket listens.
const LISTENING: &str = "Server listening on";
/// The directory sshd's privilege separation needs, owned by root and not writable by
/// others. Debian's init script makes it; nothing does where sshd was never started.
const PRIVSEP_DIR: &str = "/run/sshd";

/// The ssh tier of a test bed.
#[derive(Debug)]
pub(crate) struct Tier {
    dir: TempDir,
    identity: PathBuf,
    config: PathBuf,
    /// # Invariant
    /// An sshd is pushed as soon as it is spawned, so that [`Tier::stop`] reaches every one.
    sshds: Vec<Sshd>,
}

#[derive(Debug)]
struct Sshd {
    host: String,
    namespace: String,
    addr: Ipv4Addr,
    /// `ssh-ed25519 AAAA…`, for known_hosts.
    host_key: String,
    log: PathBuf,
    child: Child,
}

impl Tier {
    /// The temporary directory, the client's key pair and authorized_keys.
    pub(crate) fn new() -> Result<Tier> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(Error::io("creating the ssh tier's temporary directory"))?;
        let identity = dir.path().join("id_ed25519");
        keygen(&identity, "netbed-client")?;
        let public = public_key(&identity)?;
        let authorized = dir.path().join("authorized_keys");
        fs::write(&authorized, format!("{public}\n"))
            .map_err(Error::io(format!("writing {}", authorized.display())))?;
        let config = dir.path().join("ssh_config");
        Ok(Tier {
            dir,
            identity,
            config,
            sshds: Vec::new(),
        })
    }

    /// The ssh client configuration (written by [`Tier::write_client_config`]).
    pub(crate) fn config(&self) -> &Path {
        &self.config
    }

    /// Starts an sshd in `namespace`, listening on `addr` only, as `host` of the client
    /// configuration, serving SFTP if `sftp`. It is not waited for here, so that the sshds
    /// start side by side.
    pub(crate) fn start_sshd(
        &mut self,
        sshd: &Path,
        namespace: &str,
        host: &str,
        addr: Ipv4Addr,
        sftp: bool,
    ) -> Result<()> {
        ensure_privsep_dir()?;
        let dir = self.dir.path().join(host);
        fs::create_dir(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        let host_key = dir.join("ssh_host_ed25519_key");
        keygen(&host_key, &format!("netbed-{host}"))?;
        let host_key_line = public_key(&host_key)?;
        let conf = dir.join("sshd_config");
        fs::write(
            &conf,
            sshd_config(
                addr,
                &host_key,
                &self.dir.path().join("authorized_keys"),
                &dir.join("sshd.pid"),
                sftp,
            ),
        )
        .map_err(Error::io(format!("writing {}", conf.display())))?;
        let log = dir.join("sshd.log");
        let out = File::create(&log).map_err(Error::io(format!("creating {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(Error::io(format!("opening {}", log.display())))?;
        let mut command = crate::in_namespace(namespace, sshd.as_os_str());
        command.arg("-D").arg("-e").arg("-f").arg(&conf);
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| Error::Spawn {
                command: cmd::describe(&command),
                source,
            })?;
        self.sshds.push(Sshd {
            host: host.to_owned(),
            namespace: namespace.to_owned(),
            addr,
            host_key: host_key_line,
            log,
            child,
        });
        Ok(())
    }

    /// Writes known_hosts and the client configuration for the sshds started so far.
    pub(crate) fn write_client_config(&self) -> Result<()> {
        let known_hosts = self.dir.path().join("known_hosts");
        let lines: String = self
            .sshds
            .iter()
            .map(|s| format!("{} {}\n", s.addr, s.host_key))
            .collect();
        fs::write(&known_hosts, lines)
            .map_err(Error::io(format!("writing {}", known_hosts.display())))?;
        let mut config = String::from(
            "# Written by netbed: one Host per client namespace of a test bed, for `ssh -F` run\n\
             # in its server namespace. Deleted with the test bed.\n",
        );
        for sshd in &self.sshds {
            config.push_str(&host_entry(
                &sshd.host,
                sshd.addr,
                &self.identity,
                &known_hosts,
            ));
        }
        fs::write(&self.config, config)
            .map_err(Error::io(format!("writing {}", self.config.display())))
    }

    /// Waits until every sshd listens, then proves each serves with one login from the
    /// server namespace through the client configuration, as its users will log in.
    pub(crate) fn wait_until_ready(&mut self, server_namespace: &str) -> Result<()> {
        for sshd in &mut self.sshds {
            let deadline = Instant::now() + LISTEN_TIMEOUT;
            loop {
                if read_log(&sshd.log).contains(LISTENING) {
                    break;
                }
                if let Some(status) = sshd
                    .child
                    .try_wait()
                    .map_err(Error::io("waiting for sshd"))?
                {
                    return Err(sshd.failure(format!("it exited ({status}) before listening")));
                }
                if Instant::now() >= deadline {
                    return Err(sshd.failure(format!(
                        "it did not say \"{LISTENING}\" within {LISTEN_TIMEOUT:?}"
                    )));
                }
                pause();
            }
            let mut login = crate::in_namespace(server_namespace, "ssh".as_ref());
            login
                .arg("-F")
                .arg(&self.config)
                .args([sshd.host.as_str(), "true"]);
            let out = cmd::bounded_output(&mut login, LOGIN_TIMEOUT)
                .map_err(|e| sshd.failure(e.to_string()))?;
            if !out.status.success() {
                let said = String::from_utf8_lossy(&out.stderr);
                return Err(sshd.failure(format!(
                    "`{}` failed ({}): {}",
                    cmd::describe(&login),
                    out.status,
                    said.trim()
                )));
            }
        }
        Ok(())
    }

    /// Kills and reaps every sshd (their sessions, in the namespace, go with it: the
    /// namespace's processes are killed before it is deleted).
    pub(crate) fn stop(&mut self) {
        for mut sshd in self.sshds.drain(..) {
            let _ = sshd.child.kill();
            match wait_until(&mut sshd.child, Instant::now() + REAP_TIMEOUT) {
                Ok(Some(_)) => {}
                Ok(None) => crate::warn(&format!(
                    "netbed: the sshd of {} outlived SIGKILL",
                    sshd.namespace
                )),
                Err(e) => crate::warn(&format!(
                    "netbed: cannot reap the sshd of {}: {e}",
                    sshd.namespace
                )),
            }
        }
    }
}

impl Sshd {
    fn failure(&self, why: String) -> Error {
        Error::Sshd {
            namespace: self.namespace.clone(),
            why,
            stderr: match read_log(&self.log) {
                log if log.trim().is_empty() => "(nothing)".to_owned(),
                log => log,
            },
        }
    }
}

/// sshd's configuration: this address only, root by key only, nothing read from /etc/ssh.
///
/// `StrictModes no` because the keys live under /tmp, which others can write to (sticky
/// or not, sshd refuses such a path). `UsePAM no` because PAM's session modules
/// (pam_loginuid) fail in many containers; without PAM, sshd refuses a locked account
/// (a password field starting with `!`), which root's `*` is not. The sftp subsystem, when
/// `sftp`, lets `scp` copy a binary to a client, as it would to a real host; without it, as
/// on minimal and hardened hosts, `scp` fails and an ssh session still works.
fn sshd_config(
    addr: Ipv4Addr,
    host_key: &Path,
    authorized: &Path,
    pid_file: &Path,
    sftp: bool,
) -> String {
    let subsystem = if sftp {
        "Subsystem sftp internal-sftp\n"
    } else {
        "# No sftp subsystem: scp cannot copy here.\n"
    };
    format!(
        "# Written by netbed for one client namespace of a test bed.\n\
         ListenAddress {addr}:22\n\
         AddressFamily inet\n\
         HostKey \"{host_key}\"\n\
         PidFile \"{pid_file}\"\n\
         AuthorizedKeysFile \"{authorized}\"\n\
         PermitRootLogin prohibit-password\n\
         AllowUsers root\n\
         PubkeyAuthentication yes\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         UsePAM no\n\
         StrictModes no\n\
         UseDNS no\n\
         PrintMotd no\n\
         PrintLastLog no\n\
         X11Forwarding no\n\
         {subsystem}",
        host_key = host_key.display(),
        pid_file = pid_file.display(),
        authorized = authorized.display(),
    )
}

/// One `Host` of the client configuration. `StrictHostKeyChecking yes` holds because
/// known_hosts has every client's key; `-F` keeps the user's and the system's
/// configurations out.
fn host_entry(host: &str, addr: Ipv4Addr, identity: &Path, known_hosts: &Path) -> String {
    format!(
        "Host {host}\n\
         \x20   HostName {addr}\n\
         \x20   Port 22\n\
         \x20   User root\n\
         \x20   IdentityFile \"{identity}\"\n\
         \x20   IdentitiesOnly yes\n\
         \x20   UserKnownHostsFile \"{known_hosts}\"\n\
         \x20   GlobalKnownHostsFile /dev/null\n\
         \x20   StrictHostKeyChecking yes\n\
         \x20   BatchMode yes\n\
         \x20   ConnectTimeout {CONNECT_TIMEOUT_S}\n\
         \x20   LogLevel ERROR\n",
        identity = identity.display(),
        known_hosts = known_hosts.display(),
    )
}

/// Generates an ed25519 key pair without a passphrase at `path` and `path`.pub.
fn keygen(path: &Path, comment: &str) -> Result<()> {
    let mut keygen = Command::new("ssh-keygen");
    keygen
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path);
    cmd::run(&mut keygen, KEYGEN_TIMEOUT).map(drop)
}

/// The key type and key of `path`.pub, without its comment.
fn public_key(path: &Path) -> Result<String> {
    let public = path.with_extension("pub");
    let text =
        fs::read_to_string(&public).map_err(Error::io(format!("reading {}", public.display())))?;
    Ok(text
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" "))
}

fn ensure_privsep_dir() -> Result<()> {
    if Path::new(PRIVSEP_DIR).is_dir() {
        return Ok(());
    }
    match DirBuilder::new().mode(0o755).create(PRIVSEP_DIR) {
        // Another test bed made it meanwhile.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other.map_err(Error::io(format!(
            "creating {PRIVSEP_DIR}, which sshd needs"
        ))),
    }
}

fn read_log(log: &Path) -> String {
    fs::read_to_string(log).unwrap_or_else(|e| format!("(cannot read {}: {e})", log.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_configuration_checks_host_keys_and_never_asks() {
        let entry = host_entry(
            "client3",
            Ipv4Addr::new(198, 18, 3, 2),
            Path::new("/t/id"),
            Path::new("/t/kh"),
        );
        for line in [
            "Host client3\n",
            "    HostName 198.18.3.2\n",
            "    User root\n",
            "    StrictHostKeyChecking yes\n",
            "    BatchMode yes\n",
            "    IdentityFile \"/t/id\"\n",
            "    UserKnownHostsFile \"/t/kh\"\n",
        ] {
            assert!(entry.contains(line), "{line:?} missing from\n{entry}");
        }
    }

    #[test]
    fn sshd_listens_on_its_client_address_only_and_takes_keys_only() {
        let conf = sshd_config(
            Ipv4Addr::new(198, 18, 0, 2),
            Path::new("/t/hk"),
            Path::new("/t/ak"),
            Path::new("/t/pid"),
            true,
        );
        assert!(conf.contains("ListenAddress 198.18.0.2:22\n"), "{conf}");
        assert_eq!(conf.matches("ListenAddress").count(), 1, "{conf}");
        assert!(
            conf.contains("PermitRootLogin prohibit-password\n"),
            "{conf}"
        );
        assert!(conf.contains("PasswordAuthentication no\n"), "{conf}");
        assert!(conf.contains("Subsystem sftp internal-sftp\n"), "{conf}");
    }

    #[test]
    fn an_sshd_without_sftp_has_no_subsystem_line() {
        let conf = sshd_config(
            Ipv4Addr::new(198, 18, 0, 2),
            Path::new("/t/hk"),
            Path::new("/t/ak"),
            Path::new("/t/pid"),
            false,
        );
        assert!(!conf.contains("Subsystem"), "{conf}");
    }
}
