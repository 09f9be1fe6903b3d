//! The engine's [`Invoker`] over the closed provider adapters ([`super::invoke`]): the
//! server's PATH and the provider allowlist's inherited environment, nothing else.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::engine::{Agent, Invoked, Invoker};
use super::invoke::{self, Invocation};
use super::prompt::Role;

/// Invokes the real (or, in the demo and the tests, the fake) provider CLIs.
pub struct Provider {
    /// The PATH the programs are found on.
    pub path: OsString,
    /// The allowlisted environment the children start from.
    pub base_env: Vec<(OsString, OsString)>,
    /// Set when the server stops: an invocation in progress is stopped (its whole tree).
    pub cancel: Arc<AtomicBool>,
}

impl Provider {
    /// From the server's own environment: its PATH and the allowlist's names.
    pub fn from_env(cancel: Arc<AtomicBool>) -> Provider {
        Provider {
            cancel,
            path: std::env::var_os("PATH").unwrap_or_default(),
            base_env: crate::providers::env::inherited_now(),
        }
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
        let inv = Invocation {
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
        };
        match invoke::run(&inv, Some(&self.cancel)) {
            Ok(o) => Invoked {
                answer: o.answer,
                exit: o.exit,
                timed_out: o.timed_out,
                files: o.files.into_iter().map(|(_, p)| p).collect(),
            },
            Err(e) => Invoked {
                answer: Err(e.to_string()),
                exit: None,
                timed_out: false,
                files: Vec::new(),
            },
        }
    }
}
