//! The vm backend against real QEMU (TCG here) booting the real base image (built once per
//! machine by `tests/common/rigs.rs`). What needs no guest agent is driven through the serial
//! console, as a person at the rig's terminal would; what needs the agent (`hello`, exec)
//! goes through `Machine`.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proctor::home::Home;
use proctor::rigs::backend::{LaunchSpec, Machine, OWNER_VAR};
use proctor::rigs::model::{Allow, Egress, ExecRequest};
use proctor::rigs::vm::{self, Vm};
use proctor::runs::TermSize;
use proctor::runs::ring::ReadOutcome;

const BOOT: Duration = Duration::from_secs(180);
const WAIT: Duration = Duration::from_secs(60);

struct Rig {
    _home: tempfile::TempDir,
    home: Home,
    vm: Option<Vm>,
    tag: String,
}

impl Rig {
    fn vm(&self) -> &Vm {
        self.vm.as_ref().unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(vm) = &self.vm {
            let _ = vm.shutdown(Duration::from_secs(3));
        }
    }
}

fn home() -> (tempfile::TempDir, Home) {
    let dir = tempfile::Builder::new()
        .prefix("pv")
        .tempdir_in("/tmp")
        .unwrap();
    common::rigs::install_image(dir.path());
    let home = Home::resolve(Some(dir.path())).unwrap();
    (dir, home)
}

fn spec(home: &Home, id: &str, allow: Vec<Allow>) -> LaunchSpec {
    let rigs = home.data.join("rigs");
    LaunchSpec {
        id: id.into(),
        dir: rigs.join(id),
        image: proctor::rigs::image::current(home).unwrap(),
        allow,
        workspace: None,
        memory_mb: 256,
        size: TermSize {
            rows: 24,
            cols: 200,
        },
        owner_tag: format!("test-{}/{id}", std::process::id()),
        proctor_exe: PathBuf::from(env!("CARGO_BIN_EXE_proctor")),
        boot_timeout: BOOT,
    }
}

fn boot_in(dir: tempfile::TempDir, home: Home, id: &str, allow: Vec<Allow>) -> Rig {
    let s = spec(&home, id, allow);
    let tag = s.owner_tag.clone();
    let vm = vm::boot(&s).unwrap_or_else(|e| panic!("boot {id}: {e}"));
    Rig {
        _home: dir,
        home,
        vm: Some(vm),
        tag,
    }
}

fn boot(id: &str, allow: Vec<Allow>) -> Rig {
    let (dir, home) = home();
    boot_in(dir, home, id, allow)
}

/// Everything the console printed so far.
fn console_text(vm: &Vm) -> String {
    let ring = vm.console().ring();
    let mut bytes = Vec::new();
    let mut cursor = ring.status().first_available;
    while let ReadOutcome::Frames(frames) = ring.read_from(cursor, 1 << 20) {
        for f in frames {
            cursor = f.seq + 1;
            bytes.extend_from_slice(&f.bytes);
        }
    }
    String::from_utf8_lossy(&bytes).replace('\r', "")
}

static SEQ: AtomicU64 = AtomicU64::new(1);

/// Types `cmd` at the guest's shell on the serial console; returns its output and exit code.
/// The markers are split in the typed line so the echo of the input never matches them.
fn sh(vm: &Vm, cmd: &str) -> (String, i32) {
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let line = format!("echo \"@@B\"\"EG-{n}@@\"; {cmd}; echo \"@@E\"\"ND-{n}-$?@@\"\r");
    vm.console().write_input(line.as_bytes()).unwrap();
    let begin = format!("@@BEG-{n}@@\n");
    let end = format!("@@END-{n}-");
    let deadline = Instant::now() + WAIT;
    loop {
        let text = console_text(vm);
        if let Some(b) = text.rfind(&begin)
            && let Some(e) = text[b..].find(&end)
        {
            let out = text[b + begin.len()..b + e].to_string();
            let rest = &text[b + e + end.len()..];
            let code: i32 = rest.split("@@").next().unwrap().trim().parse().unwrap();
            return (out, code);
        }
        assert!(
            Instant::now() < deadline,
            "no answer to {cmd:?}; the console:\n{}",
            &text[text.len().saturating_sub(3000)..]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether a TCP connection from inside the guest to ADDR:PORT opens.
fn guest_connects(vm: &Vm, addr: &str, port: u16) -> bool {
    let (out, _) = sh(
        vm,
        &format!(
            "timeout 3 bash -c 'exec 3<>/dev/tcp/{addr}/{port}' 2>/dev/null && echo CONN''ECTED || echo REF''USED"
        ),
    );
    assert!(
        out.contains("CONNECTED") || out.contains("REFUSED"),
        "{out:?}"
    );
    out.contains("CONNECTED")
}

/// The host's own non-loopback IPv4 addresses.
fn host_addresses() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|a| a.split('/').next())
        .filter(|a| !a.starts_with("127."))
        .map(str::to_string)
        .collect()
}

/// A host listener on every address; counts the connections it accepted and their bytes.
fn listener() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut c = c;
                let mut buf = Vec::new();
                let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = c.read_to_end(&mut buf);
                s.lock().unwrap().push(buf);
            });
        }
    });
    (port, seen)
}

/// Every process on the host whose environment carries `OWNER_VAR=tag`.
fn tagged_processes(tag: &str) -> Vec<u32> {
    let needle = format!("{OWNER_VAR}={tag}");
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ"))
            && env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes())
            && common::alive(pid as i32)
        {
            pids.push(pid);
        }
    }
    pids
}

fn sha256(p: &Path) -> String {
    proctor::rigs::image::sha256_file(p).unwrap()
}

#[test]
fn a_vm_boots_with_only_lo_and_its_boundary_says_so() {
    let rig = boot("rig-0001", vec![]);
    let vm = rig.vm();
    let b = vm.boundary();
    assert_eq!(
        b.summary,
        format!(
            "vm boundary: own kernel, disk and network stack (QEMU microvm, {})",
            match vm.accel() {
                proctor::rigs::model::Accel::Kvm => "KVM",
                proctor::rigs::model::Accel::Tcg => "TCG",
            }
        )
    );
    assert_eq!(b.egress, Egress::Denied);
    // The console is the guest's own kernel and shell.
    let (kernel, _) = sh(vm, "uname -r");
    assert!(kernel.contains("cloud-amd64"), "{kernel:?}");
    let (host, _) = sh(vm, "hostname");
    assert_eq!(host.trim(), "rig-0001");
    let (links, code) = sh(vm, "ip -o link");
    assert_eq!(code, 0);
    let names: Vec<&str> = links.lines().filter_map(|l| l.split(": ").nth(1)).collect();
    assert_eq!(names, vec!["lo"], "{links}");
    // The tools disk is read-only at /proctor and holds this binary.
    let (t, code) = sh(vm, "test -x /proctor/bin/proctor && touch /proctor/x");
    assert_ne!(code, 0, "{t}");
    let rss = vm.resident_bytes().unwrap();
    assert!(rss > 16 << 20, "{rss}");
    // The accel probe's answer is cached beside the rigs.
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rig.home.data.join("rigs/accel.json")).unwrap())
            .unwrap();
    assert!(rec["qemu"].as_str().unwrap().contains("QEMU"), "{rec}");
}

#[test]
fn egress_is_refused_from_inside_the_guest() {
    let (port, seen) = listener();
    let rig = boot("rig-0002", vec![]);
    let vm = rig.vm();
    assert!(!guest_connects(vm, "10.0.2.2", port));
    assert!(!guest_connects(vm, "1.1.1.1", 80));
    for a in host_addresses() {
        assert!(!guest_connects(vm, &a, port), "{a}");
    }
    // A host listener on loopback is the guest's own loopback, not the host's.
    assert!(!guest_connects(vm, "127.0.0.1", port));
    std::thread::sleep(Duration::from_millis(200));
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn an_allowed_service_is_reached_at_its_guest_address_and_nothing_else() {
    let (port, seen) = listener();
    let allow = vec![Allow::parse(&format!("127.0.0.1:{port}")).unwrap()];
    let rig = boot("rig-0003", allow);
    let vm = rig.vm();
    let a = vm.allow();
    assert_eq!(a[0].guest, format!("10.0.2.100:{port}"));
    assert_eq!(vm.boundary().egress, Egress::Allowlist);
    let (out, code) = sh(
        vm,
        &format!(
            "timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.100/{port}; echo through-the-relay >&3; exec 3>&-'"
        ),
    );
    assert_eq!(code, 0, "{out}");
    let deadline = Instant::now() + WAIT;
    while !seen
        .lock()
        .unwrap()
        .iter()
        .any(|b| b.starts_with(b"through-the-relay"))
    {
        assert!(
            Instant::now() < deadline,
            "the listener never saw the bytes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!guest_connects(vm, "10.0.2.2", port));
    assert!(!guest_connects(vm, "10.0.2.101", port));
    assert!(!guest_connects(vm, "1.1.1.1", 80));
    for h in host_addresses() {
        assert!(!guest_connects(vm, &h, port), "{h}");
    }
}

#[test]
fn suspend_pauses_the_cpus_and_resume_continues() {
    let rig = boot("rig-0004", vec![]);
    let vm = rig.vm();
    assert_eq!(vm.status().unwrap(), "running");
    vm.suspend().unwrap();
    assert_eq!(vm.status().unwrap(), "paused");
    // Memory stays resident while paused.
    assert!(vm.resident_bytes().unwrap() > 16 << 20);
    vm.resume().unwrap();
    assert_eq!(vm.status().unwrap(), "running");
    let (out, _) = sh(vm, "echo still-here");
    assert_eq!(out.trim(), "still-here");
}

#[test]
fn the_base_image_is_never_written_and_a_second_rig_boots_from_the_same_bytes() {
    let (dir, home) = home();
    let image = proctor::rigs::image::current(&home).unwrap().unwrap();
    let before = sha256(&image.base);
    assert_eq!(before, image.digest);
    let rig = boot_in(dir, home, "rig-0005", vec![]);
    let vm = rig.vm();
    let (out, _) = sh(
        vm,
        "for d in / /etc /usr /usr/bin /var /root /boot /sbin /opt /srv /home; do echo x > $d/proctor-wrote-here; done; \
         ls /proctor-wrote-here /etc/proctor-wrote-here",
    );
    assert!(out.contains("/etc/proctor-wrote-here"), "{out}");
    // Then over the root disk itself (the overlay takes it).
    let (out, _) = sh(
        vm,
        "dd if=/dev/zero of=/dev/vda bs=1M count=32 conv=fsync 2>&1 | tail -1; sync",
    );
    assert!(out.contains("copied"), "{out}");
    let dir = {
        let mut rig = rig;
        rig.vm
            .take()
            .unwrap()
            .shutdown(Duration::from_secs(3))
            .unwrap();
        rig
    };
    assert_eq!(sha256(&image.base), before);
    let s = spec(&dir.home, "rig-0006", vec![]);
    let second = vm::boot(&s).unwrap();
    let (out, _) = sh(&second, "cat /etc/proctor-wrote-here 2>&1; echo ok");
    assert!(out.contains("No such file"), "{out}");
    second.shutdown(Duration::from_secs(3)).unwrap();
    assert_eq!(sha256(&image.base), before);
}

#[test]
fn shutdown_leaves_no_qemu_process() {
    let (port, _seen) = listener();
    let allow = vec![Allow::parse(&format!("127.0.0.1:{port}")).unwrap()];
    let mut rig = boot("rig-0007", allow);
    let (pid, start) = rig.vm().pid();
    assert!(start.is_some());
    assert!(tagged_processes(&rig.tag).contains(&pid));
    let vm = rig.vm.take().unwrap();
    vm.shutdown(Duration::from_secs(3)).unwrap();
    assert!(!common::alive(pid as i32));
    assert_eq!(tagged_processes(&rig.tag), Vec::<u32>::new());
}

#[test]
fn a_launch_without_an_image_names_the_remedy() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::resolve(Some(dir.path())).unwrap();
    let mut s = spec(&home, "rig-0008", vec![]);
    s.image = None;
    let e = vm::launch(&s).err().expect("refused").to_string();
    assert!(e.contains("proctor rig image build"), "{e}");
}

/// Needs helper B's guest agent: `launch` returns once `hello` answered, then exec runs in
/// the guest.
#[test]
fn launch_waits_for_the_agent_and_exec_runs_in_the_guest() {
    let (dir, home) = home();
    let s = spec(&home, "rig-0009", vec![]);
    let vm = vm::launch(&s).unwrap_or_else(|e| panic!("launch: {e}"));
    let rig = Rig {
        _home: dir,
        home,
        vm: Some(vm),
        tag: s.owner_tag.clone(),
    };
    let r = rig
        .vm()
        .exec(&ExecRequest {
            argv: vec!["ip".into(), "-o".into(), "link".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.exit_code, Some(0));
    use base64::Engine;
    let out = base64::engine::general_purpose::STANDARD
        .decode(&r.stdout_b64)
        .unwrap();
    let out = String::from_utf8_lossy(&out);
    let names: Vec<&str> = out.lines().filter_map(|l| l.split(": ").nth(1)).collect();
    assert_eq!(names, vec!["lo"], "{out}");
}
