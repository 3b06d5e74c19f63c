//! The one way the file tools reach the file system: a handle on the workspace folder, with
//! every path resolved beneath it by the kernel.
//!
//! Why a handle and not checks on path strings: a check of a path and a later open of the same
//! path are two lookups, and a folder swapped for a symlink between them sent the open outside
//! (the old check-then-open code escaped in 3–11 % of 300 tries per tool). Here a path is looked
//! up once, by `openat2(workspace, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: the kernel
//! itself refuses any step out of the workspace during that lookup (`..` above it, an absolute
//! symlink, a symlink that leads out, `/proc` magic links). The folder it returns is then used
//! with `*at` calls (`openat`, `renameat`, `unlinkat`, `mkdirat`) on one name, with
//! `O_NOFOLLOW`: what that folder is cannot change any more, whatever is renamed meanwhile.
//!
//! Protection is decided on the opened objects by (device, inode), never on how the path was
//! spelled: `self/overrides.toml` with `self -> .` opens the workspace folder as the parent, and
//! that folder is what is compared. What is protected, and why, is the authority rule's list
//! ([`crate::authority::PROTECTED`]): this sandbox is the one place every model-driven file access
//! passes (the file tools, skills, Lua's `cap.call`), so the rule is kept here once.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

use crate::authority::{PROTECTED, Protected, Reach};
use crate::tools::ToolError;

/// Version-control folders (git, Mercurial, Subversion, Bazaar, Jujutsu, darcs, CVS). A write in
/// one (`.git/config` with `core.fsmonitor`, a hook) runs commands the next time the user runs
/// the tool, so writes there are refused unless `files.allow_vcs_writes` is on.
const VCS: &[&str] = &[".git", ".hg", ".svn", ".bzr", ".jj", "_darcs", "CVS"];

/// Deepest folder nesting the ancestry walk follows before it refuses.
const MAX_DEPTH: usize = 256;

/// How often a lookup is retried when the kernel reports a concurrent rename (`EAGAIN`).
const RETRIES: usize = 8;

/// What a file system object is, independent of any name for it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Id {
    dev: u64,
    ino: u64,
}

impl Id {
    #[allow(clippy::unnecessary_cast)] // The field types differ between targets.
    fn of(st: &Stat) -> Id {
        Id { dev: st.st_dev as u64, ino: st.st_ino as u64 }
    }
}

/// Whether an operation changes what it reaches (version-control folders refuse only that).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Access {
    Read,
    Write,
}

/// The workspace, as a folder handle. See the module doc.
pub struct Sandbox {
    root: OwnedFd,
    root_id: Id,
    /// The protected objects that exist, by identity (another name for one is refused too).
    protected: Vec<(Id, &'static Protected)>,
    allow_vcs_writes: bool,
}

/// One name in a folder that was opened beneath the workspace.
pub struct Place {
    pub dir: OwnedFd,
    /// `None` for the workspace folder itself.
    pub name: Option<OsString>,
}

/// What is at a [`Place`] now; a symlink is reported, not followed.
pub enum Kind {
    Missing,
    File(Stat),
    Dir,
    Symlink,
    /// A FIFO, socket or device, named.
    Special(&'static str),
}

/// An opened object: the file tools open only regular files and folders.
pub enum Opened {
    File(File, Stat),
    Dir,
}

/// How [`Sandbox::open`] opens a file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum How {
    Read,
    /// For appending; created (0600) if missing.
    Append,
}

impl Sandbox {
    pub fn open_root(root: &Path, allow_vcs_writes: bool) -> Result<Sandbox, ToolError> {
        let root = rfs::open(root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| ToolError::new(format!("The workspace is not accessible: {}.", std::io::Error::from(e))))?;
        let root_id = rfs::fstat(&root)
            .map(|st| Id::of(&st))
            .map_err(|e| ToolError::new(format!("The workspace is not accessible: {}.", std::io::Error::from(e))))?;
        let protected = PROTECTED
            .iter()
            .filter_map(|p| rfs::statat(&root, p.name, AtFlags::SYMLINK_NOFOLLOW).ok().map(|st| (Id::of(&st), p)))
            .collect();
        Ok(Sandbox { root, root_id, protected, allow_vcs_writes })
    }

    /// The name parts of `rel`, or why it is refused before the file system is asked.
    pub fn parts(rel: &str) -> Result<Vec<OsString>, ToolError> {
        let rel = rel.trim();
        if rel.contains('\0') {
            return Err(ToolError::new("The path contains a NUL byte."));
        }
        let p = Path::new(rel);
        if p.is_absolute() || rel.starts_with('~') {
            return Err(ToolError::new(format!(
                "`{rel}` is an absolute path; use a path relative to the workspace, e.g. notes/todo.md."
            )));
        }
        let mut parts = Vec::new();
        for c in p.components() {
            match c {
                Component::Normal(part) => parts.push(part.to_owned()),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(ToolError::new(format!("`{rel}` uses `..`; paths must stay inside the workspace.")));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(ToolError::new(format!("`{rel}` is not a relative path.")));
                }
            }
        }
        Ok(parts)
    }

    /// Opens the folder `parts` beneath the workspace, following symlinks that stay inside it.
    fn beneath(&self, parts: &[OsString]) -> Result<OwnedFd, Errno> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if parts.is_empty() {
            return rfs::openat(&self.root, ".", flags, Mode::empty());
        }
        let path: PathBuf = parts.iter().collect();
        let mut tries = 0;
        loop {
            match rfs::openat2(
                &self.root,
                &path,
                flags,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            ) {
                // The kernel could not rule out a race with a rename; looking up again is safe.
                Err(Errno::AGAIN) if tries < RETRIES => tries += 1,
                r => return r,
            }
        }
    }

    /// The folder `rel` names, following symlinks that stay inside (for listing).
    pub fn dir(&self, rel: &str) -> Result<OwnedFd, ToolError> {
        let parts = Sandbox::parts(rel)?;
        let dir = self.beneath(&parts).map_err(|e| match e {
            Errno::NOTDIR => ToolError::new(format!("`{rel}` is not a folder.")),
            Errno::NOENT => ToolError::new(format!("`{rel}` does not exist.")),
            e => lookup_err(rel, e),
        })?;
        self.guard(&dir, None, Access::Read, rel)?;
        Ok(dir)
    }

    /// The folder that holds `rel`'s last part, opened beneath the workspace, and that part.
    /// With `create_dirs`, missing folders on the way are created (0700) beneath the handle.
    pub fn place(&self, rel: &str, access: Access, create_dirs: bool) -> Result<Place, ToolError> {
        let mut parts = Sandbox::parts(rel)?;
        // By name first, so `new/.git/hooks/x` creates no folder before it is refused; the
        // identity check in `guard` catches the other spellings (a symlink to `.git`).
        if access == Access::Write && !self.allow_vcs_writes && parts.iter().any(|p| is_vcs_name(p)) {
            return Err(vcs_refused(rel));
        }
        let Some(name) = parts.pop() else {
            let dir = self.beneath(&[]).map_err(|e| lookup_err(rel, e))?;
            return Ok(Place { dir, name: None });
        };
        let dir = if create_dirs {
            self.create_dirs(&parts, rel)?
        } else {
            self.beneath(&parts).map_err(|e| lookup_err(rel, e))?
        };
        self.guard(&dir, Some(&name), access, rel)?;
        Ok(Place { dir, name: Some(name) })
    }

    fn create_dirs(&self, parts: &[OsString], rel: &str) -> Result<OwnedFd, ToolError> {
        let mut dir = self.beneath(&[]).map_err(|e| lookup_err(rel, e))?;
        for i in 0..parts.len() {
            dir = match self.beneath(&parts[..=i]) {
                Ok(d) => d,
                Err(Errno::NOENT) => {
                    // Checked before it exists, so no folder appears in sessions/ or .git/.
                    self.guard(&dir, Some(&parts[i]), Access::Write, rel)?;
                    match rfs::mkdirat(&dir, &parts[i], Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(lookup_err(rel, e)),
                    }
                    self.beneath(&parts[..=i]).map_err(|e| lookup_err(rel, e))?
                }
                Err(e) => return Err(lookup_err(rel, e)),
            };
        }
        Ok(dir)
    }

    /// Refuses `name` in the opened folder `dir` (or `dir` itself) if it is, or is inside,
    /// something protected. The folder's ancestors are walked through `..` by identity up to
    /// the workspace folder, so no spelling of the path matters; a folder that is not beneath
    /// the workspace any more (moved out meanwhile) is refused.
    fn guard(&self, dir: &OwnedFd, name: Option<&OsStr>, access: Access, rel: &str) -> Result<(), ToolError> {
        let fail = |e: Errno| lookup_err(rel, e);
        let vcs_guarded = access == Access::Write && !self.allow_vcs_writes;
        let dir_id = Id::of(&rfs::fstat(dir).map_err(fail)?);
        let mut cur: Option<OwnedFd> = None;
        let mut cur_id = dir_id;
        let mut depth = 0;
        while cur_id != self.root_id {
            if let Some(p) = self.protected_id(cur_id) {
                refuse(p, access, rel)?;
            }
            let here = cur.as_ref().unwrap_or(dir);
            let parent = rfs::openat(here, "..", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
                .map_err(fail)?;
            let parent_id = Id::of(&rfs::fstat(&parent).map_err(fail)?);
            if parent_id == cur_id || depth >= MAX_DEPTH {
                return Err(outside(rel));
            }
            if vcs_guarded && is_vcs_entry(&parent, cur_id) {
                return Err(vcs_refused(rel));
            }
            cur = Some(parent);
            cur_id = parent_id;
            depth += 1;
        }
        let Some(name) = name else { return Ok(()) };
        if dir_id == self.root_id
            && let Some(p) = crate::authority::protected(name.as_bytes())
        {
            refuse(p, access, rel)?;
        }
        if vcs_guarded && is_vcs_name(name) {
            return Err(vcs_refused(rel));
        }
        // Another name for a protected object (a case-insensitive spelling, a hard link).
        if let Ok(st) = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            && let Some(p) = self.protected_id(Id::of(&st))
        {
            refuse(p, access, rel)?;
        }
        Ok(())
    }

    fn protected_id(&self, id: Id) -> Option<&'static Protected> {
        self.protected.iter().find(|(p, _)| *p == id).map(|(_, p)| *p)
    }

    /// What is at `place`, without following a symlink.
    pub fn kind(&self, place: &Place, rel: &str) -> Result<Kind, ToolError> {
        let st = match &place.name {
            None => rfs::fstat(&place.dir),
            Some(name) => rfs::statat(&place.dir, name, AtFlags::SYMLINK_NOFOLLOW),
        };
        match st {
            Ok(st) => Ok(kind_of(st)),
            Err(Errno::NOENT) => Ok(Kind::Missing),
            Err(e) => Err(lookup_err(rel, e)),
        }
    }

    /// Opens the regular file at `place`. Refused: a symlink (not followed), a file with other
    /// hard links, and anything that is not a regular file or a folder; a folder is reported as
    /// [`Opened::Dir`]. `O_NONBLOCK` keeps the open itself from waiting on a FIFO.
    pub fn open(&self, place: &Place, how: How, rel: &str) -> Result<Opened, ToolError> {
        let Some(name) = &place.name else { return Ok(Opened::Dir) };
        let base = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let flags = match how {
            How::Read => OFlags::RDONLY | base,
            How::Append => OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | base,
        };
        let fd = match rfs::openat(&place.dir, name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(self.symlink_refused(rel)),
            Err(Errno::ISDIR) => return Ok(Opened::Dir),
            Err(Errno::NOENT) => return Err(ToolError::new(format!("`{rel}` does not exist."))),
            // A FIFO opened for writing with no reader.
            Err(Errno::NXIO) => return Err(special_refused(rel, "FIFO")),
            Err(e) => return Err(ToolError::new(format!("Cannot open `{rel}`: {}.", std::io::Error::from(e)))),
        };
        let st = rfs::fstat(&fd).map_err(|e| lookup_err(rel, e))?;
        match kind_of(st) {
            Kind::Dir => Ok(Opened::Dir),
            Kind::File(st) => {
                refuse_links(&st, rel)?;
                Ok(Opened::File(File::from(fd), st))
            }
            Kind::Special(what) => Err(special_refused(rel, what)),
            Kind::Missing | Kind::Symlink => Err(self.symlink_refused(rel)),
        }
    }

    /// Why a symlink at the end of `rel` is refused: where it leads decides the wording.
    pub fn symlink_refused(&self, rel: &str) -> ToolError {
        let path: PathBuf = Sandbox::parts(rel).unwrap_or_default().iter().collect();
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match rfs::openat2(&self.root, &path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty(), how) {
            Err(Errno::XDEV) => {
                ToolError::new(format!("`{rel}` is a symlink that leads outside the workspace; refused."))
            }
            _ => ToolError::new(format!("`{rel}` is a symlink; the file tools do not follow symlinks.")),
        }
    }

    /// Whether `name` in the opened folder `dir` is an object the file tools may not even read;
    /// for hiding it in lists.
    pub fn is_protected(&self, dir: &OwnedFd, name: &OsStr) -> bool {
        rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| self.protected_id(Id::of(&st)).is_some_and(|p| p.reach == Reach::None))
    }
}

fn is_vcs_name(name: &OsStr) -> bool {
    VCS.iter().any(|v| name.as_bytes().eq_ignore_ascii_case(v.as_bytes()))
}

fn is_vcs_entry(parent: &OwnedFd, id: Id) -> bool {
    VCS.iter().any(|v| rfs::statat(parent, *v, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| Id::of(&st) == id))
}

pub fn kind_of(st: Stat) -> Kind {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Kind::File(st),
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        FileType::Fifo => Kind::Special("FIFO"),
        FileType::Socket => Kind::Special("socket"),
        FileType::CharacterDevice | FileType::BlockDevice => Kind::Special("device"),
        FileType::Unknown => Kind::Special("file of unknown type"),
    }
}

/// A regular file with more than one link shares its content with another name, which may be
/// outside the workspace; reading or changing it would reach that file.
pub fn refuse_links(st: &Stat, rel: &str) -> Result<(), ToolError> {
    #[allow(clippy::unnecessary_cast)] // The field type differs between targets.
    let links = st.st_nlink as u64;
    if links > 1 {
        return Err(ToolError::new(format!(
            "`{rel}` has {links} hard links: its content is shared with another name, possibly outside \
             the workspace, so the file tools refuse it."
        )));
    }
    Ok(())
}

pub fn special_refused(rel: &str, what: &str) -> ToolError {
    ToolError::new(format!("`{rel}` is a {what}, not a regular file or folder; the file tools refuse it."))
}

/// Refuses `access` to something protected as `p`, with why.
fn refuse(p: &Protected, access: Access, rel: &str) -> Result<(), ToolError> {
    match (p.reach, access) {
        (Reach::ReadOnly, Access::Read) => Ok(()),
        (Reach::ReadOnly, Access::Write) => {
            Err(ToolError::new(format!("`{rel}` is read-only to the file tools: {}.", p.why)))
        }
        (Reach::None, _) => Err(ToolError::new(format!("`{rel}` is off limits to the file tools: {}.", p.why))),
    }
}

fn outside(rel: &str) -> ToolError {
    ToolError::new(format!("`{rel}` leads outside the workspace (through a symlink); refused."))
}

fn vcs_refused(rel: &str) -> ToolError {
    ToolError::new(format!(
        "`{rel}` is in a version-control folder (.git, .hg, .svn…); writes there can run commands when \
         you next use it, so they are refused. To allow them: chela config set files.allow_vcs_writes true"
    ))
}

/// A lookup that failed, explained.
fn lookup_err(rel: &str, e: Errno) -> ToolError {
    match e {
        Errno::XDEV => outside(rel),
        Errno::NOENT => ToolError::new(format!("`{rel}`: a folder on the way does not exist.")),
        Errno::NOTDIR => ToolError::new(format!("`{rel}`: a part of the path is not a folder.")),
        Errno::LOOP => ToolError::new(format!("`{rel}` goes through too many symlinks.")),
        Errno::NOSYS => ToolError::new(
            "The file tools need openat2 (Linux 5.6 or later) to keep every path inside the workspace; \
             this system does not offer it, so they are unavailable.",
        ),
        e => ToolError::new(format!("Cannot reach `{rel}`: {}.", std::io::Error::from(e))),
    }
}
