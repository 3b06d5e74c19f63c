//! The `files` group: read and change files inside the workspace, and nowhere else.
//!
//! Every path the model gives is relative to the workspace and goes through [`Sandbox`], the
//! only way these tools touch the file system: the kernel resolves each path beneath a handle on
//! the workspace folder, so no symlink, `..` or folder swapped mid-call leads outside, and the
//! last part of a path is never followed. The configuration (it holds keys), the session files
//! (other chats) and, for writes, version-control folders are off limits, decided on the objects
//! reached, not on the spelling. Only regular files with one link and folders are opened. Sizes
//! are bounded by `files.max_read_bytes` and `files.max_write_bytes`.

use std::ffi::OsStr;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

use chela_core::config as keys;
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use serde::Deserialize;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};
use crate::read_args;
use crate::workspace::{Replace, append_whole, write_atomic_at};

use super::sandbox;

use sandbox::{Access, How, Kind, Opened, Place, Sandbox, refuse_links, special_refused};

pub fn group() -> Group {
    Group::new("files", "Read, write and organise files in the workspace.")
        .guidance(
            "Files: paths are relative to your workspace folder; you cannot reach outside it. \
             Read a file before editing it; file_edit replaces one exact, unique piece of text.",
        )
        .with(FileRead)
        .with(FileWrite)
        .with(FileEdit)
        .with(FileList)
}

/// The file tools most turns never need, hidden until the model unlocks them (`tools_unlock`);
/// off whenever the owner switches off or hides `files`.
pub fn manage_group() -> Group {
    Group::new("files_manage", "Delete, move, copy and inspect workspace files.")
        .hidden("")
        .part_of("files")
        .with(FileDelete)
        .with(FileMove)
        .with(FileCopy)
        .with(FileStat)
}

/// Most entries `file_list` returns.
const MAX_LIST: usize = 500;

fn sandbox(ctx: &ToolCtx) -> Result<Sandbox, ToolError> {
    Sandbox::open_root(ctx.ws.root(), ctx.cfg.bool(keys::FILES_ALLOW_VCS_WRITES))
}

fn io_err(action: &str, path: &str, e: &io::Error) -> ToolError {
    let why = match e.kind() {
        io::ErrorKind::NotFound => "it does not exist".to_owned(),
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        io::ErrorKind::AlreadyExists => "it already exists".to_owned(),
        _ if e.raw_os_error() == Some(libc::ELOOP) => "it is a symlink, which the file tools do not follow".to_owned(),
        _ => e.to_string(),
    };
    ToolError::new(format!("Cannot {action} `{path}`: {why}."))
}

fn errno(action: &str, path: &str, e: Errno) -> ToolError {
    io_err(action, path, &io::Error::from(e))
}

fn max_read(ctx: &ToolCtx) -> usize {
    ctx.cfg.usize(keys::FILES_MAX_READ_BYTES)
}

fn max_write(ctx: &ToolCtx) -> usize {
    ctx.cfg.usize(keys::FILES_MAX_WRITE_BYTES)
}

/// The name at `place`; only the workspace folder itself has none.
fn name_of<'p>(place: &'p Place, refusal: &str) -> Result<&'p OsStr, ToolError> {
    place.name.as_deref().ok_or_else(|| ToolError::new(refusal.to_owned()))
}

/// Opens `rel` as a regular file for reading, or says why not.
fn open_for_read(
    sb: &Sandbox,
    rel: &str,
    access: Access,
    folder: &str,
) -> Result<(std::fs::File, rfs::Stat), ToolError> {
    let place = sb.place(rel, access, false)?;
    match sb.open(&place, How::Read, rel)? {
        Opened::File(f, st) => Ok((f, st)),
        Opened::Dir => Err(ToolError::new(format!("`{rel}` is a folder; {folder}."))),
    }
}

/// A workspace file opened for reading through the sandbox, and its size: for tools of other
/// groups that hand a file on (`im_send_media`). Blocking.
pub fn open_workspace_file(ctx: &ToolCtx, rel: &str) -> Result<(std::fs::File, u64), ToolError> {
    let (f, st) = open_for_read(&sandbox(ctx)?, rel, Access::Read, "send a file, not a folder")?;
    Ok((f, size_of(&st)))
}

#[allow(clippy::unnecessary_cast)] // The field type differs between targets.
fn size_of(st: &rfs::Stat) -> u64 {
    st.st_size as u64
}

pub struct FileRead;

pub struct ReadArgs {
    path: String,
    offset: u64,
    max_bytes: Option<usize>,
}

read_args!(ReadArgs { path: need, offset: or_default, max_bytes: opt });

impl Tool for FileRead {
    const NAME: &'static str = "file_read";
    const DESCRIPTION: &'static str = "Read a text file. Long files come in pieces: pass offset to continue.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","description":"Byte to start at."},"max_bytes":{"type":"integer"}},"required":["path"]}"#;
    type Args = ReadArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: ReadArgs) -> ToolResult {
        let (mut f, st) = open_for_read(&sandbox(ctx)?, &a.path, Access::Read, "use file_list")?;
        let size = size_of(&st);
        let limit = a.max_bytes.unwrap_or(usize::MAX).min(max_read(ctx));
        f.seek(SeekFrom::Start(a.offset.min(size))).map_err(|e| io_err("read", &a.path, &e))?;
        let mut buf = Vec::with_capacity(limit.min(size as usize));
        f.take(limit as u64).read_to_end(&mut buf).map_err(|e| io_err("read", &a.path, &e))?;
        if buf.contains(&0) {
            return Err(ToolError::new(format!("`{}` is a binary file ({size} bytes); it is not shown.", a.path)));
        }
        // A piece may end inside a character; the next piece's offset starts after it.
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t.to_owned(),
            Err(e) if e.error_len().is_none() => String::from_utf8_lossy(&buf[..e.valid_up_to()]).into_owned(),
            Err(_) => String::from_utf8_lossy(&buf).into_owned(),
        };
        let end = a.offset.min(size) + text.len() as u64;
        if a.offset == 0 && end >= size {
            return Ok(text);
        }
        let more = if end < size { format!("; continue with offset {end}") } else { String::new() };
        Ok(format!("[bytes {}..{end} of {size}{more}]\n{text}", a.offset.min(size)))
    }
}

pub struct FileWrite;

pub struct WriteArgs {
    path: String,
    content: String,
    mode: WriteMode,
}

read_args!(WriteArgs { path: need, content: need, mode: or_default });

#[derive(Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    #[default]
    Overwrite,
    Append,
}

impl Tool for FileWrite {
    const NAME: &'static str = "file_write";
    const DESCRIPTION: &'static str = "Write or append to a text file; folders are created as needed.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"type":"string","enum":["overwrite","append"]}},"required":["path","content"]}"#;
    type Args = WriteArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: WriteArgs) -> ToolResult {
        let limit = max_write(ctx);
        let too_big = |total: usize| {
            ToolError::new(format!(
                "`{}` would be {total} bytes, over the {limit}-byte limit (files.max_write_bytes).",
                a.path
            ))
        };
        if a.content.len() > limit {
            return Err(too_big(a.content.len()));
        }
        let sb = sandbox(ctx)?;
        let place = sb.place(&a.path, Access::Write, true)?;
        let name = name_of(&place, "The workspace itself is a folder.")?;
        let existing = match sb.kind(&place, &a.path)? {
            Kind::Missing => 0,
            Kind::File(st) => {
                refuse_links(&st, &a.path)?;
                size_of(&st)
            }
            Kind::Dir => return Err(ToolError::new(format!("`{}` is a folder.", a.path))),
            Kind::Symlink => return Err(sb.symlink_refused(&a.path)),
            Kind::Special(what) => return Err(special_refused(&a.path, what)),
        };
        let total = match a.mode {
            WriteMode::Append => existing as usize + a.content.len(),
            WriteMode::Overwrite => a.content.len(),
        };
        if total > limit {
            return Err(too_big(total));
        }
        match a.mode {
            WriteMode::Overwrite => write_atomic_at(&place.dir, name, a.content.as_bytes(), Replace::Yes)
                .map_err(|e| io_err("write", &a.path, &e))?,
            WriteMode::Append => match sb.open(&place, How::Append, &a.path)? {
                Opened::File(mut f, _) => {
                    append_whole(&mut f, a.content.as_bytes()).map_err(|e| io_err("append to", &a.path, &e))?
                }
                Opened::Dir => return Err(ToolError::new(format!("`{}` is a folder.", a.path))),
            },
        }
        let verb = if a.mode == WriteMode::Append { "appended" } else { "wrote" };
        Ok(format!("{verb} {} bytes to {} ({total} bytes now)", a.content.len(), a.path))
    }
}

pub struct FileEdit;

pub struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

read_args!(EditArgs { path: need, old_text: need, new_text: need });

impl Tool for FileEdit {
    const NAME: &'static str = "file_edit";
    const DESCRIPTION: &'static str = "Replace text in a file: old_text must occur exactly once (include context).";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"]}"#;
    type Args = EditArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: EditArgs) -> ToolResult {
        if a.old_text.is_empty() {
            return Err(ToolError::new("old_text is empty; give the exact text to replace."));
        }
        let limit = max_write(ctx);
        let sb = sandbox(ctx)?;
        let place = sb.place(&a.path, Access::Write, false)?;
        let (mut f, st) = match sb.open(&place, How::Read, &a.path)? {
            Opened::File(f, st) => (f, st),
            Opened::Dir => return Err(ToolError::new(format!("`{}` is a folder.", a.path))),
        };
        if size_of(&st) > limit as u64 {
            return Err(ToolError::new(format!("`{}` is over the {limit}-byte limit for editing.", a.path)));
        }
        let mut text = String::new();
        f.read_to_string(&mut text).map_err(|_| ToolError::new(format!("`{}` is not a UTF-8 text file.", a.path)))?;
        let count = text.matches(&a.old_text).count();
        match count {
            0 => {
                return Err(ToolError::new(format!(
                    "old_text was not found in `{}`; read the file and copy the text exactly.",
                    a.path
                )));
            }
            1 => {}
            n => {
                return Err(ToolError::new(format!(
                    "old_text occurs {n} times in `{}`; include more surrounding text so it is unique.",
                    a.path
                )));
            }
        }
        let new = text.replacen(&a.old_text, &a.new_text, 1);
        if new.len() > limit {
            return Err(ToolError::new(format!("the edit would make `{}` larger than {limit} bytes.", a.path)));
        }
        let name = name_of(&place, "The workspace itself is a folder.")?;
        write_atomic_at(&place.dir, name, new.as_bytes(), Replace::Yes).map_err(|e| io_err("write", &a.path, &e))?;
        Ok(format!("edited {} ({} -> {} bytes)", a.path, text.len(), new.len()))
    }
}

pub struct FileList;

pub struct ListArgs {
    path: Option<String>,
    recursive: bool,
}

read_args!(ListArgs { path: opt, recursive: or_default });

impl Tool for FileList {
    const NAME: &'static str = "file_list";
    const DESCRIPTION: &'static str = "List a folder of the workspace (default: its top). Folders end with /.";
    const SCHEMA: &'static str =
        r#"{"type":"object","properties":{"path":{"type":"string"},"recursive":{"type":"boolean"}}}"#;
    type Args = ListArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: ListArgs) -> ToolResult {
        let sb = sandbox(ctx)?;
        let rel = a.path.as_deref().filter(|p| !p.trim().is_empty()).unwrap_or(".");
        let dir = sb.dir(rel)?;
        let mut prefix = String::new();
        for part in Sandbox::parts(rel)? {
            prefix.push_str(&part.to_string_lossy());
            prefix.push('/');
        }
        let mut out = Vec::new();
        let mut truncated = false;
        walk(&sb, &dir, &prefix, a.recursive, &mut out, &mut truncated).map_err(|e| errno("list", rel, e))?;
        chela_infra::sort::sort_by(&mut out, Ord::cmp);
        if out.is_empty() {
            return Ok(format!("`{rel}` is empty."));
        }
        let mut text = out.join("\n");
        if truncated {
            text.push_str(&format!("\n[… stopped at {MAX_LIST} entries]"));
        }
        Ok(text)
    }
}

/// Lists the opened folder `dir`; subfolders are opened beneath it without following symlinks.
fn walk(
    sb: &Sandbox,
    dir: &OwnedFd,
    prefix: &str,
    recursive: bool,
    out: &mut Vec<String>,
    truncated: &mut bool,
) -> Result<(), Errno> {
    let mut entries = rfs::Dir::read_from(dir)?;
    while let Some(entry) = entries.read() {
        if out.len() >= MAX_LIST {
            *truncated = true;
            return Ok(());
        }
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        let shown_name = name.to_string_lossy();
        // Temp files of atomic writes and what the tools may not touch are not listed.
        if name == "." || name == ".." || (shown_name.starts_with('.') && shown_name.ends_with(".tmp")) {
            continue;
        }
        if sb.is_protected(dir, name) {
            continue;
        }
        let shown = format!("{prefix}{shown_name}");
        let Ok(st) = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
        match sandbox::kind_of(st) {
            Kind::Symlink => out.push(format!("{shown} (symlink)")),
            Kind::Dir => {
                out.push(format!("{shown}/"));
                if recursive {
                    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    // Swapped for something else since it was listed: left out, not followed.
                    let Ok(sub) = rfs::openat(dir, name, flags, Mode::empty()) else { continue };
                    walk(sb, &sub, &format!("{shown}/"), true, out, truncated)?;
                }
            }
            Kind::File(st) => out.push(format!("{shown} ({} bytes)", size_of(&st))),
            Kind::Special(what) => out.push(format!("{shown} ({what}, not opened)")),
            Kind::Missing => {}
        }
    }
    Ok(())
}

pub struct FileDelete;

pub struct PathArgs {
    path: String,
}

read_args!(PathArgs { path: need });

impl Tool for FileDelete {
    const NAME: &'static str = "file_delete";
    const DESCRIPTION: &'static str = "Delete a file, or an empty folder.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#;
    type Args = PathArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: PathArgs) -> ToolResult {
        let sb = sandbox(ctx)?;
        let place = sb.place(&a.path, Access::Write, false)?;
        let name = name_of(&place, "The workspace itself cannot be deleted.")?;
        #[cfg(feature = "lua")]
        let note = ctx.before_remove(&a.path);
        #[cfg(not(feature = "lua"))]
        let note = "";
        match sb.kind(&place, &a.path)? {
            Kind::Missing => return Err(ToolError::new(format!("Cannot delete `{}`: it does not exist.", a.path))),
            Kind::Dir => rfs::unlinkat(&place.dir, name, AtFlags::REMOVEDIR).map_err(|e| match e {
                Errno::NOTEMPTY => {
                    ToolError::new(format!("`{}` is a folder that is not empty; delete its files first.", a.path))
                }
                e => errno("delete", &a.path, e),
            })?,
            Kind::File(st) => {
                refuse_links(&st, &a.path)?;
                rfs::unlinkat(&place.dir, name, AtFlags::empty()).map_err(|e| errno("delete", &a.path, e))?;
            }
            // The link itself goes; what it points to is not touched.
            Kind::Symlink => {
                rfs::unlinkat(&place.dir, name, AtFlags::empty()).map_err(|e| errno("delete", &a.path, e))?
            }
            Kind::Special(what) => return Err(special_refused(&a.path, what)),
        }
        Ok(format!("deleted {}{note}", a.path))
    }
}

pub struct FromToArgs {
    from: String,
    to: String,
    overwrite: bool,
}

read_args!(FromToArgs { from: need, to: need, overwrite: or_default });

const FROM_TO_SCHEMA: &str = r#"{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"},"overwrite":{"type":"boolean","description":"Replace an existing destination."}},"required":["from","to"]}"#;

const WHOLE: &str = "The workspace itself cannot be moved or replaced.";

/// The destination of a move or copy, its folders created; refused if it is a folder, a
/// symlink, a special or hard-linked file, or exists and `overwrite` is off.
fn destination(sb: &Sandbox, a: &FromToArgs) -> Result<Place, ToolError> {
    let to = sb.place(&a.to, Access::Write, true)?;
    name_of(&to, WHOLE)?;
    let exists = || ToolError::new(format!("`{}` already exists; pass overwrite: true to replace it.", a.to));
    match sb.kind(&to, &a.to)? {
        Kind::Missing => {}
        _ if !a.overwrite => return Err(exists()),
        Kind::File(st) => refuse_links(&st, &a.to)?,
        Kind::Dir => return Err(ToolError::new(format!("`{}` is a folder; it is not replaced.", a.to))),
        Kind::Symlink => return Err(sb.symlink_refused(&a.to)),
        Kind::Special(what) => return Err(special_refused(&a.to, what)),
    }
    Ok(to)
}

pub struct FileMove;

impl Tool for FileMove {
    const NAME: &'static str = "file_move";
    const DESCRIPTION: &'static str = "Move or rename a file or folder.";
    const SCHEMA: &'static str = FROM_TO_SCHEMA;
    type Args = FromToArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: FromToArgs) -> ToolResult {
        let sb = sandbox(ctx)?;
        let from = sb.place(&a.from, Access::Write, false)?;
        let from_name = name_of(&from, WHOLE)?;
        match sb.kind(&from, &a.from)? {
            Kind::Missing => return Err(ToolError::new(format!("Cannot move `{}`: it does not exist.", a.from))),
            Kind::File(st) => refuse_links(&st, &a.from)?,
            Kind::Special(what) => return Err(special_refused(&a.from, what)),
            Kind::Dir | Kind::Symlink => {}
        }
        let to = destination(&sb, &a)?;
        let to_name = name_of(&to, WHOLE)?;
        #[cfg(feature = "lua")]
        let note = ctx.before_remove(&a.from);
        #[cfg(not(feature = "lua"))]
        let note = "";
        // Without overwrite the kernel refuses an existing destination at the rename itself.
        let flags = if a.overwrite { RenameFlags::empty() } else { RenameFlags::NOREPLACE };
        rfs::renameat_with(&from.dir, from_name, &to.dir, to_name, flags).map_err(|e| match e {
            Errno::EXIST => ToolError::new(format!("`{}` already exists; pass overwrite: true to replace it.", a.to)),
            e => errno("move", &a.from, e),
        })?;
        Ok(format!("moved {} to {}{note}", a.from, a.to))
    }
}

pub struct FileCopy;

impl Tool for FileCopy {
    const NAME: &'static str = "file_copy";
    const DESCRIPTION: &'static str = "Copy a file.";
    const SCHEMA: &'static str = FROM_TO_SCHEMA;
    type Args = FromToArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: FromToArgs) -> ToolResult {
        let sb = sandbox(ctx)?;
        let limit = max_write(ctx);
        let (f, _) = open_for_read(&sb, &a.from, Access::Read, "copy its files one by one")?;
        let mut bytes = Vec::new();
        f.take(limit as u64 + 1).read_to_end(&mut bytes).map_err(|e| io_err("copy", &a.from, &e))?;
        if bytes.len() > limit {
            return Err(ToolError::new(format!(
                "`{}` is over the {limit}-byte limit (files.max_write_bytes).",
                a.from
            )));
        }
        let to = destination(&sb, &a)?;
        let replace = if a.overwrite { Replace::Yes } else { Replace::No };
        write_atomic_at(&to.dir, name_of(&to, WHOLE)?, &bytes, replace).map_err(|e| io_err("write", &a.to, &e))?;
        Ok(format!("copied {} to {} ({} bytes)", a.from, a.to, bytes.len()))
    }
}

pub struct FileStat;

impl Tool for FileStat {
    const NAME: &'static str = "file_stat";
    const DESCRIPTION: &'static str = "Size, type and modification time of a file or folder.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#;
    type Args = PathArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: PathArgs) -> ToolResult {
        let sb = sandbox(ctx)?;
        let place = sb.place(&a.path, Access::Read, false)?;
        let st = match &place.name {
            None => rfs::fstat(&place.dir),
            Some(name) => rfs::statat(&place.dir, name, AtFlags::SYMLINK_NOFOLLOW),
        }
        .map_err(|e| errno("stat", &a.path, e))?;
        let (kind, links) = match sandbox::kind_of(st) {
            Kind::Dir => ("folder", None),
            Kind::Symlink => ("symlink", None),
            #[allow(clippy::unnecessary_cast)] // The field type differs between targets.
            Kind::File(st) => ("file", Some(st.st_nlink as u64)),
            Kind::Special(what) => (what, None),
            Kind::Missing => ("missing", None),
        };
        #[allow(clippy::unnecessary_cast)] // The field types differ between targets.
        let modified = Some(crate::localtime::Local::at(&ctx.tz, st.st_mtime as i64).rfc3339());
        let mut out = serde_json::json!({"path": a.path, "type": kind, "size": size_of(&st), "modified": modified});
        // More than one link: the other tools refuse this file; saying so here explains why.
        if let Some(n) = links.filter(|n| *n > 1) {
            out["links"] = n.into();
        }
        Ok(out.to_string())
    }
}

#[cfg(test)]
mod tests;
