//! The cockpit: a full-screen terminal UI, a thin client of the server's API.
//!
//! [`run`] is the entry point (`proctor` with no verb, and `proctor demo`): it makes sure a
//! server runs for the home, loads the token, asks the server who the token is, takes the
//! terminal over and runs the event loop until the operator quits (sessions keep running),
//! a signal arrives, or the input ends. The terminal is given back on every path.

pub mod action;
pub mod ansi;
pub mod app;
pub mod approval;
pub mod config;
pub mod data;
pub mod event_loop;
pub mod evidence;
pub mod hosts;
pub mod keymap;
pub mod keys;
pub mod role;
pub mod term;
pub mod theme;
pub mod ui;
pub mod views;
pub mod vt;
pub mod widgets;

use crate::client::{Client, ClientError};
use crate::home::Home;

/// How the cockpit starts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Flags for a server this call starts (as for `proctor serve`); ignored when a server
    /// already runs.
    pub serve_args: Vec<String>,
    /// Tests only (`proctor demo --test-panic-on-key`): the cockpit panics on this key.
    pub test_panic_key: Option<char>,
    /// Two or more hosts (`--host A --host B`; `local` is this home's server): the cockpit
    /// follows them all (super::hosts). Empty: the one host `PROCTOR_HOST` names, or this one.
    pub hosts: Vec<String>,
}

/// Why the cockpit could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error(
        "the cockpit needs a terminal on stdin and stdout; to list sessions from a script or a \
         pipe, use `proctor session list`"
    )]
    NotATerminal,
    #[error(
        "TERM=dumb: this terminal cannot draw the full-screen cockpit; to list sessions, use \
         `proctor session list` (or set TERM to the terminal's type, e.g. TERM=xterm-256color)"
    )]
    DumbTerminal,
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Keymap(#[from] Box<keymap::KeymapError>),
    #[error(transparent)]
    Config(#[from] Box<config::ConfigError>),
    #[error(transparent)]
    Theme(#[from] Box<theme::ThemeError>),
    #[error("the terminal failed: {0}")]
    Terminal(#[from] std::io::Error),
}

/// This machine's host name (for the header).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "?".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The home for the header: its folder, `~` for the user's home directory.
pub fn home_label(home: &Home) -> String {
    let p = home.root.clone().unwrap_or_else(|| home.data.clone());
    let s = p.to_string_lossy().into_owned();
    if let Some(h) = std::env::var_os("HOME").map(|h| h.to_string_lossy().into_owned())
        && !h.is_empty()
        && h != "/"
        && let Some(rest) = s.strip_prefix(&h)
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return format!("~{rest}");
    }
    s
}

/// Opens the cockpit on `home` and returns when the operator quits. Sessions keep running.
pub fn run(home: &Home, opts: Options) -> Result<(), TuiError> {
    if !term::is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let kind = term::TermKind::from_env();
    if kind == term::TermKind::Dumb {
        return Err(TuiError::DumbTerminal);
    }
    // Settings, keys and looks first: a mistake in them is reported before the terminal is
    // taken, naming the file, the key and the value.
    let settings = config::CockpitConfig::load(&home.config).map_err(Box::new)?;
    let keymap =
        keymap::Keymap::load(Some(&config::keymap_path(&home.config))).map_err(Box::new)?;
    let theme = theme::Theme::for_cockpit(
        &settings.theme,
        &home.config,
        std::env::var_os("NO_COLOR").as_deref(),
    )
    .map_err(Box::new)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let several = opts.hosts.len() > 1;
        let (client, hosts) = if several {
            // Every host named, each with its own client: this home's server is started
            // (and must answer: it is this machine's); a remote host that does not answer
            // now is shown unreachable, and its task tries again (event_loop::host_task).
            let mut list = Vec::new();
            for name in &opts.hosts {
                let c = Client::for_host(home, name)?;
                let c = if c.remote_host().is_none() {
                    c.ensure_server_with(home, &opts.serve_args).await?;
                    c.with_token(home)?
                } else {
                    let h = home.clone();
                    let try_c = c.clone();
                    match tokio::task::spawn_blocking(move || try_c.with_token(&h)).await {
                        Ok(Ok(c)) => c,
                        _ => c,
                    }
                };
                list.push((name.clone(), c));
            }
            (list[0].1.clone(), event_loop::Hosts::many(list))
        } else {
            let client = Client::new(home)?;
            client.ensure_server_with(home, &opts.serve_args).await?;
            let client = client.with_token(home)?;
            (client.clone(), event_loop::Hosts::one(client))
        };
        // The role decides which actions are shown as unavailable. A server without the
        // route (older) leaves it unknown: actions are tried and its answer is shown. In a
        // cockpit of several hosts the first host's token says it (each host's server
        // answers for its own).
        let who = match data::whoami(&client).await {
            Ok(w) => Some(w),
            Err(ClientError::Api { status, .. }) if status.as_u16() == 404 => None,
            Err(_) if several => None,
            Err(e) => return Err(e.into()),
        };
        // The header names where the sessions are: this machine and its home, or the one
        // remote host the cockpit follows (never this machine's name over another's runs).
        let (where_host, where_home) = match (several, client.remote_host()) {
            (false, Some(h)) => (h.to_string(), "over ssh".to_string()),
            _ => (host_name(), home_label(home)),
        };
        let mut app = app::App::new(where_host, where_home, keymap, theme);
        if several {
            app.hosts = crate::tui::hosts::Hosts::new(&opts.hosts);
        }
        app.remote_intents_host = client.remote_host().map(str::to_string);
        app.notify = app::NotifySettings {
            enabled: settings.notify,
            command: settings.notify_command.clone(),
        };
        app.who = who;
        app.test_panic_key = opts.test_panic_key;
        app.ascii = kind == term::TermKind::Ascii;
        app.key_path = Some(crate::authority::keys::default_key_path(home));
        app.demo_key_offer = crate::demo::is_demo_home(home);
        // What the new-session form offers: this home's profiles (the defaults, one per
        // tool, then the added ones) and the folder the cockpit was started in.
        if let Some(user_home) = std::env::var_os("HOME").map(std::path::PathBuf::from)
            && let Ok(list) = crate::providers::profile::Store::new(&home.config).list(&user_home)
        {
            app.profiles = list.into_iter().map(|p| p.name).collect();
        }
        if let Ok(cwd) = std::env::current_dir() {
            app.workspace = cwd.to_string_lossy().into_owned();
        }
        app.client_path = std::env::var("PATH").ok();
        // A rig attach runs this same binary on this same home.
        if let Ok(exe) = std::env::current_exe() {
            app.proctor_argv = vec![exe.to_string_lossy().into_owned()];
            if let Some(root) = &home.root {
                app.proctor_argv.push("--home".into());
                app.proctor_argv.push(root.to_string_lossy().into_owned());
            }
        }
        let guard = term::TerminalGuard::enter(settings.mouse)?;
        // The guard cleared the alternate screen: the painter starts from a blank one. The
        // size is asked once here, then taken from the resize events.
        let (cols, rows) = ratatui::crossterm::terminal::size()?;
        let mut terminal = ansi::Painter::new(
            std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()),
            cols,
            rows,
            Some(ratatui::crossterm::terminal::size),
        )?;
        let multi_home = several.then(|| home.clone());
        let result =
            event_loop::run_hosts(&mut app, &mut terminal, hosts, multi_home, settings.fps).await;
        drop(terminal);
        drop(guard);
        result?;
        Ok(())
    })
}
