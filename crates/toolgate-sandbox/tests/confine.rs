//! The escape table: small programs run confined in a temporary workspace, each of which must
//! be refused with nothing changed, each first run unconfined (where that is harmless) to show
//! that it would have worked; and the column of what must keep working inside.
//!
//! These run as root in CI: root passes discretionary access checks, but neither Landlock nor
//! seccomp, so every refusal below is the sandbox's.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::Read;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use toolgate_sandbox::{
    DenyList, MountNamespaces, NetworkMode, Prepared, Sandbox, SandboxSpec, Support, UnixSockets,
    UserDirs,
};

/// One probe: `argv` with `{name}` placeholders filled from the fixture.
struct Escape {
    name: &'static str,
    argv: &'static [&'static str],
    /// A path that must not exist after the probe ran confined.
    absent: Option<&'static str>,
    /// Whether the probe is first run unconfined, where it must succeed.
    control: bool,
}

/// A Python program that exits 0 when the call it makes is not refused by the sandbox
/// (`EPERM` or `EACCES`), whatever else went wrong with its made-up arguments.
macro_rules! syscall_probe {
    ($call:literal) => {
        concat!(
            "import ctypes,sys\n",
            "l=ctypes.CDLL(None,use_errno=True)\n",
            "buf=ctypes.create_string_buffer(256)\n",
            "r=",
            $call,
            "\n",
            "e=ctypes.get_errno()\n",
            "print('rc',r,'errno',e)\n",
            "sys.exit(1 if r<0 and e in (1,13) else 0)\n"
        )
    };
}

const ESCAPES: &[Escape] = &[
    Escape {
        name: "write outside the workspace, absolute",
        argv: &["/bin/sh", "-c", "echo x > {outside}/absolute"],
        absent: Some("{outside}/absolute"),
        control: false,
    },
    Escape {
        name: "write through a link inside the workspace",
        argv: &["/bin/sh", "-c", "echo x > {ws}/link/through-link"],
        absent: Some("{outside}/through-link"),
        control: false,
    },
    Escape {
        name: "write through /proc/self/cwd/..",
        argv: &["/bin/sh", "-c", "echo x > /proc/self/cwd/../via-proc"],
        absent: Some("{root}/via-proc"),
        control: false,
    },
    Escape {
        name: "hard link of an outside file into the workspace",
        argv: &["/bin/ln", "{outside}/victim", "{ws}/hardlink"],
        absent: Some("{ws}/hardlink"),
        control: false,
    },
    Escape {
        name: "rename an outside file into the workspace",
        argv: &["/bin/mv", "{outside}/victim", "{ws}/moved"],
        // Where the mount tier makes the workspace a mount of its own, `mv` falls back to a
        // copy (the outside file is readable) and then fails to remove the original: the
        // escape is taking the file away, which the end of the test checks did not happen.
        absent: None,
        control: false,
    },
    Escape {
        name: "read the kernel log device",
        argv: &[
            "/bin/dd",
            "if=/dev/kmsg",
            "of=/dev/null",
            "count=1",
            "iflag=nonblock",
        ],
        absent: None,
        control: false,
    },
    Escape {
        name: "read a key in ~/.ssh",
        argv: &["/bin/cat", "{home}/.ssh/id_ed25519"],
        absent: None,
        control: true,
    },
    Escape {
        name: "list ~/.ssh",
        argv: &["/bin/ls", "{home}/.ssh"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read the cargo credentials",
        argv: &["/bin/cat", "{home}/.cargo/credentials.toml"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read gh's token in a separate $XDG_CONFIG_HOME",
        argv: &["/bin/cat", "{xdg_config}/gh/hosts.yml"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read git's credential store in ~/.config",
        argv: &["/bin/cat", "{home}/.config/git/credentials"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read git's credential store in $XDG_CONFIG_HOME",
        argv: &["/bin/cat", "{xdg_config}/git/credentials"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read Claude Code's OAuth tokens",
        argv: &["/bin/cat", "{home}/.claude/.credentials.json"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read Claude Code's account file",
        argv: &["/bin/cat", "{home}/.claude.json"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read a backup of Claude Code's account file",
        argv: &["/bin/cat", "{home}/.claude.json.backup"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read Codex's auth file",
        argv: &["/bin/cat", "{home}/.codex/auth.json"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read podman's logins in ~/.config",
        argv: &["/bin/cat", "{home}/.config/containers/auth.json"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read podman's logins in $XDG_CONFIG_HOME",
        argv: &["/bin/cat", "{xdg_config}/containers/auth.json"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read podman's logins in $XDG_RUNTIME_DIR",
        argv: &["/bin/cat", "{xdg_runtime}/containers/auth.json"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read the GNOME keyring in ~/.local/share",
        argv: &["/bin/cat", "{home}/.local/share/keyrings/login.keyring"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read the GNOME keyring in $XDG_DATA_HOME",
        argv: &["/bin/cat", "{xdg_data}/keyrings/login.keyring"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read the Hugging Face token in $XDG_CACHE_HOME",
        argv: &["/bin/cat", "{xdg_cache}/huggingface/token"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read gcloud's credentials in $XDG_CONFIG_HOME",
        argv: &[
            "/bin/cat",
            "{xdg_config}/gcloud/application_default_credentials.json",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "read the Bitwarden CLI's vault",
        argv: &["/bin/cat", "{home}/.config/Bitwarden CLI/data.json"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read rclone's remotes in $XDG_CONFIG_HOME",
        argv: &["/bin/cat", "{xdg_config}/rclone/rclone.conf"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read the gradle credentials",
        argv: &["/bin/cat", "{home}/.gradle/gradle.properties"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read toolgate's console token",
        argv: &["/bin/cat", "{state}/console.token"],
        absent: None,
        control: true,
    },
    Escape {
        name: "list toolgate's state directory",
        argv: &["/bin/ls", "{state}"],
        absent: None,
        control: true,
    },
    Escape {
        name: "read a file in the shared /tmp",
        argv: &["/bin/cat", "{shared_tmp}"],
        absent: None,
        control: true,
    },
    Escape {
        name: "tcp connect to a local listener",
        argv: &[
            "{python}",
            "-c",
            "import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('in')",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "tcp bind",
        argv: &[
            "{python}",
            "-c",
            "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "udp to port 53",
        argv: &[
            "{python}",
            "-c",
            "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 53))",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "ipv6 socket",
        argv: &[
            "{python}",
            "-c",
            "import socket; socket.socket(socket.AF_INET6, socket.SOCK_STREAM)",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "raw socket",
        argv: &[
            "{python}",
            "-c",
            "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "packet socket",
        argv: &[
            "{python}",
            "-c",
            "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "netlink socket",
        argv: &[
            "{python}",
            "-c",
            "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "abstract unix socket to a listener outside",
        argv: &[
            "{python}",
            "-c",
            "import socket; socket.socket(socket.AF_UNIX).connect('\\0{abstract}')",
        ],
        absent: None,
        control: true,
    },
    Escape {
        name: "io_uring_setup",
        argv: &["{python}", "-c", syscall_probe!("l.syscall(425, 4, buf)")],
        absent: None,
        control: true,
    },
    Escape {
        name: "ptrace of the parent",
        // PTRACE_SEIZE does not stop the tracee, should it ever succeed.
        argv: &[
            "{python}",
            "-c",
            syscall_probe!("l.ptrace(0x4206, __import__('os').getppid(), 0, 0)"),
        ],
        absent: None,
        control: false,
    },
    Escape {
        name: "process_vm_readv of the parent",
        argv: &[
            "{python}",
            "-c",
            syscall_probe!("l.syscall(310, __import__('os').getppid(), 0, 0, 0, 0, 0)"),
        ],
        absent: None,
        control: false,
    },
    Escape {
        name: "a signal to the parent",
        argv: &["{python}", "-c", "import os; os.kill(os.getppid(), 0)"],
        absent: None,
        control: true,
    },
    Escape {
        name: "a new user namespace",
        argv: &["{python}", "-c", syscall_probe!("l.unshare(0x10000000)")],
        absent: None,
        control: false,
    },
    Escape {
        name: "a mount",
        argv: &[
            "{python}",
            "-c",
            syscall_probe!("l.mount(b'none', b'{ws}', b'tmpfs', 0, None)"),
        ],
        absent: None,
        control: false,
    },
    Escape {
        name: "bpf",
        argv: &[
            "{python}",
            "-c",
            syscall_probe!("l.syscall(321, 0, buf, 64)"),
        ],
        absent: None,
        control: false,
    },
    Escape {
        name: "a kernel keyring",
        argv: &[
            "{python}",
            "-c",
            syscall_probe!("l.syscall(248, b'user', b'probe', b'x', 1, -3)"),
        ],
        absent: None,
        control: false,
    },
    Escape {
        name: "an inherited descriptor above 2",
        argv: &["{python}", "-c", "import os; os.fstat({inherited})"],
        absent: None,
        control: true,
    },
];

/// The credential files the fixture makes, relative to its root: those the escape table
/// reads, in their several places.
const SECRETS: &[&str] = &[
    "xdg-config/gh/hosts.yml",
    "home/.config/git/credentials",
    "xdg-config/git/credentials",
    "home/.claude/.credentials.json",
    "home/.claude.json",
    "home/.claude.json.backup",
    "home/.codex/auth.json",
    "home/.config/containers/auth.json",
    "xdg-config/containers/auth.json",
    "xdg-runtime/containers/auth.json",
    "home/.local/share/keyrings/login.keyring",
    "xdg-data/keyrings/login.keyring",
    "xdg-cache/huggingface/token",
    "xdg-config/gcloud/application_default_credentials.json",
    "home/.config/Bitwarden CLI/data.json",
    "xdg-config/rclone/rclone.conf",
    "home/.gradle/gradle.properties",
];

/// What must keep working inside: `argv`, and what its stdout must contain.
const KEEPS_WORKING: &[(&[&str], &str)] = &[
    (&["/bin/ls", "/usr"], "bin"),
    (&["/bin/cat", "/etc/passwd"], "root"),
    (
        &["/bin/sh", "-c", "echo made > {ws}/made && cat {ws}/made"],
        "made",
    ),
    (
        &[
            "/bin/sh",
            "-c",
            "mkdir -p {ws}/d/e && mv {ws}/d/e {ws}/f && rm -r {ws}/d {ws}/f && echo moved",
        ],
        "moved",
    ),
    (
        &[
            "/bin/sh",
            "-c",
            "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
        ],
        "t",
    ),
    (
        &[
            "/bin/sh",
            "-c",
            "echo quiet > /dev/null && echo ok | tr a-z A-Z",
        ],
        "OK",
    ),
    (&["{python}", "-c", "print(1)"], "1"),
    (
        &[
            "{python}",
            "-c",
            "import socket; a,b=socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())",
        ],
        "pair",
    ),
    (
        &[
            "{python}",
            "-c",
            "print([l for l in open('/proc/self/status') if l.startswith('NoNewPrivs')][0].split()[1])",
        ],
        "1",
    ),
    (&["{cargo}", "--version"], "cargo"),
];

/// The temporary tree of one test: a workspace, a call temp dir, a fake home and state dir,
/// a directory outside, and a file in the shared `/tmp`; all removed when dropped.
struct Fixture {
    root: tempfile::TempDir,
    shared_tmp: tempfile::NamedTempFile,
    listener: TcpListener,
    _abstract_listener: UnixListener,
    abstract_name: String,
    inherited: std::fs::File,
}

impl Fixture {
    fn new() -> Fixture {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let base = root.path().canonicalize().unwrap();
        for dir in ["ws", "tmp", "home/.ssh", "home/.cargo", "state", "outside"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        for secret in SECRETS {
            let path = base.join(secret);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "SECRET store\n").unwrap();
        }
        std::fs::write(base.join("home/.ssh/id_ed25519"), "SECRET ssh key\n").unwrap();
        std::fs::write(base.join("home/.cargo/credentials.toml"), "SECRET token\n").unwrap();
        std::fs::write(base.join("state/console.token"), "SECRET console\n").unwrap();
        std::fs::write(base.join("outside/victim"), "victim\n").unwrap();
        std::os::unix::fs::symlink(base.join("outside"), base.join("ws/link")).unwrap();
        let mut shared_tmp = tempfile::NamedTempFile::new_in("/tmp").unwrap();
        std::io::Write::write_all(&mut shared_tmp, b"SECRET in tmp\n").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let abstract_name = format!(
            "toolgate-sandbox-test-{}-{}",
            std::process::id(),
            base.file_name().unwrap().to_string_lossy()
        );
        let abstract_listener =
            UnixListener::bind_addr(&SocketAddr::from_abstract_name(&abstract_name).unwrap())
                .unwrap();
        // A descriptor without close-on-exec, as a careless parent would leave one.
        let inherited = std::fs::File::open(base.join("home/.ssh/id_ed25519")).unwrap();
        rustix::io::fcntl_setfd(&inherited, rustix::io::FdFlags::empty()).unwrap();
        Fixture {
            root,
            shared_tmp,
            listener,
            _abstract_listener: abstract_listener,
            abstract_name,
            inherited,
        }
    }

    fn base(&self) -> PathBuf {
        self.root.path().canonicalize().unwrap()
    }

    /// The fake home, with every XDG directory set apart from it.
    fn dirs(&self) -> UserDirs {
        let base = self.base();
        let mut dirs = UserDirs::new(base.join("home"));
        dirs.config_home = Some(base.join("xdg-config"));
        dirs.data_home = Some(base.join("xdg-data"));
        dirs.cache_home = Some(base.join("xdg-cache"));
        dirs.runtime_dir = Some(base.join("xdg-runtime"));
        dirs
    }

    fn spec(&self, network: NetworkMode) -> SandboxSpec {
        let base = self.base();
        let mut spec = SandboxSpec::new(base.join("ws"), base.join("tmp"));
        spec.denied = DenyList::for_user(&self.dirs(), &[base.join("state")]);
        spec.network = network;
        spec
    }

    fn fill(&self, arg: &str) -> String {
        let base = self.base();
        arg.replace("{root}", &base.display().to_string())
            .replace("{ws}", &base.join("ws").display().to_string())
            .replace("{outside}", &base.join("outside").display().to_string())
            .replace("{home}", &base.join("home").display().to_string())
            .replace(
                "{xdg_config}",
                &base.join("xdg-config").display().to_string(),
            )
            .replace("{xdg_data}", &base.join("xdg-data").display().to_string())
            .replace("{xdg_cache}", &base.join("xdg-cache").display().to_string())
            .replace(
                "{xdg_runtime}",
                &base.join("xdg-runtime").display().to_string(),
            )
            .replace("{state}", &base.join("state").display().to_string())
            .replace(
                "{shared_tmp}",
                &self.shared_tmp.path().display().to_string(),
            )
            .replace(
                "{port}",
                &self.listener.local_addr().unwrap().port().to_string(),
            )
            .replace("{abstract}", &self.abstract_name)
            .replace("{inherited}", &self.inherited.as_raw_fd().to_string())
            .replace("{python}", python())
            .replace("{cargo}", env!("CARGO"))
    }

    fn command(&self, argv: &[&str]) -> Command {
        let argv: Vec<String> = argv.iter().map(|a| self.fill(a)).collect();
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .current_dir(self.base().join("ws"))
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.base().join("home"))
            .env("TMPDIR", self.base().join("tmp"))
            .env("LANG", "C");
        for var in ["CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"] {
            if let Some(v) = std::env::var_os(var) {
                command.env(var, v);
            }
        }
        if std::env::var_os("RUSTUP_HOME").is_none() {
            command.env("RUSTUP_HOME", "/root/.rustup");
        }
        command
    }

    fn run(&self, argv: &[&str], sandbox: Option<&Prepared>) -> Output {
        let mut command = self.command(argv);
        if let Some(prepared) = sandbox {
            prepared.confine(&mut command);
        }
        command.output().unwrap()
    }
}

/// The real interpreter: `python3` may be a shim that needs the real home to find it.
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}, stdout {:?}, stderr {:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_escape_is_refused_with_nothing_changed() {
    let fixture = Fixture::new();
    let prepared = Sandbox::detect()
        .prepare(&fixture.spec(NetworkMode::None))
        .unwrap();
    let mut failures = Vec::new();
    for escape in ESCAPES {
        if escape.control {
            let out = fixture.run(escape.argv, None);
            assert!(
                out.status.success(),
                "control `{}` should work unconfined: {}",
                escape.name,
                show(&out)
            );
            // The controls that write leave nothing to undo: only reads and sockets run here.
        }
        let out = fixture.run(escape.argv, Some(&prepared));
        let leaked = String::from_utf8_lossy(&out.stdout).contains("SECRET");
        let made = escape
            .absent
            .map(|p| Path::new(&fixture.fill(p)).exists())
            .unwrap_or(false);
        if out.status.success() || leaked || made {
            failures.push(format!("`{}` escaped: {}", escape.name, show(&out)));
        }
    }
    assert_eq!(
        std::fs::read_to_string(fixture.base().join("outside/victim")).unwrap(),
        "victim\n"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(ESCAPES.len() >= 42);
}

#[test]
fn what_must_keep_working_works_confined() {
    let fixture = Fixture::new();
    let prepared = Sandbox::detect()
        .prepare(&fixture.spec(NetworkMode::None))
        .unwrap();
    let mut failures = Vec::new();
    for (argv, want) in KEEPS_WORKING {
        let out = fixture.run(argv, Some(&prepared));
        if !out.status.success() || !String::from_utf8_lossy(&out.stdout).contains(want) {
            failures.push(format!("{argv:?}: {}", show(&out)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_proxy_port_alone_is_reachable_in_proxy_mode() {
    let fixture = Fixture::new();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = fixture.listener.local_addr().unwrap().port();
    let prepared = Sandbox::detect()
        .prepare(&fixture.spec(NetworkMode::Proxy { port: proxy }))
        .unwrap();
    let connect = |port: u16| {
        format!("import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('in')")
    };
    let to_proxy = connect(proxy);
    let out = fixture.run(&["{python}", "-c", &to_proxy], Some(&prepared));
    assert!(out.status.success(), "{}", show(&out));
    let mut accepted = fixture.listener.accept().unwrap().0;
    let mut rest = Vec::new();
    accepted.read_to_end(&mut rest).unwrap();

    let to_other = connect(other.local_addr().unwrap().port());
    for refused in [
        to_other.as_str(),
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
        "import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)",
        "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)",
        "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0))",
    ] {
        let out = fixture.run(&["{python}", "-c", refused], Some(&prepared));
        assert!(!out.status.success(), "{refused}: {}", show(&out));
    }
}

#[test]
fn a_kernel_without_the_abi_in_force_is_refused_as_unavailable() {
    let fixture = Fixture::new();
    let spec = fixture.spec(NetworkMode::None);
    let real = toolgate_sandbox::probe();
    for (support, says) in [
        (
            Support {
                landlock_abi: None,
                ..real
            },
            "landlock is not available",
        ),
        (
            Support {
                landlock_abi: Some(3),
                ..real
            },
            "landlock abi 3 is too old",
        ),
        (
            Support {
                seccomp: false,
                ..real
            },
            "seccomp",
        ),
    ] {
        let err = Sandbox::with_support(support).prepare(&spec).unwrap_err();
        assert_eq!(err.code(), "sandbox_unavailable", "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    // A claim beyond the kernel is caught by the kernel: the hard requirement refuses rights
    // it lacks rather than dropping them.
    if real.landlock_abi.is_some_and(|abi| abi < 9) {
        let err = Sandbox::with_support(Support {
            landlock_abi: Some(9),
            ..real
        })
        .prepare(&spec)
        .unwrap_err();
        assert_eq!(err.code(), "sandbox_unavailable", "{err}");
    }
}

#[test]
fn the_report_names_the_tier_and_the_gaps() {
    let fixture = Fixture::new();
    let sandbox = Sandbox::detect();
    let prepared = sandbox.prepare(&fixture.spec(NetworkMode::None)).unwrap();
    let report = prepared.enforced().to_string();
    assert!(report.contains("landlock+seccomp"), "{report}");
    assert!(report.contains("network none"), "{report}");
    // By default no socket that could connect to a path can be made, so that is no gap.
    assert!(report.contains("connected stream pairs only"), "{report}");
    assert!(!report.contains("pathname unix sockets"), "{report}");
    let abi = sandbox.support().landlock_abi.unwrap();
    let mut spec = fixture.spec(NetworkMode::None);
    spec.unix_sockets = UnixSockets::Allowed;
    let allowed = sandbox.prepare(&spec).unwrap().enforced().to_string();
    if abi < 9 {
        assert!(allowed.contains("pathname unix sockets"), "{allowed}");
        assert!(allowed.contains(&format!("abi {abi}")), "{allowed}");
    }
    let proxy = sandbox
        .prepare(&fixture.spec(NetworkMode::Proxy { port: 3128 }))
        .unwrap();
    assert!(
        proxy.enforced().to_string().contains("ports, not hosts"),
        "{}",
        proxy.enforced()
    );
}

/// A pathname Unix socket outside the sandbox (standing for a Docker daemon's) is closed by
/// default, in every network mode: no socket that could connect to it can be made, and a
/// datagram pair cannot be aimed at it. Stream pairs keep working. Below Landlock ABI 9, with
/// Unix sockets allowed, it is reachable, and the report says so: this shows the report is
/// not guessing.
#[test]
fn a_pathname_socket_outside_is_closed_unless_unix_sockets_are_allowed() {
    let fixture = Fixture::new();
    let sandbox = Sandbox::detect();
    let path = fixture.base().join("outside/daemon.sock");
    let _listener = UnixListener::bind(&path).unwrap();
    let connect = format!(
        "import socket; socket.socket(socket.AF_UNIX).connect('{}')",
        path.display()
    );
    let datagram = format!(
        "import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); \
         a.sendto(b'x', '{}')",
        path.display()
    );
    let pair = "import socket; a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'";
    for network in [NetworkMode::None, NetworkMode::Proxy { port: 3128 }] {
        let prepared = sandbox.prepare(&fixture.spec(network)).unwrap();
        for program in [&connect, &datagram] {
            let out = fixture.run(&["{python}", "-c", program], Some(&prepared));
            assert!(
                !out.status.success(),
                "{network:?} {program}: {}",
                show(&out)
            );
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("PermissionError"),
                "{network:?} {program}: {}",
                show(&out)
            );
        }
        let out = fixture.run(&["{python}", "-c", pair], Some(&prepared));
        assert!(out.status.success(), "{network:?}: {}", show(&out));
    }
    if sandbox.support().landlock_abi.is_some_and(|abi| abi >= 9) {
        return;
    }
    let mut spec = fixture.spec(NetworkMode::None);
    spec.unix_sockets = UnixSockets::Allowed;
    let prepared = sandbox.prepare(&spec).unwrap();
    assert!(
        prepared
            .enforced()
            .gaps
            .iter()
            .any(|g| g.contains("pathname unix sockets"))
    );
    let out = fixture.run(&["{python}", "-c", &connect], Some(&prepared));
    assert!(out.status.success(), "{}", show(&out));
}

#[test]
fn the_limits_are_set_in_the_child() {
    let fixture = Fixture::new();
    let mut spec = fixture.spec(NetworkMode::None);
    spec.limits.file_size = Some(4096);
    spec.limits.open_files = Some(64);
    let prepared = Sandbox::detect().prepare(&spec).unwrap();
    let out = fixture.run(
        &[
            "{python}",
            "-c",
            "import resource as r; print([r.getrlimit(x)[0] for x in (r.RLIMIT_CORE, r.RLIMIT_FSIZE, r.RLIMIT_NOFILE)])",
        ],
        Some(&prepared),
    );
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[0, 4096, 64]");
    // A write past RLIMIT_FSIZE fails and leaves the file at the limit.
    let out = fixture.run(
        &[
            "/bin/sh",
            "-c",
            "head -c 10000 /dev/zero > {ws}/big 2>/dev/null; stat -c %s {ws}/big",
        ],
        Some(&prepared),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "4096",
        "{}",
        show(&out)
    );
}

/// Where this machine can make a mount namespace, paths given as read-only (a workspace's
/// `.git/hooks` and `.git/config`) cannot be written, replaced or removed from inside, while
/// the rest of the workspace stays writable, and the host sees no mount of the child's.
#[test]
fn read_only_paths_stay_unwritable_inside_the_workspace_where_mounts_are_possible() {
    let fixture = Fixture::new();
    let sandbox = Sandbox::detect();
    let ws = fixture.base().join("ws");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    let mut spec = fixture.spec(NetworkMode::None);
    spec.read_only = vec![ws.join(".git/hooks"), ws.join(".git/config")];
    let prepared = sandbox.prepare(&spec).unwrap();
    let report = prepared.enforced().to_string();
    if !sandbox.support().mount_namespaces.possible() {
        assert!(
            report.contains("read-only or pinned"),
            "the gap is named: {report}"
        );
        return;
    }
    assert!(report.contains("mount namespace"), "{report}");
    let script = "import os\n\
        def tried(f):\n    try:\n        f()\n        return 'ESCAPED'\n    except OSError as e:\n        return 'REFUSED'\n\
        print(tried(lambda: open('.git/hooks/pre-commit', 'w').write('x')))\n\
        print(tried(lambda: open('.git/config', 'a').write('[alias]')))\n\
        print(tried(lambda: os.rename('.git/hooks', 'hooks-moved')))\n\
        print(tried(lambda: os.unlink('.git/config')))\n\
        open('other.txt', 'w').write('fine')\nprint('WROTE')\n";
    let out = fixture.run(&["{python}", "-c", script], Some(&prepared));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["REFUSED", "REFUSED", "REFUSED", "REFUSED", "WROTE"],
        "{}",
        show(&out)
    );
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(ws.join(".git").to_str().unwrap()),
        "the child's mounts stay its own"
    );
}

/// Where this machine can make a mount namespace, a pinned directory (a workspace's `.git`)
/// cannot be renamed, replaced or removed from inside, while what it holds stays writable.
#[test]
fn a_pinned_directory_stays_where_it_is_and_writable_where_mounts_are_possible() {
    let fixture = Fixture::new();
    let sandbox = Sandbox::detect();
    if !sandbox.support().mount_namespaces.possible() {
        return;
    }
    let ws = fixture.base().join("ws");
    std::fs::create_dir_all(ws.join(".git/objects")).unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let mut spec = fixture.spec(NetworkMode::None);
    spec.pinned = vec![ws.join(".git")];
    let prepared = sandbox.prepare(&spec).unwrap();
    let script = "import os\n\
        def tried(f):\n    try:\n        f()\n        return 'ESCAPED'\n    except OSError as e:\n        return 'REFUSED'\n\
        open('.git/objects/new', 'w').write('object')\nprint('WROTE')\n\
        print(tried(lambda: os.rename('.git', 'git-moved')))\n\
        os.makedirs('fresh/objects')\n\
        print(tried(lambda: os.rename('fresh', '.git')))\n\
        print(tried(lambda: os.rmdir('.git')))\n";
    let out = fixture.run(&["{python}", "-c", script], Some(&prepared));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["WROTE", "REFUSED", "REFUSED", "REFUSED"],
        "{}",
        show(&out)
    );
    assert!(ws.join(".git/objects/new").exists());
    assert!(!ws.join("git-moved").exists());
}

/// Every store of the compiled-in data, made as a file in each place its base may be (the
/// fake home, `~/.config` and a separate `$XDG_CONFIG_HOME`, and so on), is readable
/// unconfined and unreadable confined. One program reads them all, each way.
#[test]
fn every_store_of_the_data_is_denied_in_each_of_its_places() {
    let fixture = Fixture::new();
    let base = fixture.base();
    let mut made = Vec::new();
    for store in DenyList::credential_stores(&fixture.dirs()) {
        // The system's own stores exist or not on this machine; the table above covers
        // those of a user. A prefix entry is made as its prefix and one name beyond it.
        if !store.starts_with(&base) {
            continue;
        }
        let text = store.display().to_string();
        let names = match text.strip_suffix('*') {
            Some(prefix) => vec![prefix.to_string(), format!("{prefix}.backup")],
            None => vec![text],
        };
        for name in names {
            let path = PathBuf::from(&name);
            if path.is_dir() {
                let inside = path.join("secret-in-store");
                std::fs::write(&inside, "SECRET store\n").unwrap();
                made.push(inside);
                continue;
            }
            if path.exists() {
                made.push(path);
                continue;
            }
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "SECRET store\n").unwrap();
            made.push(path);
        }
    }
    assert!(made.len() > 150, "{}", made.len());
    let list = made
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(base.join("outside/stores"), &list).unwrap();
    let reader = "import sys\n\
        paths = open(sys.argv[1]).read().splitlines()\n\
        readable = []\n\
        for p in paths:\n    try:\n        open(p).read()\n        readable.append(p)\n    except OSError:\n        pass\n\
        print(len(readable), 'of', len(paths))\n\
        print('\\n'.join(readable[:5]))\n";
    let list_path = base.join("outside/stores").display().to_string();
    let out = fixture.run(&["{python}", "-c", reader, &list_path], None);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().next(),
        Some(format!("{} of {}", made.len(), made.len()).as_str()),
        "unconfined, every store is readable: {}",
        show(&out)
    );
    // The list itself lies outside the denied places, readable to the confined reader.
    let prepared = Sandbox::detect()
        .prepare(&fixture.spec(NetworkMode::None))
        .unwrap();
    let out = fixture.run(&["{python}", "-c", reader, &list_path], Some(&prepared));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().next(),
        Some(format!("0 of {}", made.len()).as_str()),
        "confined, none is: {}",
        show(&out)
    );
}

/// A terminal the command did not make (standing for the person's, or another session's)
/// cannot be opened, in either tier: the control writes a false `[sudo] password:` prompt
/// to it and the test reads it from the master; confined, nothing arrives, also when the
/// command first makes pseudo-terminals of its own until one bears the same number. Where
/// the mount tier gives the command a devpts instance of its own, it can still make and use
/// a pty; where not, it cannot, and the report names that gap.
#[test]
fn another_terminal_cannot_be_opened_and_a_pty_of_its_own_only_in_the_mount_tier() {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let fixture = Fixture::new();
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let slave = ptsname(&master, Vec::new()).unwrap().into_string().unwrap();
    rustix::io::ioctl_fionbio(&master, true).unwrap();
    let heard = || {
        let mut buf = [0u8; 256];
        match rustix::io::read(&master, &mut buf) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(_) => String::new(),
        }
    };
    let number: u32 = slave.rsplit('/').next().unwrap().parse().unwrap();
    let direct = format!(
        "import os\nfd = os.open('{slave}', os.O_RDWR | os.O_NOCTTY)\n\
         os.write(fd, b'[sudo] password: ')\nprint('opened')\n"
    );
    // The same name, after making ptys of its own until its instance has that number.
    let numbered = format!(
        "import os, pty\nkept = []\n\
         for _ in range({}):\n    try:\n        kept.append(pty.openpty())\n    except OSError:\n        break\n\
         fd = os.open('{slave}', os.O_RDWR | os.O_NOCTTY)\n\
         os.write(fd, b'[sudo] password: ')\nprint('opened')\n",
        number + 1
    );
    let own = "import os, pty\nm, s = pty.openpty()\nos.write(s, b'mine')\n\
               print(os.read(m, 4).decode(), os.ttyname(s))\n";

    let out = fixture.run(&["{python}", "-c", &direct], None);
    assert!(out.status.success(), "control: {}", show(&out));
    assert!(
        heard().contains("[sudo] password:"),
        "the control reaches it"
    );

    let real = toolgate_sandbox::probe();
    let mut tiers = vec![Support {
        mount_namespaces: MountNamespaces::Claimed(false),
        ..real
    }];
    if real.mount_namespaces.possible() {
        tiers.push(real);
    }
    for support in tiers {
        let prepared = Sandbox::with_support(support)
            .prepare(&fixture.spec(NetworkMode::None))
            .unwrap();
        let tier = prepared.enforced().tier;
        for probe in [&direct, &numbered] {
            let out = fixture.run(&["{python}", "-c", probe], Some(&prepared));
            let got = heard();
            assert!(
                !got.contains("[sudo]"),
                "{tier}: the confined command wrote to another terminal: {}",
                show(&out)
            );
            // Refused outright unless the name now names the command's own terminal.
            if tier == toolgate_sandbox::Tier::LandlockSeccomp || probe == &direct {
                assert!(!out.status.success(), "{tier}: {}", show(&out));
            }
        }
        let out = fixture.run(&["{python}", "-c", own], Some(&prepared));
        let gaps = prepared.enforced().gaps.join("\n");
        if support.mount_namespaces.possible() {
            assert!(
                out.status.success(),
                "{tier}: a pty of its own: {}",
                show(&out)
            );
            assert!(String::from_utf8_lossy(&out.stdout).starts_with("mine /dev/pts/"));
            assert!(!gaps.contains("no pseudo-terminal"), "{gaps}");
        } else {
            assert!(!out.status.success(), "{tier}: {}", show(&out));
            assert!(gaps.contains("no pseudo-terminal"), "{gaps}");
        }
    }
}

/// Set in the copy of this test binary that runs with a controlling terminal.
const INSIDE_A_TERMINAL: &str = "TOOLGATE_SANDBOX_TEST_INSIDE_A_TERMINAL";

/// A command started by a process that has a controlling terminal (`toolgate call` in the
/// person's terminal) cannot open that terminal as `/dev/tty`: unconfined it can, and writes
/// there; confined, `/dev/tty` is no terminal at all (`ENXIO`), in either tier. This test
/// runs itself again in a session of its own whose controlling terminal is a new pty.
#[test]
fn dev_tty_is_not_the_terminal_of_the_process_that_started_the_command() {
    let probe = "import os\nfd = os.open('/dev/tty', os.O_RDWR)\n\
                 os.write(fd, b'[sudo] password: ')\nprint('opened', os.ttyname(fd))\n";
    if std::env::var_os(INSIDE_A_TERMINAL).is_some() {
        let fixture = Fixture::new();
        let out = fixture.run(&["{python}", "-c", probe], None);
        assert!(out.status.success(), "control: {}", show(&out));
        let real = toolgate_sandbox::probe();
        for mounts in [false, real.mount_namespaces.possible()] {
            let support = Support {
                mount_namespaces: MountNamespaces::Claimed(mounts),
                ..real
            };
            let prepared = Sandbox::with_support(support)
                .prepare(&fixture.spec(NetworkMode::None))
                .unwrap();
            let out = fixture.run(&["{python}", "-c", probe], Some(&prepared));
            assert!(!out.status.success(), "mounts {mounts}: {}", show(&out));
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("No such device or address"),
                "mounts {mounts}: {}",
                show(&out)
            );
        }
        println!("checked inside a terminal");
        return;
    }
    // setsid, the new pty as the controlling terminal, then this test again; the master
    // stays open in the parent so that the terminal lives as long as the test.
    let wrapper = "import os, sys, fcntl, termios\n\
        m, s = os.openpty()\n\
        pid = os.fork()\n\
        if pid == 0:\n    os.setsid()\n    fcntl.ioctl(s, termios.TIOCSCTTY, 0)\n    os.execv(sys.argv[1], sys.argv[1:])\n\
        _, status = os.waitpid(pid, 0)\n\
        sys.exit(os.waitstatus_to_exitcode(status))\n";
    let me = std::env::current_exe().unwrap();
    let out = Command::new(python())
        .args(["-c", wrapper])
        .arg(&me)
        .args([
            "--exact",
            "dev_tty_is_not_the_terminal_of_the_process_that_started_the_command",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INSIDE_A_TERMINAL, "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("checked inside a terminal"),
        "{}",
        show(&out)
    );
}
