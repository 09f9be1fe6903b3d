//! `proctor rig …`: terminal rigs (see `docs/rigs.md`). The public verbs are thin clients of
//! `/v1/m/rigs` (helper D); `rig image …` is local (`rig_image.rs`, helper A); the hidden
//! verbs run inside a guest or for the engines (`rig_internal.rs`, helper B). Every string
//! that comes from a guest or the server reaches the terminal through `text`.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use base64::Engine;
use clap::{Args, Subcommand};
use hyper::Method;

use super::rig_image;
use super::rig_internal;
use super::{Ctx, UsageError, print_json};
use crate::api::rigs::{
    self as wire, Allow, BackendKind, ExecRequest, OpenRequest, RigState, RigView, TypeRequest,
};
use crate::client::{self, Client};
use crate::text;

/// Disposable machines an agent drives and a person can take over.
///
/// A rig is a throwaway terminal machine: a shell an agent drives through `rig exec` and
/// `rig type`, and a person can watch (`rig attach`, `rig screen`) or take over. Two
/// backends, each saying what its boundary is:
///
///   vm         QEMU microvm: its own kernel, disk and network stack (TCG here, or KVM).
///   namespace  bubblewrap on the host's kernel: a weaker boundary, and `rig show` says so.
///
/// Egress is denied (only loopback) unless `--allow HOST:PORT` admits one host service,
/// reached through a channel the host controls. A rig's life is bounded: a hard TTL nothing
/// extends, an idle window (suspended after it, closed after twice it), a memory budget.
///
/// The lock: `rig lock RIG` gives a person exclusive control; while it is held an agent's
/// actions that change the rig are refused (423, naming who holds it since when), and
/// observation (screen, cp out, audit) still works. Every action is in the rig's audit log
/// (`rig audit`), never a paste's or a file's content.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RigArgs {
    #[command(subcommand)]
    pub command: RigCommand,
}

#[derive(Debug, Subcommand)]
pub enum RigCommand {
    /// Opens a rig and waits until it runs (one progress line a second while it boots).
    Open(OpenArgs),
    /// Every rig: ID, BACKEND, BOUNDARY, STATE, LOCK, TTL LEFT, IDLE, RSS.
    List(JsonArg),
    /// One rig: every field, and what its boundary does not prove.
    Show(RigJson),
    /// Closes a rig (its engine ended, its folder kept with the audit log).
    Close(RigArg),
    /// Runs a program in the rig (no shell unless you name one); exit code = the guest's.
    Exec(ExecArgs),
    /// Types text into the rig's terminal (`\r` is Enter); `--paste` records it as a paste.
    Type(TypeArgs),
    Attach(AttachArgs),
    /// What the rig's terminal shows now (sanitised text).
    Screen(RigJson),
    /// Copies a file in or out: one side is `RIG:PATH` (`rig cp notes.txt rig-0001:/work/`).
    Cp(CpArgs),
    /// Takes the control lock (a person only): agents' changes are refused while held.
    Lock(RigArg),
    /// Releases the control lock.
    Unlock(RigArg),
    /// Suspends the rig (CPUs stopped or processes frozen; memory stays).
    Suspend(RigArg),
    /// Resumes a suspended rig.
    Resume(RigArg),
    /// The rig's audit log (who did what, when; refusals too).
    Audit(AuditArgs),
    /// Fetches the guest repository's commits into `refs/rigs/<id>/*` of the host's.
    Fetch(RigJson),
    Image(rig_image::ImageArgs),
    #[command(hide = true)]
    GuestAgent(rig_internal::GuestAgentArgs),
    #[command(hide = true)]
    Relay(rig_internal::RelayArgs),
    #[command(hide = true)]
    GuestInit(rig_internal::GuestInitArgs),
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RigArg {
    /// The rig's id (`rig-0001`; `proctor rig list`).
    pub rig: String,
}

#[derive(Debug, Args)]
pub struct RigJson {
    /// The rig's id (`rig-0001`).
    pub rig: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct OpenArgs {
    /// What kind of rig: only `terminal` exists.
    #[arg(long, default_value = "terminal", value_parser = ["terminal"])]
    pub kind: String,
    /// vm (default: its own kernel) or namespace (shares the host kernel).
    #[arg(long, value_parser = ["vm", "namespace"])]
    pub backend: Option<String>,
    /// A registered workspace (name or path): its tree is copied in at /work.
    #[arg(long)]
    pub workspace: Option<String>,
    /// The hard TTL (`90s`, `30m`, `2h`; default 2h, at most 24h).
    #[arg(long)]
    pub ttl: Option<String>,
    /// The idle window (default 30m): suspended after it, closed after twice it.
    #[arg(long)]
    pub idle: Option<String>,
    /// Admits one host service, HOST:PORT (repeatable); everything else stays denied.
    #[arg(long = "allow", value_name = "HOST:PORT")]
    pub allow: Vec<String>,
    /// Print the running rig as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    pub rig: String,
    /// Seconds before the guest program is killed (default 60, at most 3600).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub argv: Vec<String>,
}

#[derive(Debug, Args)]
pub struct TypeArgs {
    pub rig: String,
    /// The text; `-` reads it from stdin.
    pub text: String,
    /// A paste: the audit records that it happened and its size, never its content.
    #[arg(long)]
    pub paste: bool,
}

/// Attaches this terminal to the rig's console, live; detach with Ctrl-\ (it keeps running).
///
/// You see what the guest's terminal shows and type into it. The detach key is Ctrl-\ unless
/// --detach-key names another; detaching leaves the rig running.
///
/// The rig's screen is drawn (in the alternate screen, so your shell's screen comes back on
/// detach), the terminal goes to raw mode, and every key goes to the guest as typed (Ctrl-C
/// included: it interrupts the guest's program). The guest's output is untrusted: it reaches
/// your terminal through the same filter as `proctor session attach`'s, which drops what
/// would act outside the pane (clipboard writes, title changes, terminal queries whose
/// answers would be typed into the guest) and counts them on detach. The rig's terminal
/// follows the size of yours (up to 500 rows and 1000 columns); a dropped stream is resumed
/// from the next output seq.
///
/// Your keys go through the rig's chokepoint like `rig type`: each batch is in the rig's
/// audit log with your principal (its size, never its content); while a person holds the
/// lock (`rig lock`), an agent's keys are refused (423, naming who holds it since when) and
/// the attach ends with that refusal. An attached terminal counts as use: the idle ladder
/// leaves the rig alone while you are attached (its hard TTL still ends it).
///
/// Needs a terminal on stdin and stdout; without one use `proctor rig screen RIG` and
/// `proctor rig type RIG TEXT`. Exit 0 on detach or when the console ends; 1 when the server
/// refused or closed the stream; 2 without a terminal.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The rig's id (`rig-0001`; `proctor rig list`).
    pub rig: String,
    /// The key that detaches: ctrl-\ (default), ctrl-], ctrl-^, ctrl-_, or ctrl-a … ctrl-z
    /// except ctrl-c, ctrl-d, ctrl-h, ctrl-i, ctrl-j, ctrl-m, ctrl-q, ctrl-s and ctrl-z.
    #[arg(long, value_name = "KEY", default_value = "ctrl-\\")]
    pub detach_key: String,
}

#[derive(Debug, Args)]
pub struct CpArgs {
    /// A host file, or `RIG:PATH`.
    pub src: String,
    /// A host file, or `RIG:PATH`.
    pub dst: String,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    pub rig: String,
    /// Print JSON (one page; with --follow, one event a line).
    #[arg(long)]
    pub json: bool,
    /// Keep printing new events until interrupted.
    #[arg(long)]
    pub follow: bool,
}

pub fn run(ctx: &Ctx, args: RigArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        RigCommand::Image(a) => rig_image::run(ctx, a),
        RigCommand::GuestAgent(a) => rig_internal::guest_agent(a),
        RigCommand::Relay(a) => rig_internal::relay(a),
        RigCommand::GuestInit(a) => rig_internal::guest_init(a),
        RigCommand::Open(a) => open(ctx, a),
        RigCommand::List(a) => list(ctx, a),
        RigCommand::Show(a) => show(ctx, a),
        RigCommand::Close(a) => verb(ctx, Method::POST, wire::CLOSE, &a.rig, "closed"),
        RigCommand::Lock(a) => verb(ctx, Method::POST, wire::LOCK, &a.rig, "locked by you"),
        RigCommand::Unlock(a) => verb(ctx, Method::DELETE, wire::LOCK, &a.rig, "unlocked"),
        RigCommand::Suspend(a) => verb(ctx, Method::POST, wire::SUSPEND, &a.rig, "suspended"),
        RigCommand::Resume(a) => verb(ctx, Method::POST, wire::RESUME, &a.rig, "resumed"),
        RigCommand::Exec(a) => exec(ctx, a),
        RigCommand::Type(a) => type_text(ctx, a),
        RigCommand::Attach(a) => attach(ctx, a),
        RigCommand::Screen(a) => screen(ctx, a),
        RigCommand::Cp(a) => cp(ctx, a),
        RigCommand::Audit(a) => audit(ctx, a),
        RigCommand::Fetch(a) => fetch(ctx, a),
    }
}

fn client(ctx: &Ctx) -> anyhow::Result<Client> {
    let home = ctx.home()?;
    let client = Client::new(&home)?;
    client::block_on(client.ensure_server(&home))??;
    Ok(client.with_token(&home)?)
}

/// A server or guest string for one line of a terminal.
fn t(s: &str) -> String {
    text::one_line(s, 120)
}

/// A rig id as the user wrote it: `rig-` and digits, or a usage error naming an example.
fn check_id(id: &str) -> anyhow::Result<()> {
    let ok = id
        .strip_prefix("rig-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if !ok {
        return Err(UsageError::new(format!(
            "{} is not a rig id: give one `proctor rig list` shows, for example rig-0001",
            t(id)
        )));
    }
    Ok(())
}

/// `90s`, `30m`, `2h`, `1d` as seconds (at least 1).
pub fn parse_span(s: &str) -> Result<u64, String> {
    let bad = || format!("{}: give a span such as 90s, 30m or 2h", t(s));
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = n.parse().map_err(|_| bad())?;
    let mult = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(bad()),
    };
    match n.checked_mul(mult) {
        Some(v) if v >= 1 => Ok(v),
        _ => Err(bad()),
    }
}

fn span(secs: u64) -> String {
    match secs {
        s if s >= 3600 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        s if s >= 60 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

fn mib(bytes: Option<u64>) -> String {
    bytes
        .map(|b| format!("{} MiB", b.div_ceil(1 << 20)))
        .unwrap_or_else(|| "-".into())
}

fn lock_label(v: &RigView) -> String {
    v.lock
        .as_ref()
        .map(|l| t(&l.holder.name))
        .unwrap_or_else(|| "-".into())
}

fn boundary_label(v: &RigView) -> &'static str {
    match v.record.boundary.as_ref().map(|b| b.shares_host_kernel) {
        Some(true) => "shares host kernel",
        Some(false) => "own kernel",
        None => "-",
    }
}

fn open(ctx: &Ctx, a: OpenArgs) -> anyhow::Result<ExitCode> {
    for s in a.ttl.iter().chain(a.idle.iter()) {
        parse_span(s).map_err(UsageError::new)?;
    }
    for s in &a.allow {
        Allow::parse(s).map_err(UsageError::new)?;
    }
    let backend = a.backend.as_deref().map(|b| match b {
        "namespace" => BackendKind::Namespace,
        _ => BackendKind::Vm,
    });
    let (rows, cols) = super::session::terminal_size().unzip();
    let req = OpenRequest {
        backend,
        workspace: a.workspace,
        ttl: a.ttl,
        idle: a.idle,
        allow: a.allow,
        rows,
        cols,
        ..Default::default()
    };
    let c = client(ctx)?;
    let mut v = client::block_on(c.rig_open(&req))??;
    let id = v.record.id.clone();
    let started = std::time::Instant::now();
    while v.record.state == RigState::Booting {
        eprintln!(
            "{}: booting ({} s, {})",
            t(&id),
            started.elapsed().as_secs(),
            v.record.backend.as_str()
        );
        std::thread::sleep(Duration::from_secs(1));
        v = client::block_on(c.rig(&id))??;
    }
    if v.record.state != RigState::Running {
        let why = v
            .record
            .error
            .as_deref()
            .map(t)
            .unwrap_or_else(|| format!("it is {}", v.record.state.as_str()));
        anyhow::bail!("{} did not start: {why}", t(&id));
    }
    if a.json {
        print_json(&v)?;
    } else {
        println!("{} running", t(&id));
        if let Some(b) = &v.record.boundary {
            println!("  {}", t(&b.summary));
        }
        for al in &v.record.allow {
            println!(
                "  allow {}:{} at {} in the guest",
                t(&al.host),
                al.port,
                t(&al.guest)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn list(ctx: &Ctx, a: JsonArg) -> anyhow::Result<ExitCode> {
    let c = client(ctx)?;
    let l = client::block_on(c.rigs())??;
    if a.json {
        print_json(&l)?;
        return Ok(ExitCode::SUCCESS);
    }
    let engines: Vec<String> = l
        .engines
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e.backend.as_str(),
                if e.available {
                    "available".to_string()
                } else {
                    format!("unavailable ({})", t(&e.detail))
                }
            )
        })
        .collect();
    println!("engines: {}", engines.join("; "));
    if l.items.is_empty() {
        println!("no rigs; open one with `proctor rig open --kind terminal`");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<10} {:<9} {:<18} {:<9} {:<12} {:<9} {:<9} RSS",
        "ID", "BACKEND", "BOUNDARY", "STATE", "LOCK", "TTL LEFT", "IDLE"
    );
    for v in &l.items {
        println!(
            "{:<10} {:<9} {:<18} {:<9} {:<12} {:<9} {:<9} {}",
            t(&v.record.id),
            v.record.backend.as_str(),
            boundary_label(v),
            v.record.state.as_str(),
            lock_label(v),
            span(v.ttl_left_secs),
            span(v.idle_secs_now),
            mib(v.resident_bytes)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show(ctx: &Ctx, a: RigJson) -> anyhow::Result<ExitCode> {
    check_id(&a.rig)?;
    let c = client(ctx)?;
    let v = client::block_on(c.rig(&a.rig))??;
    if a.json {
        print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r = &v.record;
    println!("{}  {}  {}", t(&r.id), r.backend.as_str(), r.state.as_str());
    match &r.boundary {
        Some(b) => {
            println!("boundary: {}", t(&b.summary));
            println!(
                "  egress: {}",
                match b.egress {
                    wire::Egress::Denied => "denied (only loopback)",
                    wire::Egress::Allowlist => "allowlist",
                }
            );
            for res in &b.residuals {
                println!("  not proven: {}", t(res));
            }
        }
        None => println!("boundary: not measured yet (booting)"),
    }
    for al in &r.allow {
        println!(
            "allow: {}:{} -> guest {}",
            t(&al.host),
            al.port,
            t(&al.guest)
        );
    }
    println!("opened: {} by {}", t(&r.opened_at), t(&r.opened_by.label()));
    println!(
        "ttl: {} (expires {}, {} left); idle window {}, idle now {}",
        span(r.ttl_secs),
        t(&r.expires_at),
        span(v.ttl_left_secs),
        span(r.idle_secs),
        span(v.idle_secs_now)
    );
    println!(
        "lock: {}",
        match &v.lock {
            Some(l) => format!("{} since {}", t(&l.holder.label()), t(&l.since)),
            None => "none".into(),
        }
    );
    println!(
        "memory: {} now, {} MiB reserved; watchers {}",
        mib(v.resident_bytes),
        r.reserved_mb,
        v.watchers
    );
    if let Some(w) = &r.workspace {
        println!("workspace: {}", t(w));
    }
    if let Some(i) = &r.image {
        println!("image: {} ({})", t(&i.digest), t(&i.recipe));
    }
    if let Some(p) = r.pid {
        println!("engine pid: {p}");
    }
    if let Some(at) = &r.closed_at {
        println!(
            "closed: {} ({})",
            t(at),
            r.close_reason
                .map(|c| serde_json::to_value(c).unwrap_or_default())
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        );
    }
    if let Some(e) = &r.error {
        println!("error: {}", t(e));
    }
    println!(
        "audit: {} event(s) (`proctor rig audit {}`)",
        v.audit_next.saturating_sub(1),
        t(&r.id)
    );
    Ok(ExitCode::SUCCESS)
}

fn verb(
    ctx: &Ctx,
    method: Method,
    template: &str,
    id: &str,
    done: &str,
) -> anyhow::Result<ExitCode> {
    check_id(id)?;
    let c = client(ctx)?;
    let v = client::block_on(c.rig_verb(method, template, id))??;
    println!("{} {done} ({})", t(&v.record.id), v.record.state.as_str());
    Ok(ExitCode::SUCCESS)
}

/// Writes guest output: raw to a pipe or a file, through the sanitiser to a terminal.
fn emit(out: &mut dyn Write, is_tty: bool, bytes: &[u8]) -> std::io::Result<()> {
    if is_tty {
        out.write_all(text::multi_line_bytes(bytes).as_bytes())?;
    } else {
        out.write_all(bytes)?;
    }
    out.flush()
}

fn exec(ctx: &Ctx, a: ExecArgs) -> anyhow::Result<ExitCode> {
    check_id(&a.rig)?;
    if a.timeout.is_some_and(|s| s == 0 || s > 3600) {
        return Err(UsageError::new("--timeout: give 1 to 3600 seconds"));
    }
    let c = client(ctx)?;
    let req = ExecRequest {
        argv: a.argv,
        stdin_b64: None,
        cwd: None,
        timeout_secs: a.timeout,
    };
    let r = client::block_on(c.rig_exec(&a.rig, &req))??;
    let b64 = base64::engine::general_purpose::STANDARD;
    let stdout = b64.decode(&r.stdout_b64).unwrap_or_default();
    let stderr = b64.decode(&r.stderr_b64).unwrap_or_default();
    emit(
        &mut std::io::stdout().lock(),
        std::io::stdout().is_terminal(),
        &stdout,
    )?;
    emit(
        &mut std::io::stderr().lock(),
        std::io::stderr().is_terminal(),
        &stderr,
    )?;
    if r.truncated {
        eprintln!(
            "proctor: the guest's output was cut at {} MiB",
            wire::EXEC_OUTPUT_MAX >> 20
        );
    }
    if r.timed_out {
        eprintln!("proctor: the guest program was killed at its deadline");
        return Ok(ExitCode::from(124));
    }
    if let Some(sig) = &r.signal {
        eprintln!("proctor: the guest program ended by {}", t(sig));
        return Ok(ExitCode::from(128));
    }
    Ok(ExitCode::from(
        r.exit_code.map(|c| c.clamp(0, 255) as u8).unwrap_or(1),
    ))
}

fn type_text(ctx: &Ctx, a: TypeArgs) -> anyhow::Result<ExitCode> {
    check_id(&a.rig)?;
    let text_in = if a.text == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        s
    } else {
        a.text
    };
    let c = client(ctx)?;
    let req = TypeRequest {
        text: Some(text_in),
        data_b64: None,
        paste: a.paste,
    };
    client::block_on(c.rig_type(&a.rig, &req))??;
    Ok(ExitCode::SUCCESS)
}

fn attach(ctx: &Ctx, a: AttachArgs) -> anyhow::Result<ExitCode> {
    check_id(&a.rig)?;
    // The key is checked before the server is asked anything.
    super::session::attach::DetachKey::parse(&a.detach_key).map_err(UsageError::new)?;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(UsageError::new(format!(
            "rig attach draws on a terminal and stdin or stdout is not one. Without a \
             terminal: `proctor rig screen {0}` to see it, `proctor rig type {0} TEXT` to type",
            a.rig
        )));
    }
    let home = ctx.home()?;
    let c = client(ctx)?;
    let v = client::block_on(c.rig(&a.rig))??;
    let banner = format!(
        "{}, {}",
        v.record.backend.as_str(),
        v.record
            .boundary
            .as_ref()
            .map(|b| t(&b.summary))
            .unwrap_or_else(|| v.record.state.as_str().to_string())
    );
    super::session::attach::attach_rig(&c, &home, &a.rig, &banner, &a.detach_key)
}

fn screen(ctx: &Ctx, a: RigJson) -> anyhow::Result<ExitCode> {
    check_id(&a.rig)?;
    let c = client(ctx)?;
    let s = client::block_on(c.rig_screen(&a.rig))??;
    if a.json {
        print_json(&s)?;
    } else {
        println!("{}", text::multi_line(&s.text));
    }
    Ok(ExitCode::SUCCESS)
}

/// `RIG:PATH` → (rig, path); anything else is a host path.
fn rig_side(s: &str) -> Option<(&str, &str)> {
    let (rig, path) = s.split_once(':')?;
    rig.starts_with("rig-").then_some((rig, path))
}

fn cp(ctx: &Ctx, a: CpArgs) -> anyhow::Result<ExitCode> {
    match (rig_side(&a.src), rig_side(&a.dst)) {
        (Some(_), Some(_)) | (None, None) => Err(UsageError::new(
            "rig cp copies between the host and a rig: exactly one side is RIG:PATH, for \
             example `proctor rig cp notes.txt rig-0001:/work/notes.txt`",
        )),
        (None, Some((rig, path))) => {
            check_id(rig)?;
            if !path.starts_with('/') {
                return Err(UsageError::new(format!(
                    "{}: the guest's path is absolute, for example {rig}:/work/notes.txt",
                    t(&a.dst)
                )));
            }
            let meta = std::fs::metadata(&a.src)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", t(&a.src)))?;
            if meta.len() > wire::FILE_MAX as u64 {
                anyhow::bail!(
                    "{} is {} bytes; a file copied into a rig is at most {} MiB",
                    t(&a.src),
                    meta.len(),
                    wire::FILE_MAX >> 20
                );
            }
            let bytes = std::fs::read(&a.src)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", t(&a.src)))?;
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            let c = client(ctx)?;
            client::block_on(c.rig_put_file(rig, path, mode, bytes))??;
            Ok(ExitCode::SUCCESS)
        }
        (Some((rig, path)), None) => {
            check_id(rig)?;
            let c = client(ctx)?;
            let bytes = client::block_on(c.rig_get_file(rig, path))??;
            if a.dst == "-" {
                emit(
                    &mut std::io::stdout().lock(),
                    std::io::stdout().is_terminal(),
                    &bytes,
                )?;
            } else {
                crate::files::write_atomic(std::path::Path::new(&a.dst), &bytes)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", t(&a.dst)))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn audit(ctx: &Ctx, a: AuditArgs) -> anyhow::Result<ExitCode> {
    check_id(&a.rig)?;
    let c = client(ctx)?;
    let mut after = 0;
    loop {
        let page = client::block_on(c.rig_audit(&a.rig, after, wire::AUDIT_LIMIT_MAX))??;
        if a.json && !a.follow {
            print_json(&page)?;
            return Ok(ExitCode::SUCCESS);
        }
        for e in &page.events {
            if a.json {
                println!("{}", serde_json::to_string(e)?);
            } else {
                println!(
                    "{:>5} {} {} {} {} {}",
                    e.seq,
                    t(&e.at),
                    t(&e.by.label()),
                    t(&e.action),
                    t(&e.outcome),
                    t(&e.detail.to_string())
                );
            }
            after = e.seq;
        }
        std::io::stdout().flush()?;
        if page.events.len() == wire::AUDIT_LIMIT_MAX {
            continue;
        }
        if !a.follow {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn fetch(ctx: &Ctx, a: RigJson) -> anyhow::Result<ExitCode> {
    check_id(&a.rig)?;
    let c = client(ctx)?;
    let r = client::block_on(c.rig_fetch(&a.rig))??;
    if a.json {
        print_json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("fetched into {}", t(&r.repository));
    for f in &r.refs {
        println!("  {} {}", t(&f.name), t(&f.commit));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_sides() {
        assert_eq!(parse_span("90s"), Ok(90));
        assert_eq!(parse_span("30m"), Ok(1800));
        assert_eq!(parse_span("2h"), Ok(7200));
        for bad in ["", "0s", "h", "2x", "-1s", "1.5h"] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
        assert_eq!(rig_side("rig-0001:/work/x"), Some(("rig-0001", "/work/x")));
        assert_eq!(rig_side("./a:b"), None);
        assert_eq!(span(7260), "2h01m");
        assert_eq!(mib(Some(1)), "1 MiB");
    }
}
