//! The `namespace` backend: bubblewrap with user, pid, mount, network, ipc, uts and cgroup
//! namespaces; a private root (the image's files read-only, or a read-only bind of the host's
//! system folders when no image is built), a shell under a PTY as the console, the cgroup
//! freezer for suspend, only `lo` (each `--allow` is a relay inside to a host socket). Its
//! boundary says it shares the host kernel: "namespace boundary: weaker than a VM".
//!
//! The writable layer: bubblewrap 0.8 has no `--overlay`, so the root stays read-only and the
//! folders a system writes (`/etc`, `/root`, `/home`, `/var`, `/srv`, `/opt`, `/mnt`) are
//! binds of `<rig>/upper/<folder>` (the image's `/etc` copied there first; without an image,
//! a generated minimal `/etc`); `/tmp` is a tmpfs. A write anywhere else fails (read-only).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::RigError;
use super::backend::{Availability, Entered, LaunchSpec, Machine, OWNER_VAR};
use super::guest::AgentClient;
use super::model::{Allow, BackendKind, Boundary, Egress, ExecRequest, ExecResult};
use super::relay::HostRelay;
use crate::runs::{Run, RunSpec, Transport};

/// The exact summary of this boundary.
pub const SUMMARY: &str = "namespace boundary: weaker than a VM (shares the host kernel)";

/// The folders of the writable layer.
const WRITABLE: &[&str] = &["etc", "root", "home", "var", "srv", "opt", "mnt"];

pub struct Sandbox {
    console: Run,
    agent: AgentClient,
    allow: Vec<Allow>,
    boundary: Boundary,
    freezer: Option<Freezer>,
    _relays: Vec<HostRelay>,
}

/// The cgroup the sandbox's processes are frozen through.
#[derive(Debug, Clone)]
pub struct Freezer {
    pub dir: PathBuf,
    /// v1: `freezer.state` FROZEN/THAWED; v2: `cgroup.freeze` 1/0.
    pub v1: bool,
}

impl Freezer {
    /// Creates `proctor-<tag>` under the v1 freezer hierarchy, or under this process's v2
    /// cgroup when the v1 one is not writable.
    fn create(tag: &str) -> Result<Freezer, String> {
        let name = format!("proctor-{}", tag.replace('/', "-"));
        let v1 = Path::new("/sys/fs/cgroup/freezer");
        if v1.join("cgroup.procs").exists() {
            let dir = v1.join(&name);
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Freezer { dir, v1: true }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Ok(Freezer { dir, v1: true });
                }
                Err(_) => {}
            }
        }
        for base in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
            let Some(rel) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
                continue;
            };
            let parent = Path::new(base).join(rel.trim().trim_start_matches('/'));
            if !parent.join("cgroup.procs").exists() {
                continue;
            }
            let dir = parent.join(&name);
            if std::fs::create_dir(&dir).is_ok() && dir.join("cgroup.freeze").exists() {
                return Ok(Freezer { dir, v1: false });
            }
        }
        Err("no writable freezer cgroup (v1 /sys/fs/cgroup/freezer or v2 cgroup.freeze)".into())
    }

    fn set(&self, frozen: bool) -> Result<(), RigError> {
        let (file, val) = if self.v1 {
            ("freezer.state", if frozen { "FROZEN" } else { "THAWED" })
        } else {
            ("cgroup.freeze", if frozen { "1" } else { "0" })
        };
        std::fs::write(self.dir.join(file), val)
            .map_err(|e| RigError::Internal(format!("write {val} to {file}: {e}")))?;
        // Wait until the kernel says it is done (v1 goes through FREEZING).
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.frozen() == Some(frozen) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(RigError::Internal(format!(
            "the freezer of {} did not reach {val}",
            self.dir.display()
        )))
    }

    /// What the kernel reports: frozen, thawed, or unknown (in between, unreadable).
    pub fn frozen(&self) -> Option<bool> {
        if self.v1 {
            match std::fs::read_to_string(self.dir.join("freezer.state"))
                .ok()?
                .trim()
            {
                "FROZEN" => Some(true),
                "THAWED" => Some(false),
                _ => None,
            }
        } else {
            let ev = std::fs::read_to_string(self.dir.join("cgroup.events")).ok()?;
            ev.lines().find_map(|l| match l.trim() {
                "frozen 1" => Some(true),
                "frozen 0" => Some(false),
                _ => None,
            })
        }
    }

    fn members(&self) -> Vec<u32> {
        crate::runs::cgroup::members(&self.dir)
    }
}

fn bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
}

pub fn availability() -> Availability {
    let Some(b) = bwrap() else {
        return Availability {
            backend: BackendKind::Namespace,
            available: false,
            detail: "bubblewrap (bwrap) is not on PATH. Remedy: install it \
                     (apt-get install bubblewrap)"
                .into(),
        };
    };
    match std::process::Command::new(&b).arg("--version").output() {
        Ok(o) if o.status.success() => Availability {
            backend: BackendKind::Namespace,
            available: true,
            detail: String::from_utf8_lossy(&o.stdout).trim().to_string(),
        },
        Ok(o) => Availability {
            backend: BackendKind::Namespace,
            available: false,
            detail: format!(
                "{} --version failed: {}",
                b.display(),
                crate::text::one_line_bytes(&o.stderr, 200)
            ),
        },
        Err(e) => Availability {
            backend: BackendKind::Namespace,
            available: false,
            detail: format!("cannot run {}: {e}", b.display()),
        },
    }
}

fn private_dir(p: &Path) -> Result<(), RigError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|e| RigError::Internal(format!("create {}: {e}", p.display())))?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| RigError::Internal(format!("chmod {}: {e}", p.display())))
}

fn write_private(p: &Path, bytes: &[u8]) -> Result<(), RigError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
        .map_err(|e| RigError::Internal(format!("write {}: {e}", p.display())))?;
    f.write_all(bytes)
        .map_err(|e| RigError::Internal(format!("write {}: {e}", p.display())))
}

/// Copies a folder's tree (symlinks as symlinks, regular files' contents) with private
/// modes: folders 0700, files 0600 (0700 when the source was executable by its owner). The
/// guest's processes run as the sandbox's one user, the files' owner, so none loses access.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    crate::files::ensure_private_dir(to).map_err(std::io::Error::other)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let t = e.file_type()?;
        let dst = to.join(e.file_name());
        if t.is_symlink() {
            let _ = std::os::unix::fs::symlink(std::fs::read_link(e.path())?, &dst);
        } else if t.is_dir() {
            copy_tree(&e.path(), &dst)?;
        } else if t.is_file() {
            let mode = super::workspace::staged_file_mode(e.metadata()?.permissions().mode());
            let mut src = std::fs::File::open(e.path())?;
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&dst)?;
            out.set_permissions(std::fs::Permissions::from_mode(mode))?;
            std::io::copy(&mut src, &mut out)?;
        }
    }
    Ok(())
}

/// The generated `/etc` of a host-bind root: no shadow, no keys, nothing of the host's.
fn minimal_etc(etc: &Path, id: &str, hosts: &str) -> Result<(), RigError> {
    write_private(
        &etc.join("passwd"),
        b"root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    )?;
    write_private(&etc.join("group"), b"root:x:0:\nnogroup:x:65534:\n")?;
    write_private(
        &etc.join("nsswitch.conf"),
        b"passwd: files\ngroup: files\nhosts: files\n",
    )?;
    write_private(&etc.join("hostname"), format!("{id}\n").as_bytes())?;
    if let Ok(c) = std::fs::read("/etc/ld.so.cache") {
        write_private(&etc.join("ld.so.cache"), &c)?;
    }
    let _ = hosts;
    Ok(())
}

pub fn launch(spec: &LaunchSpec) -> Result<Sandbox, RigError> {
    let Some(bwrap) = bwrap() else {
        return Err(RigError::Unavailable(availability().detail));
    };
    let run_dir = spec.dir.join("run");
    let upper = spec.dir.join("upper");
    private_dir(&spec.dir)?;
    private_dir(&run_dir)?;
    for w in WRITABLE {
        private_dir(&upper.join(w))?;
    }
    // The allow list: the N-th service at 127.0.0.(2+N):PORT.
    let mut allow = spec.allow.clone();
    let mut hosts = format!(
        "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t{}\n",
        spec.id
    );
    for (n, a) in allow.iter_mut().enumerate() {
        if n > 250 {
            return Err(RigError::BadRequest("at most 250 --allow services".into()));
        }
        let ip = format!("127.0.0.{}", 2 + n);
        a.guest = format!("{ip}:{}", a.port);
        if a.host.parse::<std::net::IpAddr>().is_err() {
            hosts.push_str(&format!("{ip}\t{}\n", a.host));
        }
    }
    let etc = upper.join("etc");
    match &spec.image {
        Some(img) => {
            copy_tree(&img.rootfs.join("etc"), &etc)
                .map_err(|e| RigError::Internal(format!("copy the image's /etc: {e}")))?;
        }
        None => minimal_etc(&etc, &spec.id, &hosts)?,
    }
    let _ = std::fs::remove_file(etc.join("hosts"));
    write_private(&etc.join("hosts"), hosts.as_bytes())?;

    let mut relays = Vec::new();
    for (n, a) in spec.allow.iter().enumerate() {
        relays.push(HostRelay::start(
            &run_dir.join(format!("allow-{n}.sock")),
            a,
        )?);
    }

    let mut args: Vec<OsString> = vec![bwrap.clone().into()];
    let mut push = |xs: &[&dyn AsRef<std::ffi::OsStr>]| {
        for x in xs {
            args.push(x.as_ref().to_os_string());
        }
    };
    // No `--die-with-parent`: its PR_SET_PDEATHSIG fires when the *thread* that spawned
    // bwrap ends (the manager launches on a short-lived thread), which killed every sandbox
    // a server opened. Teardown at stop and the orphan sweep at start end it instead.
    push(&[&"--unshare-all", &"--hostname", &spec.id]);
    push(&[&"--clearenv"]);
    for (k, v) in [
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("HOME", "/root"),
        ("TERM", "xterm-256color"),
        ("LANG", "C.UTF-8"),
        (OWNER_VAR, spec.owner_tag.as_str()),
    ] {
        push(&[&"--setenv", &k, &v]);
    }
    match &spec.image {
        // Each of the image's top-level entries on bwrap's own tmpfs root, not the image as
        // `/`: a read-only root could not take the mount points proctor adds (`/proctor`,
        // `/work`), and bwrap cannot make them in it.
        Some(img) => {
            let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&img.rootfs)
                .map_err(|e| {
                    RigError::Internal(format!(
                        "read the image's root {}: {e}",
                        img.rootfs.display()
                    ))
                })?
                .flatten()
                .map(|e| e.file_name())
                .collect();
            names.sort();
            for name in names {
                let n = name.to_string_lossy();
                if WRITABLE.contains(&n.as_ref())
                    || ["proc", "dev", "tmp", "proctor", "work"].contains(&n.as_ref())
                {
                    continue;
                }
                let host = img.rootfs.join(&name);
                let inside = Path::new("/").join(&name);
                match std::fs::symlink_metadata(&host) {
                    Ok(m) if m.file_type().is_symlink() => {
                        let t = std::fs::read_link(&host).map_err(RigError::internal)?;
                        push(&[&"--symlink", &t, &inside]);
                    }
                    Ok(m) if m.is_dir() || m.is_file() => push(&[&"--ro-bind", &host, &inside]),
                    _ => {}
                }
            }
        }
        None => {
            push(&[&"--ro-bind", &"/usr", &"/usr"]);
            for l in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
                let host = Path::new("/").join(l);
                match std::fs::symlink_metadata(&host) {
                    Ok(m) if m.file_type().is_symlink() => {
                        let t = std::fs::read_link(&host).map_err(RigError::internal)?;
                        push(&[&"--symlink", &t, &host]);
                    }
                    Ok(m) if m.is_dir() => push(&[&"--ro-bind", &host, &host]),
                    _ => {}
                }
            }
        }
    }
    push(&[&"--proc", &"/proc", &"--dev", &"/dev", &"--tmpfs", &"/tmp"]);
    for w in WRITABLE {
        let inside = format!("/{w}");
        push(&[&"--bind", &upper.join(w), &inside]);
    }
    push(&[&"--ro-bind", &spec.proctor_exe, &"/proctor/bin/proctor"]);
    push(&[&"--bind", &run_dir, &"/proctor/run"]);
    let cwd = if let Some(ws) = &spec.workspace {
        push(&[&"--bind", ws, &"/work"]);
        "/work"
    } else {
        "/root"
    };
    push(&[&"--chdir", &cwd]);
    // Namespaced only: power off ends the sandbox's pid namespace; low ports for relays.
    push(&[
        &"--cap-add",
        &"CAP_SYS_BOOT",
        &"--cap-add",
        &"CAP_NET_BIND_SERVICE",
    ]);
    push(&[&"--", &"/proctor/bin/proctor", &"rig", &"guest-init"]);
    push(&[&"--agent", &"/proctor/run/agent.sock"]);
    for (n, a) in allow.iter().enumerate() {
        let r = format!("{}=/proctor/run/allow-{n}.sock", a.guest);
        push(&[&"--relay", &r]);
    }

    let freezer = Freezer::create(&spec.owner_tag).ok();
    let mut env: BTreeMap<OsString, OsString> = BTreeMap::new();
    env.insert("PATH".into(), "/usr/sbin:/usr/bin:/sbin:/bin".into());
    env.insert("LANG".into(), "C.UTF-8".into());
    env.insert(OWNER_VAR.into(), spec.owner_tag.clone().into());
    let mut rs = RunSpec::new(args, &spec.dir, env, Transport::Pty(spec.size));
    rs.cgroup = freezer.as_ref().map(|f| f.dir.clone());
    let _ = std::fs::remove_file(run_dir.join("agent.sock"));
    let console = Run::spawn(rs).map_err(|e| RigError::Internal(format!("start bwrap: {e}")))?;
    let agent = match AgentClient::connect_while(
        &run_dir.join("agent.sock"),
        Instant::now() + spec.boot_timeout,
        || match console.liveness() {
            crate::runs::Liveness::Exited { exit } => Some(format!("bwrap ended ({exit:?})")),
            _ => None,
        },
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = console.stop(Duration::from_secs(2));
            console.end_remaining(Duration::from_secs(2));
            let said = console
                .screen()
                .map(|s| crate::text::one_line(s.text.trim(), 300))
                .unwrap_or_default();
            if let Some(f) = &freezer {
                let _ = crate::runs::cgroup::remove(&f.dir);
            }
            return Err(RigError::Unavailable(format!(
                "the namespace rig {} did not boot: {e}; its console said: {said}",
                spec.id
            )));
        }
    };
    let mut residuals = vec![
        "shares the host kernel: a kernel exploit in the guest reaches the host".to_string(),
        "uid 0 inside maps to the server's uid outside: files it writes in /work, \
         /proctor/run and its writable layer are the server user's"
            .to_string(),
        "the writable layer is binds of /etc, /root, /home, /var, /srv, /opt and /mnt into \
         the rig's folder (bubblewrap 0.8 has no overlay); the rest of the root is read-only"
            .to_string(),
    ];
    if spec.image.is_none() {
        residuals.push(
            "no image: the root is the host's /usr (and /bin, /lib*, /sbin) bound read-only, \
             so the guest reads the host's installed programs"
                .into(),
        );
    }
    match &freezer {
        Some(f) if f.v1 => residuals.push("suspend: the cgroup v1 freezer".into()),
        Some(_) => residuals.push("suspend: the cgroup v2 cgroup.freeze".into()),
        None => residuals
            .push("suspend is not available: no writable freezer cgroup on this host".into()),
    }
    let boundary = Boundary {
        backend: BackendKind::Namespace,
        summary: SUMMARY.into(),
        shares_host_kernel: true,
        accel: None,
        egress: if allow.is_empty() {
            Egress::Denied
        } else {
            Egress::Allowlist
        },
        residuals,
    };
    Ok(Sandbox {
        console,
        agent,
        allow,
        boundary,
        freezer,
        _relays: relays,
    })
}

/// The guest's PATH (the sandbox's `--setenv PATH`).
pub const GUEST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The first process inside the sandbox's namespaces: a child of bwrap (pid `outer`, on the
/// host's side) whose network namespace is not the host's.
fn inner_pid(outer: u32) -> Option<u32> {
    let ns = |pid: &str, which: &str| std::fs::read_link(format!("/proc/{pid}/ns/{which}")).ok();
    let host_net = ns("self", "net")?;
    let children = |pid: u32| -> Vec<u32> {
        let mut v = Vec::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                    v.extend(c.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
                }
            }
        }
        v
    };
    children(outer)
        .into_iter()
        .find(|c| ns(&c.to_string(), "net").is_some_and(|n| n != host_net))
}

/// `nsenter` on the host's PATH.
fn nsenter() -> Option<PathBuf> {
    ["/usr/bin/nsenter", "/bin/nsenter", "/usr/sbin/nsenter"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

impl Sandbox {
    /// The freezer cgroup, when suspend is available.
    pub fn freezer(&self) -> Option<&Freezer> {
        self.freezer.as_ref()
    }

    /// The agent's channel.
    pub fn agent(&self) -> &AgentClient {
        &self.agent
    }
}

impl Machine for Sandbox {
    fn boundary(&self) -> Boundary {
        self.boundary.clone()
    }
    fn allow(&self) -> Vec<Allow> {
        self.allow.clone()
    }
    fn console(&self) -> &Run {
        &self.console
    }
    fn pid(&self) -> (u32, Option<u64>) {
        (self.console.pid(), self.console.start_time())
    }
    fn exec(&self, req: &ExecRequest) -> Result<ExecResult, RigError> {
        self.agent.exec(req)
    }
    fn put_file(&self, path: &str, bytes: &[u8], mode: u32) -> Result<(), RigError> {
        self.agent.put(path, bytes, mode)
    }
    fn get_file(&self, path: &str, max: usize) -> Result<Vec<u8>, RigError> {
        self.agent.get(path, max)
    }
    fn suspend(&self) -> Result<(), RigError> {
        match &self.freezer {
            Some(f) => f.set(true),
            None => Err(RigError::Unavailable(
                "suspend needs a writable freezer cgroup, which this host lacks".into(),
            )),
        }
    }
    fn resume(&self) -> Result<(), RigError> {
        match &self.freezer {
            Some(f) => f.set(false),
            None => Err(RigError::Unavailable(
                "resume needs a writable freezer cgroup, which this host lacks".into(),
            )),
        }
    }
    fn resident_bytes(&self) -> Option<u64> {
        let pids = match &self.freezer {
            Some(f) => f.members(),
            None => vec![self.console.pid()],
        };
        let mut total = 0u64;
        let mut any = false;
        for p in pids {
            let Ok(s) = std::fs::read_to_string(format!("/proc/{p}/status")) else {
                continue;
            };
            if let Some(kb) = s.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            }) {
                total += kb * 1024;
                any = true;
            }
        }
        any.then_some(total)
    }
    /// `nsenter` into the sandbox's user, mount, pid, network, uts and ipc namespaces (the
    /// working folder set inside), then `setpriv` drops every capability the entering
    /// process holds in the sandbox's user namespace and sets no_new_privs, as bubblewrap
    /// does for its own children. A probe (`/bin/true` the same way) runs first, so a
    /// refusal (the kernel's EPERM, a missing tool) is named here and not as a failed run.
    fn enter_command(&self, argv: &[String], cwd: &str) -> Result<Entered, RigError> {
        let Some(pid) = inner_pid(self.console.pid()) else {
            return Err(RigError::Conflict(
                "no process of the sandbox is alive inside its namespaces: the rig is ending"
                    .into(),
            ));
        };
        let Some(nsenter) = nsenter() else {
            return Err(RigError::Unavailable(
                "nsenter is not installed: a session in a namespace rig enters it with \
                 nsenter. Remedy: apt-get install util-linux"
                    .into(),
            ));
        };
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        let setpriv = "/usr/bin/setpriv";
        if !root.join(setpriv.trim_start_matches('/')).is_file() {
            return Err(RigError::Unavailable(format!(
                "the rig's root has no {setpriv} (util-linux), which drops the entering \
                 process's capabilities; build the image anew (`proctor rig image build`)"
            )));
        }
        // With a v1 freezer, the entering process first joins the rig's freezer cgroup (a
        // hierarchy apart from the run's own v2 cgroup, which keeps holding it), so the
        // session's process and its children are frozen with the rig. A v2 freezer would
        // take it out of the run's cgroup: there the residual is named instead.
        let mut prefix: Vec<String> = Vec::new();
        if let Some(f) = self.freezer.as_ref().filter(|f| f.v1) {
            prefix.extend([
                "/bin/sh".into(),
                "-c".into(),
                "echo $$ > \"$1\" && shift && exec \"$@\"".into(),
                "proctor-enter".into(),
                f.dir.join("cgroup.procs").to_string_lossy().into_owned(),
            ]);
        }
        prefix.extend([
            nsenter.to_string_lossy().into_owned(),
            format!("--target={pid}"),
            "--user".into(),
            "--mount".into(),
            "--pid".into(),
            "--net".into(),
            "--uts".into(),
            "--ipc".into(),
            "--preserve-credentials".into(),
            format!("--wdns={cwd}"),
            "--".into(),
            setpriv.into(),
            "--bounding-set=-all".into(),
            "--inh-caps=-all".into(),
            "--no-new-privs".into(),
            "--".into(),
        ]);
        let probe = std::process::Command::new(&prefix[0])
            .args(&prefix[1..])
            .arg("/bin/true")
            .env_clear()
            .env("PATH", GUEST_PATH)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| RigError::Internal(format!("run {}: {e}", prefix[0])))?;
        if !probe.status.success() {
            let said = crate::text::one_line_bytes(&probe.stderr, 300);
            // SAFETY: geteuid has no preconditions.
            let unprivileged = unsafe { libc::geteuid() } != 0;
            return Err(RigError::Unavailable(format!(
                "entering the rig's namespaces failed ({}): {said}{}",
                probe.status,
                if unprivileged {
                    "; run as an unprivileged user, bubblewrap 0.8 nests the sandbox's user \
                     namespace inside the one that owns its other namespaces, and nsenter \
                     enters only the inner one (EPERM on the others): a session in a namespace \
                     rig needs the server to run as root here"
                } else {
                    ""
                }
            )));
        }
        let mut full = prefix;
        full.extend(argv.iter().cloned());
        Ok(Entered {
            argv: full,
            root,
            proctor: "/proctor/bin/proctor".into(),
            path: GUEST_PATH.into(),
        })
    }
    fn shutdown(&self, grace: Duration) -> Result<(), RigError> {
        if let Some(f) = &self.freezer {
            let _ = f.set(false);
        }
        let _ = self.agent.shutdown(Duration::from_secs(2));
        let _ = self.console.wait_exit(grace);
        self.console
            .stop(grace)
            .map_err(|e| RigError::Internal(format!("stop the sandbox: {e}")))?;
        if !self.console.end_remaining(grace) {
            return Err(RigError::Internal(
                "processes of the sandbox are still alive after SIGKILL".into(),
            ));
        }
        if let Some(f) = &self.freezer {
            let _ = crate::runs::cgroup::remove(&f.dir);
        }
        Ok(())
    }
}
