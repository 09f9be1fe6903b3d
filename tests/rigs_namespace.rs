//! The namespace backend against real bubblewrap, host-bind root (no image needed): the guest
//! agent, exec, files, egress, the allow relay, suspend, the read-only root, shutdown; and a
//! rig whose root is the base image's files.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use proctor::rigs::backend::{LaunchSpec, Machine, OWNER_VAR};
use proctor::rigs::model::{Allow, ExecRequest, ExecResult};
use proctor::rigs::namespace;
use proctor::runs::TermSize;

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

struct Rig {
    m: namespace::Sandbox,
    tag: String,
    _dir: tempfile::TempDir,
}

impl Drop for Rig {
    /// A test that fails mid-way still ends its sandbox (a guest loop left running would
    /// spin on the host's CPU for as long as the machine runs).
    fn drop(&mut self) {
        let _ = self.m.shutdown(Duration::from_secs(2));
    }
}

fn launch(allow: Vec<Allow>) -> Rig {
    launch_on(allow, None)
}

fn launch_on(allow: Vec<Allow>, image: Option<proctor::rigs::image::Image>) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let id = format!("rig-{:04}", std::process::id() % 10000);
    let tag = format!(
        "test{}/{}{}",
        std::process::id(),
        id,
        rand_suffix(dir.path())
    );
    let spec = LaunchSpec {
        id,
        dir: dir.path().join("rig"),
        image,
        allow,
        workspace: None,
        memory_mb: 64,
        size: TermSize { rows: 24, cols: 80 },
        owner_tag: tag.clone(),
        proctor_exe: PathBuf::from(env!("CARGO_BIN_EXE_proctor")),
        boot_timeout: Duration::from_secs(60),
    };
    let m = namespace::launch(&spec).expect("the namespace rig launches");
    Rig { m, tag, _dir: dir }
}

fn rand_suffix(p: &std::path::Path) -> String {
    p.file_name().unwrap().to_string_lossy().replace('.', "")
}

fn exec(r: &Rig, argv: &[&str], stdin: Option<&str>, timeout: u64) -> ExecResult {
    r.m.exec(&ExecRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin_b64: stdin.map(|s| base64::engine::general_purpose::STANDARD.encode(s)),
        cwd: None,
        timeout_secs: Some(timeout),
    })
    .expect("exec answers")
}

fn sh(r: &Rig, script: &str) -> ExecResult {
    exec(r, &["/bin/bash", "-c", script], None, 30)
}

fn tagged_processes(tag: &str) -> Vec<u32> {
    let needle = format!("{OWNER_VAR}={tag}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .map(|env| env.windows(needle.len()).any(|w| w == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn exec_files_and_the_boundary() {
    let r = launch(Vec::new());
    let b = r.m.boundary();
    assert_eq!(
        b.summary,
        "namespace boundary: weaker than a VM (shares the host kernel)"
    );
    assert!(b.shares_host_kernel);

    // stdin and the exit code.
    let x = exec(
        &r,
        &["/bin/bash", "-c", "cat; exit 7"],
        Some("hello in"),
        30,
    );
    assert_eq!(x.exit_code, Some(7));
    assert_eq!(b64(&x.stdout_b64), b"hello in");
    assert!(!x.timed_out);

    // The deadline kills the exec's group.
    let x = exec(&r, &["/bin/sleep", "30"], None, 1);
    assert!(x.timed_out);
    assert_eq!(x.signal.as_deref(), Some("SIGKILL"));

    // Truncation at the cap.
    let x = sh(&r, "head -c 5000000 /dev/zero");
    assert!(x.truncated);
    assert_eq!(
        b64(&x.stdout_b64).len(),
        proctor::rigs::model::EXEC_OUTPUT_MAX
    );

    // Put and get round trip, parents created, mode applied.
    r.m.put_file("/root/a/b/c.txt", b"payload\n", 0o640)
        .unwrap();
    assert_eq!(r.m.get_file("/root/a/b/c.txt", 1024).unwrap(), b"payload\n");
    let x = sh(&r, "stat -c %a /root/a/b/c.txt");
    assert_eq!(b64(&x.stdout_b64), b"640\n");
    // Too large, a symlink and a FIFO refused.
    let e = r.m.get_file("/root/a/b/c.txt", 3).unwrap_err();
    assert_eq!(e.code(), "too_large", "{e}");
    sh(&r, "ln -s /root/a/b/c.txt /root/link; mkfifo /root/fifo");
    let e = r.m.get_file("/root/link", 1024).unwrap_err();
    assert_eq!(e.code(), "bad_request", "{e}");
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let e = r.m.get_file("/root/fifo", 1024).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    assert_eq!(
        r.m.get_file("/root/none", 10).unwrap_err().code(),
        "not_found"
    );

    // Only lo; the sandbox sees only its own processes.
    let x = sh(&r, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
    assert_eq!(String::from_utf8_lossy(&b64(&x.stdout_b64)), "lo\n");
    let x = sh(&r, "ls /proc | grep -c '^[0-9]'");
    let n: u32 = String::from_utf8_lossy(&b64(&x.stdout_b64))
        .trim()
        .parse()
        .unwrap();
    assert!(n < 12, "the sandbox lists {n} processes");
    let x = sh(
        &r,
        "ls /proc | grep -qx 1 && ! ls /proc | grep -qx $PPID$PPID$PPID; echo $?",
    );
    assert_eq!(b64(&x.stdout_b64), b"0\n");

    // Writes never reach the host: /usr is read-only; /etc holds no host secret.
    let x = sh(&r, "echo x > /usr/proctor-rig-x");
    assert_ne!(x.exit_code, Some(0));
    assert!(!std::path::Path::new("/usr/proctor-rig-x").exists());
    let x = sh(&r, "ls /etc");
    let etc = String::from_utf8_lossy(&b64(&x.stdout_b64)).to_string();
    assert!(!etc.contains("shadow") && !etc.contains("ssh"), "{etc}");

    // Shutdown leaves no process with the owner tag.
    assert!(!tagged_processes(&r.tag).is_empty());
    r.m.shutdown(Duration::from_secs(3)).unwrap();
    assert_eq!(tagged_processes(&r.tag), Vec::<u32>::new());
}

#[test]
fn egress_is_refused_and_an_allow_reaches_only_its_service() {
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let ap = allowed.local_addr().unwrap().port();
    let op = other.local_addr().unwrap().port();
    let seen = std::thread::spawn(move || {
        let (mut s, _) = allowed.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        s.write_all(b"pong\n").unwrap();
        buf
    });
    let r = launch(vec![Allow::parse(&format!("127.0.0.1:{ap}")).unwrap()]);
    assert_eq!(r.m.allow()[0].guest, format!("127.0.0.2:{ap}"));
    let probe = |addr: &str| {
        sh(
            &r,
            &format!("timeout 3 bash -c 'exec 3<>/dev/tcp/{addr}' && echo open || echo refused"),
        )
    };
    // Refused: the host's listeners, the outside world, the other service.
    for addr in [
        format!("127.0.0.1/{op}"),
        format!("127.0.0.1/{ap}"),
        "1.1.1.1/53".to_string(),
    ] {
        let x = probe(&addr);
        assert_eq!(b64(&x.stdout_b64), b"refused\n", "{addr}");
    }
    let x = sh(
        &r,
        &format!("exec 3<>/dev/tcp/127.0.0.2/{ap}; printf 'ping\\n' >&3; head -n1 <&3"),
    );
    assert_eq!(b64(&x.stdout_b64), b"pong\n", "{x:?}");
    assert_eq!(&seen.join().unwrap(), b"ping\n");
    let x = probe(&format!("127.0.0.3/{ap}"));
    assert_eq!(b64(&x.stdout_b64), b"refused\n");
    r.m.shutdown(Duration::from_secs(3)).unwrap();
    assert_eq!(tagged_processes(&r.tag), Vec::<u32>::new());
}

#[test]
fn suspend_freezes_the_guest_and_resume_thaws_it() {
    let r = launch(Vec::new());
    let f =
        r.m.freezer()
            .expect("a freezer cgroup on this host")
            .clone();
    // A guest loop counting into a file, started in the background. Each value is renamed
    // into place, so a read never sees the file truncated (frozen between a truncation and
    // its write, an empty file would read the same before and after the resume).
    sh(
        &r,
        "setsid bash -c 'i=0; while true; do i=$((i+1)); echo $i > /root/count.new; \
         mv /root/count.new /root/count; done' >/dev/null 2>&1 < /dev/null &",
    );
    let read =
        || std::fs::read_to_string(r._dir.path().join("rig/upper/root/count")).unwrap_or_default();
    let start = Instant::now();
    while read().trim().is_empty() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    r.m.suspend().unwrap();
    assert_eq!(f.frozen(), Some(true));
    let a = read();
    std::thread::sleep(Duration::from_millis(300));
    let b = read();
    assert_eq!(f.frozen(), Some(true));
    assert_eq!(a, b, "the counter moved while frozen");
    assert!(r.m.resident_bytes().unwrap() > 0);
    r.m.resume().unwrap();
    assert_eq!(f.frozen(), Some(false));
    assert!(!b.trim().is_empty(), "the counter never started");
    let start = Instant::now();
    let mut c = read();
    while c == b && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
        c = read();
    }
    assert_ne!(c, b, "the counter did not move after resume");
    r.m.shutdown(Duration::from_secs(3)).unwrap();
    assert_eq!(tagged_processes(&r.tag), Vec::<u32>::new());
}

#[test]
fn a_rig_on_the_base_images_root_reads_the_images_files_and_runs_its_agent() {
    let image = proctor::rigs::image::Image::open(&common::rigs::built_image()).unwrap();
    let r = launch_on(Vec::new(), Some(image));
    // The image's own init is there (the host has none), the host's home is not.
    let x = sh(
        &r,
        "test -x /sbin/proctor-init && echo image; test -e /work || echo no-work; \
         ls /proctor/bin; touch /usr/x 2>/dev/null || echo ro",
    );
    assert_eq!(
        String::from_utf8_lossy(&b64(&x.stdout_b64)),
        "image\nno-work\nproctor\nro\n",
        "{x:?}"
    );
    r.m.shutdown(Duration::from_secs(3)).unwrap();
    assert_eq!(tagged_processes(&r.tag), Vec::<u32>::new());
}
