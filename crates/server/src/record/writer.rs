//! A recording's writer: one thread per recording that reads the shard's records off
//! the ring (`crate::transport::ring`) and writes them as pcapng segments (`gsrelay_record`,
//! `docs/recording-format.md`). The shard never waits for it; when the disk fails or
//! falls behind, the recording stops and the room goes on.
//!
//! Every segment begins with a checkpoint: at a checkpoint, the current segment is
//! closed (its checksum written, synced) when it is older than the segment time or
//! larger than the segment size, and the next one opened. What is written reaches the
//! kernel at least every [`POLL`] and the disk every [`SYNC_EVERY`], so a relay killed
//! while recording leaves files that open up to their last complete record.

use crate::transport::ring::{Drain, Kind};
use gsrelay_record::{Event, Meta, SegmentWriter};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// How long the writer sleeps when the ring is empty: the ring holds far more than
/// this much of the densest room, and polling costs the shard no wake-up per packet.
const POLL: Duration = Duration::from_millis(5);

/// Name of the writer threads (the relay's CPU includes theirs).
pub const RECORDER_THREADS: &str = "gsr-recorder";

/// How often written data is synced to the disk.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// How a recording's files are cut and kept.
#[derive(Debug, Clone)]
pub struct Layout {
    /// A segment is closed at the first checkpoint after it is this old...
    pub segment_time: Duration,
    /// ...or this large, in bytes.
    pub segment_bytes: u64,
    /// Closed segments are gzipped (Wireshark reads them as they are).
    pub compress: bool,
    /// Closed segments are encrypted with it.
    pub key: Option<gsrelay_record::Key>,
}

/// How a recording ended, for its owner.
#[derive(Debug, Clone)]
pub struct Stopped {
    /// The recording's metadata as written last.
    pub meta: Meta,
    /// Whether it stopped on an error of its own (a disk error, the writer behind).
    pub failed: bool,
    /// Bytes written.
    pub bytes: u64,
}

/// Starts the writer thread of the recording `meta` in `dir` (created already, holding
/// nothing), which writes `first` (a gap it begins with, say) right after its start.
/// `on_stop` is called once, from the thread, when the recording has ended.
pub fn spawn(
    (dir, meta): (PathBuf, Meta),
    layout: Layout,
    drain: Drain,
    first: Vec<Event>,
    on_stop: Box<dyn FnOnce(Stopped) + Send>,
) -> io::Result<thread::JoinHandle<()>> {
    write_meta(&dir, &meta)?;
    let mut drain = drain;
    let mut w = Writer {
        dir,
        meta,
        layout,
        segment: None,
        next_index: 0,
        checkpoint: Vec::new(),
        bytes: 0,
        last_sync: Instant::now(),
        last_ns: 0,
        stop_reason: None,
        first,
    };
    thread::Builder::new()
        .name(RECORDER_THREADS.into())
        .spawn(move || {
            let failure = w.run(&mut drain).err();
            let stopped = w.close(&drain, failure);
            on_stop(stopped);
        })
}

struct Open {
    writer: SegmentWriter,
    file: File,
    path: PathBuf,
    opened: Instant,
}

struct Writer {
    dir: PathBuf,
    meta: Meta,
    layout: Layout,
    segment: Option<Open>,
    next_index: u32,
    /// The packets of the checkpoint being read, each with its time (flat, reused).
    checkpoint: Vec<(u64, Vec<u8>)>,
    bytes: u64,
    last_sync: Instant,
    last_ns: u64,
    stop_reason: Option<String>,
    /// Events written right after the recording's start.
    first: Vec<Event>,
}

impl Writer {
    /// Reads and writes until the shard lets go of the ring, or an error.
    fn run(&mut self, drain: &mut Drain) -> io::Result<()> {
        loop {
            let mut got = 0usize;
            while let Some((kind, at_ns, bytes)) = drain.next() {
                got += 1;
                self.record(kind, at_ns, bytes)?;
                if got.is_multiple_of(1024) {
                    self.write_out()?;
                }
            }
            self.write_out()?;
            if drain.is_finished() || (drain.shared.is_stopped() && got == 0) {
                return Ok(());
            }
            if got == 0 {
                thread::sleep(POLL);
            }
        }
    }

    fn record(&mut self, kind: Kind, at_ns: u64, bytes: &[u8]) -> io::Result<()> {
        self.last_ns = self.last_ns.max(at_ns);
        match kind {
            Kind::Live => {
                let w = self.segment(at_ns)?;
                w.writer
                    .rtp(at_ns, false, bytes)
                    .map_err(io::Error::other)?;
            }
            Kind::Checkpoint => self.checkpoint.push((at_ns, bytes.to_vec())),
            Kind::CheckpointEnd => self.write_checkpoint(at_ns)?,
            Kind::Event => {
                let event: Event = serde_json::from_slice(bytes).map_err(io::Error::other)?;
                if let Event::RecordingStopped { reason } = &event {
                    self.stop_reason = Some(reason.clone());
                }
                self.segment(at_ns)?.writer.event(at_ns, &event);
            }
        }
        Ok(())
    }

    /// Writes the checkpoint read so far, first starting a new segment when the current
    /// one is old or large enough.
    fn write_checkpoint(&mut self, at_ns: u64) -> io::Result<()> {
        let rotate = self.segment.as_ref().is_some_and(|s| {
            s.opened.elapsed() >= self.layout.segment_time
                || s.writer.bytes() >= self.layout.segment_bytes
        });
        if rotate {
            self.close_segment(at_ns)?;
        }
        let packets = std::mem::take(&mut self.checkpoint);
        let n = u32::try_from(packets.len()).unwrap_or(u32::MAX);
        let w = self.segment(at_ns)?;
        w.writer.event(at_ns, &Event::Checkpoint { packets: n });
        for (at, packet) in &packets {
            w.writer.rtp(*at, true, packet).map_err(io::Error::other)?;
        }
        Ok(())
    }

    /// The open segment, opening the next one if none is.
    fn segment(&mut self, at_ns: u64) -> io::Result<&mut Open> {
        if self.segment.is_none() {
            let index = self.next_index;
            self.next_index += 1;
            let path = self.dir.join(format!("{index:06}.pcapng"));
            let file = File::create_new(&path)?;
            let mut writer = SegmentWriter::new(&self.meta.id, &self.meta.room, index);
            writer.event(at_ns, &Event::SegmentStarted { segment: index });
            if index == 0 {
                writer.event(
                    at_ns,
                    &Event::RecordingStarted {
                        recording: self.meta.id.clone(),
                        room: self.meta.room.clone(),
                        node: self.meta.node.clone(),
                        checkpoint_secs: self.meta.checkpoint_secs,
                    },
                );
                for e in std::mem::take(&mut self.first) {
                    writer.event(at_ns, &e);
                }
            }
            self.segment = Some(Open {
                writer,
                file,
                path,
                opened: Instant::now(),
            });
        }
        self.segment
            .as_mut()
            .ok_or_else(|| io::Error::other("no segment"))
    }

    /// Hands the kernel what the segment writer holds; syncs now and then.
    fn write_out(&mut self) -> io::Result<()> {
        let Some(s) = &mut self.segment else {
            return Ok(());
        };
        let pending = s.writer.pending();
        if !pending.is_empty() {
            s.file.write_all(pending)?;
            self.bytes += pending.len() as u64;
            s.writer.consume();
        }
        if self.last_sync.elapsed() >= SYNC_EVERY {
            s.file.sync_data()?;
            self.last_sync = Instant::now();
        }
        Ok(())
    }

    /// Closes the open segment: its checksum, synced, gzipped if asked.
    fn close_segment(&mut self, at_ns: u64) -> io::Result<()> {
        if let Some(s) = &mut self.segment {
            s.writer.finish(at_ns);
        }
        self.write_out()?;
        let Some(s) = self.segment.take() else {
            return Ok(());
        };
        s.file.sync_all()?;
        drop(s.file);
        let mut path = s.path;
        if self.layout.compress {
            path = gsrelay_record::compress_segment(&path).map_err(io::Error::other)?;
        }
        if let Some(key) = &self.layout.key {
            gsrelay_record::encrypt_segment(&path, key).map_err(io::Error::other)?;
        }
        Ok(())
    }

    /// Ends the recording: the last segment closed (as far as the disk lets), the
    /// metadata's end written.
    fn close(mut self, drain: &Drain, failure: Option<io::Error>) -> Stopped {
        let at_ns = self.last_ns;
        let mut failed = failure.is_some() || drain.shared.reason().is_some();
        let reason = match (&failure, drain.shared.reason(), &self.stop_reason) {
            (Some(e), _, _) => format!("disk_error: {e}"),
            (None, Some(r), _) => r,
            (None, None, Some(r)) => r.clone(),
            (None, None, None) => "stopped".into(),
        };
        if failure.is_none() {
            if self.stop_reason.is_none()
                && let Ok(s) = self.segment(at_ns)
            {
                s.writer.event(
                    at_ns,
                    &Event::RecordingStopped {
                        reason: reason.clone(),
                    },
                );
            }
            if let Err(e) = self.close_segment(at_ns) {
                tracing::warn!(recording = %self.meta.id, error = %e, "recording's last segment not closed");
                failed = true;
            }
        }
        drain.shared.stop(&reason);
        self.meta.stopped_ns = Some(at_ns.max(self.meta.started_ns));
        self.meta.stop_reason = Some(reason);
        if let Err(e) = write_meta(&self.dir, &self.meta) {
            tracing::warn!(recording = %self.meta.id, error = %e, "recording.json not updated");
        }
        Stopped {
            meta: self.meta,
            failed,
            bytes: self.bytes,
        }
    }
}

/// Writes `recording.json` whole or not at all (a temporary file renamed over it).
pub fn write_meta(dir: &Path, meta: &Meta) -> io::Result<()> {
    let tmp = dir.join("recording.json.tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(&meta.to_json())?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join("recording.json"))
}
