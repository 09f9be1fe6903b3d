//! The `vm` backend: QEMU `microvm` (KVM when a probe guest booted on it, TCG otherwise), the
//! guest kernel from the image, the read-only base under a per-rig qcow2 overlay, the serial
//! console as the rig's terminal, QMP for pause, resume and quit, virtio-serial for the guest
//! agent, `-nic none` unless `--allow` (then `-netdev user,restrict=on` with one `guestfwd`
//! per allowed service, to a host relay).
//!
//! Disks (virtio-blk, found by label in the guest): the rig's overlay (`overlay.qcow2`, its
//! backing file the image's `base.img`, which QEMU opens read-only as a backing file), the
//! tools disk (`proctor-tools`, read-only: `/proctor/bin/proctor`, cached per binary SHA-256
//! in `data/rigs/tools/<hex>.img`) and the workspace disk (`proctor-work`, `<rig>/work.img`,
//! built from the staged tree). The guest init prints `PROCTOR-READY <id>` on the serial line
//! once the agent is started; [`boot`] waits for it, [`launch`] then for the agent's `hello`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::RigError;
use super::backend::{Availability, LaunchSpec, Machine, OWNER_VAR};
use super::guest::{AgentClient, Request, Response};
use super::image::{Image, TOOL_PATH, need_tool, sha256_file};
use super::model::{Accel, Allow, BackendKind, Boundary, Egress, ExecRequest, ExecResult};
use crate::runs::ring::ReadOutcome;
use crate::runs::{Liveness, Run, RunSpec, Transport};

/// What the guest init prints on the serial line once it is up (then the rig's id).
pub const READY_MARKER: &str = "PROCTOR-READY";

/// The guest's address for allowed service number `n` (0-based): `10.0.2.(100+n)`.
pub fn guest_ip(n: usize) -> Option<String> {
    (n < 100).then(|| format!("10.0.2.{}", 100 + n))
}

/// How long the accel probe waits for a KVM guest's marker.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// A running VM rig.
pub struct Vm {
    id: String,
    dir: PathBuf,
    console: Run,
    accel: Accel,
    allow: Vec<Allow>,
    agent: Option<AgentClient>,
    qmp_lock: Mutex<()>,
}

/// `data/rigs/accel.json`: the probe's answer, valid while QEMU and the host kernel are the
/// same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccelRecord {
    pub accel: Accel,
    pub qemu: String,
    pub host_kernel: String,
    /// Why KVM was not used (empty when it is).
    pub reason: String,
    pub probed_at: String,
}

/// The qemu binary's version line (`QEMU emulator version 7.2.…`).
pub fn qemu_version(qemu: &Path) -> Result<String, RigError> {
    let out = Command::new(qemu)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| RigError::Unavailable(format!("{} --version: {e}", qemu.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(crate::text::one_line(
        text.lines().next().unwrap_or(""),
        200,
    ))
}

pub fn availability() -> Availability {
    let check = || -> Result<String, RigError> {
        let qemu = need_tool("qemu-system-x86_64", "qemu-system-x86")?;
        need_tool("qemu-img", "qemu-utils")?;
        need_tool("mke2fs", "e2fsprogs")?;
        qemu_version(&qemu)
    };
    match check() {
        Ok(v) => Availability {
            backend: BackendKind::Vm,
            available: true,
            detail: v,
        },
        Err(e) => Availability {
            backend: BackendKind::Vm,
            available: false,
            detail: e.to_string(),
        },
    }
}

fn host_kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Whether `/dev/kvm` can be opened read-write here (why not, when it cannot).
fn kvm_openable() -> Result<(), String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map(|_| ())
        .map_err(|e| format!("/dev/kvm: {e}"))
}

/// The accelerator rigs use here: the cached probe in `rigs_dir/accel.json` while QEMU and
/// the host kernel are unchanged, else a probe (`/dev/kvm` opened, then a KVM guest booted
/// from `image` that must print its marker within [`PROBE_TIMEOUT`]).
pub fn accel(rigs_dir: &Path, qemu: &Path, image: &Image) -> Result<AccelRecord, RigError> {
    let path = rigs_dir.join("accel.json");
    let qemu_v = qemu_version(qemu)?;
    let kernel = host_kernel();
    if let Ok(bytes) = std::fs::read(&path)
        && let Ok(rec) = serde_json::from_slice::<AccelRecord>(&bytes)
        && rec.qemu == qemu_v
        && rec.host_kernel == kernel
    {
        return Ok(rec);
    }
    let (accel, reason) = match kvm_openable() {
        Err(why) => (Accel::Tcg, why),
        Ok(()) => match probe_kvm(qemu, image) {
            Ok(()) => (Accel::Kvm, String::new()),
            Err(why) => (Accel::Tcg, why),
        },
    };
    let rec = AccelRecord {
        accel,
        qemu: qemu_v,
        host_kernel: kernel,
        reason,
        probed_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    crate::files::ensure_private_dir(rigs_dir).map_err(RigError::internal)?;
    let json = serde_json::to_vec_pretty(&rec).map_err(RigError::internal)?;
    crate::files::write_atomic(&path, &json).map_err(RigError::internal)?;
    Ok(rec)
}

/// Boots `image` once under KVM (a throwaway snapshot of the base, no network, no agent) and
/// waits for the init's marker.
fn probe_kvm(qemu: &Path, image: &Image) -> Result<(), String> {
    let mut cmd = Command::new(qemu);
    cmd.args(["-M", "microvm,acpi=on", "-accel", "kvm", "-cpu", "host"])
        .args(["-m", "256", "-smp", "1", "-nodefaults", "-no-user-config"])
        .args(["-nographic", "-no-reboot", "-kernel"])
        .arg(&image.kernel)
        .arg("-initrd")
        .arg(&image.initrd)
        .arg("-append")
        .arg(
            "console=ttyS0 root=/dev/vda rw init=/sbin/proctor-init quiet panic=1 proctor.id=probe",
        )
        .arg("-drive")
        .arg(format!(
            "id=root,file={},format=raw,if=none,snapshot=on",
            drive_path(&image.base)
        ))
        .args(["-device", "virtio-blk-device,drive=root", "-nic", "none"])
        .args(["-serial", "stdio"])
        .env_clear()
        .env("PATH", TOOL_PATH)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The probe VM dies with the thread that started it: this thread waits for it (at most
    // PROBE_TIMEOUT) and kills it, but a server killed meanwhile (SIGKILL, a crash) would
    // otherwise leave a guest running under init with no deadline.
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl(2) and getppid(2) are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The server died between the fork and the prctl: nobody waits for this guest.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("start {}: {e}", qemu.display()))?;
    let mut out = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(false);
                    return;
                }
                Ok(n) => {
                    seen.extend_from_slice(&buf[..n]);
                    if seen
                        .windows(READY_MARKER.len())
                        .any(|w| w == READY_MARKER.as_bytes())
                    {
                        let _ = tx.send(true);
                        return;
                    }
                }
            }
        }
    });
    let ok = rx.recv_timeout(PROBE_TIMEOUT).unwrap_or(false);
    let _ = child.kill();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let _ = child.wait();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a KVM guest did not boot within {} s: {}",
            PROBE_TIMEOUT.as_secs(),
            crate::text::one_line(&err, 200)
        ))
    }
}

/// The host's TSC rate in kHz, measured: the cycle counter against the monotonic clock over
/// three 20 ms windows, the median kept (a window the scheduler cut into reads high or low).
///
/// Under TCG the guest's TSC is the host's counter, but a guest kernel calibrating it against
/// the emulated PIT on a loaded host fails ("Fast TSC calibration failed", "No reference
/// (HPET/PMTIMER) available": microvm has neither) and then runs with no working clock,
/// stalled with an empty serial line. Telling it the rate (`tsc_early_khz=`, `tsc=reliable`)
/// removes that calibration; measured here rather than read from `/proc/cpuinfo`, whose MHz
/// is the current frequency, not the counter's.
#[cfg(target_arch = "x86_64")]
pub fn host_tsc_khz() -> Option<u64> {
    fn window() -> Option<u64> {
        let t0 = Instant::now();
        // SAFETY: `rdtsc` has no preconditions on x86_64; it reads the cycle counter.
        let c0 = unsafe { core::arch::x86_64::_rdtsc() };
        std::thread::sleep(Duration::from_millis(20));
        let c1 = unsafe { core::arch::x86_64::_rdtsc() };
        let ns = t0.elapsed().as_nanos() as u64;
        (ns > 0 && c1 > c0).then(|| (c1 - c0).saturating_mul(1_000_000) / ns)
    }
    let mut w: Vec<u64> = (0..3).filter_map(|_| window()).collect();
    w.sort_unstable();
    w.get(w.len() / 2).copied().filter(|&k| k > 100_000)
}

#[cfg(not(target_arch = "x86_64"))]
pub fn host_tsc_khz() -> Option<u64> {
    None
}

/// A path inside a QEMU option value: commas doubled.
fn drive_path(p: &Path) -> String {
    p.display().to_string().replace(',', ",,")
}

/// The boundary a VM rig has.
pub fn boundary_for(accel: Accel, egress: Egress) -> Boundary {
    let name = match accel {
        Accel::Kvm => "KVM",
        Accel::Tcg => "TCG",
    };
    let mut residuals = vec![
        "QEMU runs on the host as the server's user, unconfined by a second sandbox: an escape \
         from QEMU is an escape to that user"
            .to_string(),
        "timing and cache side channels on the shared CPU are not addressed".to_string(),
    ];
    if accel == Accel::Tcg {
        residuals.insert(
            0,
            "TCG: the CPU is emulated in software (KVM is not usable here); the boundary is \
             QEMU's emulator, not hardware virtualisation"
                .to_string(),
        );
    }
    if egress == Egress::Allowlist {
        residuals.push(
            "each allowed service is reached through a host relay: what that service does with \
             the guest's bytes is outside the rig"
                .to_string(),
        );
    }
    Boundary {
        backend: BackendKind::Vm,
        summary: format!("vm boundary: own kernel, disk and network stack (QEMU microvm, {name})"),
        shares_host_kernel: false,
        accel: Some(accel),
        egress,
        residuals,
    }
}

/// Total size of the regular files under `dir` (symlinks not followed).
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len() + 4096;
            }
        }
    }
    total
}

/// `mke2fs -d SRC` into `out` (size in KiB), labelled.
fn make_ext4(mke2fs: &Path, src: &Path, out: &Path, label: &str, kib: u64) -> Result<(), RigError> {
    let o = Command::new(mke2fs)
        .env_clear()
        .env("PATH", TOOL_PATH)
        .args(["-q", "-F", "-t", "ext4", "-d"])
        .arg(src)
        .args(["-L", label, "-E", "root_owner=0:0"])
        .arg(out)
        .arg(format!("{kib}K"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| RigError::Internal(format!("mke2fs: {e}")))?;
    if !o.status.success() {
        return Err(RigError::Internal(format!(
            "mke2fs -d {} failed: {}",
            src.display(),
            crate::text::one_line_bytes(&o.stderr, 300)
        )));
    }
    chmod(out, 0o600)
}

fn chmod(p: &Path, mode: u32) -> Result<(), RigError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .map_err(|e| RigError::Internal(format!("chmod {}: {e}", p.display())))
}

/// The tools disk for `exe` (`rigs_dir/tools/<sha256>.img`: `bin/proctor`), built once per
/// binary.
pub fn tools_disk(rigs_dir: &Path, mke2fs: &Path, exe: &Path) -> Result<PathBuf, RigError> {
    let tools = rigs_dir.join("tools");
    crate::files::ensure_private_dir(&tools).map_err(RigError::internal)?;
    let digest = sha256_file(exe)?;
    let hex = digest.trim_start_matches("sha256:");
    let img = tools.join(format!("{hex}.img"));
    if img.is_file() {
        return Ok(img);
    }
    let stage = tools.join(format!(".stage-{}-{hex}", std::process::id()));
    let _ = std::fs::remove_dir_all(&stage);
    let result = (|| {
        let bin = stage.join("bin");
        // The stage and its `bin` are 0700 like every folder proctor makes (the guest's
        // root reads the tools disk whatever its folders' modes).
        crate::files::ensure_private_dir(&bin).map_err(RigError::internal)?;
        let dst = bin.join("proctor");
        if std::fs::hard_link(exe, &dst).is_err() {
            std::fs::copy(exe, &dst)
                .map_err(|e| RigError::Internal(format!("copy {}: {e}", exe.display())))?;
        }
        chmod(&dst, 0o755)?;
        let kib = tree_bytes(&stage) / 1024 * 5 / 4 + 16 * 1024;
        let tmp = tools.join(format!(".{hex}.{}.img", std::process::id()));
        make_ext4(mke2fs, &stage, &tmp, "proctor-tools", kib)?;
        std::fs::rename(&tmp, &img).map_err(RigError::internal)
    })();
    let _ = std::fs::remove_dir_all(&stage);
    result.map(|()| img)
}

/// Quotes one word for the relay command line (`g_shell_parse_argv` in libslirp).
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The QEMU command line for one rig (everything after the program).
#[allow(clippy::too_many_arguments)]
fn qemu_args(
    spec: &LaunchSpec,
    image: &Image,
    accel: Accel,
    overlay: &Path,
    tools: &Path,
    work: Option<&Path>,
    allow: &[Allow],
) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |s: &str| a.push(s.into());
    push("-M");
    push("microvm,acpi=on");
    push("-accel");
    match accel {
        Accel::Kvm => {
            push("kvm");
            push("-cpu");
            push("host");
        }
        Accel::Tcg => push("tcg"),
    }
    push("-m");
    push(&spec.memory_mb.max(64).to_string());
    for s in [
        "-smp",
        "1",
        "-nodefaults",
        "-no-user-config",
        "-nographic",
        "-no-reboot",
    ] {
        push(s);
    }
    push("-name");
    push(&format!("proctor-{}", spec.id));
    push("-kernel");
    push(&image.kernel.display().to_string());
    push("-initrd");
    push(&image.initrd.display().to_string());
    let mut cmdline = format!(
        "console=ttyS0 root=/dev/vda rw init=/sbin/proctor-init quiet panic=1 proctor.id={}",
        spec.id
    );
    if accel == Accel::Tcg
        && let Some(khz) = host_tsc_khz()
    {
        cmdline.push_str(&format!(" tsc_early_khz={khz} tsc=reliable"));
    }
    if !allow.is_empty() {
        cmdline.push_str(" proctor.net=1");
        let names: Vec<String> = allow
            .iter()
            .filter(|a| a.host.parse::<std::net::IpAddr>().is_err())
            .map(|a| format!("{}@{}", a.host, a.guest.rsplit_once(':').unwrap().0))
            .collect();
        if !names.is_empty() {
            cmdline.push_str(&format!(" proctor.hosts={}", names.join(",")));
        }
    }
    push("-append");
    push(&cmdline);
    push("-drive");
    push(&format!(
        "id=root,file={},format=qcow2,if=none",
        drive_path(overlay)
    ));
    push("-device");
    push("virtio-blk-device,drive=root");
    push("-drive");
    push(&format!(
        "id=tools,file={},format=raw,if=none,readonly=on",
        drive_path(tools)
    ));
    push("-device");
    push("virtio-blk-device,drive=tools");
    if let Some(w) = work {
        push("-drive");
        push(&format!(
            "id=work,file={},format=raw,if=none",
            drive_path(w)
        ));
        push("-device");
        push("virtio-blk-device,drive=work");
    }
    push("-chardev");
    push(&format!(
        "socket,id=agent,path={},server=on,wait=off",
        drive_path(&spec.dir.join("agent.sock"))
    ));
    push("-device");
    push("virtio-serial-device");
    push("-device");
    push("virtserialport,chardev=agent,name=proctor.agent");
    push("-qmp");
    push(&format!(
        "unix:{},server=on,wait=off",
        drive_path(&spec.dir.join("qmp.sock"))
    ));
    if allow.is_empty() {
        push("-nic");
        push("none");
    } else {
        let mut netdev = "user,id=n0,restrict=on".to_string();
        for al in allow {
            let target = format!("{}:{}", al.host, al.port);
            let cmd = format!(
                "{} rig relay --stdio --to {}",
                sh_quote(&spec.proctor_exe.display().to_string()),
                sh_quote(&target)
            );
            netdev.push_str(&format!(
                ",guestfwd=tcp:{}-cmd:{}",
                al.guest,
                cmd.replace(',', ",,")
            ));
        }
        push("-netdev");
        push(&netdev);
        push("-device");
        push("virtio-net-device,netdev=n0");
    }
    push("-chardev");
    push("stdio,id=con,signal=off");
    push("-serial");
    push("chardev:con");
    a
}

/// Starts the VM and returns once the guest init printed its marker (the agent is started
/// then, not yet answering). [`launch`] also waits for the agent's `hello`.
pub fn boot(spec: &LaunchSpec) -> Result<Vm, RigError> {
    let qemu = need_tool("qemu-system-x86_64", "qemu-system-x86")?;
    let qemu_img = need_tool("qemu-img", "qemu-utils")?;
    let mke2fs = need_tool("mke2fs", "e2fsprogs")?;
    let image = spec.image.clone().ok_or_else(|| {
        RigError::Unavailable(
            "a vm rig needs the base image and none is built. Remedy: run `proctor rig image \
             build` (about a minute, needs the network), or open with --backend namespace"
                .into(),
        )
    })?;
    if spec.allow.len() > 100 {
        return Err(RigError::BadRequest(
            "--allow: at most 100 services per rig".into(),
        ));
    }
    crate::files::ensure_private_dir(&spec.dir).map_err(RigError::internal)?;
    let rigs_dir = crate::files::parent_of(&spec.dir);
    let accel = accel(&rigs_dir, &qemu, &image)?.accel;

    // The overlay: the base is its backing file, opened read-only by QEMU.
    let overlay = spec.dir.join("overlay.qcow2");
    let _ = std::fs::remove_file(&overlay);
    let o = Command::new(&qemu_img)
        .env_clear()
        .env("PATH", TOOL_PATH)
        .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
        .arg(&image.base)
        .arg(&overlay)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| RigError::Internal(format!("qemu-img: {e}")))?;
    if !o.status.success() {
        return Err(RigError::Internal(format!(
            "qemu-img create the overlay: {}",
            crate::text::one_line_bytes(&o.stderr, 300)
        )));
    }
    chmod(&overlay, 0o600)?;
    let tools = tools_disk(&rigs_dir, &mke2fs, &spec.proctor_exe)?;
    let work = match &spec.workspace {
        Some(src) => {
            let img = spec.dir.join("work.img");
            let _ = std::fs::remove_file(&img);
            let kib = (tree_bytes(src) * 2 / 1024 + 128 * 1024).max(256 * 1024);
            make_ext4(&mke2fs, src, &img, "proctor-work", kib)?;
            Some(img)
        }
        None => None,
    };
    let allow: Vec<Allow> = spec
        .allow
        .iter()
        .enumerate()
        .map(|(n, a)| Allow {
            host: a.host.clone(),
            port: a.port,
            guest: format!("{}:{}", guest_ip(n).expect("checked above"), a.port),
        })
        .collect();
    for s in ["agent.sock", "qmp.sock"] {
        let _ = std::fs::remove_file(spec.dir.join(s));
    }

    let mut argv: Vec<OsString> = vec![qemu.clone().into()];
    argv.extend(qemu_args(
        spec,
        &image,
        accel,
        &overlay,
        &tools,
        work.as_deref(),
        &allow,
    ));
    let mut env: BTreeMap<OsString, OsString> = BTreeMap::new();
    env.insert("PATH".into(), TOOL_PATH.into());
    env.insert("LANG".into(), "C".into());
    env.insert("HOME".into(), spec.dir.clone().into());
    env.insert(OWNER_VAR.into(), spec.owner_tag.clone().into());
    let console = Run::spawn(RunSpec::new(
        argv,
        &spec.dir,
        env,
        Transport::Pty(spec.size),
    ))
    .map_err(|e| RigError::Internal(format!("start QEMU: {e}")))?;
    let vm = Vm {
        id: spec.id.clone(),
        dir: spec.dir.clone(),
        console,
        accel,
        allow,
        agent: None,
        qmp_lock: Mutex::new(()),
    };
    let deadline = Instant::now() + spec.boot_timeout;
    let marker = format!("{READY_MARKER} {}", spec.id);
    if let Err(why) = vm.wait_console(&marker, deadline) {
        let tail = vm.serial_tail(12);
        let _ = vm.console.stop(Duration::from_secs(2));
        return Err(RigError::Unavailable(format!(
            "the vm rig {} did not boot: {why}; the serial line's last lines:\n{tail}",
            spec.id
        )));
    }
    Ok(vm)
}

/// Starts a VM rig and returns once its guest agent answered `hello`. A launch that fails
/// ends QEMU and says why.
pub fn launch(spec: &LaunchSpec) -> Result<Vm, RigError> {
    let mut vm = boot(spec)?;
    let deadline = Instant::now() + spec.boot_timeout.max(Duration::from_secs(10));
    match AgentClient::connect(&spec.dir.join("agent.sock"), deadline) {
        Ok(agent) => {
            vm.agent = Some(agent);
            Ok(vm)
        }
        Err(e) => {
            let tail = vm.serial_tail(12);
            let _ = vm.console.stop(Duration::from_secs(2));
            Err(RigError::Unavailable(format!(
                "the vm rig {} booted but its guest agent did not answer: {e}; the serial \
                 line's last lines:\n{tail}",
                spec.id
            )))
        }
    }
}

impl Vm {
    /// Waits until the console's output contains `needle` (from its start), QEMU ends, or
    /// `deadline`.
    pub fn wait_console(&self, needle: &str, deadline: Instant) -> Result<(), String> {
        let ring = self.console.ring();
        let mut cursor = 1u64;
        let mut window: Vec<u8> = Vec::new();
        loop {
            match ring.read_from(cursor, 1 << 20) {
                ReadOutcome::Frames(frames) => {
                    for f in frames {
                        cursor = f.seq + 1;
                        window.extend_from_slice(&f.bytes);
                    }
                    if window.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                        return Ok(());
                    }
                    let keep = needle.len().max(1) - 1;
                    if window.len() > keep {
                        window.drain(..window.len() - keep);
                    }
                    continue;
                }
                ReadOutcome::Lag { first_available } => {
                    cursor = first_available;
                    continue;
                }
                ReadOutcome::End(_) => {
                    return Err(match self.console.wait_exit(Duration::from_secs(2)) {
                        Liveness::Exited { exit } => format!("QEMU ended ({exit:?})"),
                        _ => "QEMU's console closed".into(),
                    });
                }
                ReadOutcome::Pending { .. } | ReadOutcome::Ahead { .. } => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err("the boot timed out".into());
            }
            ring.wait_readable(cursor, (deadline - now).min(Duration::from_millis(250)));
        }
    }

    /// The last `n` non-empty lines the serial console printed, sanitised.
    pub fn serial_tail(&self, n: usize) -> String {
        let ring = self.console.ring();
        let mut bytes = Vec::new();
        let mut cursor = ring.status().first_available;
        while let ReadOutcome::Frames(frames) = ring.read_from(cursor, 1 << 20) {
            for f in frames {
                cursor = f.seq + 1;
                bytes.extend_from_slice(&f.bytes);
            }
        }
        let start = bytes.len().saturating_sub(16 * 1024);
        let text = crate::text::multi_line_capped_bytes(&bytes[start..], 200);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// One QMP command (a connection of its own: greeting, `qmp_capabilities`, the command);
    /// its `return` value.
    pub fn qmp(&self, execute: &str) -> Result<serde_json::Value, RigError> {
        let _g = self.qmp_lock.lock().unwrap_or_else(|e| e.into_inner());
        let path = self.dir.join("qmp.sock");
        let err = |e: std::io::Error| RigError::Internal(format!("QMP {execute}: {e}"));
        let stream = UnixStream::connect(&path).map_err(err)?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(err)?;
        let mut w = stream.try_clone().map_err(err)?;
        let mut r = BufReader::new(stream);
        let read_answer = |r: &mut BufReader<UnixStream>| -> Result<serde_json::Value, RigError> {
            loop {
                let mut line = String::new();
                let n = r.read_line(&mut line).map_err(err)?;
                if n == 0 {
                    return Err(RigError::Internal(format!(
                        "QMP {execute}: QEMU closed the connection"
                    )));
                }
                let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| {
                    RigError::Internal(format!("QMP {execute}: not JSON from QEMU: {e}"))
                })?;
                if let Some(ret) = v.get("return") {
                    return Ok(ret.clone());
                }
                if let Some(e) = v.get("error") {
                    return Err(RigError::Internal(format!(
                        "QMP {execute}: {}",
                        crate::text::one_line(&e.to_string(), 300)
                    )));
                }
                if v.get("QMP").is_some() {
                    return Ok(serde_json::Value::Null);
                }
                // An event: skip it.
            }
        };
        read_answer(&mut r)?; // the greeting
        w.write_all(b"{\"execute\":\"qmp_capabilities\"}\n")
            .map_err(err)?;
        read_answer(&mut r)?;
        w.write_all(format!("{{\"execute\":{}}}\n", serde_json::json!(execute)).as_bytes())
            .map_err(err)?;
        if execute == "quit" {
            // QEMU may close before or after answering.
            return Ok(read_answer(&mut r).unwrap_or(serde_json::Value::Null));
        }
        read_answer(&mut r)
    }

    /// QMP `query-status`'s `status` (`running`, `paused`, …).
    pub fn status(&self) -> Result<String, RigError> {
        let v = self.qmp("query-status")?;
        Ok(v.get("status")
            .and_then(|s| s.as_str())
            .unwrap_or("")
            .to_string())
    }

    pub fn accel(&self) -> Accel {
        self.accel
    }

    fn agent(&self) -> Result<&AgentClient, RigError> {
        self.agent.as_ref().ok_or_else(|| {
            RigError::Unavailable(format!(
                "the vm rig {}'s guest agent is not connected",
                self.id
            ))
        })
    }
}

fn unexpected(op: &str, r: Response) -> RigError {
    match r {
        Response::Error { code, message } => match code.as_str() {
            "not_found" => RigError::NotFound(crate::text::one_line(&message, 300)),
            "too_large" => RigError::TooLarge(crate::text::one_line(&message, 300)),
            "bad_request" | "not_regular" => {
                RigError::BadRequest(crate::text::one_line(&message, 300))
            }
            _ => RigError::Internal(format!(
                "{op} in the guest: {}",
                crate::text::one_line(&message, 300)
            )),
        },
        other => RigError::Internal(format!("{op}: the guest agent answered {other:?}")),
    }
}

impl Machine for Vm {
    fn boundary(&self) -> Boundary {
        boundary_for(
            self.accel,
            if self.allow.is_empty() {
                Egress::Denied
            } else {
                Egress::Allowlist
            },
        )
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
        let timeout = Duration::from_secs(req.timeout_secs.unwrap_or(60).clamp(1, 3600) + 10);
        match self.agent()?.call(Request::Exec(req.clone()), timeout)? {
            Response::Exec(r) => Ok(r),
            other => Err(unexpected("exec", other)),
        }
    }
    fn put_file(&self, path: &str, bytes: &[u8], mode: u32) -> Result<(), RigError> {
        use base64::Engine;
        if bytes.len() > super::model::FILE_MAX {
            return Err(RigError::TooLarge(format!(
                "{} bytes is over the {}-byte limit of a file copied in",
                bytes.len(),
                super::model::FILE_MAX
            )));
        }
        let req = Request::Put {
            path: path.into(),
            data_b64: base64::engine::general_purpose::STANDARD.encode(bytes),
            mode,
        };
        match self.agent()?.call(req, Duration::from_secs(60))? {
            Response::Done => Ok(()),
            other => Err(unexpected("cp in", other)),
        }
    }
    fn get_file(&self, path: &str, max: usize) -> Result<Vec<u8>, RigError> {
        use base64::Engine;
        let req = Request::Get {
            path: path.into(),
            max,
        };
        match self.agent()?.call(req, Duration::from_secs(60))? {
            Response::Data { data_b64 } => {
                if data_b64.len() > max.saturating_mul(4) / 3 + 8 {
                    return Err(RigError::TooLarge(format!(
                        "the guest sent more than {max} bytes for {path:?}"
                    )));
                }
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data_b64.as_bytes())
                    .map_err(|e| RigError::Internal(format!("cp out: bad base64: {e}")))?;
                if bytes.len() > max {
                    return Err(RigError::TooLarge(format!("{path:?} is over {max} bytes")));
                }
                Ok(bytes)
            }
            other => Err(unexpected("cp out", other)),
        }
    }
    fn suspend(&self) -> Result<(), RigError> {
        self.qmp("stop").map(|_| ())
    }
    fn resume(&self) -> Result<(), RigError> {
        self.qmp("cont").map(|_| ())
    }
    fn resident_bytes(&self) -> Option<u64> {
        if self.console.reaped() {
            return None;
        }
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.console.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line
            .trim_start_matches("VmRSS:")
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    }
    fn shutdown(&self, grace: Duration) -> Result<(), RigError> {
        if self.console.reaped() {
            let _ = self.console.stop(grace);
            return Ok(());
        }
        let half = (grace / 2).max(Duration::from_millis(500));
        if let Some(agent) = &self.agent
            && agent.call(Request::Shutdown, half).is_ok()
            && matches!(self.console.wait_exit(half), Liveness::Exited { .. })
        {
            let _ = self.console.stop(grace);
            return Ok(());
        }
        // A suspended guest cannot power itself off; QMP quit ends QEMU either way.
        if self.qmp("quit").is_ok() {
            let _ = self.console.wait_exit(grace);
        }
        self.console
            .stop(grace)
            .map_err(|e| RigError::Internal(format!("stop QEMU: {e}")))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test's child mode: run the probe against a fake QEMU (see the test below).
    const PROBE_CHILD: &str = "PROCTOR_TEST_PROBE_CHILD";

    #[test]
    fn a_probe_vm_dies_with_the_process_that_started_it() {
        if let Some(dir) = std::env::var_os(PROBE_CHILD) {
            // In the child: the fake QEMU writes its pid and sleeps; the parent test kills
            // this process while the probe waits for it.
            let dir = PathBuf::from(dir);
            let image = Image {
                dir: dir.clone(),
                base: dir.join("base.img"),
                rootfs: dir.join("root"),
                kernel: dir.join("vmlinuz"),
                initrd: dir.join("initrd"),
                digest: String::new(),
                recipe: String::new(),
            };
            let _ = probe_kvm(&dir.join("qemu"), &image);
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("qemu.pid");
        let fake = dir.path().join("qemu");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\necho $$ > {}\nexec sleep 600\n",
                pidfile.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "rigs::vm::tests::a_probe_vm_dies_with_the_process_that_started_it",
                "--nocapture",
            ])
            .env(PROBE_CHILD, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let pid: i32 = loop {
            if let Ok(t) = std::fs::read_to_string(&pidfile)
                && let Ok(p) = t.trim().parse()
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the fake QEMU never started");
            std::thread::sleep(Duration::from_millis(20));
        };
        // The server's death, as SIGKILL gives it: no cleanup runs.
        child.kill().unwrap();
        child.wait().unwrap();
        let alive = |p: i32| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .map(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(false)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let survived = alive(pid);
        if survived {
            // SAFETY: kill(2) of the fake's pid, which this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        assert!(
            !survived,
            "the probe VM outlived the process that started it"
        );
    }

    #[test]
    fn a_tcg_guest_is_told_the_hosts_tsc_rate_and_a_kvm_guest_is_not() {
        let khz = host_tsc_khz().expect("an x86_64 host has a cycle counter");
        // Any real TSC runs between 100 MHz and 10 GHz.
        assert!((100_000..10_000_000).contains(&khz), "{khz} kHz");
        let image = Image {
            dir: "/i".into(),
            base: "/i/base.img".into(),
            rootfs: "/i/root".into(),
            kernel: "/i/vmlinuz".into(),
            initrd: "/i/initrd".into(),
            digest: format!("sha256:{}", "0".repeat(64)),
            recipe: "r".into(),
        };
        let spec = LaunchSpec {
            id: "rig-0001".into(),
            dir: "/r".into(),
            image: Some(image.clone()),
            allow: vec![],
            workspace: None,
            memory_mb: 256,
            size: crate::runs::TermSize { rows: 24, cols: 80 },
            owner_tag: "t".into(),
            proctor_exe: "/p".into(),
            boot_timeout: Duration::from_secs(1),
        };
        let cmdline = |accel| {
            let a = qemu_args(
                &spec,
                &image,
                accel,
                Path::new("/o"),
                Path::new("/t"),
                None,
                &[],
            );
            let at = a.iter().position(|x| x == "-append").unwrap();
            a[at + 1].to_string_lossy().into_owned()
        };
        let tcg = cmdline(Accel::Tcg);
        assert!(tcg.contains(" tsc=reliable"), "{tcg}");
        let said: u64 = tcg
            .split("tsc_early_khz=")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        // The same counter measured twice agrees within 5%.
        assert!(said.abs_diff(khz) * 20 < khz, "{said} vs {khz}");
        assert!(!cmdline(Accel::Kvm).contains("tsc_early_khz"));
    }

    #[test]
    fn the_boundary_names_the_accelerator_and_its_residuals() {
        let b = boundary_for(Accel::Tcg, Egress::Denied);
        assert_eq!(
            b.summary,
            "vm boundary: own kernel, disk and network stack (QEMU microvm, TCG)"
        );
        assert!(!b.shares_host_kernel);
        assert!(b.residuals.iter().any(|r| r.starts_with("TCG")));
        let k = boundary_for(Accel::Kvm, Egress::Allowlist);
        assert!(k.summary.ends_with("(QEMU microvm, KVM)"));
        assert!(k.residuals.iter().any(|r| r.contains("relay")));
    }

    #[test]
    fn guest_addresses_are_numbered_from_100() {
        assert_eq!(guest_ip(0).as_deref(), Some("10.0.2.100"));
        assert_eq!(guest_ip(99).as_deref(), Some("10.0.2.199"));
        assert_eq!(guest_ip(100), None);
    }

    #[test]
    fn option_values_double_their_commas() {
        assert_eq!(drive_path(Path::new("/a,b/c")), "/a,,b/c");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
    }
}
