//! The tar (POSIX ustar) archives of `chela backup`: a writer, and a strict reader for
//! `chela restore`. Any `tar` reads what the writer makes. The reader takes outside bytes (an
//! archive may come from anywhere), so it accepts only what the writer makes: regular files
//! and folders with relative paths of plain names, correct checksums, bounded sizes; anything
//! else (links, devices, `..`, absolute paths, GNU or PAX extensions) is an error naming the
//! entry, before any file is written.

use std::fmt;

const BLOCK: usize = 512;
/// The longest path ustar holds: a 155-byte prefix, `/`, a 100-byte name.
const MAX_NAME: usize = 100;
const MAX_PREFIX: usize = 155;
/// Entries in one archive: a workspace holds a few thousand files at most.
pub const MAX_ENTRIES: usize = 100_000;

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// One entry: a path relative to the workspace (`/`-separated plain names), its permission
/// bits and, for a file, its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub mode: u32,
    pub kind: Kind,
    pub data: Vec<u8>,
}

/// Why an archive (or a path for one) is refused.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Whether `path` is one the archive may hold: relative, `/`-separated names that are none of
/// ``, `.`, `..`, without NUL or backslash tricks that another tar would read otherwise.
pub fn check_path(path: &str) -> Result<(), Refused> {
    let bad = |why: &str| Err(Refused(format!("the entry {:?} {why}", path.chars().take(120).collect::<String>())));
    if path.is_empty() {
        return bad("has no name");
    }
    if path.starts_with('/') {
        return bad("is an absolute path");
    }
    if path.contains('\0') {
        return bad("holds a NUL byte");
    }
    for part in path.split('/') {
        match part {
            "" | "." => return bad("has an empty or `.` part"),
            ".." => return bad("climbs out with `..`"),
            _ => {}
        }
    }
    Ok(())
}

/// Appends `e` to `out`.
pub fn write_entry(out: &mut Vec<u8>, e: &Entry) -> Result<(), Refused> {
    check_path(&e.path)?;
    let (prefix, name) = split_name(&e.path)?;
    let mut h = [0u8; BLOCK];
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], u64::from(e.mode & 0o7777));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    let size = if e.kind == Kind::File { e.data.len() as u64 } else { 0 };
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], 0);
    h[156] = if e.kind == Kind::File { b'0' } else { b'5' };
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    h[148..156].fill(b' ');
    let sum: u64 = h.iter().map(|b| u64::from(*b)).sum();
    octal(&mut h[148..155], sum);
    h[155] = b' ';
    out.extend_from_slice(&h);
    if e.kind == Kind::File {
        out.extend_from_slice(&e.data);
        out.resize(out.len().next_multiple_of(BLOCK), 0);
    }
    Ok(())
}

/// Ends an archive: two zero blocks.
pub fn finish(out: &mut Vec<u8>) {
    out.resize(out.len() + 2 * BLOCK, 0);
}

/// Splits a path into ustar's prefix and name fields.
fn split_name(path: &str) -> Result<(&str, &str), Refused> {
    if path.len() <= MAX_NAME {
        return Ok(("", path));
    }
    // The split must be at a `/`, leaving at most 100 bytes after it and 155 before.
    path.match_indices('/')
        .map(|(i, _)| (&path[..i], &path[i + 1..]))
        .find(|(p, n)| p.len() <= MAX_PREFIX && n.len() <= MAX_NAME && !n.is_empty())
        .ok_or_else(|| Refused(format!("the path {path:?} is too long for the archive (ustar holds 255 bytes)")))
}

/// Writes `value` as zero-padded octal with a NUL at the end of `field`.
fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&text.as_bytes()[text.len() - digits..]);
    field[digits] = 0;
}

/// Reads an octal field (digits, then NUL or spaces).
fn read_octal(field: &[u8], what: &str) -> Result<u64, Refused> {
    let text: &[u8] = field.split(|b| *b == 0 || *b == b' ').find(|s| !s.is_empty()).unwrap_or(b"");
    if text.is_empty() || !text.iter().all(|b| (b'0'..=b'7').contains(b)) {
        return Err(Refused(format!("an archive header's {what} is not an octal number")));
    }
    let s = std::str::from_utf8(text).unwrap_or("0");
    u64::from_str_radix(s, 8).map_err(|_| Refused(format!("an archive header's {what} is too large")))
}

/// A NUL-terminated text field.
fn text_field(field: &[u8]) -> Result<&str, Refused> {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    std::str::from_utf8(&field[..end]).map_err(|_| Refused("an archive entry's name is not UTF-8".to_owned()))
}

/// Every entry of `bytes`, checked; `max_total` bounds the files' bytes together.
pub fn read(bytes: &[u8], max_total: u64) -> Result<Vec<Entry>, Refused> {
    let mut entries = Vec::new();
    let mut at = 0usize;
    let mut total = 0u64;
    loop {
        let Some(h) = bytes.get(at..at + BLOCK) else {
            return Err(Refused("the archive ends in the middle (no end marker): it is cut short".to_owned()));
        };
        if h.iter().all(|b| *b == 0) {
            return Ok(entries);
        }
        if entries.len() >= MAX_ENTRIES {
            return Err(Refused(format!("the archive holds over {MAX_ENTRIES} entries")));
        }
        let stored = read_octal(&h[148..156], "checksum")?;
        let sum: u64 =
            h.iter().enumerate().map(|(i, b)| if (148..156).contains(&i) { 32 } else { u64::from(*b) }).sum();
        if stored != sum {
            return Err(Refused("an archive header's checksum is wrong: the archive is damaged".to_owned()));
        }
        if &h[257..263] != b"ustar\0" {
            return Err(Refused("the archive is not a ustar archive written by `chela backup`".to_owned()));
        }
        let name = text_field(&h[..100])?;
        let prefix = text_field(&h[345..500])?;
        let path = if prefix.is_empty() { name.to_owned() } else { format!("{prefix}/{name}") };
        let path = path.strip_suffix('/').map(str::to_owned).unwrap_or(path);
        check_path(&path)?;
        let mode = u32::try_from(read_octal(&h[100..108], "mode")? & 0o777).unwrap_or(0o600);
        let size = read_octal(&h[124..136], "size")?;
        let kind = match h[156] {
            b'0' | 0 => Kind::File,
            b'5' => Kind::Dir,
            other => {
                return Err(Refused(format!(
                    "the entry {path:?} is not a plain file or folder (type {:?}): links and devices are refused",
                    char::from(other)
                )));
            }
        };
        at += BLOCK;
        let data = if kind == Kind::File {
            total = total.saturating_add(size);
            if total > max_total {
                return Err(Refused(format!("the archive's files are over {max_total} bytes together")));
            }
            let len = usize::try_from(size).map_err(|_| Refused("an entry is too large".to_owned()))?;
            let Some(data) = bytes.get(at..at.saturating_add(len)) else {
                return Err(Refused(format!("the entry {path:?} is cut short")));
            };
            at += len.next_multiple_of(BLOCK);
            data.to_vec()
        } else {
            Vec::new()
        };
        entries.push(Entry { path, mode, kind, data });
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn archive(entries: &[Entry]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in entries {
            write_entry(&mut out, e).unwrap();
        }
        finish(&mut out);
        out
    }

    fn file(path: &str, data: &[u8]) -> Entry {
        Entry { path: path.to_owned(), mode: 0o600, kind: Kind::File, data: data.to_vec() }
    }

    #[test]
    fn what_is_written_reads_back_and_long_paths_use_the_prefix() {
        let long = format!("{}/{}", "d".repeat(120), "f".repeat(90));
        let entries = vec![
            Entry { path: "sessions".into(), mode: 0o700, kind: Kind::Dir, data: vec![] },
            file("sessions/cli_local.jsonl", b"{}\n"),
            file(&long, b"x"),
            file("empty", b""),
        ];
        assert_eq!(read(&archive(&entries), 1 << 20).unwrap(), entries);
        let too_long = file(&"a".repeat(300), b"");
        assert!(write_entry(&mut Vec::new(), &too_long).is_err());
    }

    #[test]
    fn escapes_links_and_damage_are_refused() {
        for bad in ["../etc/passwd", "/etc/passwd", "a/../../b", "a//b", "./a", ""] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
        // A symlink entry, made by hand as another tar would.
        let mut bytes = archive(&[file("link", b"")]);
        bytes[156] = b'2';
        let sum: u64 = bytes[..BLOCK]
            .iter()
            .enumerate()
            .map(|(i, b)| if (148..156).contains(&i) { 32 } else { u64::from(*b) })
            .sum();
        octal(&mut bytes[148..155], sum);
        assert!(read(&bytes, 1 << 20).unwrap_err().0.contains("links and devices are refused"));
        // A `..` path written by hand past the writer's check.
        let mut bytes = archive(&[file("xx/passwd", b"")]);
        bytes[..2].copy_from_slice(b"..");
        let sum: u64 = bytes[..BLOCK]
            .iter()
            .enumerate()
            .map(|(i, b)| if (148..156).contains(&i) { 32 } else { u64::from(*b) })
            .sum();
        octal(&mut bytes[148..155], sum);
        assert!(read(&bytes, 1 << 20).unwrap_err().0.contains("climbs out"));
        // A flipped byte breaks the checksum; a cut archive and an oversized one are refused.
        let mut bytes = archive(&[file("a", b"hello")]);
        bytes[0] = b'b';
        assert!(read(&bytes, 1 << 20).unwrap_err().0.contains("checksum"));
        let bytes = archive(&[file("a", &[7u8; 2000])]);
        assert!(read(&bytes[..1024], 1 << 20).is_err());
        assert!(read(&bytes, 1000).unwrap_err().0.contains("over 1000 bytes"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Outside bytes never panic the reader, and whatever it accepts has safe paths.
        #[test]
        fn any_bytes_are_refused_or_read_safely(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
            if let Ok(entries) = read(&bytes, 1 << 20) {
                for e in entries {
                    prop_assert!(check_path(&e.path).is_ok());
                }
            }
        }

        /// A real archive with bytes changed anywhere: refused or read safely, never a panic.
        #[test]
        fn damaged_archives_are_refused_or_read_safely(at in 0usize..2048, byte in any::<u8>()) {
            let mut bytes = archive(&[file("a/b", b"data"), file("c", &[1u8; 600])]);
            let i = at % bytes.len();
            bytes[i] = byte;
            if let Ok(entries) = read(&bytes, 1 << 20) {
                for e in entries {
                    prop_assert!(check_path(&e.path).is_ok());
                }
            }
        }

        #[test]
        fn round_trip(names in proptest::collection::vec("[a-z]{1,20}(/[a-z.]{1,20}){0,3}", 1..6),
                      data in proptest::collection::vec(any::<u8>(), 0..700)) {
            let entries: Vec<Entry> = names.iter().filter(|n| check_path(n).is_ok()).map(|n| file(n, &data)).collect();
            prop_assert_eq!(read(&archive(&entries), 1 << 30).unwrap(), entries);
        }
    }
}
