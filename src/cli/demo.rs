//! `proctor demo`: the cockpit on a throwaway home, backed by the provider fakes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{Ctx, print_json, show_path};
use crate::demo;
use crate::home::Home;
use crate::text;

/// Open the cockpit on a throwaway home whose sessions are run by the provider fakes.
///
/// The demo starts its own server (a fresh home under the temp folder unless --home is
/// given) with proctor's fakes of claude, codex, gemini, grok and opencode first on its PATH,
/// and six sessions: two narrating their work at a human pace in terminals, one idle after
/// its turn, one stopped with exit code 0, one failed with exit code 3, and one that works in
/// a worktree of a small throwaway git repository: its change is bound as a candidate, the
/// repository's approved check ran on it (the gate awaits a person), and a publication intent
/// awaits authority. Every session is labelled demo: no model runs, nothing leaves the
/// machine. The demo's server serves the demo forge (a loopback fake of GitHub's REST API,
/// labelled demo); `P` on the intent offers a throwaway demo publish key (its passphrase
/// typed twice), and the approval then pushes to the demo's bare remote, opens a pull request
/// on the demo forge and leaves a signed receipt (docs/cockpit.md).
///
/// When the cockpit closes, the demo's server is stopped and the throwaway home removed,
/// unless --keep. With --no-cockpit the demo is set up and left running, and the command
/// prints how to open it.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo home and its server running after the cockpit closes.
    #[arg(long)]
    pub keep: bool,

    /// Set up the demo and leave it running without opening the cockpit.
    #[arg(long)]
    pub no_cockpit: bool,

    /// With --no-cockpit: print the home and the runs as JSON.
    #[arg(long, requires = "no_cockpit")]
    pub json: bool,

    /// Tests only: the cockpit panics when this key is pressed (to prove that the demo's
    /// server is stopped and its throwaway home removed after a panic too).
    #[arg(long, hide = true, value_name = "KEY")]
    pub test_panic_on_key: Option<char>,
}

/// What the demo leaves behind, undone when dropped: on every way out of [`run`] once the
/// demo is set up, a panic of the cockpit included (unwinding drops it after the panic hook
/// gave the terminal back and printed the message).
struct Cleanup<'a> {
    home: &'a Home,
    /// The throwaway home to remove; `None` for a home given with --home (its server is
    /// stopped, the folder kept).
    throwaway: Option<PathBuf>,
    keep: bool,
    done: bool,
}

impl Cleanup<'_> {
    fn finish(mut self) -> anyhow::Result<()> {
        self.done = true;
        self.undo()
    }

    fn undo(&self) -> anyhow::Result<()> {
        if self.keep {
            let h = show_path(self.home.root.as_deref().unwrap_or(&self.home.data));
            eprintln!(
                "proctor demo: kept. open it: proctor --home {h}; stop it: proctor --home {h} server stop"
            );
            return Ok(());
        }
        match &self.throwaway {
            Some(root) => demo::discard(self.home, root)?,
            None => {
                let client = crate::client::Client::new(self.home)?.with_token(self.home)?;
                let _ = client.request_blocking::<(), crate::api::server::Stopping>(
                    hyper::Method::POST,
                    crate::api::server::SERVER_STOP,
                    None,
                );
            }
        }
        Ok(())
    }
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let what = match (self.keep, &self.throwaway) {
            (true, _) => "the demo was kept",
            (false, Some(_)) => "the demo's server was stopped and its throwaway home removed",
            (false, None) => "the demo's server was stopped",
        };
        match self.undo() {
            Ok(()) => eprintln!("proctor demo: the cockpit failed; {what}"),
            Err(e) => {
                eprintln!("proctor demo: the cockpit failed, and cleaning up failed too: {e:#}")
            }
        }
    }
}

pub fn run(ctx: &Ctx, args: DemoArgs) -> anyhow::Result<ExitCode> {
    if !args.no_cockpit && !crate::tui::term::is_terminal() {
        return Err(super::UsageError::new(
            "the demo opens the cockpit, which needs a terminal on stdin and stdout; \
             use `proctor demo --no-cockpit` to set it up and leave it running",
        ));
    }
    if !args.no_cockpit
        && crate::tui::term::TermKind::from_env() == crate::tui::term::TermKind::Dumb
    {
        return Err(super::UsageError::new(format!(
            "{}; `proctor demo --no-cockpit` sets the demo up without the cockpit",
            crate::tui::TuiError::DumbTerminal
        )));
    }
    let (home, throwaway) = match &ctx.home_flag {
        Some(_) => (ctx.home()?, None),
        None => {
            let root = demo::throwaway_root()?;
            (Home::resolve(Some(&root))?, Some(root))
        }
    };
    let exe = std::env::current_exe()?;
    eprintln!(
        "proctor demo: starting the fakes' sessions in {}",
        show_path(home.root.as_deref().unwrap_or(&home.data))
    );
    let runs = match demo::prepare(&home, &exe) {
        Ok(r) => r,
        Err(e) => {
            if let Some(root) = &throwaway {
                let _ = demo::discard(&home, root);
            }
            return Err(e.into());
        }
    };
    // One namespace rig for the Rigs view; a rig that cannot open is a notice, not the end.
    match crate::demo::rigs::open(&home) {
        Ok(v) => eprintln!(
            "proctor demo: opened {} (namespace rig, demo)",
            text::one_line(&v.record.id, 20)
        ),
        Err(e) => eprintln!(
            "proctor demo: notice: no demo rig: {}",
            text::one_line(&e, 200)
        ),
    }
    let root = home.root.clone().unwrap_or_else(|| home.data.clone());
    if args.no_cockpit {
        if args.json {
            print_json(&Prepared {
                home: &root,
                runs: &runs,
            })?;
        } else {
            for r in &runs {
                let s = |x: &str| text::one_line(x, 40);
                println!(
                    "{}  {:<9} {:<8} {:<8} {}",
                    s(&r.run_ref),
                    s(&r.tool),
                    r.state.as_str(),
                    "demo",
                    s(r.name.as_deref().unwrap_or("-"))
                );
            }
            let h = show_path(&root);
            println!("\nopen it:  proctor --home {h}\nstop it:  proctor --home {h} server stop");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cleanup = Cleanup {
        home: &home,
        throwaway,
        keep: args.keep,
        done: false,
    };
    let opts = crate::tui::Options {
        test_panic_key: args.test_panic_on_key,
        ..Default::default()
    };
    let result = crate::tui::run(&home, opts);
    cleanup.finish()?;
    result?;
    Ok(ExitCode::SUCCESS)
}

/// `demo --no-cockpit --json`: the home and its runs as the server shows them.
#[derive(serde::Serialize)]
struct Prepared<'a> {
    home: &'a std::path::Path,
    runs: &'a [crate::api::runs::RunView],
}
