//! The engine's [`Invoker`] over the closed provider adapters ([`super::invoke`]): the
//! server's PATH and the provider allowlist's inherited environment, nothing else. With a
//! rig (`--rig`), the worker and the repair run in a copy of the worktree inside it
//! ([`super::rig`]), and what they changed comes back judged.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::engine::{Agent, Invoked, Invoker};
use super::invoke::{self, Invocation};
use super::prompt::Role;
use super::rig::Cell;

/// Invokes the real (or, in the demo and the tests, the fake) provider CLIs.
pub struct Provider {
    /// The PATH the programs are found on.
    pub path: OsString,
    /// The allowlisted environment the children start from.
    pub base_env: Vec<(OsString, OsString)>,
    /// Set when the server stops: an invocation in progress is stopped (its whole tree).
    pub cancel: Arc<AtomicBool>,
    /// The rig the writing roles run in, and the run's id (the copy's name there).
    pub rig: Option<(Arc<Cell>, String)>,
}

impl Provider {
    /// From the server's own environment: its PATH and the allowlist's names.
    pub fn from_env(cancel: Arc<AtomicBool>) -> Provider {
        Provider {
            cancel,
            path: std::env::var_os("PATH").unwrap_or_default(),
            base_env: crate::providers::env::inherited_now(),
            rig: None,
        }
    }
}

fn outcome(r: Result<invoke::Outcome, invoke::InvokeError>) -> Invoked {
    match r {
        Ok(o) => Invoked {
            answer: o.answer,
            exit: o.exit,
            timed_out: o.timed_out,
            files: o.files.into_iter().map(|(_, p)| p).collect(),
            ..Invoked::default()
        },
        Err(e) => Invoked {
            answer: Err(e.to_string()),
            ..Invoked::default()
        },
    }
}

impl Invoker for Provider {
    fn invoke(
        &self,
        agent: &Agent,
        role: Role,
        worktree: &Path,
        scratch: &Path,
        prompt: String,
        deadline: Duration,
    ) -> Invoked {
        let mut inv = Invocation {
            tool: agent.tool,
            profile: agent.profile.clone(),
            model: agent.model.clone(),
            role,
            worktree: worktree.to_path_buf(),
            scratch: scratch.to_path_buf(),
            prompt,
            deadline,
            path: self.path.clone(),
            base_env: self.base_env.clone(),
            enclosure: None,
        };
        let Some((cell, run)) = self.rig.as_ref().filter(|_| role.writes()) else {
            return outcome(invoke::run(&inv, Some(&self.cancel)));
        };
        let refused = |e: super::rig::RigCopyError, copy: Option<&super::rig::Copy>| Invoked {
            answer: Err(e.to_string()),
            error: Some((e.code(), e.to_string())),
            rig_copy: copy.and_then(|c| serde_json::to_value(&c.summary).ok()),
            ..Invoked::default()
        };
        let mut copy = match cell.stage(worktree, run) {
            Ok(c) => c,
            Err(e) => return refused(e, None),
        };
        inv.enclosure = Some(cell.enclosure(&copy));
        let mut out = outcome(invoke::run(&inv, Some(&self.cancel)));
        // Only an answered turn's copy comes back: a failed or stopped one fails the run.
        if out.answer.is_ok()
            && let Err(e) = cell.bring_back(&mut copy, worktree)
        {
            let r = refused(e, Some(&copy));
            out.error = r.error;
        }
        cell.discard(&copy);
        out.rig_copy = serde_json::to_value(&copy.summary).ok();
        out
    }
}
