//! The `files` group: read and change files inside the workspace, and nowhere else.
//!
//! Every path the model gives is relative to the workspace. [`Jail::resolve`] refuses absolute
//! paths and `..`, then checks where the path really leads after symlinks; the final open does
//! not follow a symlink, so one swapped in after the check is refused too. The configuration
//! (it holds keys) and the session files (other chats) are off limits. Sizes are bounded by
//! `files.max_read_bytes` and `files.max_write_bytes`.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use chela_core::config as keys;
use serde::Deserialize;

use super::{Group, Tool, ToolCtx, ToolError, ToolResult};
use crate::workspace::{CONFIG_FILE, OVERRIDES_FILE, write_atomic};

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
        .with(FileDelete)
        .with(FileMove)
        .with(FileCopy)
        .with(FileStat)
}

/// Most entries `file_list` returns.
const MAX_LIST: usize = 500;

/// Paths inside the workspace that the tools refuse, with the reason.
const PROTECTED: &[(&str, &str)] = &[
    (CONFIG_FILE, "it holds the configuration and API keys"),
    (OVERRIDES_FILE, "it holds the configuration and API keys"),
    ("sessions", "it holds the conversation records"),
];

/// Confines paths to one folder.
pub struct Jail {
    root: PathBuf,
}

impl Jail {
    pub fn new(root: &Path) -> Result<Jail, ToolError> {
        let root = root.canonicalize().map_err(|e| ToolError::new(format!("the workspace is not accessible: {e}")))?;
        Ok(Jail { root })
    }

    /// The real path for `rel`, or why it is refused. `rel` may name something that does not
    /// exist yet; its existing ancestors are what is checked.
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, ToolError> {
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
        let mut clean = PathBuf::new();
        for c in p.components() {
            match c {
                Component::Normal(part) => clean.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(ToolError::new(format!("`{rel}` uses `..`; paths must stay inside the workspace.")));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(ToolError::new(format!("`{rel}` is not a relative path.")));
                }
            }
        }
        if let Some(first) = clean.components().next().and_then(|c| c.as_os_str().to_str())
            && let Some((_, why)) = PROTECTED.iter().find(|(name, _)| *name == first)
        {
            return Err(ToolError::new(format!("`{rel}` is off limits to the file tools: {why}.")));
        }
        let Some(name) = clean.file_name().map(|n| n.to_owned()) else {
            return Ok(self.root.clone());
        };
        // Where the parent folder really is, after symlinks. Folders that do not exist yet
        // (a write creates them) cannot be symlinks; the deepest one that exists is checked.
        let parent = self.root.join(clean.parent().unwrap_or(Path::new("")));
        let mut existing = parent.as_path();
        while fs::symlink_metadata(existing).is_err() {
            existing = existing.parent().unwrap_or(&self.root);
        }
        let real = existing.canonicalize().map_err(|e| ToolError::new(format!("cannot resolve `{rel}`: {e}")))?;
        if !real.starts_with(&self.root) {
            return Err(ToolError::new(format!("`{rel}` leads outside the workspace (through a symlink); refused.")));
        }
        let path = real.join(parent.strip_prefix(existing).unwrap_or(Path::new(""))).join(name);
        // The last part is not followed by the tools, but a link out of the workspace is
        // refused outright rather than left to fail later.
        if fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink())
            && path.canonicalize().map_or(true, |t| !t.starts_with(&self.root))
        {
            return Err(ToolError::new(format!("`{rel}` is a symlink that leads outside the workspace; refused.")));
        }
        Ok(path)
    }

    /// The path as the model should see it.
    pub fn shown(&self, p: &Path) -> String {
        p.strip_prefix(&self.root).unwrap_or(p).display().to_string()
    }
}

fn jail(ctx: &ToolCtx) -> Result<Jail, ToolError> {
    Jail::new(ctx.ws.root())
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

/// Opens an existing file for reading without following a symlink in its last component.
fn open_nofollow(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)
}

fn max_read(ctx: &ToolCtx) -> usize {
    ctx.cfg.usize(keys::FILES_MAX_READ_BYTES)
}

fn max_write(ctx: &ToolCtx) -> usize {
    ctx.cfg.usize(keys::FILES_MAX_WRITE_BYTES)
}

fn parents(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(p) => fs::create_dir_all(p),
        None => Ok(()),
    }
}

pub struct FileRead;

#[derive(Deserialize)]
pub struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: u64,
    #[serde(default)]
    max_bytes: Option<usize>,
}

impl Tool for FileRead {
    const NAME: &'static str = "file_read";
    const DESCRIPTION: &'static str = "Read a text file. Long files come in pieces: pass offset to continue.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","minimum":0,"description":"Byte to start at."},"max_bytes":{"type":"integer","minimum":1}},"required":["path"]}"#;
    type Args = ReadArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: ReadArgs) -> ToolResult {
        let path = jail(ctx)?.resolve(&a.path)?;
        let mut f = open_nofollow(&path).map_err(|e| io_err("read", &a.path, &e))?;
        let meta = f.metadata().map_err(|e| io_err("read", &a.path, &e))?;
        if meta.is_dir() {
            return Err(ToolError::new(format!("`{}` is a folder; use file_list.", a.path)));
        }
        let size = meta.len();
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

#[derive(Deserialize)]
pub struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    mode: WriteMode,
}

#[derive(Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    #[default]
    Overwrite,
    Append,
}

impl Tool for FileWrite {
    const NAME: &'static str = "file_write";
    const DESCRIPTION: &'static str =
        "Create or overwrite a text file, or append to it. Folders are created as needed.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"type":"string","enum":["overwrite","append"]}},"required":["path","content"]}"#;
    type Args = WriteArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: WriteArgs) -> ToolResult {
        let path = jail(ctx)?.resolve(&a.path)?;
        let limit = max_write(ctx);
        if path.is_dir() {
            return Err(ToolError::new(format!("`{}` is a folder.", a.path)));
        }
        refuse_symlink(&path, &a.path)?;
        let existing = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let total = if a.mode == WriteMode::Append { existing as usize + a.content.len() } else { a.content.len() };
        if total > limit {
            return Err(ToolError::new(format!(
                "`{}` would be {total} bytes, over the {limit}-byte limit (files.max_write_bytes).",
                a.path
            )));
        }
        parents(&path).map_err(|e| io_err("create folders for", &a.path, &e))?;
        match a.mode {
            WriteMode::Overwrite => write_atomic(&path, a.content.as_bytes()),
            WriteMode::Append => append_raw(&path, &a.content),
        }
        .map_err(|e| io_err("write", &a.path, &e))?;
        let verb = if a.mode == WriteMode::Append { "appended" } else { "wrote" };
        Ok(format!("{verb} {} bytes to {} ({total} bytes now)", a.content.len(), a.path))
    }
}

/// Appends text as given (a file's content need not be lines), durably.
fn append_raw(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut f =
        fs::OpenOptions::new().create(true).append(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_data()
}

fn refuse_symlink(path: &Path, shown: &str) -> Result<(), ToolError> {
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(ToolError::new(format!("`{shown}` is a symlink; the file tools do not follow symlinks.")));
    }
    Ok(())
}

pub struct FileEdit;

#[derive(Deserialize)]
pub struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

impl Tool for FileEdit {
    const NAME: &'static str = "file_edit";
    const DESCRIPTION: &'static str =
        "Replace one exact piece of text in a file. Fails unless old_text occurs exactly once; include enough context.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"]}"#;
    type Args = EditArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: EditArgs) -> ToolResult {
        let path = jail(ctx)?.resolve(&a.path)?;
        if a.old_text.is_empty() {
            return Err(ToolError::new("old_text is empty; give the exact text to replace."));
        }
        let limit = max_write(ctx);
        let mut f = open_nofollow(&path).map_err(|e| io_err("edit", &a.path, &e))?;
        if f.metadata().map(|m| m.len()).unwrap_or(0) > limit as u64 {
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
        write_atomic(&path, new.as_bytes()).map_err(|e| io_err("write", &a.path, &e))?;
        Ok(format!("edited {} ({} -> {} bytes)", a.path, text.len(), new.len()))
    }
}

pub struct FileList;

#[derive(Deserialize)]
pub struct ListArgs {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    recursive: bool,
}

impl Tool for FileList {
    const NAME: &'static str = "file_list";
    const DESCRIPTION: &'static str = "List a folder of the workspace (default: its top). Folders end with /.";
    const SCHEMA: &'static str =
        r#"{"type":"object","properties":{"path":{"type":"string"},"recursive":{"type":"boolean"}}}"#;
    type Args = ListArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: ListArgs) -> ToolResult {
        let j = jail(ctx)?;
        let rel = a.path.as_deref().filter(|p| !p.trim().is_empty()).unwrap_or(".");
        let dir = j.resolve(rel)?;
        if !dir.is_dir() {
            return Err(ToolError::new(format!("`{rel}` is not a folder.")));
        }
        let mut out = Vec::new();
        let mut truncated = false;
        walk(&j, &dir, a.recursive, &mut out, &mut truncated).map_err(|e| io_err("list", rel, &e))?;
        out.sort();
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

fn walk(j: &Jail, dir: &Path, recursive: bool, out: &mut Vec<String>, truncated: &mut bool) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        if out.len() >= MAX_LIST {
            *truncated = true;
            return Ok(());
        }
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let shown = j.shown(&path);
        let top = shown.split('/').next().unwrap_or("");
        // Temp files of atomic writes and what the tools may not touch are not listed.
        if (name.starts_with('.') && name.ends_with(".tmp")) || PROTECTED.iter().any(|(p, _)| *p == top) {
            continue;
        }
        let ft = entry.file_type()?;
        if ft.is_symlink() {
            out.push(format!("{shown} (symlink)"));
        } else if ft.is_dir() {
            out.push(format!("{shown}/"));
            if recursive {
                walk(j, &path, true, out, truncated)?;
            }
        } else {
            out.push(format!("{shown} ({} bytes)", entry.metadata()?.len()));
        }
    }
    Ok(())
}

pub struct FileDelete;

#[derive(Deserialize)]
pub struct PathArgs {
    path: String,
}

impl Tool for FileDelete {
    const NAME: &'static str = "file_delete";
    const DESCRIPTION: &'static str = "Delete a file, or an empty folder.";
    const SCHEMA: &'static str = r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#;
    type Args = PathArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: PathArgs) -> ToolResult {
        let j = jail(ctx)?;
        let path = j.resolve(&a.path)?;
        if path == j.root {
            return Err(ToolError::new("The workspace itself cannot be deleted."));
        }
        let meta = fs::symlink_metadata(&path).map_err(|e| io_err("delete", &a.path, &e))?;
        if meta.is_dir() {
            fs::remove_dir(&path).map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTEMPTY) => {
                    ToolError::new(format!("`{}` is a folder that is not empty; delete its files first.", a.path))
                }
                _ => io_err("delete", &a.path, &e),
            })?;
        } else {
            fs::remove_file(&path).map_err(|e| io_err("delete", &a.path, &e))?;
        }
        Ok(format!("deleted {}", a.path))
    }
}

#[derive(Deserialize)]
pub struct FromToArgs {
    from: String,
    to: String,
    #[serde(default)]
    overwrite: bool,
}

const FROM_TO_SCHEMA: &str = r#"{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"},"overwrite":{"type":"boolean","description":"Replace an existing destination."}},"required":["from","to"]}"#;

fn from_to(ctx: &ToolCtx, a: &FromToArgs, action: &str) -> Result<(PathBuf, PathBuf), ToolError> {
    let j = jail(ctx)?;
    let from = j.resolve(&a.from)?;
    let to = j.resolve(&a.to)?;
    fs::symlink_metadata(&from).map_err(|e| io_err(action, &a.from, &e))?;
    if from == j.root || to == j.root {
        return Err(ToolError::new("The workspace itself cannot be moved or replaced."));
    }
    if !a.overwrite && fs::symlink_metadata(&to).is_ok() {
        return Err(ToolError::new(format!("`{}` already exists; pass overwrite: true to replace it.", a.to)));
    }
    parents(&to).map_err(|e| io_err("create folders for", &a.to, &e))?;
    Ok((from, to))
}

pub struct FileMove;

impl Tool for FileMove {
    const NAME: &'static str = "file_move";
    const DESCRIPTION: &'static str = "Move or rename a file or folder.";
    const SCHEMA: &'static str = FROM_TO_SCHEMA;
    type Args = FromToArgs;
    const BLOCKING: bool = true;

    async fn call<'a>(&'a self, ctx: &'a ToolCtx, a: FromToArgs) -> ToolResult {
        let (from, to) = from_to(ctx, &a, "move")?;
        fs::rename(&from, &to).map_err(|e| io_err("move", &a.from, &e))?;
        Ok(format!("moved {} to {}", a.from, a.to))
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
        let (from, to) = from_to(ctx, &a, "copy")?;
        let limit = max_write(ctx);
        let f = open_nofollow(&from).map_err(|e| io_err("copy", &a.from, &e))?;
        if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            return Err(ToolError::new(format!("`{}` is a folder; copy its files one by one.", a.from)));
        }
        let mut bytes = Vec::new();
        f.take(limit as u64 + 1).read_to_end(&mut bytes).map_err(|e| io_err("copy", &a.from, &e))?;
        if bytes.len() > limit {
            return Err(ToolError::new(format!(
                "`{}` is over the {limit}-byte limit (files.max_write_bytes).",
                a.from
            )));
        }
        refuse_symlink(&to, &a.to)?;
        write_atomic(&to, &bytes).map_err(|e| io_err("write", &a.to, &e))?;
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
        let path = jail(ctx)?.resolve(&a.path)?;
        let meta = fs::symlink_metadata(&path).map_err(|e| io_err("stat", &a.path, &e))?;
        let kind = if meta.is_dir() {
            "folder"
        } else if meta.file_type().is_symlink() {
            "symlink"
        } else {
            "file"
        };
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| jiff::Timestamp::try_from(t).ok())
            .map(|t| t.to_zoned(ctx.tz.clone()).strftime("%Y-%m-%dT%H:%M:%S%:z").to_string());
        Ok(serde_json::json!({"path": a.path, "type": kind, "size": meta.len(), "modified": modified}).to_string())
    }
}

#[cfg(test)]
mod tests;
