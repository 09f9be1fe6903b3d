//! The attach filter: what of a PTY child's bytes may reach the operator's real terminal
//! when `proctor session attach` passes the child through.
//!
//! Attach is the one place where a child's bytes are written to the operator's terminal
//! as they are (an interactive program cannot be shown otherwise). An agent is hostile, so
//! whatever would act *outside the pane* is dropped here, whole, and everything else passes
//! byte for byte:
//!
//! - **clipboard**: OSC 52 (a write would fill the operator's clipboard; a read, `OSC 52 ;
//!   c ; ?`, would type the clipboard back into the child). Writes pass only with
//!   [`Clipboard::Allow`] (tmux's `set-clipboard`); reads never do;
//! - **titles**: OSC 0, 1, 2 (and every OSC not listed below as passed), the title stack
//!   and title modes (`CSI 22 t`, `CSI 23 t`, `CSI > … t`, `CSI > … T`);
//! - **reports** whose replies the terminal would type into the child as keystrokes:
//!   ENQ (answerback), DECID (`ESC Z`, C1 SCI), DA1/DA2/DA3 (`CSI … c`, `CSI > … c`,
//!   `CSI = … c`), DSR and CPR (`CSI 5 n`, `CSI 6 n`, `CSI ? … n`), DECRQM (`CSI … $ p`),
//!   DECREQTPARM (`CSI … x`), DECRQPKFM (`CSI + x`), XTVERSION (`CSI > … q`), every window
//!   operation and report (`CSI … t`: move, resize, iconify, report size, position, title),
//!   the kitty keyboard query (`CSI ? u`), DECRQTSR (`CSI $ u`), DECRQUPSS (`CSI & u`),
//!   DECRQPSR (`CSI $ w`), DECRQKT (`CSI , w`), DECRQCRA (`CSI * y`), DECRQLP (`CSI ' |`),
//!   DECRQDE (`CSI " v`), DECSR (`CSI + p`), XTQMODKEYS (`CSI ? … m`), XTSMGRAPHICS
//!   (`CSI ? … S`), XTREPORTCOLORS (`CSI # R`), colour queries (any `?` in OSC 4, 5,
//!   10–19), media copy (`CSI … i`: the printer);
//! - **every DCS** except sixel images (`DCS … q`) and the synchronized-update form
//!   (`DCS = 1 s`, `DCS = 2 s`): DECRQSS (`DCS $ q`), XTGETTCAP (`DCS + q`), DECUDK (keys
//!   that type text), tmux passthrough (`DCS tmux;`), kitty remote control and the like;
//! - **every SOS, PM and APC** (kitty graphics answers on the input, among others);
//! - **a change of the terminal's coding** (`ESC %` other than `ESC % G`, UTF-8): in
//!   another coding, bytes this filter reads as text could be controls.
//!
//! OSC passed: 8 (hyperlinks), 133 (shell-integration marks), and colour sets and resets
//! without `?` (4, 5, 10–19, 104, 105, 110–119). Every other OSC is dropped (notifications
//! 9, 99 and 777, the working folder 7, fonts 50, iTerm2's 1337, kitty's 5113 and 5522 …).
//!
//! The filter is a streaming parser of the DEC/ECMA-48 grammar (vt100.net's state machine):
//! a sequence cut across two reads is judged as a whole, the output of the pieces is the
//! output of the whole, and what it holds back is bounded: an escape or control sequence
//! at most [`MAX_SEQUENCE`] bytes, a colour OSC at most [`MAX_OSC_BUFFER`] bytes, an
//! incomplete UTF-8 character 3 bytes; past those bounds the sequence is dropped. The
//! 8-bit forms of the introducers (raw C1 bytes, and C1 code points encoded in UTF-8) are
//! recognised as the 7-bit ones are. Sequences the filter passes are written exactly as the
//! child wrote them; a passed string that the child aborts (an ESC that is not ST) is closed
//! with ST so the terminal's parser and this one stay in step.

/// The most bytes of an escape or control sequence (or of a DCS's header) held while it is
/// judged; a longer one is dropped.
pub const MAX_SEQUENCE: usize = 256;
/// The most bytes of a colour OSC held while it is judged (a query hides its `?` anywhere);
/// a longer one is dropped.
pub const MAX_OSC_BUFFER: usize = 4096;
/// The most digits of an OSC's number.
const MAX_OSC_DIGITS: usize = 8;
/// The most bytes of OSC 52's selection field.
const MAX_SELECTION: usize = 16;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const ENQ: u8 = 0x05;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;
const ST_7BIT: &[u8] = b"\x1b\\";

/// What the filter does with OSC 52 clipboard writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clipboard {
    /// Drop them (the default).
    #[default]
    Drop,
    /// Pass writes to the terminal (reads, `?`, are dropped all the same).
    Allow,
}

/// How many sequences the filter dropped, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dropped {
    /// OSC 52.
    pub clipboard: u64,
    /// Titles, icon names and the title stack.
    pub title: u64,
    /// Queries whose reply would be typed into the child.
    pub report: u64,
    /// Everything else dropped: other OSC, DCS, SOS/PM/APC, window operations, coding
    /// changes, sequences past the bounds.
    pub other: u64,
}

impl Dropped {
    pub fn total(&self) -> u64 {
        self.clipboard + self.title + self.report + self.other
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Clipboard,
    Title,
    Report,
    Other,
}

/// One unit of input: an ASCII byte, a C1 control (from a raw byte or from its UTF-8
/// encoding), or anything else (a UTF-8 character, an invalid byte), with its raw bytes.
#[derive(Debug, Clone, Copy)]
enum Unit {
    Ascii(u8),
    C1 { code: u8, raw: [u8; 2], len: u8 },
    Other { raw: [u8; 4], len: u8 },
}

impl Unit {
    fn raw(&self) -> &[u8] {
        match self {
            Unit::Ascii(b) => std::slice::from_ref(b),
            Unit::C1 { raw, len, .. } => &raw[..usize::from(*len)],
            Unit::Other { raw, len } => &raw[..usize::from(*len)],
        }
    }
}

/// The UTF-8 layer: turns bytes into units, holding an incomplete character.
#[derive(Debug, Default, Clone)]
struct Utf8 {
    pend: [u8; 4],
    len: u8,
    need: u8,
}

impl Utf8 {
    fn other(bytes: &[u8]) -> Unit {
        let mut raw = [0u8; 4];
        raw[..bytes.len()].copy_from_slice(bytes);
        Unit::Other {
            raw,
            len: bytes.len() as u8,
        }
    }

    /// The held bytes as one opaque unit (an incomplete or invalid character).
    fn flush(&mut self) -> Option<Unit> {
        if self.len == 0 {
            return None;
        }
        let u = Utf8::other(&self.pend[..usize::from(self.len)]);
        self.len = 0;
        self.need = 0;
        Some(u)
    }

    /// Feeds one byte; calls `emit` with each unit completed (at most two: a flushed
    /// invalid prefix and the byte itself).
    fn push(&mut self, b: u8, mut emit: impl FnMut(Unit)) {
        if self.need > 0 {
            let lead = self.pend[0];
            let first = self.len == 1;
            let (lo, hi) = match (first, lead) {
                (true, 0xe0) => (0xa0, 0xbf),
                (true, 0xed) => (0x80, 0x9f),
                (true, 0xf0) => (0x90, 0xbf),
                (true, 0xf4) => (0x80, 0x8f),
                _ => (0x80, 0xbf),
            };
            if (lo..=hi).contains(&b) {
                if lead == 0xc2 && b <= 0x9f {
                    // A C1 control encoded in UTF-8.
                    self.len = 0;
                    self.need = 0;
                    emit(Unit::C1 {
                        code: b,
                        raw: [0xc2, b],
                        len: 2,
                    });
                    return;
                }
                self.pend[usize::from(self.len)] = b;
                self.len += 1;
                self.need -= 1;
                if self.need == 0 {
                    let u = Utf8::other(&self.pend[..usize::from(self.len)]);
                    self.len = 0;
                    emit(u);
                }
                return;
            }
            // Not a continuation: the prefix is an invalid byte run; `b` starts afresh.
            if let Some(u) = self.flush() {
                emit(u);
            }
        }
        match b {
            0x00..=0x7f => emit(Unit::Ascii(b)),
            0x80..=0x9f => emit(Unit::C1 {
                code: b,
                raw: [b, 0],
                len: 1,
            }),
            0xc2..=0xf4 => {
                self.pend[0] = b;
                self.len = 1;
                self.need = match b {
                    0xc2..=0xdf => 1,
                    0xe0..=0xef => 2,
                    _ => 3,
                };
            }
            _ => emit(Utf8::other(&[b])),
        }
    }
}

/// Where the parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    /// After ESC (and any intermediates); `buf` holds them.
    Esc,
    /// Inside CSI; `buf` holds the introducer, parameters and intermediates.
    Csi,
    /// Inside a CSI too long to judge: dropped up to its final byte.
    CsiDrop,
    /// Inside a string (OSC, DCS, SOS, PM, APC).
    Str(StrMode),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StrMode {
    /// OSC: reading its number; `buf` holds the introducer and the digits.
    OscNumber,
    /// A colour OSC held whole until its end (a `?` anywhere makes it a query).
    OscColour,
    /// OSC 52 with writes allowed: reading the selection field.
    Osc52Selection,
    /// OSC 52: the first byte of the data decides (a `?` is a read).
    Osc52Data,
    /// DCS: reading its parameters, intermediates and final byte.
    DcsHeader,
    /// A string judged safe: passed as it comes.
    Pass,
    /// A string judged unsafe: dropped to its end.
    Drop,
}

/// How a string ended.
enum StrEnd<'a> {
    /// BEL (OSC), ESC \ or C1 ST: these raw bytes.
    Terminator(&'a [u8]),
    /// An ESC that is not ST, or a C1 control: the string is over and the unit starts
    /// something new (terminals end the string there too).
    Aborted,
    /// CAN or SUB: the string is cancelled.
    Cancelled(u8),
}

/// The streaming filter. One per attachment: it carries a sequence cut between reads.
#[derive(Debug, Clone)]
pub struct AttachFilter {
    clipboard: Clipboard,
    utf8: Utf8,
    state: State,
    /// The sequence being judged (bounded).
    buf: Vec<u8>,
    /// Inside a string: the OSC's kind (BEL ends an OSC only).
    osc: bool,
    /// Inside a string: an ESC was seen, its meaning depends on the next unit.
    str_esc: bool,
    dropped: Dropped,
}

impl AttachFilter {
    pub fn new(clipboard: Clipboard) -> AttachFilter {
        AttachFilter {
            clipboard,
            utf8: Utf8::default(),
            state: State::Ground,
            buf: Vec::with_capacity(64),
            osc: false,
            str_esc: false,
            dropped: Dropped::default(),
        }
    }

    /// What was dropped so far.
    pub fn dropped(&self) -> Dropped {
        self.dropped
    }

    /// Filters `input`, appending what may reach the terminal to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut utf8 = std::mem::take(&mut self.utf8);
        for &b in input {
            utf8.push(b, |u| self.unit(u, out));
        }
        self.utf8 = utf8;
    }

    /// Convenience: filters `input` into a new vector.
    pub fn filter(&mut self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len());
        self.push(input, &mut out);
        out
    }

    /// The stream has ended (detach, end of the run): an incomplete character is written
    /// as it is, an incomplete sequence is dropped, a passed string is closed with ST.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if let Some(u) = self.utf8.flush() {
            self.unit(u, out);
        }
        match self.state {
            State::Ground => {}
            State::Str(StrMode::Pass) => out.extend_from_slice(ST_7BIT),
            State::Esc | State::Csi => self.drop_sequence(Kind::Other, out),
            State::CsiDrop | State::Str(_) => {}
        }
        self.state = State::Ground;
        self.buf.clear();
        self.str_esc = false;
    }

    fn count(&mut self, kind: Kind) {
        let d = &mut self.dropped;
        match kind {
            Kind::Clipboard => d.clipboard += 1,
            Kind::Title => d.title += 1,
            Kind::Report => d.report += 1,
            Kind::Other => d.other += 1,
        }
    }

    /// Drops the escape or control sequence in `buf`; the C0 controls inside it are
    /// written (terminals execute them where they stand, and they are not the sequence).
    fn drop_sequence(&mut self, kind: Kind, out: &mut Vec<u8>) {
        self.count(kind);
        out.extend(self.buf.iter().filter(|b| **b < 0x20 && **b != ESC));
        self.buf.clear();
        self.state = State::Ground;
    }

    fn start_string(&mut self, mode: StrMode, osc: bool, raw: &[u8]) {
        self.buf.clear();
        self.buf.extend_from_slice(raw);
        self.osc = osc;
        self.str_esc = false;
        self.state = State::Str(mode);
        if mode == StrMode::Drop {
            self.count(Kind::Other);
            self.buf.clear();
        }
    }

    fn unit(&mut self, u: Unit, out: &mut Vec<u8>) {
        match self.state {
            State::Ground => self.ground(u, out),
            State::Esc => self.esc(u, out),
            State::Csi | State::CsiDrop => self.csi(u, out),
            State::Str(mode) => self.string(mode, u, out),
        }
    }

    fn ground(&mut self, u: Unit, out: &mut Vec<u8>) {
        match u {
            Unit::Ascii(ESC) => {
                self.buf.clear();
                self.buf.push(ESC);
                self.state = State::Esc;
            }
            Unit::Ascii(ENQ) => self.count(Kind::Report),
            Unit::Ascii(b) => out.push(b),
            Unit::C1 { code, .. } => self.c1(code, u.raw(), out),
            Unit::Other { .. } => out.extend_from_slice(u.raw()),
        }
    }

    /// A C1 control in the ground state (or ending something else).
    fn c1(&mut self, code: u8, raw: &[u8], out: &mut Vec<u8>) {
        match code {
            0x9b => {
                self.buf.clear();
                self.buf.extend_from_slice(raw);
                self.state = State::Csi;
            }
            0x9d => self.start_string(StrMode::OscNumber, true, raw),
            0x90 => self.start_string(StrMode::DcsHeader, false, raw),
            0x98 | 0x9e | 0x9f => self.start_string(StrMode::Drop, false, raw),
            // SCI, which xterm takes as DECID (identify: a DA1 reply).
            0x9a => self.count(Kind::Report),
            _ => out.extend_from_slice(raw),
        }
    }

    fn esc(&mut self, u: Unit, out: &mut Vec<u8>) {
        let b = match u {
            Unit::Ascii(b) => b,
            Unit::C1 { code, .. } => {
                self.drop_sequence(Kind::Other, out);
                self.c1(code, u.raw(), out);
                return;
            }
            Unit::Other { .. } => {
                // ESC before a non-ASCII character: not a sequence; the character stays.
                self.drop_sequence(Kind::Other, out);
                out.extend_from_slice(u.raw());
                return;
            }
        };
        let intermediates = self.buf.len() > 1;
        match b {
            ESC => {
                self.drop_sequence(Kind::Other, out);
                self.buf.push(ESC);
                self.state = State::Esc;
            }
            CAN | SUB => {
                self.drop_sequence(Kind::Other, out);
                out.push(b);
            }
            b'[' if !intermediates => {
                self.buf.push(b);
                self.state = State::Csi;
            }
            b']' if !intermediates => self.start_string(StrMode::OscNumber, true, b"\x1b]"),
            b'P' if !intermediates => self.start_string(StrMode::DcsHeader, false, b"\x1bP"),
            b'X' | b'^' | b'_' if !intermediates => self.start_string(StrMode::Drop, false, b""),
            ENQ => self.count(Kind::Report),
            0x00..=0x1f | 0x7f => self.buf.push(b),
            0x20..=0x2f => {
                self.buf.push(b);
                if self.buf.len() > MAX_SEQUENCE {
                    self.drop_sequence(Kind::Other, out);
                }
            }
            _ => {
                // A final byte (0x30–0x7e).
                let inter: Vec<u8> = self.buf[1..]
                    .iter()
                    .copied()
                    .filter(|c| (0x20..=0x2f).contains(c))
                    .collect();
                let drop = match (inter.as_slice(), b) {
                    // ST outside a string does nothing; it is not passed either.
                    ([], b'\\') => {
                        self.buf.clear();
                        self.state = State::Ground;
                        return;
                    }
                    // DECID: a DA1 reply.
                    ([], b'Z') => Some(Kind::Report),
                    // Leaving UTF-8 would let bytes read here as text be controls there.
                    ([b'%'], b'G') => None,
                    ([b'%', ..], _) => Some(Kind::Other),
                    _ => None,
                };
                match drop {
                    Some(kind) => {
                        self.buf.push(b);
                        self.drop_sequence(kind, out);
                    }
                    None => {
                        out.extend_from_slice(&self.buf);
                        out.push(b);
                        self.buf.clear();
                        self.state = State::Ground;
                    }
                }
            }
        }
    }

    fn csi(&mut self, u: Unit, out: &mut Vec<u8>) {
        let dropping = self.state == State::CsiDrop;
        let b = match u {
            Unit::Ascii(b) => b,
            Unit::C1 { code, .. } => {
                if dropping {
                    self.buf.clear();
                    self.state = State::Ground;
                } else {
                    self.drop_sequence(Kind::Other, out);
                }
                self.c1(code, u.raw(), out);
                return;
            }
            Unit::Other { .. } => {
                if dropping {
                    self.buf.clear();
                    self.state = State::Ground;
                } else {
                    self.drop_sequence(Kind::Other, out);
                }
                out.extend_from_slice(u.raw());
                return;
            }
        };
        match b {
            ESC => {
                if !dropping {
                    self.drop_sequence(Kind::Other, out);
                }
                self.buf.clear();
                self.buf.push(ESC);
                self.state = State::Esc;
            }
            CAN | SUB => {
                if !dropping {
                    self.drop_sequence(Kind::Other, out);
                }
                self.buf.clear();
                self.state = State::Ground;
                out.push(b);
            }
            ENQ => self.count(Kind::Report),
            0x00..=0x1f => {
                if dropping {
                    out.push(b);
                } else {
                    self.buf.push(b);
                }
            }
            0x20..=0x3f | 0x7f => {
                if !dropping {
                    self.buf.push(b);
                    if self.buf.len() > MAX_SEQUENCE {
                        self.drop_sequence(Kind::Other, out);
                        self.state = State::CsiDrop;
                    }
                }
            }
            _ => {
                // The final byte.
                if dropping {
                    self.buf.clear();
                    self.state = State::Ground;
                    return;
                }
                match judge_csi(&self.buf, b) {
                    Some(kind) => self.drop_sequence(kind, out),
                    None => {
                        out.extend_from_slice(&self.buf);
                        out.push(b);
                        self.buf.clear();
                        self.state = State::Ground;
                    }
                }
            }
        }
    }

    fn string(&mut self, mode: StrMode, u: Unit, out: &mut Vec<u8>) {
        if self.str_esc {
            self.str_esc = false;
            if let Unit::Ascii(b'\\') = u {
                self.end_string(mode, StrEnd::Terminator(ST_7BIT), out);
                return;
            }
            self.end_string(mode, StrEnd::Aborted, out);
            // The ESC starts whatever comes next.
            self.ground(Unit::Ascii(ESC), out);
            self.unit(u, out);
            return;
        }
        match u {
            Unit::Ascii(ESC) => self.str_esc = true,
            Unit::Ascii(BEL) if self.osc => self.end_string(mode, StrEnd::Terminator(&[BEL]), out),
            Unit::Ascii(b @ (CAN | SUB)) => self.end_string(mode, StrEnd::Cancelled(b), out),
            Unit::C1 { code: 0x9c, .. } => self.end_string(mode, StrEnd::Terminator(u.raw()), out),
            Unit::C1 { .. } => {
                self.end_string(mode, StrEnd::Aborted, out);
                self.unit(u, out);
            }
            _ => self.string_data(mode, u, out),
        }
    }

    fn string_data(&mut self, mode: StrMode, u: Unit, out: &mut Vec<u8>) {
        match mode {
            StrMode::Pass => out.extend_from_slice(u.raw()),
            StrMode::Drop => {}
            StrMode::OscNumber => match u {
                Unit::Ascii(d @ b'0'..=b'9') => {
                    self.buf.push(d);
                    if self.osc_digits().len() > MAX_OSC_DIGITS {
                        self.drop_string(Kind::Other);
                    }
                }
                Unit::Ascii(b';') => {
                    let n = self.osc_number();
                    match osc_kind(n) {
                        OscKind::Pass => {
                            out.extend_from_slice(&self.buf);
                            out.push(b';');
                            self.buf.clear();
                            self.state = State::Str(StrMode::Pass);
                        }
                        OscKind::Colour => {
                            self.buf.push(b';');
                            self.state = State::Str(StrMode::OscColour);
                        }
                        OscKind::Clipboard if self.clipboard == Clipboard::Allow => {
                            self.buf.push(b';');
                            self.state = State::Str(StrMode::Osc52Selection);
                        }
                        OscKind::Clipboard => self.drop_string(Kind::Clipboard),
                        OscKind::Title => self.drop_string(Kind::Title),
                        OscKind::Drop => self.drop_string(Kind::Other),
                    }
                }
                // A number that is not one (dtterm's `OSC l`, `OSC L` titles, …).
                _ => self.drop_string(Kind::Other),
            },
            StrMode::OscColour => {
                self.buf.extend_from_slice(u.raw());
                if self.buf.len() > MAX_OSC_BUFFER {
                    self.drop_string(Kind::Other);
                }
            }
            StrMode::Osc52Selection => match u {
                Unit::Ascii(b';') => {
                    self.buf.push(b';');
                    self.state = State::Str(StrMode::Osc52Data);
                }
                Unit::Ascii(c) if c.is_ascii_alphanumeric() => {
                    self.buf.push(c);
                    if self.buf.len() > MAX_SELECTION + 8 {
                        self.drop_string(Kind::Clipboard);
                    }
                }
                _ => self.drop_string(Kind::Clipboard),
            },
            StrMode::Osc52Data => {
                if let Unit::Ascii(b'?') = u {
                    self.drop_string(Kind::Clipboard);
                } else {
                    out.extend_from_slice(&self.buf);
                    out.extend_from_slice(u.raw());
                    self.buf.clear();
                    self.state = State::Str(StrMode::Pass);
                }
            }
            StrMode::DcsHeader => match u {
                Unit::Ascii(c @ 0x20..=0x3f) => {
                    self.buf.push(c);
                    if self.buf.len() > MAX_SEQUENCE {
                        self.drop_string(Kind::Other);
                    }
                }
                Unit::Ascii(f @ 0x40..=0x7e) => {
                    if dcs_passes(&self.buf, f) {
                        out.extend_from_slice(&self.buf);
                        out.push(f);
                        self.buf.clear();
                        self.state = State::Str(StrMode::Pass);
                    } else {
                        let kind = if matches!(f, b'q' | b'p') {
                            Kind::Report
                        } else {
                            Kind::Other
                        };
                        self.drop_string(kind);
                    }
                }
                // Terminals ignore C0 and DEL in a DCS header.
                Unit::Ascii(_) => {}
                _ => self.drop_string(Kind::Other),
            },
        }
    }

    /// Switches the current string to dropped, counting it as `kind`.
    fn drop_string(&mut self, kind: Kind) {
        self.count(kind);
        self.buf.clear();
        self.state = State::Str(StrMode::Drop);
    }

    fn osc_digits(&self) -> &[u8] {
        let start = self
            .buf
            .iter()
            .position(|b| b.is_ascii_digit())
            .unwrap_or(self.buf.len());
        &self.buf[start..]
    }

    fn osc_number(&self) -> Option<u32> {
        let d = self.osc_digits();
        if d.is_empty() {
            return None;
        }
        std::str::from_utf8(d).ok()?.parse().ok()
    }

    fn end_string(&mut self, mode: StrMode, end: StrEnd<'_>, out: &mut Vec<u8>) {
        let terminator: &[u8] = match &end {
            StrEnd::Terminator(t) => t,
            StrEnd::Aborted => ST_7BIT,
            StrEnd::Cancelled(_) => b"",
        };
        match mode {
            StrMode::Pass => match end {
                StrEnd::Cancelled(b) => out.push(b),
                _ => out.extend_from_slice(terminator),
            },
            StrMode::Drop => {}
            StrMode::OscNumber => {
                // An OSC with a number and no data (`OSC 104 ST` resets every colour).
                let kind = osc_kind(self.osc_number());
                match (kind, &end) {
                    (OscKind::Pass | OscKind::Colour, StrEnd::Terminator(_) | StrEnd::Aborted) => {
                        out.extend_from_slice(&self.buf);
                        out.extend_from_slice(terminator);
                    }
                    (OscKind::Clipboard, _) => self.count(Kind::Clipboard),
                    (OscKind::Title, _) => self.count(Kind::Title),
                    _ => self.count(Kind::Other),
                }
            }
            StrMode::OscColour => {
                if matches!(end, StrEnd::Cancelled(_)) {
                    self.count(Kind::Other);
                } else if self.buf.contains(&b'?') {
                    self.count(Kind::Report);
                } else {
                    out.extend_from_slice(&self.buf);
                    out.extend_from_slice(terminator);
                }
            }
            StrMode::Osc52Selection | StrMode::Osc52Data => self.count(Kind::Clipboard),
            StrMode::DcsHeader => self.count(Kind::Other),
        }
        self.buf.clear();
        self.state = State::Ground;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OscKind {
    Pass,
    Colour,
    Clipboard,
    Title,
    Drop,
}

fn osc_kind(n: Option<u32>) -> OscKind {
    match n {
        Some(8 | 133) => OscKind::Pass,
        Some(4 | 5 | 10..=19 | 104 | 105 | 110..=119) => OscKind::Colour,
        Some(52) => OscKind::Clipboard,
        Some(0..=2) => OscKind::Title,
        _ => OscKind::Drop,
    }
}

/// Whether a DCS whose header is `buf` (introducer, parameters, intermediates) and final
/// byte `f` passes: sixel images and the synchronized-update form only.
fn dcs_passes(buf: &[u8], f: u8) -> bool {
    let body = strip_introducer(buf);
    let inter = body.iter().any(|c| (0x20..=0x2f).contains(c));
    match f {
        b'q' => !inter && body.iter().all(|c| c.is_ascii_digit() || *c == b';'),
        b's' => body == b"=1" || body == b"=2",
        _ => false,
    }
}

/// The parameters and intermediates of a CSI or DCS, without its introducer (ESC [ / ESC P,
/// or the C1 form in one or two bytes).
fn strip_introducer(buf: &[u8]) -> &[u8] {
    match buf {
        [ESC, _, rest @ ..] => rest,
        [0xc2, _, rest @ ..] => rest,
        [_, rest @ ..] => rest,
        [] => buf,
    }
}

/// Whether a complete CSI (introducer, parameters and intermediates in `buf`, final byte
/// `f`) is dropped, and as what.
fn judge_csi(buf: &[u8], f: u8) -> Option<Kind> {
    let body = strip_introducer(buf);
    // Controls executed inside the sequence are not part of it.
    let body: Vec<u8> = body.iter().copied().filter(|c| *c >= 0x20).collect();
    let prefix = body.first().copied().filter(|c| b"<=>?".contains(c));
    let inter: Vec<u8> = body
        .iter()
        .copied()
        .filter(|c| (0x20..=0x2f).contains(c))
        .collect();
    let params: Vec<u8> = body
        .iter()
        .copied()
        .filter(|c| (0x30..=0x3f).contains(c))
        .collect();
    let report = Some(Kind::Report);
    match (inter.as_slice(), f) {
        // DA1, DA2, DA3 (with intermediates too: no control has them, and an emulator that
        // ignores intermediates would answer).
        (_, b'c') => report,
        // DSR, CPR, DECXCPR and the private reports; `CSI > … n` sets key modifiers.
        ([], b'n') if prefix == Some(b'>') => None,
        (_, b'n') => report,
        // DECRQM; DECSR (answers DECSRC).
        ([b'$'], b'p') | ([b'+'], b'p') => report,
        // XTVERSION.
        ([], b'q') if prefix == Some(b'>') => report,
        // Window operations and reports: the title stack (22, 23) and title modes.
        ([], b't') => {
            let first: Vec<u8> = params.iter().copied().take_while(|c| *c != b';').collect();
            if prefix == Some(b'>') || first == b"22" || first == b"23" {
                Some(Kind::Title)
            } else if matches!(first.as_slice(), b"11" | b"13" | b"14" | b"15" | b"16")
                || matches!(first.as_slice(), b"18" | b"19" | b"20" | b"21")
            {
                report
            } else {
                // Move, resize, raise, iconify the window; DECSLPP: outside the pane.
                Some(Kind::Other)
            }
        }
        ([], b'T') if prefix == Some(b'>') => Some(Kind::Title),
        // The kitty keyboard protocol's query; DECRQTSR; DECRQUPSS.
        ([], b'u') if prefix == Some(b'?') => report,
        ([b'$'], b'u') | ([b'&'], b'u') => report,
        // DECRQPSR, DECRQKT.
        ([b'$'], b'w') | ([b','], b'w') => report,
        // DECREQTPARM, DECRQPKFM.
        ([], b'x') | ([b'+'], b'x') => report,
        // DECRQCRA.
        ([b'*'], b'y') => report,
        // DECRQLP.
        ([b'\''], b'|') => report,
        // DECRQDE.
        ([b'"'], b'v') => report,
        // XTQMODKEYS, XTSMGRAPHICS (it answers), XTREPORTCOLORS.
        ([], b'm') if prefix == Some(b'?') => report,
        ([], b'S') if prefix == Some(b'?') => report,
        ([b'#'], b'R') => report,
        // Media copy: the printer.
        ([], b'i') => Some(Kind::Other),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(input: &[u8]) -> Vec<u8> {
        let mut a = AttachFilter::new(Clipboard::Drop);
        let mut out = a.filter(input);
        a.finish(&mut out);
        out
    }

    fn allow(input: &[u8]) -> Vec<u8> {
        let mut a = AttachFilter::new(Clipboard::Allow);
        let mut out = a.filter(input);
        a.finish(&mut out);
        out
    }

    fn show(b: &[u8]) -> String {
        String::from_utf8_lossy(b).escape_debug().to_string()
    }

    #[track_caller]
    fn dropped(input: &[u8], rest: &[u8]) {
        assert_eq!(show(&f(input)), show(rest), "from {}", show(input));
    }

    #[track_caller]
    fn passes(input: &[u8]) {
        assert_eq!(show(&f(input)), show(input));
    }

    #[test]
    fn clipboard_titles_and_queries_are_dropped() {
        for seq in [
            &b"\x1b]52;c;aGVsbG8=\x07"[..],
            b"\x1b]52;c;aGVsbG8=\x1b\\",
            b"\x1b]52;;aGVsbG8=\x07",
            b"\x1b]52;c;?\x07",
            b"\x1b]0;pwned\x07",
            b"\x1b]1;icon\x1b\\",
            b"\x1b]2;title\x07",
            b"\x1b]l title\x1b\\",
            b"\x1b]7;file:///etc\x07",
            b"\x1b]9;notify\x07",
            b"\x1b]777;notify;a;b\x07",
            b"\x1b]1337;File=x\x07",
            b"\x1b]10;?\x07",
            b"\x1b]11;?\x1b\\",
            b"\x1b]4;1;?\x07",
            b"\x1b]4;1;rgb:00/00/00;2;?\x07",
            b"\x1b[c",
            b"\x1b[0c",
            b"\x1b[>c",
            b"\x1b[>0c",
            b"\x1b[=c",
            b"\x1b[5n",
            b"\x1b[6n",
            b"\x1b[?6n",
            b"\x1b[?996n",
            b"\x1b[?2026$p",
            b"\x1b[4$p",
            b"\x1b[>q",
            b"\x1b[>0q",
            b"\x1b[18t",
            b"\x1b[14t",
            b"\x1b[21t",
            b"\x1b[22;0t",
            b"\x1b[23;0t",
            b"\x1b[3;0;0t",
            b"\x1b[8;100;100t",
            b"\x1b[?u",
            b"\x1b[x",
            b"\x1b[*y",
            b"\x1b[?4m",
            b"\x1b[?1;1S",
            b"\x1b[5i",
            b"\x1bZ",
            b"\x1b%@",
            b"\x1bP$qm\x1b\\",
            b"\x1bP+q544e\x1b\\",
            b"\x1bP1;1|17/7061\x1b\\",
            b"\x1bPtmux;\x1b\x1b]52;c;eA==\x07\x1b\\",
            b"\x1b_Ga=q,i=1;AAAA\x1b\\",
            b"\x1b^pm\x1b\\",
            b"\x1bXsos\x1b\\",
            b"\x05",
            // C1 forms: raw bytes and UTF-8.
            b"\x9b6n",
            b"\xc2\x9b6n",
            b"\x9d52;c;eA==\x9c",
            b"\xc2\x9d0;t\xc2\x9c",
            b"\x90$qm\x9c",
            b"\x9a",
        ] {
            dropped(seq, b"");
            let mut around = b"a".to_vec();
            around.extend_from_slice(seq);
            around.extend_from_slice(b"b");
            dropped(&around, b"ab");
        }
    }

    #[test]
    fn what_stays_inside_the_pane_passes_byte_for_byte() {
        for seq in [
            &b"plain text, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80\r\n\t\x08\x07"[..],
            b"\x1b[31;1mred\x1b[0m",
            b"\x1b[38;2;1;2;3m\x1b[48:5:17m",
            b"\x1b[H\x1b[2J\x1b[10;20H\x1b[K\x1b[3A\x1b[2C",
            b"\x1b[?1049h\x1b[?1049l\x1b[?25l\x1b[?25h",
            b"\x1b[?2004h\x1b[?2004l\x1b[?1000h\x1b[?1006h\x1b[?1004h",
            b"\x1b[?2026h\x1b[?2026l\x1b[5 q\x1b[1;24r\x1b[s\x1b[u",
            b"\x1b[>1u\x1b[<u\x1b[=1;1u\x1b[>4;2m\x1b[>4n",
            b"\x1b7\x1b8\x1b(0\x1b(B\x1b=\x1b>\x1bM\x1bD\x1bE\x1b#8\x1b%G\x1bc",
            b"\x1b]8;;https://example.com/\x1b\\link\x1b]8;;\x1b\\",
            b"\x1b]133;A\x07\x1b]133;B\x07",
            b"\x1b]4;1;rgb:ff/00/00\x07\x1b]10;#ffffff\x1b\\\x1b]104\x07\x1b]110\x1b\\",
            b"\x1bPq#0;2;0;0;0#0!10~-\x1b\\",
            b"\x1bP=1s\x1b\\\x1bP=2s\x1b\\",
            b"\x1b[2 t\x1b[1$t",
            b"\xc2\xa3\xc3\x9b\xe2\x80\x9c",
        ] {
            passes(seq);
        }
    }

    #[test]
    fn clipboard_writes_pass_when_allowed_and_reads_never() {
        let w = b"\x1b]52;c;aGVsbG8=\x07";
        assert_eq!(allow(w), w);
        let w = b"\x1b]52;;aGVsbG8=\x1b\\";
        assert_eq!(allow(w), w);
        assert_eq!(allow(b"\x1b]52;c;?\x07"), b"");
        assert_eq!(allow(b"\x1b]52;c;?\x1b\\x"), b"x");
        // Allowing the clipboard allows nothing else.
        assert_eq!(allow(b"\x1b]2;t\x07\x1b[6n"), b"");
    }

    #[test]
    fn controls_inside_a_dropped_sequence_still_act_and_enq_never() {
        dropped(b"\x1b[6\nn", b"\n");
        dropped(b"\x1b[6\x05n", b"");
        passes(b"\x1b[1\rm");
    }

    #[test]
    fn an_aborted_sequence_starts_the_next() {
        dropped(b"\x1b[6\x1b[31m", b"\x1b[31m");
        dropped(b"\x1b]2;x\x1b[6n\x1b[1m", b"\x1b[1m");
        dropped(b"\x1b[6\x18n", b"\x18n");
        // A passed string aborted by ESC is closed with ST before what follows is judged.
        assert_eq!(show(&f(b"\x1b]8;;u\x1b[6nx")), show(b"\x1b]8;;u\x1b\\x"));
        assert_eq!(show(&f(b"\x1b]8;;u\x9b6nx")), show(b"\x1b]8;;u\x1b\\x"));
    }

    #[test]
    fn held_bytes_are_bounded() {
        let mut a = AttachFilter::new(Clipboard::Drop);
        let mut long = b"\x1b[".to_vec();
        long.extend(std::iter::repeat_n(b'1', 100_000));
        let out = a.filter(&long);
        assert!(out.is_empty());
        assert!(a.buf.len() <= MAX_SEQUENCE + 1, "{}", a.buf.len());
        assert_eq!(a.filter(b"nz"), b"z");
        let mut colour = b"\x1b]4;1;".to_vec();
        colour.extend(std::iter::repeat_n(b'a', 100_000));
        assert!(a.filter(&colour).is_empty());
        assert!(a.buf.len() <= MAX_OSC_BUFFER + 1);
        assert_eq!(a.filter(b"\x07z"), b"z");
        let mut osc = b"\x1b]".to_vec();
        osc.extend(std::iter::repeat_n(b'9', 100_000));
        assert!(a.filter(&osc).is_empty());
        assert!(a.buf.len() <= 16);
        assert_eq!(a.filter(b"\x07z"), b"z");
        // A long hyperlink streams through without being held.
        let mut link = b"\x1b]8;;".to_vec();
        link.extend(std::iter::repeat_n(b'u', 100_000));
        assert_eq!(a.filter(&link), link);
        assert!(a.buf.is_empty());
        assert_eq!(a.filter(b"\x1b\\"), b"\x1b\\");
    }

    #[test]
    fn splitting_at_every_byte_boundary_gives_the_same_output() {
        let input: &[u8] = b"a\x1b]52;c;aGk=\x07b\x1b[6nc\x1b[31md\xc2\x9b6n\xe2\x82\xac\
            \x1b]8;;http://x\x1b\\e\x1b]0;t\x1b\\f\x1bP$qm\x1b\\g\x1b]4;1;?\x07h\x9d2;x\x9c\
            \x1b]10;#fff\x07i\x1b[?1049hj\xf0\x9f\x98\x80\x1bZk\x1b[>4;2m";
        let whole = f(input);
        assert_eq!(
            show(&whole),
            show(
                b"abc\x1b[31md\xe2\x82\xac\x1b]8;;http://x\x1b\\efgh\x1b]10;#fff\x07i\
                \x1b[?1049hj\xf0\x9f\x98\x80k\x1b[>4;2m"
            )
        );
        for i in 0..=input.len() {
            for j in i..=input.len() {
                let mut a = AttachFilter::new(Clipboard::Drop);
                let mut out = Vec::new();
                a.push(&input[..i], &mut out);
                a.push(&input[i..j], &mut out);
                a.push(&input[j..], &mut out);
                a.finish(&mut out);
                assert_eq!(show(&out), show(&whole), "split at {i} and {j}");
            }
        }
    }

    #[test]
    fn counts_say_what_was_dropped() {
        let mut a = AttachFilter::new(Clipboard::Drop);
        a.filter(b"\x1b]52;c;eA==\x07\x1b]2;t\x07\x1b[6n\x1b[c\x1b]777;x\x07");
        assert_eq!(
            a.dropped(),
            Dropped {
                clipboard: 1,
                title: 1,
                report: 2,
                other: 1
            }
        );
        assert_eq!(a.dropped().total(), 5);
    }
}
