//! What a rig's engine does, whichever it is: the [`Machine`] trait the manager drives, and
//! the launch of either backend ([`launch`]).
//!
//! A machine has a console (a `runs::Run` under a PTY: QEMU's serial line for a VM, the
//! sandbox's shell for a namespace rig: its ring, screen and input are the rig's terminal)
//! and a guest agent (`guest`: exec, files) reached over a channel only the host holds.

use std::path::PathBuf;
use std::time::Duration;

use super::RigError;
use super::image::Image;
use super::model::{Allow, BackendKind, Boundary, ExecRequest, ExecResult};
use crate::runs::{Run, TermSize};

/// The environment variable every engine process of a rig carries: `<home-id>/<rig-id>`.
/// The orphan sweep finds a dead server's engines by it (and by the recorded pid and start
/// time), never by name alone.
pub const OWNER_VAR: &str = "PROCTOR_RIG_OWNER";

/// Everything a backend needs to start one rig.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// `rig-0001`.
    pub id: String,
    /// The rig's private folder (0700; `data/rigs/<id>/`): overlay, sockets, logs.
    pub dir: PathBuf,
    /// The base image (read-only, never written). A VM needs one; a namespace rig without
    /// one binds the host's system folders read-only instead.
    pub image: Option<Image>,
    /// The services admitted; each gets its `guest` address filled by the launch.
    pub allow: Vec<Allow>,
    /// A staged copy of the workspace's tree (secrets excluded), mounted at `/work` in the
    /// guest; `None`: no workspace.
    pub workspace: Option<PathBuf>,
    /// The VM's RAM.
    pub memory_mb: u64,
    /// The console's size.
    pub size: TermSize,
    /// The value of [`OWNER_VAR`].
    pub owner_tag: String,
    /// The proctor binary (the guest agent and the relays are this binary; it is bound or
    /// copied read-only into the guest).
    pub proctor_exe: PathBuf,
    /// The longest the boot may take before the launch fails (the engine is then ended).
    pub boot_timeout: Duration,
}

/// A launched rig's engine.
pub trait Machine: Send + Sync {
    /// The boundary as measured at launch (with the allow list's guest addresses).
    fn boundary(&self) -> Boundary;
    /// The allow list with each `guest` address filled in.
    fn allow(&self) -> Vec<Allow>;
    /// The console: the guest's terminal (ring, screen, input, resize).
    fn console(&self) -> &Run;
    /// The engine's pid on the host and its start time (for the orphan sweep's record).
    fn pid(&self) -> (u32, Option<u64>);
    /// Runs a program in the guest through its agent; killed at the request's deadline.
    fn exec(&self, req: &ExecRequest) -> Result<ExecResult, RigError>;
    /// Writes a file in the guest (parents created), at most `model::FILE_MAX` bytes.
    fn put_file(&self, path: &str, bytes: &[u8], mode: u32) -> Result<(), RigError>;
    /// Reads a regular file from the guest, at most `max` bytes (more is `TooLarge`).
    fn get_file(&self, path: &str, max: usize) -> Result<Vec<u8>, RigError>;
    /// Stops the guest's CPUs (VM: QMP `stop`) or freezes its processes (namespace:
    /// cgroup freezer); memory stays resident.
    fn suspend(&self) -> Result<(), RigError>;
    fn resume(&self) -> Result<(), RigError>;
    /// Resident bytes of the engine's processes now; `None` when not measurable.
    fn resident_bytes(&self) -> Option<u64>;
    /// Ends the guest: a clean shutdown first (VM: QMP `quit`), then the process group,
    /// TERM then KILL after `grace`. Returns once nothing of it runs.
    fn shutdown(&self, grace: Duration) -> Result<(), RigError>;
    /// How the host starts a process *of the guest* (a session's provider process in the
    /// rig, `session start --rig`): the argv that, spawned on the host under the runs
    /// layer's own PTY or pipes, runs `argv` inside the guest's namespaces with `cwd` (a
    /// guest path) as its working folder, with the guest's view of the file system and
    /// network. Refused where the backend cannot (a VM: see [`VM_ENTER_REFUSAL`]).
    fn enter_command(&self, argv: &[String], cwd: &str) -> Result<Entered, RigError> {
        let _ = (argv, cwd);
        Err(RigError::Unavailable(VM_ENTER_REFUSAL.into()))
    }
}

/// Why a session cannot run in a VM rig (yet), and what it would need.
pub const VM_ENTER_REFUSAL: &str = "a session cannot run in a VM rig: the guest's base image \
     has no provider CLI (claude, codex, …) and the guest agent runs one command at a time \
     with its output returned at the end, not a process under a terminal the server holds; it \
     would need the provider installed in the image and a guest-agent spawn that streams a PTY \
     back. Remedy: open a namespace rig (`proctor rig open --backend namespace`) and start the \
     session in it";

/// What [`Machine::enter_command`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entered {
    /// The host argv: the entering command, then `argv`.
    pub argv: Vec<String>,
    /// The guest's root folder as the host sees it (`/proc/PID/root` of a process inside),
    /// to check that a program is visible in the guest.
    pub root: PathBuf,
    /// The proctor binary's path inside the guest (bound read-only at launch).
    pub proctor: String,
    /// The PATH inside the guest.
    pub path: String,
}

/// Starts a rig on `backend` and returns once its guest agent answers (the rig is then
/// running). A launch that fails ends everything it started.
pub fn launch(backend: BackendKind, spec: &LaunchSpec) -> Result<Box<dyn Machine>, RigError> {
    match backend {
        BackendKind::Vm => super::vm::launch(spec).map(|m| Box::new(m) as Box<dyn Machine>),
        BackendKind::Namespace => {
            super::namespace::launch(spec).map(|m| Box::new(m) as Box<dyn Machine>)
        }
    }
}

/// Whether each backend can run here, and why not (the tool missing, KVM refused, …), for
/// `rig open`'s refusal and `rig list`'s header.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Availability {
    pub backend: BackendKind,
    pub available: bool,
    /// The engine's version line, or why it cannot run (with the remedy).
    pub detail: String,
}

/// Probes both backends (versions of `qemu-system-x86_64` and `bwrap`; no guest booted).
pub fn availability() -> Vec<Availability> {
    vec![super::vm::availability(), super::namespace::availability()]
}
