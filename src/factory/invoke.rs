//! PROVISIONAL (the lead's placeholder, replaced by H2's at merge).
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::prompt::Role;
use crate::providers::Tool;
use crate::providers::profile::Profile;

pub struct Invocation {
    pub tool: Tool,
    pub profile: Profile,
    pub model: Option<String>,
    pub role: Role,
    pub worktree: PathBuf,
    pub scratch: PathBuf,
    pub prompt: String,
    pub deadline: Duration,
    pub path: OsString,
    pub base_env: Vec<(OsString, OsString)>,
}

pub struct Outcome {
    pub answer: Result<String, String>,
    pub exit: Option<i32>,
    pub timed_out: bool,
    pub elapsed: Duration,
    pub files: Vec<(String, PathBuf)>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvokeError(String);

pub fn run(_inv: &Invocation) -> Result<Outcome, InvokeError> {
    Err(InvokeError("placeholder".into()))
}
