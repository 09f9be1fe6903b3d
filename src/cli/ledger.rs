//! `proctor ledger verify|tail|recover`: check, read and repair the ledger.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::Value;

use super::{Ctx, show_path};
use crate::files;
use crate::home::HomeError;
use crate::ledger::{self, Ledger, LedgerError, TailLine, VerifyError};
use crate::text;

/// Check, read and repair the ledger: proctor's append-only, hash-chained record.
///
/// The ledger is one canonical JSON object per line, each carrying its seq, its time, its
/// kind and the SHA-256 of the line before it (format proctor-ledger/1, described in
/// docs/formats.md). Without PATH, each verb acts on the ledger of the state home
/// (--home, $PROCTOR_HOME or the XDG data folder).
#[derive(Debug, Args)]
pub struct LedgerArgs {
    #[command(subcommand)]
    pub command: LedgerCommand,
}

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    Verify(VerifyArgs),
    Tail(TailArgs),
    Recover(RecoverArgs),
}

/// Verify every line and print the ledger's fixed point.
///
/// Recomputes the whole chain: each line must end in LF, be canonical JSON with seq, at,
/// kind and prev, have seq one more than the line before (1 for the first), and carry as
/// prev the SHA-256 of the previous line's exact bytes. Reads only: takes no lock and
/// never modifies the file, so it is safe while a writer is running (it checks the bytes
/// present when it starts).
///
/// On success prints the fixed point, the four lines format=proctor-ledger-fixed-point/1,
/// bytes=, events= and sha256= (SHA-256 of the exact file bytes); copy it elsewhere to be
/// able to prove later that the file was not rewritten. On failure prints ok=false, the
/// first bad line's number, the reason (invalid_json, not_an_object, non_integer_number,
/// not_canonical, missing_field, bad_field, bad_kind, seq_gap, hash_mismatch,
/// missing_final_lf) and what exactly is wrong.
///
/// Exit codes: 0 the ledger is valid; 1 it is not, or it cannot be read (or does not
/// exist yet); 2 bad usage or an unsafe home.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The ledger file to verify (default: the home's ledger).
    pub path: Option<PathBuf>,
    /// Print JSON: {format, bytes, events, sha256} on success, {ok: false, line, reason,
    /// detail, ...} on failure.
    #[arg(long)]
    pub json: bool,
}

/// Print the last events of the ledger.
///
/// One event per line: `seq  at  kind  key=value …`, every key and value passed through
/// the terminal sanitiser (control and escape sequences removed, long values cut with …).
/// Reads from the end of the file; does not verify the chain (use `verify`) and never
/// modifies the file.
///
/// Exit codes: 0 the events were printed; 1 the ledger cannot be read, does not exist
/// yet, or the part shown holds a line that is not a JSON object or a torn final line
/// (reported on stderr after the events); 2 bad usage or an unsafe home.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// The ledger file to read (default: the home's ledger).
    pub path: Option<PathBuf>,
    /// How many events to print, oldest first.
    #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 20)]
    pub n: usize,
    /// Print each event as one JSON object per line (non-ASCII escaped as \uXXXX).
    #[arg(long)]
    pub json: bool,
}

/// Open the ledger for writing, repair a torn final line, and close it.
///
/// This is what every writer does when it opens the ledger; run it to repair a ledger
/// while no server holds it. A torn final line (no LF, or not JSON, as left by a crash in
/// the middle of an append) is copied to a sibling file `<ledger>.torn.<seq>.<time>`,
/// made durable, removed from the ledger, and recorded by a ledger.torn_tail_recovered
/// event with its size and SHA-256: nothing is dropped. A moved-aside file that an
/// interrupted earlier recovery did not record is recorded now. Damage anywhere before the
/// final line is refused, never repaired.
///
/// Exit codes: 0 recovered, or nothing to recover; 1 the ledger does not exist, is
/// damaged, is held by another writer (e.g. a running server), or an I/O error occurred;
/// 2 bad usage or an unsafe home.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The ledger file to repair (default: the home's ledger).
    pub path: Option<PathBuf>,
}

pub fn run(ctx: &Ctx, args: LedgerArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        LedgerCommand::Verify(a) => verify(ctx, a),
        LedgerCommand::Tail(a) => tail(ctx, a),
        LedgerCommand::Recover(a) => recover(ctx, a),
    }
}

/// The ledger to act on: PATH as given, else the home's (whose folders must be private).
fn ledger_path(ctx: &Ctx, path: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(p) = path {
        return Ok(p);
    }
    let home = ctx.home()?;
    for dir in home.folders() {
        if dir.exists() {
            files::check_dir_is_private(dir).map_err(|source| HomeError::Unsafe {
                source_kind: home.source,
                source,
            })?;
        }
    }
    Ok(home.ledger_path())
}

fn verify(ctx: &Ctx, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let path = ledger_path(ctx, args.path)?;
    match ledger::verify(&path) {
        Ok(v) => {
            let fp = v.fixed_point;
            if args.json {
                print_json_ascii(&fp, true);
            } else {
                println!("format={}", fp.format);
                println!("bytes={}", fp.bytes);
                println!("events={}", fp.events);
                println!("sha256={}", fp.sha256);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(VerifyError::Bad {
            path,
            fault,
            intact_events,
        }) => {
            if args.json {
                let v = serde_json::json!({
                    "ok": false,
                    "path": path,
                    "line": fault.line,
                    "offset": fault.offset,
                    "reason": fault.reason,
                    "detail": fault.detail,
                    "intact_events": intact_events,
                });
                print_json_ascii(&v, true);
            } else {
                println!("ok=false");
                println!("path={}", show_path(&path));
                println!("line={}", fault.line);
                println!("reason={}", fault.reason.as_str());
                println!("detail={}", text::one_line(&fault.detail, usize::MAX));
                println!("intact_events={intact_events}");
            }
            Ok(ExitCode::FAILURE)
        }
        Err(VerifyError::Read(e)) => Err(e.into()),
    }
}

/// Longest key shown by `tail`, in columns.
const KEY_WIDTH: usize = 48;
/// Longest value shown by `tail`, in columns.
const VALUE_WIDTH: usize = 160;

fn tail(ctx: &Ctx, args: TailArgs) -> anyhow::Result<ExitCode> {
    let path = ledger_path(ctx, args.path)?;
    let t = ledger::tail(&path, args.n)?;
    let mut fault = false;
    for line in &t.lines {
        match line {
            TailLine::Event(m) => {
                if args.json {
                    print_json_ascii(&Value::Object(with_ref(m)), false);
                } else {
                    println!("{}", render_event(m));
                }
            }
            TailLine::Unreadable { text: raw, problem } => {
                fault = true;
                if args.json {
                    let v = serde_json::json!({ "unreadable_line": raw, "problem": problem });
                    print_json_ascii(&v, false);
                } else {
                    println!(
                        "?  unreadable line ({}): {}",
                        text::one_line(problem, VALUE_WIDTH),
                        text::one_line(raw, VALUE_WIDTH)
                    );
                }
            }
        }
    }
    if fault {
        eprintln!(
            "proctor: the lines shown include one that is not a JSON object; run `proctor \
             ledger verify` to find the first bad line"
        );
    }
    if t.torn_tail_bytes > 0 {
        fault = true;
        eprintln!(
            "proctor: {} ends with {} bytes that are not a complete line (a torn tail, or an \
             append in progress); `proctor ledger recover` moves a torn tail aside",
            show_path(&path),
            t.torn_tail_bytes
        );
    }
    Ok(if fault {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// A ledger line as `ledger tail --json` prints it: the run an event names is `ref`, as in
/// every JSON proctor prints (the ledger itself keeps its `run` field: its lines are
/// hashed as written).
fn with_ref(m: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let mut m = m.clone();
    if !m.contains_key("ref")
        && let Some(run) = m.remove("run")
    {
        m.insert("ref".into(), run);
    }
    m
}

/// `seq  at  kind  key=value …`, every part sanitised.
fn render_event(m: &serde_json::Map<String, Value>) -> String {
    let show = |v: Option<&Value>| match v {
        Some(Value::String(s)) => text::one_line(s, VALUE_WIDTH),
        Some(other) => text::one_line(&other.to_string(), VALUE_WIDTH),
        None => "?".to_string(),
    };
    let mut out = format!(
        "{}  {}  {}",
        show(m.get("seq")),
        show(m.get("at")),
        show(m.get("kind"))
    );
    for (k, v) in m {
        if ledger::RESERVED_FIELDS.contains(&k.as_str()) {
            continue;
        }
        out.push_str("  ");
        out.push_str(&text::one_line(k, KEY_WIDTH));
        out.push('=');
        out.push_str(&show(Some(v)));
    }
    out
}

fn recover(ctx: &Ctx, args: RecoverArgs) -> anyhow::Result<ExitCode> {
    let path = ledger_path(ctx, args.path)?;
    if let Err(e) = std::fs::symlink_metadata(&path) {
        if e.kind() == std::io::ErrorKind::NotFound {
            return Err(LedgerError::NotFound { path }.into());
        }
        return Err(e).with_context(|| format!("cannot inspect {}", show_path(&path)));
    }
    let (ledger, opened) = Ledger::open(&path)?;
    let shown = show_path(&path);
    if opened.recovered.is_empty() {
        println!(
            "nothing to recover: {shown} ends with a complete line ({} events verified)",
            opened.events
        );
    }
    for r in &opened.recovered {
        let moved = text::one_line(&r.moved_to, usize::MAX);
        if r.recorded_after_restart {
            println!(
                "recorded {moved} ({} bytes, {}), moved aside by an earlier recovery that \
                 stopped before recording it, as event {}",
                r.bytes, r.sha256, r.seq
            );
        } else {
            println!(
                "moved the torn tail of {shown} ({} bytes at offset {}, {}, {}) to {moved} \
                 in the same folder; recorded as event {}",
                r.bytes,
                r.offset.map_or_else(|| "?".to_string(), |o| o.to_string()),
                r.reason.map_or("?", |x| x.as_str()),
                r.sha256,
                r.seq
            );
        }
    }
    drop(ledger);
    Ok(ExitCode::SUCCESS)
}

/// Prints JSON with every non-ASCII character escaped as `\uXXXX`: still the same JSON
/// value, and nothing in it (not even C1 controls or bidi marks, which JSON leaves raw) can
/// act on the terminal. Non-ASCII characters occur only inside strings, so the rewrite is
/// exact.
fn print_json_ascii(v: &impl serde::Serialize, pretty: bool) {
    let s = if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    };
    // Serialising these values cannot fail (plain structs and `Value`s, string keys).
    let s = s.unwrap_or_default();
    println!("{}", ascii_json(&s));
}

fn ascii_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() && c != '\u{7f}' {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn ascii_json_is_the_same_value() {
        let v = serde_json::json!({"k\u{e9}": "a\u{9b}b\u{202e}c\u{1F600}\u{7f}\n"});
        let s = ascii_json(&serde_json::to_string(&v).unwrap());
        assert!(s.is_ascii());
        assert!(!s.contains('\u{7f}'));
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), v);
    }

    #[test]
    fn events_render_through_the_sanitiser() {
        let m = serde_json::json!({
            "seq": 7, "at": "2026-11-30T06:01:02.345Z", "kind": "a.b", "prev": "sha256:x",
            "name": "evil\u{1b}[2Jname", "n": [1, "\u{7}"],
        });
        let Value::Object(m) = m else { unreachable!() };
        let line = render_event(&m);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(
            line.starts_with("7  2026-11-30T06:01:02.345Z  a.b  "),
            "{line}"
        );
        assert!(!line.contains("prev"), "{line}");
        assert!(line.contains("name=evil"), "{line}");
    }

    #[test]
    fn a_missing_path_is_reported_as_such() {
        let t = tempfile::tempdir().unwrap();
        let p: &Path = &t.path().join("none.jsonl");
        let e = ledger::verify(p).unwrap_err();
        assert!(e.to_string().contains("no ledger at"), "{e}");
    }
}
