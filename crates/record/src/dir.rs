//! A recording directory on disk: open it, repair it, export it, compress its segments.
//! The only module of the crate that does I/O (std::fs, blocking: call it off any
//! runtime's worker threads).

use crate::FormatError;
use crate::crypt::{self, CryptError, Key};
use crate::event::{META_VERSION, Meta};
use crate::read::scan;
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The metadata file of a recording directory.
pub const META_FILE: &str = "recording.json";

/// What went wrong with a recording directory; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `recording.json` does not parse.
    #[error("{}: {source}", path.display())]
    Meta {
        /// The file.
        path: PathBuf,
        /// The error.
        source: serde_json::Error,
    },
    /// `recording.json` is of a version this build does not read.
    #[error("{}: recording format version {version}; this build reads version {META_VERSION}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
    /// A segment is not a segment, or is corrupt.
    #[error("{}: {source}", path.display())]
    Format {
        /// The segment's file.
        path: PathBuf,
        /// What is wrong.
        source: FormatError,
    },
    /// A segment between the first and the last is missing.
    #[error("{}: segment {index:06} is missing", dir.display())]
    MissingSegment {
        /// The recording's directory.
        dir: PathBuf,
        /// The missing segment's number.
        index: u32,
    },
    /// [`Recording::read_segment`] of a number the recording does not have.
    #[error("the recording has no segment {0}")]
    NoSuchSegment(u32),
    /// An encrypted segment, and no key to open it.
    #[error("{}: the segment is encrypted; give the recording key", path.display())]
    Encrypted {
        /// The segment's file.
        path: PathBuf,
    },
    /// An encrypted segment that does not open with the key given.
    #[error("{}: {source}", path.display())]
    Crypt {
        /// The segment's file.
        path: PathBuf,
        /// Why.
        source: CryptError,
    },
    /// [`compress_segment`] of a file that is not a finished `.pcapng` segment.
    #[error("{}: not a finished segment (NNNNNN.pcapng ending with segment_end)", path.display())]
    NotFinished {
        /// The file.
        path: PathBuf,
    },
}

/// One segment of a recording, as [`Recording::open`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its file (`NNNNNN.pcapng` or `NNNNNN.pcapng.gz`).
    pub path: PathBuf,
    /// Its number.
    pub index: u32,
    /// Time of its earliest record, ns since the Unix epoch; 0 when it has none.
    pub first_ns: u64,
    /// Time of its latest good record; 0 when it has none.
    pub last_ns: u64,
    /// Times of its complete checkpoints (all their packets are in the segment).
    pub checkpoints: Vec<u64>,
    /// Whether it ends with a `segment_end` whose checksum matched.
    pub finished: bool,
    /// Bytes after its last good block (cut by [`Recording::repair`]).
    pub torn_bytes: u64,
    /// Its size on disk (compressed, for a `.gz`).
    pub bytes: u64,
}

impl SegmentInfo {
    /// Whether it holds any record.
    pub fn has_records(&self) -> bool {
        self.first_ns != 0 || self.last_ns != 0
    }
}

/// A recording directory, opened.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The directory.
    pub dir: PathBuf,
    /// Its `recording.json`.
    pub meta: Meta,
    /// Its segments, in order.
    pub segments: Vec<SegmentInfo>,
    /// The key its encrypted segments open with, if it was given one.
    key: Option<Key>,
}

impl Recording {
    /// Opens a recording: reads `recording.json` and scans every segment (checking the
    /// checksums of the finished ones). Changes nothing on disk: a torn tail is reported
    /// in [`SegmentInfo::torn_bytes`] and left out of what is read.
    pub fn open(dir: &Path) -> Result<Recording, RecordingError> {
        Recording::open_with(dir, None)
    }

    /// [`Recording::open`], its encrypted segments (`.enc`) opened with `key`.
    pub fn open_with(dir: &Path, key: Option<&Key>) -> Result<Recording, RecordingError> {
        let meta_path = dir.join(META_FILE);
        let meta = Meta::from_json(&read(&meta_path)?).map_err(|source| RecordingError::Meta {
            path: meta_path.clone(),
            source,
        })?;
        if meta.version != META_VERSION {
            return Err(RecordingError::Version {
                path: meta_path,
                version: meta.version,
            });
        }
        let segments = segment_files(dir)?
            .into_iter()
            .map(|(index, path)| segment_info(index, path, key))
            .collect::<Result<_, _>>()?;
        Ok(Recording {
            dir: dir.to_owned(),
            meta,
            segments,
            key: key.cloned(),
        })
    }

    /// Cuts every segment's torn tail (a `.gz` is written again, through a temporary
    /// file and a rename), then opens the recording.
    pub fn repair(dir: &Path) -> Result<Recording, RecordingError> {
        Recording::repair_with(dir, None)
    }

    /// [`Recording::repair`] of a recording with encrypted segments, which are sealed
    /// once finished and so never torn: they are opened with `key` and left as they are.
    pub fn repair_with(dir: &Path, key: Option<&Key>) -> Result<Recording, RecordingError> {
        for (_, path) in segment_files(dir)? {
            if is_sealed(&path) {
                continue;
            }
            let bytes = read_file(&path, None)?;
            let valid = scan(&bytes)
                .map_err(|source| format_error(&path, source))?
                .valid_len();
            if valid == bytes.len() {
                continue;
            }
            if is_gz(&path) {
                write_gz(&path, bytes.get(..valid).unwrap_or_default())?;
            } else {
                let io = |source| RecordingError::Io {
                    path: path.clone(),
                    source,
                };
                let file = fs::OpenOptions::new().write(true).open(&path).map_err(io)?;
                file.set_len(valid as u64).map_err(io)?;
                file.sync_all().map_err(io)?;
            }
        }
        Recording::open_with(dir, key)
    }

    /// Segment `index`'s bytes, inflated if it is compressed, its torn tail included.
    pub fn read_segment(&self, index: u32) -> Result<Vec<u8>, RecordingError> {
        let s = self
            .segments
            .iter()
            .find(|s| s.index == index)
            .ok_or(RecordingError::NoSuchSegment(index))?;
        read_file(&s.path, self.key.as_ref())
    }

    /// Writes the whole recording as one pcapng file: the segments' sections one after
    /// another (which pcapng allows, and Wireshark reads), their torn tails left out.
    /// Returns the bytes written.
    pub fn export_pcapng(&self, out: &mut impl Write) -> Result<u64, RecordingError> {
        let mut total = 0u64;
        for s in &self.segments {
            let bytes = read_file(&s.path, self.key.as_ref())?;
            let valid = scan(&bytes)
                .map_err(|source| format_error(&s.path, source))?
                .valid_len();
            let good = bytes.get(..valid).unwrap_or_default();
            out.write_all(good).map_err(|source| RecordingError::Io {
                path: s.path.clone(),
                source,
            })?;
            total += good.len() as u64;
        }
        Ok(total)
    }

    /// From the first record to the last, ns.
    pub fn duration_ns(&self) -> u64 {
        let spans = self.segments.iter().filter(|s| s.has_records());
        let first = spans.clone().map(|s| s.first_ns).min().unwrap_or(0);
        let last = spans.map(|s| s.last_ns).max().unwrap_or(0);
        last.saturating_sub(first)
    }

    /// The segments' size on disk.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }
}

/// Compresses a finished segment: `NNNNNN.pcapng` becomes `NNNNNN.pcapng.gz` (written to
/// a temporary file, synced, renamed; then the original is removed). Returns the new
/// path. A segment that is not finished is refused: its writer may still be appending.
pub fn compress_segment(path: &Path) -> Result<PathBuf, RecordingError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if !matches!(parse_name(name), Some((_, false, false))) {
        return Err(RecordingError::NotFinished {
            path: path.to_owned(),
        });
    }
    let bytes = read(path)?;
    let finished = scan(&bytes).map_err(|source| format_error(path, source))?;
    if !finished.finished() || finished.torn() {
        return Err(RecordingError::NotFinished {
            path: path.to_owned(),
        });
    }
    let gz = path.with_file_name(format!("{name}.gz"));
    write_gz(&gz, &bytes)?;
    fs::remove_file(path).map_err(|source| RecordingError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(gz)
}

/// Encrypts a finished segment with `key`: `N.pcapng[.gz]` becomes `N.pcapng[.gz].enc`
/// (written to a temporary file, synced, renamed; then the original is removed).
/// Returns the new path.
pub fn encrypt_segment(path: &Path, key: &Key) -> Result<PathBuf, RecordingError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if !matches!(parse_name(name), Some((_, _, false))) {
        return Err(RecordingError::NotFinished {
            path: path.to_owned(),
        });
    }
    let sealed = crypt::seal(key, &read(path)?).map_err(|source| RecordingError::Crypt {
        path: path.to_owned(),
        source,
    })?;
    let enc = path.with_file_name(format!("{name}.enc"));
    let tmp = path.with_file_name(format!("{name}.enc.tmp"));
    let io = |source| RecordingError::Io {
        path: tmp.clone(),
        source,
    };
    let mut file = fs::File::create(&tmp).map_err(io)?;
    file.write_all(&sealed).map_err(io)?;
    file.sync_all().map_err(io)?;
    fs::rename(&tmp, &enc).map_err(io)?;
    fs::remove_file(path).map_err(|source| RecordingError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(enc)
}

/// The segment files of `dir`, by number: contiguous, or an error naming the first gap.
/// When one segment has several files (compression or encryption stopped between the
/// rename and the removal), the least processed: all hold the same bytes.
fn segment_files(dir: &Path) -> Result<BTreeMap<u32, PathBuf>, RecordingError> {
    let io = |source| RecordingError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let Some((index, gz, enc)) = name.to_str().and_then(parse_name) else {
            continue;
        };
        let rank = u8::from(gz) + 2 * u8::from(enc);
        if files.get(&index).is_none_or(|(r, _)| rank < *r) {
            files.insert(index, (rank, entry.path()));
        }
    }
    let files: BTreeMap<u32, PathBuf> = files.into_iter().map(|(i, (_, p))| (i, p)).collect();
    let first = files.keys().next().copied().unwrap_or(0);
    if let Some(index) = (first..)
        .zip(files.keys())
        .find_map(|(want, &have)| (want != have).then_some(want))
    {
        return Err(RecordingError::MissingSegment {
            dir: dir.to_owned(),
            index,
        });
    }
    Ok(files)
}

/// `NNNNNN.pcapng[.gz][.enc]` -> (N, gzipped, encrypted).
fn parse_name(name: &str) -> Option<(u32, bool, bool)> {
    let (name, enc) = match name.strip_suffix(".enc") {
        Some(n) => (n, true),
        None => (name, false),
    };
    let (digits, gz) = match name.strip_suffix(".pcapng.gz") {
        Some(d) => (d, true),
        None => (name.strip_suffix(".pcapng")?, false),
    };
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, gz, enc))
}

fn is_gz(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    parse_name(name).is_some_and(|(_, gz, _)| gz)
}

fn is_sealed(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "enc")
}

fn segment_info(
    index: u32,
    path: PathBuf,
    key: Option<&Key>,
) -> Result<SegmentInfo, RecordingError> {
    let bytes = read_file(&path, key)?;
    let on_disk = match is_gz(&path) || is_sealed(&path) {
        true => fs::metadata(&path)
            .map_err(|source| RecordingError::Io {
                path: path.clone(),
                source,
            })?
            .len(),
        false => bytes.len() as u64,
    };
    let s = scan(&bytes).map_err(|source| format_error(&path, source))?;
    let (first_ns, last_ns) = s.summary().span.unwrap_or((0, 0));
    Ok(SegmentInfo {
        index,
        first_ns,
        last_ns,
        checkpoints: s.summary().checkpoints.clone(),
        finished: s.finished(),
        torn_bytes: (bytes.len() - s.valid_len()) as u64,
        bytes: on_disk,
        path,
    })
}

fn format_error(path: &Path, source: FormatError) -> RecordingError {
    RecordingError::Format {
        path: path.to_owned(),
        source,
    }
}

fn read(path: &Path) -> Result<Vec<u8>, RecordingError> {
    fs::read(path).map_err(|source| RecordingError::Io {
        path: path.to_owned(),
        source,
    })
}

/// A segment file's bytes, decrypted with `key` if it is a `.enc`, inflated if it is a
/// `.gz`.
fn read_file(path: &Path, key: Option<&Key>) -> Result<Vec<u8>, RecordingError> {
    let mut raw = read(path)?;
    if is_sealed(path) {
        let key = key.ok_or_else(|| RecordingError::Encrypted {
            path: path.to_owned(),
        })?;
        raw = crypt::open(key, &raw).map_err(|source| RecordingError::Crypt {
            path: path.to_owned(),
            source,
        })?;
    }
    if !is_gz(path) {
        return Ok(raw);
    }
    let mut out = Vec::new();
    MultiGzDecoder::new(raw.as_slice())
        .read_to_end(&mut out)
        .map_err(|source| RecordingError::Io {
            path: path.to_owned(),
            source,
        })?;
    Ok(out)
}

/// Writes `bytes` gzipped to `path`, through `path.tmp`, synced, then renamed.
fn write_gz(path: &Path, bytes: &[u8]) -> Result<(), RecordingError> {
    let tmp = path.with_extension("gz.tmp");
    let io = |source| RecordingError::Io {
        path: tmp.clone(),
        source,
    };
    let file = fs::File::create(&tmp).map_err(io)?;
    let mut enc = GzEncoder::new(file, Compression::default());
    enc.write_all(bytes).map_err(io)?;
    enc.finish().map_err(io)?.sync_all().map_err(io)?;
    fs::rename(&tmp, path).map_err(io)
}
