//! `proctor demo-agent`: the faithful fakes of the provider CLIs.

use std::process::ExitCode;

use clap::Args;

use super::UsageError;
use crate::providers::{Tool, fake};

/// Run the demo fake of a provider CLI: it behaves as TOOL does with the same arguments,
/// but is a demo (model `demo`, agent `proctor-demo-agent`), never the real tool.
///
/// With the tool's stdio form (claude -p --verbose --input-format stream-json
/// --output-format stream-json; codex app-server; gemini --acp; grok agent stdio;
/// opencode acp) it speaks that tool's protocol on stdin/stdout; without arguments (or
/// with the tool's resume flag) it runs a minimal interactive form for a terminal.
/// With a headless form (claude -p --output-format json; codex exec; gemini --prompt)
/// it reads one prompt on stdin and answers a tribunal verdict scripted by --model
/// (fake-pass, fake-refuse, fake-blocker, fake-wrong-lens, fake-garbage, fake-silent, …)
/// for the lens the prompt's foot names, in the tool's output shape.
/// Replies are deterministic; prompt lines starting with `!` are directives for tests:
/// `!sleep MS`, `!emit N`, `!ignore-term`, `!grandchild`, `!exit K`, `!write PATH TEXT`,
/// `!env NAME`. Transcripts are written where the real tool keeps them, under the account
/// home its own variable (or $HOME) designates, so resume works and an unknown id is
/// refused as the tool refuses it. Exit status: the fake's, as the real tool would exit
/// (0 at end of input; 1 for a refused resume or a usage error the tool reports with 1;
/// 2 for a form the fake does not serve, or an unknown TOOL).
#[derive(Debug, Args)]
pub struct DemoAgentArgs {
    /// The tool to fake (claude, codex, gemini, grok or opencode), then the tool's own
    /// arguments, passed verbatim (even `--help` or `--home`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "TOOL [ARGS]"
    )]
    pub tool_and_args: Vec<String>,
}

pub fn run(args: DemoAgentArgs) -> anyhow::Result<ExitCode> {
    let (name, rest) = args
        .tool_and_args
        .split_first()
        .ok_or_else(|| UsageError::new("demo-agent needs a TOOL"))?;
    let tool = Tool::parse(name).map_err(|e| UsageError::new(e.to_string()))?;
    let code = fake::run(tool, rest, tribunal_answer);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// The headless fakes' script: the tribunal's fake behaviour for `model`
/// (`Behaviour::from_model`), answering `lens` with reasoning off (a CLI verdict has no
/// separate reasoning budget). A model that is not `fake-…` is refused.
fn tribunal_answer(model: &str, lens: &str) -> Result<Option<String>, String> {
    match crate::tribunal::Behaviour::from_model(model) {
        Some(b) => Ok(b.answer(lens, true)),
        None => Err(format!(
            "the demo juror scripts only fake models (fake-pass, fake-refuse, fake-blocker, \
             fake-wrong-lens, fake-garbage, fake-silent, …), not `{model}`"
        )),
    }
}
