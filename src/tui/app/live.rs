//! The live pane: the focused session's terminal (PTY runs) or output lines (pipe runs), the
//! stream that feeds it, the terminals of sessions focused earlier, and the size the PTY
//! should have.

use std::collections::VecDeque;

use ratatui::layout::Rect;

use super::{Effect, LiveEvent};
use crate::text;
use crate::tui::action::Action;
use crate::tui::vt::{PipeLog, VtTerm};

/// How many terminals of sessions focused earlier are kept (their history, and the seq to
/// resume the stream from).
pub const CACHED_TERMS: usize = 8;

/// What the live pane holds.
pub enum LiveBuf {
    Pty(Box<VtTerm>),
    Pipe(Box<PipeLog>),
}

impl LiveBuf {
    pub fn seq(&self) -> u64 {
        match self {
            LiveBuf::Pty(t) => t.seq,
            LiveBuf::Pipe(p) => p.seq,
        }
    }
}

/// Where the stream of the focused session stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveState {
    Connecting,
    Streaming,
    Ended(String),
    NotLive(String),
    Error(String),
}

/// The focused session's live view.
pub struct LiveSlot {
    pub run: String,
    /// Increases with every (re)attach; messages of an older stream are ignored.
    pub epoch: u64,
    pub buf: LiveBuf,
    pub state: LiveState,
    /// The run's generation and liveness when the stream was opened (a resume or a restart
    /// reopens it).
    pub run_generation: u64,
    pub run_live: bool,
}

/// Where an attach stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachFrom {
    /// Fetch the screen, then stream from its seq + 1 (PTY runs).
    Snapshot,
    /// Stream from this seq.
    Seq(u64),
}

/// What the live pane should show: the focused run as the list describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub tool: String,
    pub run: String,
    pub pty: bool,
    pub generation: u64,
    pub live: bool,
    /// The first seq the server still holds.
    pub first_seq: u64,
}

/// What following the focused run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// No run is focused: the stream stopped.
    Nothing,
    /// The same run: its stream kept, or reopened after a resume or a restart.
    Same,
    /// Another run: its terminal (cached or new) and its stream.
    Switched,
}

/// The live pane's state.
#[derive(Default)]
pub struct LivePane {
    pub slot: Option<LiveSlot>,
    pub cache: VecDeque<LiveSlot>,
    pub next_epoch: u64,
    /// The live pane's inner size (what the PTY should be), set with the layout.
    pub inner: Rect,
    /// The last resize asked for (run, rows, cols): not asked again.
    pub resize_sent: Option<(String, u16, u16)>,
}

impl LivePane {
    pub fn bump_epoch(&mut self) -> u64 {
        self.next_epoch += 1;
        self.next_epoch
    }

    fn park(&mut self, slot: LiveSlot) {
        self.cache.retain(|s| s.run != slot.run);
        self.cache.push_front(slot);
        self.cache.truncate(CACHED_TERMS);
    }

    /// The PTY size for the live pane: its inner rect, within the limits a run's terminal
    /// may have (a larger pane shows the run's screen in its top-left part).
    pub fn pane_size(&self) -> (u16, u16) {
        let r = self.inner;
        if r.width == 0 || r.height == 0 {
            (24, 80)
        } else {
            let s = crate::runs::TermSize {
                rows: r.height,
                cols: r.width,
            }
            .clamped();
            (s.rows, s.cols)
        }
    }

    /// The focused run's terminal (PTY runs).
    pub fn term(&self) -> Option<&VtTerm> {
        match &self.slot.as_ref()?.buf {
            LiveBuf::Pty(t) => Some(&**t),
            LiveBuf::Pipe(_) => None,
        }
    }

    /// Whether the stream is open or opening.
    pub fn streaming(&self) -> bool {
        matches!(
            self.slot.as_ref().map(|s| &s.state),
            Some(LiveState::Streaming | LiveState::Connecting)
        )
    }

    /// Follows the focused run: reuses a cached terminal (streaming from where it stopped
    /// when the server still holds that output), or opens a new one. A resume (new
    /// generation) or a run that became live reopens the stream.
    pub fn follow(&mut self, want: Option<Want>, fx: &mut Vec<Effect>) -> Followed {
        let Some(Want {
            tool,
            run,
            pty,
            generation,
            live,
            first_seq,
        }) = want
        else {
            if let Some(old) = self.slot.take() {
                self.park(old);
                fx.push(Effect::Detach);
                fx.push(Effect::WatchEvents(None));
            }
            return Followed::Nothing;
        };
        let from_start = if pty {
            AttachFrom::Snapshot
        } else {
            AttachFrom::Seq(first_seq)
        };
        if let Some(slot) = &self.slot
            && slot.run == run
        {
            let reopen = slot.run_generation != generation || (live && !slot.run_live);
            if reopen {
                let epoch = self.bump_epoch();
                if let Some(slot) = &mut self.slot {
                    slot.epoch = epoch;
                    slot.state = LiveState::Connecting;
                    slot.run_generation = generation;
                    slot.run_live = live;
                }
                self.resize_sent = None;
                fx.push(Effect::Attach {
                    run,
                    epoch,
                    pty,
                    from: from_start,
                });
            } else if let Some(slot) = &mut self.slot {
                slot.run_live = live;
            }
            return Followed::Same;
        }
        if let Some(old) = self.slot.take() {
            self.park(old);
        }
        let epoch = self.bump_epoch();
        let cached = self
            .cache
            .iter()
            .position(|s| s.run == run)
            .and_then(|i| self.cache.remove(i))
            .filter(|s| s.run_generation == generation);
        let (buf, from) = match cached {
            Some(s) if s.buf.seq() > 0 && s.buf.seq() + 1 >= first_seq => {
                let from = AttachFrom::Seq(s.buf.seq() + 1);
                (s.buf, from)
            }
            Some(s) => (s.buf, from_start),
            None => {
                let buf = if pty {
                    let (r, c) = self.pane_size();
                    LiveBuf::Pty(Box::new(VtTerm::new(r, c)))
                } else {
                    LiveBuf::Pipe(Box::new(PipeLog::for_tool(&tool)))
                };
                (buf, from_start)
            }
        };
        self.slot = Some(LiveSlot {
            run: run.clone(),
            epoch,
            buf,
            state: LiveState::Connecting,
            run_generation: generation,
            run_live: live,
        });
        self.resize_sent = None;
        fx.push(Effect::Attach {
            run: run.clone(),
            epoch,
            pty,
            from,
        });
        fx.push(Effect::WatchEvents(Some(run)));
        Followed::Switched
    }

    /// An event of the stream of `epoch`; `false` when it is an older stream's (ignored).
    pub fn on_live(&mut self, epoch: u64, ev: LiveEvent) -> bool {
        let Some(slot) = self.slot.as_mut().filter(|s| s.epoch == epoch) else {
            return false;
        };
        match ev {
            LiveEvent::Connected => slot.state = LiveState::Streaming,
            LiveEvent::Screen {
                rows,
                cols,
                formatted,
                seq,
            } => {
                if let LiveBuf::Pty(t) = &mut slot.buf {
                    t.load_snapshot(rows, cols, &formatted, seq);
                }
                slot.state = LiveState::Streaming;
            }
            LiveEvent::Output(frames) => {
                slot.state = LiveState::Streaming;
                for (seq, stream, bytes) in frames {
                    match &mut slot.buf {
                        LiveBuf::Pty(t) => {
                            // A PTY run has one stream; nothing else is the terminal's.
                            if stream == crate::runs::Stream::Stdout {
                                t.feed(&bytes);
                            }
                            t.seq = seq;
                        }
                        LiveBuf::Pipe(p) => {
                            p.feed(stream, &bytes);
                            p.seq = seq;
                        }
                    }
                }
            }
            LiveEvent::Lag { first_available } => {
                if let LiveBuf::Pipe(p) = &mut slot.buf {
                    p.gap(&format!(
                        "output before seq {first_available} is no longer held by the server"
                    ));
                }
            }
            LiveEvent::End(what) => slot.state = LiveState::Ended(what),
            LiveEvent::NotLive(state) => slot.state = LiveState::NotLive(state),
            LiveEvent::Error(e) => slot.state = LiveState::Error(text::one_line(&e, 300)),
        }
        true
    }

    fn scroll(&mut self, t: impl FnOnce(&mut VtTerm), p: impl FnOnce(&mut PipeLog)) {
        match self.slot.as_mut().map(|s| &mut s.buf) {
            Some(LiveBuf::Pty(term)) => t(term),
            Some(LiveBuf::Pipe(log)) => p(log),
            None => {}
        }
    }

    /// Shows or hides the tool calls' output under their lines (a pipe session's log).
    pub fn toggle_tool_output(&mut self) {
        if let Some(LiveBuf::Pipe(p)) = self.slot.as_mut().map(|s| &mut s.buf) {
            p.toggle_expanded();
        }
    }

    /// Scrolls the session's own scrollback: a line, a page (the pane's height less one),
    /// the oldest line kept, or back to the live output.
    pub fn navigate(&mut self, action: Action) {
        let page = usize::from(self.inner.height.max(2) - 1);
        match action {
            Action::Up | Action::ScrollUp => self.scroll(|t| t.scroll_up(1), |p| p.scroll_up(1)),
            Action::Down | Action::ScrollDown => {
                self.scroll(|t| t.scroll_down(1), |p| p.scroll_down(1))
            }
            Action::PageUp => self.scroll(|t| t.scroll_up(page), |p| p.scroll_up(page)),
            Action::PageDown => self.scroll(|t| t.scroll_down(page), |p| p.scroll_down(page)),
            Action::Top | Action::ScrollTop => self.scroll(VtTerm::scroll_top, PipeLog::scroll_top),
            _ => self.scroll(VtTerm::scroll_bottom, PipeLog::scroll_bottom),
        }
    }
}
