//! What the server checks at start before it trusts the ledger: the ledger is the source of
//! truth, so it must not be behind what the rest of the home says it recorded, and it must
//! not be missing or empty while the home holds state that only its events can explain.
//!
//! - "Behind": run records name event seqs (`data/runs/<ref>/run.json`), receipts,
//!   intents and candidates name ledger fixed points (`events`) and seqs (`event_seq`,
//!   `ledger_head.seq`, `ledger_seq`, `*_seq`), factory runs name their latest event's seq
//!   (`data/factory/fac-NNNN/run.json`), the workspace registry names the last seq it
//!   applied. A ledger with fewer
//!   events than the highest of these lost its tail (truncated, or restored from an older
//!   copy); appending to it would reuse seqs that those files already name.
//! - "Missing or empty while other state exists": tokens, run folders, receipts, intents,
//!   keys, workspaces or candidates without a ledger.
//!
//! Both refusals name the file and the remedy. Nothing is repaired silently.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value;

use crate::home::Home;

#[derive(Debug, thiserror::Error)]
pub enum StartCheckError {
    #[error(
        "the ledger {ledger} is {what}, but this home holds state that only its events \
         explain ({found}). The server does not start afresh over it. Remedy: restore the \
         ledger from a copy (check it with `proctor ledger verify`); or, to really start \
         afresh, move the home's data folder aside"
    )]
    Missing {
        ledger: PathBuf,
        what: &'static str,
        found: String,
    },
    #[error(
        "the ledger {ledger} has {events} event(s), but {file} names {name} {seq}: the \
         ledger lost its tail (truncated, or restored from an older copy), and new events \
         would reuse seqs that are already named. The server does not start on it. Remedy: \
         restore the ledger's lost tail from a copy whose fixed point covers seq {seq} \
         (check it with `proctor ledger verify`); keep this file as evidence"
    )]
    Behind {
        ledger: PathBuf,
        events: u64,
        file: PathBuf,
        name: String,
        seq: u64,
    },
}

/// Files and folders (under `data/`) that exist only once something was recorded.
const STATE: [&str; 8] = [
    "tokens.json",
    "runs",
    "receipts",
    "intents",
    "keys.json",
    "workspaces.json",
    "candidates",
    "evidence",
];

/// Refuses a ledger that is missing or empty while other state exists. Run before anything
/// is created (the owner token, the ledger itself).
pub fn check_presence(home: &Home) -> Result<(), StartCheckError> {
    let ledger = home.ledger_path();
    let what = match std::fs::metadata(&ledger) {
        Ok(m) if m.len() > 0 => return Ok(()),
        Ok(_) => "empty",
        Err(_) => "missing",
    };
    for name in STATE {
        let p = home.data.join(name);
        let present = match std::fs::read_dir(&p) {
            Ok(mut rd) => rd.next().is_some(),
            Err(_) => p.is_file(),
        };
        if present {
            return Err(StartCheckError::Missing {
                ledger,
                what,
                found: p.display().to_string(),
            });
        }
    }
    Ok(())
}

/// Refuses a ledger of `events` events that is behind what the home's files name.
pub fn check_not_behind(home: &Home, events: u64) -> Result<(), StartCheckError> {
    let ledger = home.ledger_path();
    let mut worst: Option<(u64, PathBuf, String)> = None;
    let mut note = |seq: u64, file: &Path, name: &str| {
        if seq > events && worst.as_ref().is_none_or(|w| seq > w.0) {
            worst = Some((seq, file.to_path_buf(), name.to_string()));
        }
    };
    // Run records: their events' seqs.
    for f in files_in(&home.data.join("runs"), 1) {
        if f.file_name().is_some_and(|n| n == "run.json")
            && let Some(v) = read_json(&f)
        {
            for e in v["events"].as_array().into_iter().flatten() {
                if let Some(seq) = e["seq"].as_u64() {
                    note(seq, &f, "event seq");
                }
            }
        }
    }
    // Receipts, intents (and their approvals), candidates, the workspace registry: every seq and
    // fixed point they carry, signed payloads included.
    let mut others = files_in(&home.data.join("receipts"), 3);
    others.extend(files_in(&home.data.join("intents"), 3));
    others.extend(files_in(&home.data.join("candidates"), 2));
    others.push(home.data.join("workspaces.json"));
    // Factory runs (`data/factory/fac-NNNN/`): the record's `ledger_seq`, and the receipt.
    // (A smoke report's fixed point is its own bus log's, not the ledger's: not read.)
    if let Ok(rd) = std::fs::read_dir(home.data.join("factory")) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("fac-") {
                others.extend(files_in(&e.path(), 0));
            }
        }
    }
    for f in others {
        if let Some(v) = read_json(&f) {
            let mut found = Vec::new();
            refs(&v, None, &mut found, 0);
            for (seq, name) in found {
                note(seq, &f, &name);
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((seq, file, name)) => Err(StartCheckError::Behind {
            ledger,
            events,
            file,
            name,
            seq,
        }),
    }
}

fn read_json(path: &Path) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() > 64 << 20 {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

/// Regular `.json` files under `dir`, at most `depth` folders down.
fn files_in(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let p = e.path();
        if t.is_dir() && depth > 0 {
            out.extend(files_in(&p, depth - 1));
        } else if t.is_file() && p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out
}

/// Ledger references in a JSON value: `*_seq` numbers, `seq` inside a `ledger…` object, a
/// fixed point's `events` inside a `ledger` object; base64 `payload`s (DSSE) are opened.
fn refs(v: &Value, parent: Option<&str>, out: &mut Vec<(u64, String)>, depth: usize) {
    if depth > 32 {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                if let Some(n) = val.as_u64() {
                    let in_ledger = parent.is_some_and(|p| p.starts_with("ledger"));
                    let output_cursor = k == "next_seq" || k == "first_seq";
                    if (k.ends_with("_seq") && !output_cursor) || (k == "seq" && in_ledger) {
                        out.push((n, k.clone()));
                    } else if k == "events" && parent == Some("ledger") {
                        out.push((n, "a ledger fixed point of events".into()));
                    }
                } else if k == "payload"
                    && let Some(s) = val.as_str()
                    && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(s)
                    && let Ok(inner) = serde_json::from_slice::<Value>(&bytes)
                {
                    refs(&inner, None, out, depth + 1);
                } else {
                    refs(val, Some(k), out, depth + 1);
                }
            }
        }
        Value::Array(a) => {
            for x in a {
                refs(x, parent, out, depth + 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_are_found_where_they_name_the_ledger() {
        let payload = base64::engine::general_purpose::STANDARD
            .encode(json!({"predicate": {"ledger": {"events": 40, "bytes": 9}}}).to_string());
        let v = json!({
            "ledger": {"events": 12, "event_seq": 13, "bytes": 999},
            "approval": {"ledger_head": {"seq": 21, "line_sha256": "x"}},
            "minted_seq": 30,
            "output": {"seq": 5000, "next_seq": 77},
            "payload": payload,
        });
        let mut out = Vec::new();
        refs(&v, None, &mut out, 0);
        let mut seqs: Vec<u64> = out.iter().map(|x| x.0).collect();
        seqs.sort();
        assert_eq!(seqs, vec![12, 13, 21, 30, 40]);
    }
}
