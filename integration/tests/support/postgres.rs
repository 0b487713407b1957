//! A throwaway PostgreSQL server for the tests and the example: a cluster made with the
//! system's `initdb` in a temporary directory (in memory, `/dev/shm`, where there is
//! one; once per process, then copied for each server), started with `pg_ctl` on a free port of 127.0.0.1 (its socket in that
//! directory too), and stopped and deleted when the value is dropped, also when a test
//! panics.
//!
//! The binaries are found under `/usr/lib/postgresql/<version>/bin` (the newest
//! version), where Debian's package `postgresql` puts them, off `PATH`; where they are
//! missing, [`Postgres::start`] panics saying to install that package. The server
//! refuses to run as root: as root, the directory is handed to the `postgres` user (the
//! package makes it) and the binaries run as it through `runuser`.

// Each user of this module uses a different part of it.
#![allow(dead_code)]

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Where Debian's package `postgresql` puts the server's binaries, one folder per
/// major version.
const BINARIES: &str = "/usr/lib/postgresql";

/// One running throwaway cluster, with trust authentication for the user `postgres`.
pub struct Postgres {
    bin: PathBuf,
    root: PathBuf,
    port: u16,
    as_root: bool,
    running: bool,
}

impl Postgres {
    /// Makes a cluster in a new temporary directory and starts it. Blocks for about a
    /// second the first time in a process (`initdb`), a fraction after (a copy).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// The same, with extra server settings (`("max_connections", "20")`).
    pub fn start_with(settings: &[(&str, &str)]) -> Self {
        let bin = binaries();
        let as_root = is_root();
        let mut server = Postgres {
            bin,
            root: new_directory(as_root),
            port: 0,
            as_root,
            running: false,
        };
        // A copy of the process's template cluster: `initdb` once, not once per server.
        let template = Template::acquire(&server);
        let copy = Command::new("cp")
            .arg("-a")
            .arg(template.join("data"))
            .arg(server.data())
            .output();
        server.check(copy, "copy the template cluster");
        // Speed over durability: the cluster dies with the test.
        let mut conf = String::from(
            "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n\
             listen_addresses = '127.0.0.1'\nmax_connections = 120\n",
        );
        conf += &format!("unix_socket_directories = '{}'\n", server.root.display());
        for (name, value) in settings {
            conf += &format!("{name} = {value}\n");
        }
        let auto = server.data().join("postgresql.auto.conf");
        let mut existing = fs::read_to_string(&auto).unwrap_or_default();
        existing += &conf;
        fs::write(&auto, existing).expect("the cluster's settings");
        server.start_again();
        server
    }

    /// Starts the stopped server again, on a free port (a new one if its old one was
    /// taken meanwhile).
    pub fn start_again(&mut self) {
        assert!(!self.running, "the server is running");
        let mut last = None;
        for _ in 0..5 {
            let port = self.port_to_use();
            let output = self
                .command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.root.join("server.log"))
                .args(["-w", "-t", "30", "-o"])
                .arg(format!("-p {port}"))
                .arg("start")
                .output();
            match output {
                Ok(out) if out.status.success() => {
                    self.port = port;
                    self.running = true;
                    return;
                }
                other => last = Some(other),
            }
            // The port was taken between our probe and the server's bind: another.
            self.port = 0;
        }
        self.check(last.unwrap(), "pg_ctl start");
    }

    /// Stops the server (`pg_ctl stop -m fast`: sessions are ended, as at a shutdown).
    pub fn stop(&mut self) {
        if self.running {
            let output = self
                .command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-w", "-m", "fast", "stop"])
                .output();
            self.running = false;
            self.check(output, "pg_ctl stop");
        }
    }

    /// The port the server listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where to connect: the user `postgres`, its database, over TCP.
    pub fn config(&self) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(5));
        config
    }

    /// The same, as a URL (for sqlx).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A new connection, its connection task spawned on the current runtime.
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, connection) = self
            .config()
            .connect(tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connecting to the test server: {e:?}"));
        tokio::spawn(connection);
        client
    }

    /// What the server logged.
    pub fn log(&self) -> String {
        fs::read_to_string(self.root.join("server.log")).unwrap_or_default()
    }

    fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    fn port_to_use(&self) -> u16 {
        if self.port != 0 {
            return self.port;
        }
        let probe = TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
        probe.local_addr().unwrap().port()
    }

    /// A command of the server's, as the `postgres` user when we are root.
    fn command(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        if self.as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    fn check(&self, output: std::io::Result<Output>, what: &str) {
        match output {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!(
                "{what} failed ({}):\n{}{}\nserver log:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log()
            ),
            Err(e) => panic!("{what} could not run: {e}"),
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            // Immediate: nothing to keep, and a test that panicked may hold sessions.
            let _ = self
                .command("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .args(["-w", "-m", "immediate", "stop"])
                .output();
        }
        let _ = fs::remove_dir_all(&self.root);
        Template::release();
    }
}

/// Where the clusters go: memory (`/dev/shm`) where there is some, since a cluster is
/// copied for each server and written to throughout (a copy takes a millisecond there,
/// most of a second on a busy disk); else the system's temporary directory.
fn temporary() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let writable = shm.is_dir() && fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly());
    if writable {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A new, empty temporary directory, the `postgres` user's when we are root.
fn new_directory(as_root: bool) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let root = temporary().join(format!(
        "persevere-pg-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).expect("a temporary directory for the cluster");
    if as_root {
        let chown = Command::new("chown")
            .arg("postgres:postgres")
            .arg(&root)
            .status();
        assert!(
            chown.is_ok_and(|s| s.success()),
            "chown the cluster's directory to the `postgres` user"
        );
    }
    root
}

/// The cluster `initdb` made for this process, which each server copies, and the
/// servers alive: the last one dropped deletes it.
static TEMPLATE: Mutex<(usize, Option<PathBuf>)> = Mutex::new((0, None));

struct Template;

impl Template {
    /// The template's directory, made first if there is none; one more server alive.
    fn acquire(server: &Postgres) -> PathBuf {
        let mut template = TEMPLATE.lock().unwrap_or_else(PoisonError::into_inner);
        template.0 += 1;
        if let Some(root) = &template.1 {
            return root.clone();
        }
        let root = new_directory(server.as_root);
        let initdb = server
            .command("initdb")
            .arg("-D")
            .arg(root.join("data"))
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
            // WAL segments of 1 MB, not 16: a smaller cluster to copy.
            .args(["--locale=C", "--wal-segsize=1"])
            .output();
        server.check(initdb, "initdb");
        template.1 = Some(root.clone());
        root
    }

    /// One server fewer; with none left, the template is deleted.
    fn release() {
        let mut template = TEMPLATE.lock().unwrap_or_else(PoisonError::into_inner);
        template.0 -= 1;
        if template.0 == 0 {
            if let Some(root) = template.1.take() {
                let _ = fs::remove_dir_all(root);
            }
        }
    }
}

/// The newest version's `bin` folder that has `initdb` and `pg_ctl`.
fn binaries() -> PathBuf {
    let newest = fs::read_dir(BINARIES)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            let complete = ["initdb", "pg_ctl", "postgres"]
                .iter()
                .all(|name| Path::new(&bin).join(name).is_file());
            complete.then_some((version, bin))
        })
        .max();
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "these tests start a PostgreSQL server of their own, and found no initdb and \
             pg_ctl under {BINARIES}/<version>/bin: install PostgreSQL's server binaries, \
             Debian's package `postgresql` (apt-get install -y postgresql; .ci/run does)"
        ),
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}
