//! The output ring of a run: seq-numbered frames in memory, bounded by bytes.
//!
//! One writer (the reader threads of the child) pushes frames; any number of readers hold a
//! cursor (the next seq they want) and call [`Ring::read_from`]. Sequence numbers start at 1
//! and are contiguous. When the ring is over its budget it evicts the oldest frames; a reader
//! whose cursor falls below the oldest frame still held gets [`ReadOutcome::Lag`] and decides
//! what to do (usually: say so, then continue from `first_available`). Writers never wait for
//! readers: the lock is held only to append or to clone a few reference-counted frames.
//!
//! When the run is over, [`Ring::end`] records an [`End`] after the last frame; a reader whose
//! cursor is just past the last frame then gets [`ReadOutcome::End`].
//!
//! Waiting for new data: [`Ring::readable`] from async code (a `tokio::sync::watch` channel,
//! which std threads can signal without a runtime) and [`Ring::wait_readable`] for blocking
//! callers.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::process::ExitStatus;

/// The default budget of a run's ring: 4 MiB.
pub const DEFAULT_RING_BYTES: usize = 4 * 1024 * 1024;
/// The largest payload of one frame; larger pushes are split.
pub const MAX_FRAME_BYTES: usize = 64 * 1024;
/// What each frame costs against the budget on top of its payload (the frame record, the
/// reference count and the allocation), so that many tiny frames cannot exceed the bound.
pub const FRAME_OVERHEAD: usize = 64;
/// The smallest budget a ring accepts; smaller requests are raised to it.
pub const MIN_RING_BYTES: usize = 256;

/// Which stream of the child a frame belongs to. A PTY run has one stream, `Stdout` (the
/// terminal's output, where the child's stdout and stderr are merged by the terminal). A
/// pipe run also records what proctor wrote to the child's stdin as `Stdin` (the handshake,
/// the person's inputs, the replies to the tool's requests); a PTY run's input (keys, which
/// can be secrets) never is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
    Stdin,
}

impl Stream {
    /// The wire name: `stdout`, `stderr`, `stdin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Stdin => "stdin",
        }
    }
}

/// One chunk of output as the child wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// 1 for the first frame of the run, then contiguous.
    pub seq: u64,
    pub stream: Stream,
    pub bytes: Arc<[u8]>,
}

/// The marker after the last frame of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct End {
    /// The seq of the last frame (0 when the run wrote nothing).
    pub last_seq: u64,
    /// The exit status the OS reported, or `None` when it could not be observed.
    pub exit: Option<ExitStatus>,
}

/// What a reader gets for a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// One or more frames, starting exactly at the cursor, contiguous.
    Frames(Vec<Frame>),
    /// The cursor is below the oldest frame still held: frames before `first_available`
    /// were evicted and are gone from memory.
    Lag { first_available: u64 },
    /// The cursor is just past the last frame and the run has ended.
    End(End),
    /// The cursor is just past the last frame and the run is live: wait, then read again.
    Pending { next: u64 },
    /// The cursor is beyond the next seq to be written; `next` is that seq.
    Ahead { next: u64 },
}

/// Where the ring stands; also the value published to async waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RingStatus {
    /// The oldest seq still held (equals `next_seq` when nothing is held).
    pub first_available: u64,
    /// The seq the next frame will get.
    pub next_seq: u64,
    /// Bytes charged against the budget (payload plus per-frame overhead).
    pub held_bytes: usize,
    /// The budget.
    pub capacity: usize,
    /// Total payload bytes ever pushed.
    pub total_bytes: u64,
    /// Set once the run has ended.
    pub end: Option<End>,
    /// When the child's last frame was pushed (milliseconds since the Unix epoch, wall
    /// clock; `stdin` frames do not count): what a client shows as "output 2s ago".
    pub last_push_ms: Option<u64>,
}

struct State {
    frames: VecDeque<Frame>,
    held: usize,
    next_seq: u64,
    total_bytes: u64,
    /// Payload bytes of the frames evicted so far: the byte offset of the oldest frame held.
    evicted_bytes: u64,
    end: Option<End>,
    last_push_ms: Option<u64>,
}

/// A run's output ring. Shared as `Arc<Ring>`.
pub struct Ring {
    capacity: usize,
    max_frame: usize,
    state: Mutex<State>,
    cond: Condvar,
    /// Notified only when the run ends, so that [`Ring::wait_end`] sleeps through pushes.
    end_cond: Condvar,
    tx: watch::Sender<RingStatus>,
}

impl Ring {
    /// A ring with a budget of `capacity` bytes (raised to [`MIN_RING_BYTES`]).
    pub fn new(capacity: usize) -> Ring {
        let capacity = capacity.max(MIN_RING_BYTES);
        let max_frame = MAX_FRAME_BYTES.min(capacity - FRAME_OVERHEAD);
        let state = State {
            frames: VecDeque::new(),
            held: 0,
            next_seq: 1,
            total_bytes: 0,
            evicted_bytes: 0,
            end: None,
            last_push_ms: None,
        };
        let status = status_of(&state, capacity);
        let (tx, _rx) = watch::channel(status);
        Ring {
            capacity,
            max_frame,
            state: Mutex::new(state),
            cond: Condvar::new(),
            end_cond: Condvar::new(),
            tx,
        }
    }

    /// The budget in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The largest payload of one frame in this ring.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state consistent (every mutation is
        // completed before anything can panic), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `bytes` as one or more frames (split at [`Ring::max_frame`]) and returns the
    /// seq of the last frame written, or `None` when nothing was written (empty input, or the
    /// ring has already ended). Evicts the oldest frames to stay within the budget. Never
    /// waits for a reader.
    pub fn push(&self, stream: Stream, bytes: &[u8]) -> Option<u64> {
        if bytes.is_empty() {
            return None;
        }
        self.push_chunks(stream, bytes.chunks(self.max_frame).map(Arc::from))
    }

    /// As [`Ring::push`], for a payload already in an `Arc`. When it fits in one frame the
    /// ring keeps that very allocation (no copy), so another consumer can share it.
    pub fn push_shared(&self, stream: Stream, bytes: Arc<[u8]>) -> Option<u64> {
        if bytes.is_empty() {
            return None;
        }
        if bytes.len() > self.max_frame {
            return self.push(stream, &bytes);
        }
        self.push_chunks(stream, std::iter::once(bytes))
    }

    fn push_chunks(&self, stream: Stream, chunks: impl Iterator<Item = Arc<[u8]>>) -> Option<u64> {
        let status = {
            let mut st = self.lock();
            if st.end.is_some() {
                return None;
            }
            for bytes in chunks {
                let charge = bytes.len() + FRAME_OVERHEAD;
                while st.held + charge > self.capacity {
                    match st.frames.pop_front() {
                        Some(old) => {
                            st.held -= old.bytes.len() + FRAME_OVERHEAD;
                            st.evicted_bytes += old.bytes.len() as u64;
                        }
                        None => break,
                    }
                }
                let seq = st.next_seq;
                st.next_seq += 1;
                st.held += charge;
                st.total_bytes += bytes.len() as u64;
                st.frames.push_back(Frame { seq, stream, bytes });
            }
            // When the child last wrote: what proctor wrote to it does not count.
            if stream != Stream::Stdin {
                st.last_push_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .and_then(|d| u64::try_from(d.as_millis()).ok());
            }
            status_of(&st, self.capacity)
        };
        self.publish(status);
        Some(status.next_seq - 1)
    }

    /// Records the end of the run after the last frame. Only the first call counts; later
    /// calls return the end already recorded.
    pub fn end(&self, exit: Option<ExitStatus>) -> End {
        let (end, status) = {
            let mut st = self.lock();
            if let Some(end) = st.end {
                return end;
            }
            let end = End {
                last_seq: st.next_seq - 1,
                exit,
            };
            st.end = Some(end);
            (end, status_of(&st, self.capacity))
        };
        self.publish(status);
        self.end_cond.notify_all();
        end
    }

    fn publish(&self, status: RingStatus) {
        self.cond.notify_all();
        // send_replace stores the value even when nobody is subscribed.
        self.tx.send_replace(status);
    }

    /// Frames from `cursor` on, at most `max_bytes` of payload (but always at least one
    /// frame when one is available, whatever its size). A cursor of 0 means "from the
    /// beginning" and reads as 1.
    pub fn read_from(&self, cursor: u64, max_bytes: usize) -> ReadOutcome {
        let cursor = cursor.max(1);
        let st = self.lock();
        let first = st.frames.front().map_or(st.next_seq, |f| f.seq);
        if cursor < first {
            return ReadOutcome::Lag {
                first_available: first,
            };
        }
        if cursor > st.next_seq {
            return ReadOutcome::Ahead { next: st.next_seq };
        }
        if cursor == st.next_seq {
            return match st.end {
                Some(end) => ReadOutcome::End(end),
                None => ReadOutcome::Pending { next: cursor },
            };
        }
        // first <= cursor < next_seq, and seqs in the deque are contiguous.
        let skip = usize::try_from(cursor - first).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        let mut taken = 0usize;
        for f in st.frames.iter().skip(skip) {
            if !out.is_empty() && taken + f.bytes.len() > max_bytes {
                break;
            }
            taken += f.bytes.len();
            out.push(f.clone());
        }
        ReadOutcome::Frames(out)
    }

    /// The oldest frame still held and its byte offset in the output (the payload bytes of
    /// every frame before it, all streams counted): `(next_seq, total_bytes)` when nothing
    /// is held. What a consumer that fell behind the ring needs to take the missing bytes
    /// from the transcript instead.
    pub fn first_held(&self) -> (u64, u64) {
        let st = self.lock();
        match st.frames.front() {
            Some(f) => (f.seq, st.evicted_bytes),
            None => (st.next_seq, st.total_bytes),
        }
    }

    /// The oldest seq the ring would still hold after a push of one frame of `len` bytes
    /// (at most [`Ring::max_frame`]): frames below it would be evicted by that push.
    pub fn first_kept_after_push(&self, len: usize) -> u64 {
        let st = self.lock();
        let mut held = st.held + len.min(self.max_frame) + FRAME_OVERHEAD;
        let mut first = st.next_seq;
        for f in &st.frames {
            if held <= self.capacity {
                first = f.seq;
                break;
            }
            held -= f.bytes.len() + FRAME_OVERHEAD;
        }
        first
    }

    /// Where the ring stands now.
    pub fn status(&self) -> RingStatus {
        status_of(&self.lock(), self.capacity)
    }

    /// The end marker, once the run has ended.
    pub fn ended(&self) -> Option<End> {
        self.lock().end
    }

    /// Blocks until a read at `cursor` would not be `Pending` (new frames at or past the
    /// cursor, the end, or a lag), or until `timeout`. Returns whether it is readable.
    pub fn wait_readable(&self, cursor: u64, timeout: Duration) -> bool {
        let cursor = cursor.max(1);
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        loop {
            if st.next_seq != cursor || st.end.is_some() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self
                .cond
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Blocks until the run has ended or `timeout` passes; returns the end, if recorded.
    /// Pushes do not wake it (unlike [`Ring::wait_readable`]), so a thread that only needs
    /// the end sleeps while output flows.
    pub fn wait_end(&self, timeout: Duration) -> Option<End> {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        loop {
            if let Some(end) = st.end {
                return Some(end);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            st = self
                .end_cond
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits, without blocking the async runtime, until a read at `cursor` would not be
    /// `Pending`. Cancel-safe (dropping the future loses nothing).
    pub async fn readable(&self, cursor: u64) {
        let cursor = cursor.max(1);
        let mut rx = self.tx.subscribe();
        loop {
            {
                let s = rx.borrow_and_update();
                if s.next_seq != cursor || s.end.is_some() {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                // The sender lives as long as the ring; unreachable while `self` is borrowed.
                return;
            }
        }
    }

    /// A receiver of the ring's status, updated on every push and at the end.
    pub fn subscribe(&self) -> watch::Receiver<RingStatus> {
        self.tx.subscribe()
    }
}

fn status_of(st: &State, capacity: usize) -> RingStatus {
    RingStatus {
        first_available: st.frames.front().map_or(st.next_seq, |f| f.seq),
        next_seq: st.next_seq,
        held_bytes: st.held,
        capacity,
        total_bytes: st.total_bytes,
        end: st.end,
        last_push_ms: st.last_push_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(o: ReadOutcome) -> Vec<Frame> {
        match o {
            ReadOutcome::Frames(f) => f,
            other => panic!("expected frames, got {other:?}"),
        }
    }

    #[test]
    fn seqs_start_at_one_and_are_contiguous_across_splits() {
        let r = Ring::new(1 << 20);
        assert_eq!(r.read_from(0, usize::MAX), ReadOutcome::Pending { next: 1 });
        assert_eq!(r.push(Stream::Stdout, b"ab"), Some(1));
        let big = vec![b'x'; MAX_FRAME_BYTES * 2 + 5];
        assert_eq!(r.push(Stream::Stderr, &big), Some(4));
        assert_eq!(r.push(Stream::Stdout, b""), None);
        let got = frames(r.read_from(1, usize::MAX));
        let seqs: Vec<u64> = got.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4]);
        assert_eq!(got[3].bytes.len(), 5);
        assert_eq!(got[1].stream, Stream::Stderr);
        let joined: Vec<u8> = got[1..]
            .iter()
            .flat_map(|f| f.bytes.iter().copied())
            .collect();
        assert_eq!(joined, big);
    }

    #[test]
    fn max_bytes_limits_a_read_but_one_frame_always_comes() {
        let r = Ring::new(1 << 20);
        for _ in 0..5 {
            r.push(Stream::Stdout, b"0123456789");
        }
        assert_eq!(frames(r.read_from(1, 25)).len(), 2);
        assert_eq!(frames(r.read_from(2, 1)).len(), 1);
        assert_eq!(frames(r.read_from(5, 1000)).len(), 1);
        assert_eq!(r.read_from(6, 1000), ReadOutcome::Pending { next: 6 });
        assert_eq!(r.read_from(7, 1000), ReadOutcome::Ahead { next: 6 });
    }

    #[test]
    fn eviction_keeps_the_budget_and_reports_lag() {
        let cap = 1024;
        let r = Ring::new(cap);
        for i in 0..100u32 {
            r.push(Stream::Stdout, format!("frame-{i:04}").as_bytes());
            assert!(r.status().held_bytes <= cap);
        }
        let s = r.status();
        assert!(s.first_available > 1);
        assert_eq!(s.next_seq, 101);
        assert_eq!(
            r.read_from(1, usize::MAX),
            ReadOutcome::Lag {
                first_available: s.first_available
            }
        );
        let got = frames(r.read_from(s.first_available, usize::MAX));
        assert_eq!(got.last().unwrap().seq, 100);
        assert_eq!(&*got.last().unwrap().bytes, b"frame-0099");
        // A frame larger than the budget is split so the budget still holds.
        r.push(Stream::Stdout, &vec![b'y'; cap * 3]);
        assert!(r.status().held_bytes <= cap);
    }

    #[test]
    fn first_held_gives_the_byte_offset_and_first_kept_predicts_the_eviction() {
        let r = Ring::new(1024);
        assert_eq!(r.first_held(), (1, 0));
        let mut total = 0u64;
        for i in 0..200u32 {
            let bytes = format!("frame-{i}-{}", "z".repeat((i % 7) as usize));
            let predicted = r.first_kept_after_push(bytes.len());
            r.push(Stream::Stdout, bytes.as_bytes());
            total += bytes.len() as u64;
            let s = r.status();
            assert_eq!(s.first_available, predicted, "push {i}");
            let (seq, offset) = r.first_held();
            assert_eq!(seq, s.first_available);
            // The offset is the payload of every frame before the oldest one held.
            let held: u64 = frames(r.read_from(seq, usize::MAX))
                .iter()
                .map(|f| f.bytes.len() as u64)
                .sum();
            assert_eq!(offset, total - held);
        }
        assert!(r.first_held().0 > 1);
    }

    #[test]
    fn end_comes_after_the_last_frame_and_stops_pushes() {
        let r = Ring::new(4096);
        r.push(Stream::Stdout, b"a");
        r.push(Stream::Stdout, b"b");
        let e = r.end(None);
        assert_eq!(e.last_seq, 2);
        assert_eq!(r.push(Stream::Stdout, b"late"), None);
        assert_eq!(r.read_from(3, 10), ReadOutcome::End(e));
        assert_eq!(frames(r.read_from(2, 10))[0].seq, 2);
        assert_eq!(r.end(None), e);
        assert!(r.wait_readable(3, Duration::from_secs(30)));
    }

    #[test]
    fn reconnect_from_last_plus_one_is_exact() {
        let r = Ring::new(1 << 20);
        let mut expected = Vec::new();
        let mut got = Vec::new();
        let mut cursor = 1;
        for i in 0..50u32 {
            let chunk = format!("<{i}>");
            expected.extend_from_slice(chunk.as_bytes());
            r.push(Stream::Stdout, chunk.as_bytes());
            // The reader connects only every 7th push, reading what it missed.
            if i % 7 == 0 {
                for f in frames(r.read_from(cursor, usize::MAX)) {
                    assert_eq!(f.seq, cursor);
                    got.extend_from_slice(&f.bytes);
                    cursor = f.seq + 1;
                }
            }
        }
        r.end(None);
        loop {
            match r.read_from(cursor, 10) {
                ReadOutcome::Frames(fs) => {
                    for f in fs {
                        got.extend_from_slice(&f.bytes);
                        cursor = f.seq + 1;
                    }
                }
                ReadOutcome::End(_) => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, expected);
    }

    #[test]
    fn blocking_wait_wakes_on_a_push_from_another_thread() {
        let r = Arc::new(Ring::new(4096));
        assert!(!r.wait_readable(1, Duration::from_millis(1)));
        let w = Arc::clone(&r);
        let t = std::thread::spawn(move || {
            w.push(Stream::Stdout, b"x");
        });
        assert!(r.wait_readable(1, Duration::from_secs(30)));
        t.join().unwrap();
        assert_eq!(frames(r.read_from(1, 10)).len(), 1);
    }

    #[tokio::test]
    async fn async_wait_wakes_on_a_push_from_a_std_thread() {
        let r = Arc::new(Ring::new(4096));
        let w = Arc::clone(&r);
        let t = std::thread::spawn(move || {
            for _ in 0..3 {
                w.push(Stream::Stdout, b"x");
            }
            w.end(None);
        });
        let mut cursor = 1;
        let end = loop {
            tokio::time::timeout(Duration::from_secs(30), r.readable(cursor))
                .await
                .expect("no wake-up");
            match r.read_from(cursor, usize::MAX) {
                ReadOutcome::Frames(fs) => cursor = fs.last().unwrap().seq + 1,
                ReadOutcome::End(e) => break e,
                ReadOutcome::Pending { .. } => {}
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(end.last_seq, 3);
        t.join().unwrap();
    }

    #[test]
    fn wait_end_ignores_pushes_and_returns_the_end() {
        let r = Arc::new(Ring::new(4096));
        r.push(Stream::Stdout, b"x");
        assert_eq!(r.wait_end(Duration::from_millis(1)), None, "not ended yet");
        let w = Arc::clone(&r);
        let t = std::thread::spawn(move || {
            for _ in 0..50 {
                w.push(Stream::Stdout, b"y");
            }
            w.end(None)
        });
        let end = r.wait_end(Duration::from_secs(30)).expect("the end");
        assert_eq!(end, t.join().unwrap());
        assert_eq!(end.last_seq, 51);
        // Once ended, it answers at once, every time.
        assert_eq!(r.wait_end(Duration::ZERO), Some(end));
    }

    #[test]
    fn proctors_own_input_is_not_the_childs_output_time() {
        let r = Ring::new(1 << 20);
        assert_eq!(r.push(Stream::Stdin, b"{\"type\":\"user\"}\n"), Some(1));
        assert_eq!(r.status().last_push_ms, None, "the child wrote nothing yet");
        assert_eq!(r.status().next_seq, 2);
        r.push(Stream::Stdout, b"answer\n");
        assert!(r.status().last_push_ms.is_some());
    }

    #[test]
    fn push_shared_keeps_the_allocation_and_splits_what_does_not_fit() {
        let r = Ring::new(1 << 20);
        let a: Arc<[u8]> = Arc::from(&b"shared"[..]);
        assert_eq!(r.push_shared(Stream::Stdout, Arc::clone(&a)), Some(1));
        let got = frames(r.read_from(1, usize::MAX));
        assert!(
            Arc::ptr_eq(&got[0].bytes, &a),
            "the same allocation, not a copy"
        );
        assert_eq!(r.push_shared(Stream::Stdout, Arc::from(&b""[..])), None);
        let big: Arc<[u8]> = Arc::from(vec![b'z'; MAX_FRAME_BYTES + 1]);
        assert_eq!(r.push_shared(Stream::Stderr, Arc::clone(&big)), Some(3));
        let got = frames(r.read_from(2, usize::MAX));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].bytes.len(), MAX_FRAME_BYTES);
        assert_eq!(got[1].bytes.len(), 1);
        r.end(None);
        assert_eq!(
            r.push_shared(Stream::Stdout, a),
            None,
            "nothing after the end"
        );
    }
}
