//! The durable room log: one append-only file per chat room, in the format of
//! `docs/room-log.md`, with an in-memory index from seq to file offset so that a replay
//! starts with one `pread`, never a scan.
//!
//! ```text
//!  file offset 0                                                      self.end
//!  | record seq 1 | record seq 2 | ...              | record seq n   |  (torn tail, cut)
//!  ^offsets[0]    ^offsets[1]                       ^offsets[n-1]
//!
//!  record: | body_len u32 LE | crc u32 LE | seq u64 LE | name_len u8 | name | text |
//!          |<------ header: 8 bytes ----->|<------------- body: body_len -------->|
//! ```
//!
//! Two ways of writing are offered. [`RoomLog::append`] is for a process that owns the
//! room: its caller serialises appends (the hub holds the room's lock), so no file lock is
//! taken. [`RoomLog::append_locked`] and [`RoomLog::refresh_locked`] are for several
//! processes sharing the files (srv-threads `--mode process`): they take `flock(2)` and
//! first index what the other processes appended.

use proto::chat::is_valid_name;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;

use crate::commit::SyncTarget;
use nix::fcntl::{Flock, FlockArg};

/// Bytes in a record's header: `body_len` and `crc`.
pub const HEADER_LEN: usize = 8;
/// The smallest body: a seq, a name length and a one-byte name.
pub const MIN_BODY_LEN: u32 = 10;
/// The largest body the format allows (1 MiB).
pub const MAX_BODY_LEN: u32 = 1 << 20;
/// Bytes of body before the name: the seq and the name length.
const BODY_FIXED: usize = 9;
/// The recovery scan reads the file in windows of this many bytes.
const SCAN_CHUNK: usize = 256 * 1024;

/// Whether an append waits for the disk (`--fsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// `ACK` follows the `write(2)`: a message survives a crash of the process, not of the machine.
    #[default]
    Never,
    /// Every append is followed by `fdatasync(2)`.
    Always,
}

/// One message of a room, borrowed from a read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub seq: u64,
    pub name: &'a str,
    pub text: &'a str,
}

/// Why a room log could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// A bad record followed by more bytes: acknowledged messages may lie after it, so it
    /// is not cut, and the server refuses to start.
    #[error("{path}: corrupt record at offset {offset}: {what}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        what: &'static str,
    },
}

impl LogError {
    fn io(path: &Path, source: io::Error) -> LogError {
        LogError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// How an indexing scan ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// Every byte up to the length scanned belongs to a good record.
    Clean,
    /// The record at `offset` is the torn remains of an interrupted write.
    Torn { offset: u64 },
    /// The record at `offset` is bad and more bytes follow it.
    Corrupt { offset: u64, what: &'static str },
}

/// A room's log file and its index.
#[derive(Debug)]
pub struct RoomLog {
    room: String,
    path: PathBuf,
    /// Opened read + `O_APPEND`: every write lands at the end, whoever else appends.
    file: File,
    /// A duplicate of `file`, moved into a [`Flock`] while a lock is held. A `flock(2)` lock
    /// belongs to the open file description, which both descriptors share.
    lock_file: Option<File>,
    fsync: Fsync,
    /// # Invariant
    /// `offsets[i]` is the file offset of the record with seq `i + 1`; the records
    /// `1..=offsets.len()` have been checked (or written by us) and are immutable.
    offsets: Vec<u64>,
    /// # Invariant
    /// The end of the last indexed record (0 for an empty room): the next append lands here.
    end: u64,
    /// A failed append left bytes past `end` that could not be cut off at once.
    dirty: bool,
    /// With [`Fsync::Always`]: what the group commit syncs for this file (a handle of
    /// its own on it), and whether a sync of it failed.
    sync_target: Option<Arc<SyncTarget>>,
}

impl RoomLog {
    /// Opens (creating if missing) `DIR/<room>.log` and recovers it per `docs/room-log.md`:
    /// builds the in-memory seq -> offset index, cuts a torn tail (and says so on stderr),
    /// and refuses corruption in the middle of the file.
    ///
    /// Recovery assumes no other process is appending to the file; processes that share
    /// the files use [`RoomLog::open_locked`].
    pub fn open(dir: &Path, room: &str, fsync: Fsync) -> Result<RoomLog, LogError> {
        let mut log = RoomLog::open_file(dir, room, fsync)?;
        let len = log.file_len().map_err(|e| LogError::io(&log.path, e))?;
        let tail = log.index_to(len).map_err(|e| LogError::io(&log.path, e))?;
        log.settle_tail(tail, len, true)
            .map_err(|e| LogError::io(&log.path, e))?
            .map_or(Ok(log), Err)
    }

    /// Like [`RoomLog::open`], for processes that share the room files: the file is indexed
    /// under an exclusive `flock(2)`, so a record another process is writing is never taken
    /// for a torn tail. Use it, not a handle inherited through `fork`, in each process: a
    /// `flock` lock belongs to the open file description, which a forked child shares with
    /// its parent, so an inherited handle would not exclude the parent.
    pub fn open_locked(dir: &Path, room: &str, fsync: Fsync) -> Result<RoomLog, LogError> {
        let mut log = RoomLog::open_file(dir, room, fsync)?;
        let corrupt = log
            .with_flock(FlockArg::LockExclusive, |log| {
                let len = log.file_len()?;
                let tail = log.index_to(len)?;
                log.settle_tail(tail, len, true)
            })
            .and_then(|r| r)
            .map_err(|e| LogError::io(&log.path, e))?;
        corrupt.map_or(Ok(log), Err)
    }

    fn open_file(dir: &Path, room: &str, fsync: Fsync) -> Result<RoomLog, LogError> {
        let path = dir.join(format!("{room}.log"));
        if !is_valid_name(room.as_bytes()) {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "invalid room name");
            return Err(LogError::io(&path, e));
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o644)
            .open(&path)
            .map_err(|e| LogError::io(&path, e))?;
        let mut sync_target = None;
        if fsync == Fsync::Always {
            // The file may be new: its directory entry must be durable before any ACK.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| LogError::io(dir, e))?;
            let handle = file.try_clone().map_err(|e| LogError::io(&path, e))?;
            sync_target = Some(Arc::new(SyncTarget::new(handle)));
        }
        Ok(RoomLog {
            room: room.to_owned(),
            path,
            file,
            lock_file: None,
            fsync,
            offsets: Vec::new(),
            end: 0,
            dirty: false,
            sync_target,
        })
    }

    pub fn room(&self) -> &str {
        &self.room
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The seq the next message will get: 1 for an empty room.
    pub fn next_seq(&self) -> u64 {
        self.offsets.len() as u64 + 1
    }

    /// Bytes of the indexed records with seq > `seq`: how far behind a reader whose last
    /// record was `seq` is (0 when it has them all).
    pub fn bytes_after(&self, seq: u64) -> u64 {
        match usize::try_from(seq) {
            Ok(i) if i < self.offsets.len() => self.end - self.offsets[i],
            _ => 0,
        }
    }

    /// Appends a message for a process that owns the room (the caller serialises appends):
    /// one `write(2)` of header and body on the `O_APPEND` file, then `fdatasync(2)` with
    /// [`Fsync::Always`]. Returns the message's seq.
    ///
    /// A name that is not valid, a text with a newline or a body over 1 MiB is refused with
    /// `InvalidInput`: it would make a record recovery rejects. A failed write or sync is
    /// undone (the file is cut back), so the seq is not used.
    pub fn append(&mut self, name: &str, text: &str) -> io::Result<u64> {
        self.append_with(name, text, self.fsync)
    }

    /// Like [`RoomLog::append`], but with [`Fsync::Always`] leaves the sync to the group
    /// commit (`crate::commit`): the record is written, indexed and served, and the
    /// caller holds its sender's `ACK` until [`RoomLog::sync_target`] is synced.
    pub fn append_unsynced(&mut self, name: &str, text: &str) -> io::Result<u64> {
        self.append_with(name, text, Fsync::Never)
    }

    /// What the group commit syncs for this room: `Some` with [`Fsync::Always`].
    pub fn sync_target(&self) -> Option<&Arc<SyncTarget>> {
        self.sync_target.as_ref()
    }

    fn append_with(&mut self, name: &str, text: &str, fsync: Fsync) -> io::Result<u64> {
        let record = encode_record(self.next_seq(), name, text)?;
        if self.sync_target.as_ref().is_some_and(|t| t.has_failed()) {
            return Err(io::Error::other(
                "a sync of this room failed; no more appends until a restart",
            ));
        }
        if self.dirty {
            self.file.set_len(self.end)?;
            self.dirty = false;
        }
        self.write_record(&record, fsync)
    }

    /// Appends a message for a process that shares the room file with others: under an
    /// exclusive `flock(2)`, indexes the records other processes appended since this handle
    /// last looked, cuts a torn tail found there, appends, and unlocks. Returns the seq.
    ///
    /// Corruption found among the new records is an `InvalidData` error wrapping
    /// [`LogError::Corrupt`].
    pub fn append_locked(&mut self, name: &str, text: &str) -> io::Result<u64> {
        // Encode first so that a bad argument costs no lock; the seq is patched in below.
        let mut record = encode_record(0, name, text)?;
        self.with_flock(FlockArg::LockExclusive, |log| {
            let len = log.file_len()?;
            let tail = log.index_to(len)?;
            if let Some(corrupt) = log.settle_tail(tail, len, true)? {
                return Err(io::Error::new(io::ErrorKind::InvalidData, corrupt));
            }
            // Whatever a failed append of ours left behind was a torn tail, now cut.
            log.dirty = false;
            set_record_seq(&mut record, log.next_seq());
            log.write_record(&record, log.fsync)
        })?
    }

    /// Under a shared `flock(2)`, indexes the records other processes appended since this
    /// handle last looked; returns the new [`RoomLog::next_seq`]. A torn tail is left for
    /// the next writer to cut (it holds the exclusive lock that cutting needs).
    pub fn refresh_locked(&mut self) -> Result<u64, LogError> {
        let corrupt = self
            .with_flock(FlockArg::LockShared, |log| {
                let len = log.file_len()?;
                let tail = log.index_to(len)?;
                log.settle_tail(tail, len, false)
            })
            .and_then(|r| r)
            .map_err(|e| LogError::io(&self.path, e))?;
        corrupt.map_or(Ok(self.next_seq()), Err)
    }

    /// Calls `f` for each record with seq > `since`, in order, stopping before the record
    /// that would take the bytes visited past `max_bytes` (but visiting at least one record
    /// if there is any). Returns the seq of the last record visited, or `since` if none.
    ///
    /// Reads only indexed records (immutable once written), with one `pread` found through
    /// the index; it takes no lock. Other processes' new records need
    /// [`RoomLog::refresh_locked`] first.
    pub fn read_since(
        &self,
        since: u64,
        max_bytes: usize,
        mut f: impl FnMut(Record<'_>),
    ) -> io::Result<u64> {
        let first = match usize::try_from(since) {
            Ok(i) if i < self.offsets.len() => i,
            _ => return Ok(since),
        };
        let start = self.offsets[first];
        let budget = u64::try_from(max_bytes).unwrap_or(u64::MAX);
        let mut stop = first + 1;
        let mut stop_off = self.record_end(first);
        while stop < self.offsets.len() {
            let next_end = self.record_end(stop);
            if next_end - start > budget {
                break;
            }
            stop += 1;
            stop_off = next_end;
        }
        let len = usize::try_from(stop_off - start)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "replay chunk too large"))?;
        let mut buf = vec![0; len];
        self.file.read_exact_at(&mut buf, start)?;
        let mut pos = 0;
        for seq in (first as u64 + 1)..=(stop as u64) {
            let (record, used) = parse_indexed(&buf[pos..], seq).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: record {seq} at offset {} changed after it was indexed",
                        self.path.display(),
                        start + pos as u64
                    ),
                )
            })?;
            f(record);
            pos += used;
        }
        Ok(stop as u64)
    }

    /// `fdatasync(2)` the file.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// The end offset of the indexed record at index `i`.
    fn record_end(&self, i: usize) -> u64 {
        self.offsets.get(i + 1).copied().unwrap_or(self.end)
    }

    fn file_len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Writes one whole record at the end of the file and indexes it, or leaves the file
    /// as it was (as far as the kernel lets us) and returns the error.
    fn write_record(&mut self, record: &[u8], fsync: Fsync) -> io::Result<u64> {
        let written = loop {
            match (&self.file).write(record) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let mut result = match written {
            Ok(n) if n == record.len() => Ok(()),
            // A regular file writes short only when it runs out of room (ENOSPC, a file
            // size limit); the next write would say why, but the record is broken now.
            Ok(n) => Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("short write: {n} of {} bytes", record.len()),
            )),
            Err(e) => Err(e),
        };
        if result.is_ok() && fsync == Fsync::Always {
            if let Some(gate) = crate::commit::test_gate() {
                crate::commit::wait_at_gate(gate);
            }
            result = self.file.sync_data();
        }
        if let Err(e) = result {
            // The client gets an error, so the message must not be served later: cut back
            // whatever reached the file. If even that fails, the next append retries it.
            if self.file.set_len(self.end).is_err() {
                self.dirty = true;
            }
            return Err(e);
        }
        let seq = self.next_seq();
        self.offsets.push(self.end);
        self.end += record.len() as u64;
        Ok(seq)
    }

    /// Scans the records from `self.end` up to `len`, indexing the good ones, and says how
    /// the scan ended; `self.end` is left at the first byte not indexed.
    ///
    /// A record that fails checks 1 or 2 of docs/room-log.md is a torn tail only when no
    /// record that could have been acknowledged lies after it ([`find_later_record`]);
    /// a record that fails check 3 alone was written whole, so it is always corruption.
    fn index_to(&mut self, len: u64) -> io::Result<Tail> {
        if len < self.end {
            // Records we indexed are gone: someone cut or replaced the file under us.
            return Ok(Tail::Corrupt {
                offset: len,
                what: "file shrank below records already read",
            });
        }
        let mut window = Window::new(&self.file, len);
        let mut offset = self.end;
        let tail = loop {
            if offset == len {
                break Tail::Clean;
            }
            let seq = self.offsets.len() as u64 + 1;
            match check_record(&mut window, offset, len)? {
                Ok((record_len, found)) if found == seq => {
                    self.offsets.push(offset);
                    offset += record_len;
                }
                Ok(_) => {
                    break Tail::Corrupt {
                        offset,
                        what: "seq out of order",
                    };
                }
                Err(what) => {
                    break match find_later_record(&mut window, offset, len, seq)? {
                        Some(_) => Tail::Corrupt { offset, what },
                        None => Tail::Torn { offset },
                    };
                }
            }
        };
        self.end = offset;
        Ok(tail)
    }

    /// Acts on the end of a scan: cuts a torn tail (if `cut`), or turns corruption into
    /// the error to return.
    fn settle_tail(&mut self, tail: Tail, len: u64, cut: bool) -> io::Result<Option<LogError>> {
        match tail {
            Tail::Clean => Ok(None),
            Tail::Torn { offset } => {
                if cut {
                    self.file.set_len(offset)?;
                    if self.fsync == Fsync::Always {
                        self.file.sync_data()?;
                    }
                    eprintln!(
                        "room {}: cut a torn tail at offset {offset} ({} bytes) from {}",
                        self.room,
                        len - offset,
                        self.path.display()
                    );
                }
                Ok(None)
            }
            Tail::Corrupt { offset, what } => Ok(Some(LogError::Corrupt {
                path: self.path.clone(),
                offset,
                what,
            })),
        }
    }

    /// Runs `f` holding a `flock(2)` of kind `arg` on the file.
    fn with_flock<R>(&mut self, arg: FlockArg, f: impl FnOnce(&mut Self) -> R) -> io::Result<R> {
        let mut file = match self.lock_file.take() {
            Some(file) => file,
            None => self.file.try_clone()?,
        };
        let guard = loop {
            match Flock::lock(file, arg) {
                Ok(guard) => break guard,
                Err((f, Errno::EINTR)) => file = f,
                Err((f, errno)) => {
                    self.lock_file = Some(f);
                    return Err(errno.into());
                }
            }
        };
        let result = f(self);
        // An unlock that fails (it cannot on a valid descriptor) is retried by the guard's
        // drop; the descriptor is then duplicated afresh next time.
        if let Ok(file) = guard.unlock() {
            self.lock_file = Some(file);
        }
        Ok(result)
    }
}

/// Opens every `<room>.log` in `dir`, recovering each (see [`RoomLog::open`]). Other
/// files, and names that are not valid rooms, are ignored. Rooms come sorted by name.
pub fn recover_dir(dir: &Path, fsync: Fsync) -> Result<Vec<RoomLog>, LogError> {
    let entries = std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))?;
    let mut rooms = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| LogError::io(dir, e))?;
        let file_name = entry.file_name();
        let Some(room) = file_name.to_str().and_then(|n| n.strip_suffix(".log")) else {
            continue;
        };
        if !is_valid_name(room.as_bytes()) {
            continue;
        }
        // Follows a symlink, as opening the file would; a directory named x.log is skipped.
        let path = entry.path();
        let meta = std::fs::metadata(&path).map_err(|e| LogError::io(&path, e))?;
        if meta.is_file() {
            rooms.push(room.to_owned());
        }
    }
    rooms.sort_unstable();
    rooms
        .iter()
        .map(|room| RoomLog::open(dir, room, fsync))
        .collect()
}

/// Encodes a whole record (header and body) for one `write(2)`.
fn encode_record(seq: u64, name: &str, text: &str) -> io::Result<Vec<u8>> {
    if !is_valid_name(name.as_bytes()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "invalid sender name",
        ));
    }
    if text.contains('\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "message text contains a newline",
        ));
    }
    let body_len = BODY_FIXED + name.len() + text.len();
    let body_len = u32::try_from(body_len)
        .ok()
        .filter(|&n| n <= MAX_BODY_LEN)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "message too long"))?;
    let mut record = Vec::with_capacity(HEADER_LEN + body_len as usize);
    record.extend_from_slice(&body_len.to_le_bytes());
    record.extend_from_slice(&[0; 4]);
    record.extend_from_slice(&seq.to_le_bytes());
    // is_valid_name bounds the name to 64 bytes.
    record.push(name.len() as u8);
    record.extend_from_slice(name.as_bytes());
    record.extend_from_slice(text.as_bytes());
    set_record_seq(&mut record, seq);
    Ok(record)
}

/// Sets the seq of an encoded record and recomputes its checksum.
fn set_record_seq(record: &mut [u8], seq: u64) {
    record[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32fast::hash(&record[HEADER_LEN..]);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Checks 1 and 2 of docs/room-log.md on the record at `offset` of a file `len` bytes
/// long: `Ok(Ok((record length, seq)))` if the record is whole and well formed (its seq
/// not yet compared with anything), `Ok(Err(what failed))` if not.
fn check_record(
    window: &mut Window<'_>,
    offset: u64,
    len: u64,
) -> io::Result<Result<(u64, u64), &'static str>> {
    // Check 1: the header and the body it announces are all there.
    if len - offset < HEADER_LEN as u64 {
        return Ok(Err("incomplete header"));
    }
    let header = window.get(offset, HEADER_LEN)?;
    let body_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let record_len = HEADER_LEN as u64 + u64::from(body_len);
    if record_len > len - offset {
        return Ok(Err("body length past the end of the file"));
    }
    // Check 2: the body is whole and well formed.
    if !(MIN_BODY_LEN..=MAX_BODY_LEN).contains(&body_len) {
        return Ok(Err("body length out of range"));
    }
    let body = window.get(offset + HEADER_LEN as u64, body_len as usize)?;
    if crc32fast::hash(body) != crc {
        return Ok(Err("checksum mismatch"));
    }
    let name_len = usize::from(body[8]);
    if !(1..=64).contains(&name_len) || BODY_FIXED + name_len > body.len() {
        return Ok(Err("bad name length"));
    }
    let name = &body[BODY_FIXED..BODY_FIXED + name_len];
    if !is_valid_name(name) {
        return Ok(Err("bad name"));
    }
    if std::str::from_utf8(&body[BODY_FIXED + name_len..]).is_err() {
        return Ok(Err("text is not UTF-8"));
    }
    let seq = u64::from_le_bytes(body[..8].try_into().unwrap_or_default());
    Ok(Ok((record_len, seq)))
}

/// The smallest whole record: a header and the smallest body.
const MIN_RECORD_LEN: u64 = HEADER_LEN as u64 + MIN_BODY_LEN as u64;

/// After the record at `bad` failed checks 1 or 2 where seq `seq` was expected, looks at
/// every later byte offset `p` (`bad < p`) for a record that could have been
/// acknowledged: one that passes checks 1 and 2 and whose seq `s` could follow in this
/// file, `seq <= s < seq + (len - bad) / 18` (the records `seq..=s` all fit between `bad`
/// and the end, each at least 18 bytes). Returns the first such offset.
///
/// None means nothing after `bad` can be a message anybody was told was stored, so the
/// bytes from `bad` on are a torn tail (a zero-filled tail of any length among them).
/// Some means cutting would lose messages: it is corruption.
fn find_later_record(
    window: &mut Window<'_>,
    bad: u64,
    len: u64,
    seq: u64,
) -> io::Result<Option<u64>> {
    let max_seq = seq.saturating_add((len - bad) / MIN_RECORD_LEN);
    let mut p = bad + 1;
    while p + MIN_RECORD_LEN <= len {
        // Cheap filters first (length, seq, name length), so that a long tail of zeros or
        // garbage is scanned without a checksum at every byte.
        let head = window.get(p, HEADER_LEN + BODY_FIXED)?;
        let body_len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let found = u64::from_le_bytes(head[8..16].try_into().unwrap_or_default());
        let name_len = head[16];
        let plausible = (MIN_BODY_LEN..=MAX_BODY_LEN).contains(&body_len)
            && p + HEADER_LEN as u64 + u64::from(body_len) <= len
            && (seq..max_seq).contains(&found)
            && (1..=64).contains(&name_len);
        if plausible && check_record(window, p, len)?.is_ok() {
            return Ok(Some(p));
        }
        p += 1;
    }
    Ok(None)
}

/// Parses the record at the start of `buf`, one this process indexed, expecting seq `seq`.
/// Returns the record and its length, or None if the bytes are not what was indexed.
fn parse_indexed(buf: &[u8], seq: u64) -> Option<(Record<'_>, usize)> {
    let body_len = u32::from_le_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    let body = buf.get(HEADER_LEN..HEADER_LEN + body_len)?;
    let found = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let name_len = usize::from(*body.get(8)?);
    let name = std::str::from_utf8(body.get(BODY_FIXED..BODY_FIXED + name_len)?).ok()?;
    let text = std::str::from_utf8(&body[BODY_FIXED + name_len..]).ok()?;
    (found == seq).then_some((Record { seq, name, text }, HEADER_LEN + body_len))
}

/// A sliding read window over a file for the recovery scan: big sequential `pread`s
/// rather than two small ones per record.
struct Window<'f> {
    file: &'f File,
    /// The file length the scan stops at; nothing past it is read.
    len: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
}

impl<'f> Window<'f> {
    fn new(file: &'f File, len: u64) -> Window<'f> {
        Window {
            file,
            len,
            buf: Vec::new(),
            start: 0,
        }
    }

    /// The bytes `offset..offset + n`, which the caller has checked lie within `len`.
    fn get(&mut self, offset: u64, n: usize) -> io::Result<&[u8]> {
        let buf_end = self.start + self.buf.len() as u64;
        if offset < self.start || offset + n as u64 > buf_end {
            let left = usize::try_from(self.len - offset).unwrap_or(usize::MAX);
            let want = n.max(SCAN_CHUNK).min(left);
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, offset)?;
            self.start = offset;
        }
        let at = (offset - self.start) as usize;
        Ok(&self.buf[at..at + n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(log: &RoomLog, since: u64, max_bytes: usize) -> (Vec<(u64, String, String)>, u64) {
        let mut seen = Vec::new();
        let last = log
            .read_since(since, max_bytes, |r| {
                seen.push((r.seq, r.name.to_owned(), r.text.to_owned()));
            })
            .unwrap();
        (seen, last)
    }

    fn seqs(log: &RoomLog) -> Vec<u64> {
        collect(log, 0, usize::MAX).0.iter().map(|r| r.0).collect()
    }

    fn file_bytes(log: &RoomLog) -> Vec<u8> {
        std::fs::read(log.path()).unwrap()
    }

    /// Writes `n` messages to a fresh room `r` and returns the file's bytes.
    fn room_with(dir: &Path, n: u64) -> Vec<u8> {
        let mut log = RoomLog::open(dir, "r", Fsync::Never).unwrap();
        for i in 1..=n {
            assert_eq!(log.append("anon", &format!("message {i}")).unwrap(), i);
        }
        file_bytes(&log)
    }

    #[test]
    fn record_layout_matches_the_doc() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RoomLog::open(dir.path(), "r", Fsync::Always).unwrap();
        log.append("anon", "0123456789abcdef").unwrap();
        let bytes = file_bytes(&log);
        // The example of docs/room-log.md: 8 + 8 + 1 + 4 + 16 bytes.
        assert_eq!(bytes.len(), 37);
        assert_eq!(&bytes[0..4], &29u32.to_le_bytes());
        assert_eq!(&bytes[4..8], &crc32fast::hash(&bytes[8..]).to_le_bytes());
        assert_eq!(&bytes[8..16], &1u64.to_le_bytes());
        assert_eq!(bytes[16], 4);
        assert_eq!(&bytes[17..21], b"anon");
        assert_eq!(&bytes[21..], b"0123456789abcdef");
    }

    #[test]
    fn empty_room_starts_at_one() {
        let dir = tempfile::tempdir().unwrap();
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(log.next_seq(), 1);
        assert_eq!(log.room(), "r");
        assert_eq!(log.path(), dir.path().join("r.log"));
        assert!(log.path().exists());
        assert_eq!(collect(&log, 0, 100), (vec![], 0));
    }

    #[test]
    fn bytes_after_measures_what_a_reader_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(log.bytes_after(0), 0);
        log.append("bob", "0123456789").unwrap(); // 8 + 9 + 3 + 10 = 30 bytes
        log.append("bob", "").unwrap(); // 20 bytes
        assert_eq!(log.bytes_after(0), 50);
        assert_eq!(log.bytes_after(1), 20);
        assert_eq!(log.bytes_after(2), 0);
        assert_eq!(log.bytes_after(99), 0);
    }

    #[test]
    fn seq_continues_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        for round in 0..3u64 {
            let mut log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
            assert_eq!(log.next_seq(), round * 2 + 1);
            assert_eq!(log.append("bob", "a").unwrap(), round * 2 + 1);
            assert_eq!(log.append("bob", "").unwrap(), round * 2 + 2);
        }
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(seqs(&log), (1..=6).collect::<Vec<_>>());
        let (records, _) = collect(&log, 5, usize::MAX);
        assert_eq!(records, vec![(6, "bob".to_owned(), String::new())]);
    }

    #[test]
    fn torn_tail_at_every_cut_point_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let whole = room_with(dir.path(), 3);
        let last_start = {
            let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
            log.offsets[2] as usize
        };
        // Every proper prefix of the last record, from nothing to one byte short.
        for cut in last_start..whole.len() {
            std::fs::write(dir.path().join("r.log"), &whole[..cut]).unwrap();
            let mut log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
            assert_eq!(log.next_seq(), 3, "cut at {cut}");
            assert_eq!(file_bytes(&log), &whole[..last_start], "cut at {cut}");
            assert_eq!(log.append("anon", "again").unwrap(), 3);
            let (records, last) = collect(&log, 0, usize::MAX);
            assert_eq!(last, 3);
            assert_eq!(records[2], (3, "anon".to_owned(), "again".to_owned()));
        }
    }

    #[test]
    fn whole_last_record_with_bad_checksum_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut whole = room_with(dir.path(), 3);
        let n = whole.len();
        whole[n - 1] ^= 0x01;
        std::fs::write(dir.path().join("r.log"), &whole).unwrap();
        let mut log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(log.next_seq(), 3);
        assert_eq!(log.append("anon", "x").unwrap(), 3);
        assert_eq!(seqs(&log), vec![1, 2, 3]);
        drop(log);
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(log.next_seq(), 4);
    }

    #[test]
    fn bad_body_length_in_last_record_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = room_with(dir.path(), 1);
        // Eight zero bytes: a header announcing an empty body that ends at the end.
        bytes.extend_from_slice(&[0; 8]);
        std::fs::write(dir.path().join("r.log"), &bytes).unwrap();
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(log.next_seq(), 2);
        assert_eq!(file_bytes(&log).len(), bytes.len() - 8);
    }

    /// Damages the middle record of three and expects a refusal naming its offset,
    /// with the file untouched.
    fn expect_corrupt(damage: impl Fn(&mut Vec<u8>, usize), what: &str) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = room_with(dir.path(), 3);
        let mid = {
            let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
            log.offsets[1] as usize
        };
        damage(&mut bytes, mid);
        std::fs::write(dir.path().join("r.log"), &bytes).unwrap();
        match RoomLog::open(dir.path(), "r", Fsync::Never) {
            Err(LogError::Corrupt {
                path,
                offset,
                what: found,
            }) => {
                assert_eq!(path, dir.path().join("r.log"));
                assert_eq!(offset, mid as u64);
                assert_eq!(found, what);
            }
            other => panic!("expected corruption, got {other:?}"),
        }
        assert_eq!(std::fs::read(dir.path().join("r.log")).unwrap(), bytes);
        let err = recover_dir(dir.path(), Fsync::Never).unwrap_err();
        assert!(err.to_string().contains(&format!("offset {mid}")), "{err}");
    }

    #[test]
    fn bad_checksum_in_the_middle_is_corruption() {
        expect_corrupt(|b, mid| b[mid + 20] ^= 0x40, "checksum mismatch");
        expect_corrupt(|b, mid| b[mid + 5] ^= 0x01, "checksum mismatch");
    }

    #[test]
    fn bad_seq_in_the_middle_is_corruption() {
        expect_corrupt(
            |b, mid| {
                let body_end =
                    mid + 8 + u32::from_le_bytes(b[mid..mid + 4].try_into().unwrap()) as usize;
                b[mid + 8..mid + 16].copy_from_slice(&7u64.to_le_bytes());
                let crc = crc32fast::hash(&b[mid + 8..body_end]);
                b[mid + 4..mid + 8].copy_from_slice(&crc.to_le_bytes());
            },
            "seq out of order",
        );
    }

    #[test]
    fn bad_seq_in_a_whole_last_record_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = room_with(dir.path(), 1);
        let mut extra = encode_record(5, "anon", "late").unwrap();
        bytes.append(&mut extra);
        std::fs::write(dir.path().join("r.log"), &bytes).unwrap();
        let err = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap_err();
        assert!(
            matches!(
                err,
                LogError::Corrupt {
                    what: "seq out of order",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn read_since_bounds() {
        let dir = tempfile::tempdir().unwrap();
        room_with(dir.path(), 10);
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        // "message N" from "anon": 8 + 9 + 4 + 9 bytes for N < 10, one more for 10.
        let record = 30;

        let (all, last) = collect(&log, 0, usize::MAX);
        assert_eq!(last, 10);
        assert_eq!(
            all.iter().map(|r| r.0).collect::<Vec<_>>(),
            (1..=10).collect::<Vec<_>>()
        );
        assert_eq!(all[3], (4, "anon".to_owned(), "message 4".to_owned()));

        assert_eq!(collect(&log, 10, usize::MAX), (vec![], 10));
        assert_eq!(collect(&log, 11, usize::MAX), (vec![], 11));
        assert_eq!(collect(&log, u64::MAX, usize::MAX), (vec![], u64::MAX));
        let (tail, last) = collect(&log, 9, 1);
        assert_eq!((tail.len(), tail[0].0, last), (1, 10, 10));

        // Too small for one record: still one.
        let (one, last) = collect(&log, 0, 0);
        assert_eq!((one.len(), one[0].0, last), (1, 1, 1));
        // Exactly three records' worth, and a byte short of four.
        let (three, last) = collect(&log, 2, 3 * record + record - 1);
        assert_eq!(three.iter().map(|r| r.0).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(last, 5);
        let (three, _) = collect(&log, 2, 3 * record);
        assert_eq!(three.len(), 3);
        // Walking in small steps visits every record once.
        let mut since = 0;
        let mut walked = Vec::new();
        for _ in 0..20 {
            let (chunk, last) = collect(&log, since, 2 * record);
            if chunk.is_empty() {
                break;
            }
            walked.extend(chunk.iter().map(|r| r.0));
            since = last;
        }
        assert_eq!(walked, (1..=10).collect::<Vec<_>>());
    }

    #[test]
    fn append_refuses_what_recovery_would_reject() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        for (name, text) in [
            ("", "x"),
            ("a b", "x"),
            (&*"n".repeat(65), "x"),
            ("ok", "a\nb"),
        ] {
            let err = log.append(name, text).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
        let big = "x".repeat(MAX_BODY_LEN as usize);
        assert_eq!(
            log.append("ok", &big).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(log.next_seq(), 1);
        assert_eq!(file_bytes(&log).len(), 0);
        let fits = "x".repeat(MAX_BODY_LEN as usize - BODY_FIXED - 2);
        assert_eq!(log.append("ok", &fits).unwrap(), 1);
        drop(log);
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(collect(&log, 0, 0).0[0].2.len(), fits.len());
    }

    #[test]
    fn bad_room_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for room in ["", "../x", "a.b", "a b"] {
            let err = RoomLog::open(dir.path(), room, Fsync::Never).unwrap_err();
            assert!(
                matches!(err, LogError::Io { ref source, .. } if source.kind() == io::ErrorKind::InvalidInput)
            );
        }
    }

    #[test]
    fn recover_dir_opens_rooms_and_skips_other_files() {
        let dir = tempfile::tempdir().unwrap();
        for (room, n) in [("b", 2), ("a", 1)] {
            let mut log = RoomLog::open(dir.path(), room, Fsync::Never).unwrap();
            for _ in 0..n {
                log.append("anon", "hi").unwrap();
            }
        }
        std::fs::write(dir.path().join("notes.txt"), b"not a room").unwrap();
        std::fs::write(dir.path().join("bad name.log"), b"garbage").unwrap();
        std::fs::create_dir(dir.path().join("d.log")).unwrap();
        let rooms = recover_dir(dir.path(), Fsync::Never).unwrap();
        let found: Vec<_> = rooms.iter().map(|r| (r.room(), r.next_seq())).collect();
        assert_eq!(found, vec![("a", 2), ("b", 3)]);
        assert!(matches!(
            recover_dir(&dir.path().join("missing"), Fsync::Never),
            Err(LogError::Io { .. })
        ));
    }

    #[test]
    fn locked_handles_interleave() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = RoomLog::open_locked(dir.path(), "r", Fsync::Never).unwrap();
        let mut b = RoomLog::open_locked(dir.path(), "r", Fsync::Never).unwrap();
        let mut expected = Vec::new();
        for i in 1..=20u64 {
            let (log, who) = if i % 3 == 0 {
                (&mut b, "b")
            } else {
                (&mut a, "a")
            };
            assert_eq!(log.append_locked(who, &format!("m{i}")).unwrap(), i);
            expected.push((i, who.to_owned(), format!("m{i}")));
        }
        // b wrote a third of the records but sees only up to its own last one until it looks.
        assert_eq!(b.next_seq(), 19);
        assert_eq!(b.refresh_locked().unwrap(), 21);
        assert_eq!(a.refresh_locked().unwrap(), 21);
        assert_eq!(collect(&a, 0, usize::MAX).0, expected);
        assert_eq!(collect(&b, 0, usize::MAX).0, expected);
        let fresh = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(collect(&fresh, 0, usize::MAX).0, expected);
    }

    #[test]
    fn locked_handles_on_threads_keep_seq_continuous() {
        let dir = tempfile::tempdir().unwrap();
        let per_thread = 50u64;
        let seqs: Vec<Vec<u64>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|t| {
                    let dir = dir.path();
                    s.spawn(move || {
                        let mut log = RoomLog::open_locked(dir, "r", Fsync::Never).unwrap();
                        (0..per_thread)
                            .map(|i| {
                                log.append_locked(&format!("t{t}"), &format!("{i}"))
                                    .unwrap()
                            })
                            .collect()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let mut all: Vec<u64> = seqs.concat();
        for s in &seqs {
            assert!(s.windows(2).all(|w| w[0] < w[1]));
        }
        all.sort_unstable();
        assert_eq!(all, (1..=2 * per_thread).collect::<Vec<_>>());
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(log.next_seq(), 2 * per_thread + 1);
    }

    #[test]
    fn locked_writer_cuts_a_torn_tail_readers_skip_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = RoomLog::open_locked(dir.path(), "r", Fsync::Never).unwrap();
        let mut reader = RoomLog::open_locked(dir.path(), "r", Fsync::Never).unwrap();
        a.append_locked("a", "one").unwrap();
        // A process that died halfway through its write.
        let torn = encode_record(2, "z", "never acknowledged").unwrap();
        let mut raw = OpenOptions::new().append(true).open(a.path()).unwrap();
        raw.write_all(&torn[..torn.len() / 2]).unwrap();
        assert_eq!(reader.refresh_locked().unwrap(), 2);
        let mut b = RoomLog::open_locked(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(b.next_seq(), 2);
        // open_locked already cut it; make a new one for the writer to find.
        raw.write_all(&torn[..torn.len() - 1]).unwrap();
        assert_eq!(a.append_locked("a", "two").unwrap(), 2);
        assert_eq!(b.append_locked("b", "three").unwrap(), 3);
        assert_eq!(reader.refresh_locked().unwrap(), 4);
        let texts: Vec<_> = collect(&reader, 0, usize::MAX)
            .0
            .into_iter()
            .map(|r| r.2)
            .collect();
        assert_eq!(texts, vec!["one", "two", "three"]);
    }

    #[test]
    fn locked_handle_reports_corruption_and_shrinking() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = RoomLog::open_locked(dir.path(), "r", Fsync::Never).unwrap();
        let mut b = RoomLog::open_locked(dir.path(), "r", Fsync::Never).unwrap();
        a.append_locked("a", "one").unwrap();
        let mut bad = encode_record(2, "a", "two").unwrap();
        bad[HEADER_LEN + 10] ^= 0x20;
        let good = encode_record(3, "a", "three").unwrap();
        let mut raw = OpenOptions::new().append(true).open(a.path()).unwrap();
        raw.write_all(&bad).unwrap();
        raw.write_all(&good).unwrap();
        let first_len = encode_record(1, "a", "one").unwrap().len() as u64;
        let err = b.refresh_locked().unwrap_err();
        assert!(
            matches!(err, LogError::Corrupt { offset, what: "checksum mismatch", .. } if offset == first_len),
            "{err}"
        );
        let err = a.append_locked("a", "x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(
            err.to_string().contains(&format!("offset {first_len}")),
            "{err}"
        );
        // Nothing was cut, nothing appended.
        let size = first_len as usize + bad.len() + good.len();
        assert_eq!(file_bytes(&a).len(), size);
        raw.set_len(0).unwrap();
        assert!(matches!(
            b.refresh_locked(),
            Err(LogError::Corrupt { offset: 0, .. })
        ));
    }

    #[test]
    fn failed_sync_or_write_leaves_no_record() {
        // A read-only handle makes the write fail; the index must not move.
        let dir = tempfile::tempdir().unwrap();
        let mut log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        log.append("a", "one").unwrap();
        log.file = File::open(log.path()).unwrap();
        assert!(log.append("a", "two").is_err());
        assert_eq!(log.next_seq(), 2);
        assert_eq!(file_bytes(&log).len() as u64, log.end);
        log.file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(log.path())
            .unwrap();
        assert_eq!(log.append("a", "three").unwrap(), 2);
        drop(log);
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        let texts: Vec<_> = collect(&log, 0, usize::MAX)
            .0
            .into_iter()
            .map(|r| r.2)
            .collect();
        assert_eq!(texts, vec!["one", "three"]);
    }

    #[test]
    fn scan_crosses_window_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        // Records of varying size, some larger than a scan window, ~1 MiB in all.
        let mut sizes = Vec::new();
        for i in 0..300usize {
            let n = if i % 100 == 7 {
                SCAN_CHUNK + 13
            } else {
                (i * 37) % 1500
            };
            log.append("anon", &"y".repeat(n)).unwrap();
            sizes.push(n);
        }
        drop(log);
        let log = RoomLog::open(dir.path(), "r", Fsync::Never).unwrap();
        assert_eq!(log.next_seq(), 301);
        let (records, last) = collect(&log, 0, usize::MAX);
        assert_eq!(last, 300);
        assert_eq!(records.iter().map(|r| r.2.len()).collect::<Vec<_>>(), sizes);
    }
}
