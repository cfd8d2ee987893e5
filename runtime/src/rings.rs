//! Rings of records (`GPUINSTR_RING` in `gpuinstr/gpuinstr.h`): a tool's
//! records streamed to its host part while the dispatch runs, so none is
//! dropped and memory is bounded by the ring, not the trace.
//!
//! Each ring is host memory the runtime allocates when its code object
//! loads (fine-grained: the host reads it while the kernel writes it):
//! a head (`gpuinstr_ring_head`), `capacity` records and one sequence word
//! per record. Hooks reserve records by adding to the head's `Reserved`,
//! wait while the ring has no room past what the runtime has `Read`, write
//! their records, then each record's sequence word (index + 1). The runtime
//! takes complete records in order ([`Ring::drain`]: a thread of its own
//! while dispatches run, and the dispatch's completion handler for the
//! rest), hands them to the host part, and moves `Read`.
//!
//! Records belong to the oldest dispatch in flight on the ring's code
//! object. A dispatch's end is known exactly: the collect kernel that runs
//! after it copies the ring's `Reserved` out with the tool globals, before
//! anything later in the queue can append.
//!
//! By default a wavefront whose records do not fit waits for the runtime to
//! take enough. With `GPUINSTR_RING_FULL=drop` (`gpuinstr-run --ring-full
//! drop`) it drops them instead and counts them in the head's `Dropped`,
//! which the collect kernel copies out with `Reserved`: each dispatch's
//! drops are counted exactly and reported.

use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::runtime::{Hsa, ToolCodeObject, ToolHost};

/// Offsets in a ring's head (`gpuinstr_ring_head`).
const RESERVED: u64 = 0;
const READ: u64 = 64;
const MASK: u64 = 72;
const RECORDS: u64 = 80;
const SEQUENCES: u64 = 88;
const WHEN_FULL: u64 = 96;
/// Bytes the collect kernel copies out from `Reserved`: `Reserved` and
/// `Dropped`, its neighbour.
pub const END_BYTES: u64 = 16;
/// The head's bytes: the records follow it.
const HEAD_BYTES: u64 = 128;

/// Host memory per ring unless `GPUINSTR_RING_BYTES` says otherwise.
pub const DEFAULT_RING_BYTES: u64 = 64 << 20;

/// A wavefront's records must fit at once.
const MINIMUM_CAPACITY: u64 = 64;

/// How long a dispatch's completion waits for records it reserved and has
/// not finished writing (none should be left once its collect kernel ran).
const STRAGGLER_WAIT: Duration = Duration::from_secs(2);

/// `GPUINSTR_RING_BYTES`: host memory per ring (records and their sequence
/// words), at least enough for a wavefront's records.
pub fn ring_bytes_from_environment() -> Result<u64, String> {
    match std::env::var("GPUINSTR_RING_BYTES") {
        Ok(text) if !text.is_empty() => match text.parse::<u64>() {
            Ok(bytes) if bytes > 0 => Ok(bytes),
            _ => {
                Err(format!("GPUINSTR_RING_BYTES={text}: a number of bytes is expected (default {DEFAULT_RING_BYTES})"))
            }
        },
        _ => Ok(DEFAULT_RING_BYTES),
    }
}

/// What a wavefront does when a ring has no room for its records
/// (`gpuinstr_ring_head::WhenFull`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhenFull {
    /// Wait until the runtime has taken enough: nothing is lost.
    #[default]
    Wait,
    /// Drop them, counted per dispatch and reported.
    Drop,
}

impl WhenFull {
    fn word(self) -> u64 {
        match self {
            WhenFull::Wait => 0,
            WhenFull::Drop => 1,
        }
    }

    /// `GPUINSTR_RING_FULL`: `wait` (the default) or `drop`.
    pub fn from_environment() -> Result<WhenFull, String> {
        match std::env::var("GPUINSTR_RING_FULL").as_deref() {
            Err(_) | Ok("") | Ok("wait") => Ok(WhenFull::Wait),
            Ok("drop") => Ok(WhenFull::Drop),
            Ok(other) => Err(format!("GPUINSTR_RING_FULL={other}: `wait` (the default) or `drop` is expected")),
        }
    }
}

/// Records of `record_bytes` a ring of `bytes` holds: a power of two, at
/// least a wavefront's.
pub fn capacity_for(bytes: u64, record_bytes: u64) -> u64 {
    let fits = bytes / (record_bytes + 8);
    if fits < MINIMUM_CAPACITY {
        MINIMUM_CAPACITY
    } else {
        1u64 << (63 - fits.leading_zeros())
    }
}

/// A dispatch in flight that may append to a ring.
#[derive(Clone, Debug)]
pub struct Owner {
    pub dispatch: u64,
    pub kernel: Arc<CString>,
    /// Its collect kernel's completion signal (0: the dispatch is over).
    pub done: u64,
    /// Where its collect kernel leaves the ring's `Reserved` and
    /// `Dropped` ([`END_BYTES`]).
    pub end: u64,
}

/// Records handed to a tool's host part (`gpuinstr_records` of host.h).
pub struct ToolRecords<'a> {
    pub dispatch: u64,
    pub kernel: &'a CString,
    pub code_object: &'a Arc<ToolCodeObject>,
    /// The ring's name (its tool global).
    pub ring: &'a CString,
    /// The first record's index among the dispatch's records.
    pub first: u64,
    pub record_bytes: u64,
    pub bytes: &'a [u8],
}

/// Where records go besides the tool's host part: the run's database.
pub trait RecordSink: Sync {
    fn records(&self, records: &ToolRecords);
}

/// What a drain found wrong; the runtime reports it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Records appended while no observed dispatch of the code object was
    /// in flight (a dispatch the runtime could not observe ran it).
    pub ownerless: u64,
    /// Records a finished dispatch reserved and never completed.
    pub incomplete: u64,
}

/// What a dispatch appended to a ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    /// Records handed to the tool's host part.
    pub records: u64,
    /// Records its hooks dropped because the ring was full (always 0 when
    /// wavefronts wait).
    pub dropped: u64,
}

struct Cursor {
    /// Records taken so far (the head's `Read`).
    taken: u64,
    /// What each dispatch appended, as far as handed over.
    per_dispatch: HashMap<u64, Appended>,
    /// The head's `Dropped` at the end of the last dispatch that left.
    dropped: u64,
    lost: Lost,
    batch: Vec<u8>,
}

/// One ring of a loaded code object.
pub struct Ring {
    pub name: CString,
    pub record_bytes: u64,
    pub capacity: u64,
    pub when_full: WhenFull,
    /// The head's address (what the tool global points at).
    pub head: u64,
    code_object: Arc<ToolCodeObject>,
    owners: Mutex<VecDeque<Owner>>,
    cursor: Mutex<Cursor>,
}

impl Ring {
    /// Host bytes of a ring of `capacity` records.
    pub fn bytes(capacity: u64, record_bytes: u64) -> u64 {
        HEAD_BYTES + capacity * (record_bytes + 8)
    }

    /// A ring over `bytes(capacity, record_bytes)` of host memory at
    /// `head`, its head written.
    pub fn new(
        hsa: &dyn Hsa,
        name: &str,
        code_object: Arc<ToolCodeObject>,
        head: u64,
        (capacity, record_bytes): (u64, u64),
        when_full: WhenFull,
    ) -> Ring {
        let records = head + HEAD_BYTES;
        let sequences = records + capacity * record_bytes;
        hsa.host_write(head, &[0u8; HEAD_BYTES as usize]);
        hsa.host_write(head + MASK, &(capacity - 1).to_le_bytes());
        hsa.host_write(head + RECORDS, &records.to_le_bytes());
        hsa.host_write(head + SEQUENCES, &sequences.to_le_bytes());
        hsa.host_write(head + WHEN_FULL, &when_full.word().to_le_bytes());
        // No sequence word may look complete before its record is.
        hsa.host_write(sequences, &vec![0u8; (capacity * 8) as usize]);
        Ring {
            name: CString::new(name.replace('\0', " ")).expect("no NUL left"),
            record_bytes,
            capacity,
            when_full,
            head,
            code_object,
            owners: Mutex::new(VecDeque::new()),
            cursor: Mutex::new(Cursor {
                taken: 0,
                per_dispatch: HashMap::new(),
                dropped: 0,
                lost: Lost::default(),
                batch: Vec::new(),
            }),
        }
    }

    fn records(&self) -> u64 {
        self.head + HEAD_BYTES
    }

    fn sequence(&self, index: u64) -> u64 {
        self.records() + self.capacity * self.record_bytes + (index & (self.capacity - 1)) * 8
    }

    /// Where the ring's `Reserved` is (the collect kernel copies it and
    /// `Dropped` out: [`END_BYTES`]).
    pub fn reserved_address(&self) -> u64 {
        self.head + RESERVED
    }

    /// A dispatch that may append is in flight (submission order).
    pub fn owned_by(&self, owner: Owner) {
        self.owners.lock().unwrap_or_else(|e| e.into_inner()).push_back(owner);
    }

    /// What `dispatch` appended (once it is over and drained).
    pub fn appended_by(&self, dispatch: u64) -> Appended {
        let mut cursor = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        cursor.per_dispatch.remove(&dispatch).unwrap_or_default()
    }

    /// What was lost since the last call.
    pub fn take_lost(&self) -> Lost {
        std::mem::take(&mut self.cursor.lock().unwrap_or_else(|e| e.into_inner()).lost)
    }

    /// Hands every complete record to the tool, in order, and moves `Read`
    /// past them; dispatches that are over (their collect kernel ran) get
    /// all of theirs and leave. Whether any record was taken.
    pub fn drain(&self, hsa: &dyn Hsa, tool: Option<&dyn ToolHost>, sink: &dyn RecordSink) -> bool {
        let mut cursor = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        let mut took = false;
        let mut waiting_since: Option<Instant> = None;
        loop {
            // `Reserved` before the owner's signal: if that dispatch is not
            // over yet, no later one has appended.
            let reserved = hsa.host_load_u64(self.head + RESERVED);
            let owner = self.owners.lock().unwrap_or_else(|e| e.into_inner()).front().cloned();
            let ends = owner.as_ref().filter(|o| hsa.signal_load(o.done) == 0).map(|o| {
                let mut ends = [0u8; END_BYTES as usize];
                hsa.host_read(o.end, &mut ends);
                let word = |k: usize| u64::from_le_bytes(ends[8 * k..8 * k + 8].try_into().expect("8 bytes"));
                (word(0), word(1))
            });
            let end = ends.map(|(end, _)| end);
            let limit = end.unwrap_or(reserved);
            let start = cursor.taken;
            let mut stop = start;
            while stop < limit && stop - start < self.capacity && hsa.host_load_u64(self.sequence(stop)) == stop + 1 {
                stop += 1;
            }
            if stop > start {
                self.hand_over(hsa, tool, sink, &mut cursor, owner.as_ref(), start, stop);
                took = true;
                waiting_since = None;
            }
            let Some((owner, (end, dropped))) = owner.zip(ends) else {
                if stop == start {
                    return took;
                }
                continue;
            };
            if cursor.taken >= end {
                self.owners.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                // Drops since the previous dispatch's end are this one's.
                let since = dropped.saturating_sub(cursor.dropped);
                cursor.dropped = cursor.dropped.max(dropped);
                cursor.per_dispatch.entry(owner.dispatch).or_default().dropped += since;
                continue;
            }
            if stop == start {
                // The dispatch is over and a record it reserved is not
                // complete: wait a little, then give it up, counted.
                let since = *waiting_since.get_or_insert_with(Instant::now);
                if since.elapsed() < STRAGGLER_WAIT {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                cursor.lost.incomplete += end - cursor.taken;
                cursor.taken = end;
                hsa.host_store_u64(self.head + READ, end);
            }
        }
    }

    /// Hands records `start..stop` (all complete, fewer than a ring's) to
    /// the tool and the sink as the owner's, and frees their room.
    #[allow(clippy::too_many_arguments)]
    fn hand_over(
        &self,
        hsa: &dyn Hsa,
        tool: Option<&dyn ToolHost>,
        sink: &dyn RecordSink,
        cursor: &mut Cursor,
        owner: Option<&Owner>,
        start: u64,
        stop: u64,
    ) {
        let Some(owner) = owner else {
            cursor.lost.ownerless += stop - start;
            cursor.taken = stop;
            hsa.host_store_u64(self.head + READ, stop);
            return;
        };
        let handed = &mut cursor.per_dispatch.entry(owner.dispatch).or_default().records;
        let first = *handed;
        *handed += stop - start;
        let mut batch = std::mem::take(&mut cursor.batch);
        batch.resize(((stop - start) * self.record_bytes) as usize, 0);
        // The records may wrap around the ring's end: two pieces.
        let slot = start & (self.capacity - 1);
        let before_end = ((self.capacity - slot).min(stop - start) * self.record_bytes) as usize;
        hsa.host_read(self.records() + slot * self.record_bytes, &mut batch[..before_end]);
        hsa.host_read(self.records(), &mut batch[before_end..]);
        let records = ToolRecords {
            dispatch: owner.dispatch,
            kernel: &owner.kernel,
            code_object: &self.code_object,
            ring: &self.name,
            first,
            record_bytes: self.record_bytes,
            bytes: &batch,
        };
        if let Some(tool) = tool {
            tool.records(&records);
        }
        sink.records(&records);
        cursor.batch = batch;
        cursor.taken = stop;
        hsa.host_store_u64(self.head + READ, stop);
    }
}

/// Every ring of the run, for the thread that empties them.
#[derive(Default)]
pub struct Rings {
    rings: Mutex<Vec<Arc<Ring>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    stop: std::sync::atomic::AtomicBool,
}

/// How long the draining thread rests when it found nothing.
const IDLE: Duration = Duration::from_micros(500);

impl Rings {
    pub fn add(&self, ring: Arc<Ring>) {
        self.rings.lock().unwrap_or_else(|e| e.into_inner()).push(ring);
    }

    pub fn all(&self) -> Vec<Arc<Ring>> {
        self.rings.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Starts (once) the thread that empties every ring while the program
    /// runs.
    pub fn start_draining(
        self: &Arc<Self>,
        hsa: &'static (dyn Hsa + Sync),
        tool: Option<&'static dyn ToolHost>,
        sink: &'static dyn RecordSink,
    ) -> std::io::Result<()> {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.is_some() || self.stop.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        let rings = self.clone();
        *thread = Some(std::thread::Builder::new().name("gpuinstr-rings".into()).spawn(move || {
            while !rings.stop.load(std::sync::atomic::Ordering::Acquire) {
                let mut took = false;
                for ring in rings.all() {
                    took |= ring.drain(hsa, tool, sink);
                }
                if !took {
                    std::thread::sleep(IDLE);
                }
            }
        })?);
        Ok(())
    }

    /// Stops the thread (at exit, before the tool's last call): what is
    /// left goes with the dispatches' completions.
    pub fn stop_draining(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}
