//! The worktree in a rig is a satellite: the host's tree copied in at open (`.env` and the
//! secret patterns of `docs/rigs.md` excluded), and the guest repository's commits fetched
//! back on `rig fetch` as a bundle the guest writes, into `refs/rigs/<id>/*` of the host's
//! repository: never pushed, never checked out, never a host branch moved.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::RigError;
use super::backend::Machine;
use super::model::{ExecRequest, FetchReport, FetchedRef};

/// The names never copied into a rig (a trailing `/` is a folder). `*` matches any run of
/// characters within one name.
pub const SECRET_PATTERNS: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    "id_ecdsa*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".aws/",
    ".ssh/",
    ".gnupg/",
    "*.p12",
    "*.pfx",
    "credentials.json",
    "secrets.*",
];

/// The most bytes and files a staged copy may hold.
pub const STAGE_MAX_BYTES: u64 = 1 << 30;
pub const STAGE_MAX_FILES: u64 = 200_000;
/// The largest bundle `rig fetch` copies out.
pub const BUNDLE_MAX: usize = super::model::FILE_MAX;

fn glob(pat: &str, name: &str) -> bool {
    match pat.split_once('*') {
        None => pat == name,
        Some((pre, post)) => {
            name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post)
        }
    }
}

/// Whether an entry of this name (a folder when `is_dir`) is a secret, never copied.
pub fn is_secret(name: &str, is_dir: bool) -> bool {
    SECRET_PATTERNS.iter().any(|p| match p.strip_suffix('/') {
        Some(d) => is_dir && d == name,
        None => glob(p, name),
    })
}

/// What a staging copied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Staged {
    pub files: u64,
    pub bytes: u64,
    /// Relative paths excluded as secrets.
    pub excluded: Vec<String>,
}

/// Copies `src_root` into `dest` (which must not exist): symlinks as symlinks (never
/// followed), special files skipped, secrets excluded, `.git` copied with credentials in its
/// remote URLs stripped. Refused (and `dest` removed) past [`STAGE_MAX_BYTES`] or
/// [`STAGE_MAX_FILES`].
pub fn stage(src_root: &Path, dest: &Path) -> Result<Staged, RigError> {
    stage_bounded(src_root, dest, STAGE_MAX_BYTES, STAGE_MAX_FILES)
}

pub fn stage_bounded(
    src_root: &Path,
    dest: &Path,
    max_bytes: u64,
    max_files: u64,
) -> Result<Staged, RigError> {
    let io = |p: &Path, e: std::io::Error| RigError::Internal(format!("{}: {e}", p.display()));
    std::fs::create_dir(dest).map_err(|e| io(dest, e))?;
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| io(dest, e))?;
    let mut st = Staged::default();
    let r = copy_dir(src_root, dest, Path::new(""), &mut st, max_bytes, max_files);
    if let Err(e) = r {
        let _ = std::fs::remove_dir_all(dest);
        return Err(e);
    }
    let cfg = dest.join(".git").join("config");
    if cfg.is_file() {
        let text = std::fs::read_to_string(&cfg).map_err(|e| io(&cfg, e))?;
        crate::files::write_atomic(&cfg, strip_url_credentials(&text).as_bytes())
            .map_err(RigError::internal)?;
    }
    Ok(st)
}

/// The mode of a staged file: 0600, or 0700 when its source was executable by its owner
/// (the guest runs `./build.sh`); nothing for group or others, whatever the source had.
pub fn staged_file_mode(source_mode: u32) -> u32 {
    if source_mode & 0o100 != 0 {
        0o700
    } else {
        0o600
    }
}

/// Copies a regular file into a new file created with its private mode from the start
/// (O_EXCL, O_NOFOLLOW: never written through something planted there).
fn copy_private(from: &Path, to: &Path, mode: u32) -> Result<(), RigError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |p: &Path, e: std::io::Error| RigError::Internal(format!("{}: {e}", p.display()));
    let mut src = std::fs::File::open(from).map_err(|e| io(from, e))?;
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(to)
        .map_err(|e| io(to, e))?;
    // The umask may only have removed bits; set the mode exactly.
    dst.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| io(to, e))?;
    std::io::copy(&mut src, &mut dst).map_err(|e| io(from, e))?;
    Ok(())
}

fn copy_dir(
    src: &Path,
    dst: &Path,
    rel: &Path,
    st: &mut Staged,
    max_bytes: u64,
    max_files: u64,
) -> Result<(), RigError> {
    let io = |p: &Path, e: std::io::Error| RigError::Internal(format!("{}: {e}", p.display()));
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .map_err(|e| io(src, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| io(src, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let from = entry.path();
        let to = dst.join(&name);
        let r = rel.join(&name);
        let ft = entry.file_type().map_err(|e| io(&from, e))?;
        let name_s = name.to_string_lossy();
        if is_secret(&name_s, ft.is_dir()) {
            st.excluded.push(r.to_string_lossy().into_owned());
            continue;
        }
        if ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device() {
            continue;
        }
        st.files += 1;
        if st.files > max_files {
            return Err(RigError::TooLarge(format!(
                "the workspace has more than {max_files} files, the bound of a rig's copy; \
                 open the rig without --workspace or from a smaller folder"
            )));
        }
        if ft.is_symlink() {
            let target = std::fs::read_link(&from).map_err(|e| io(&from, e))?;
            std::os::unix::fs::symlink(&target, &to).map_err(|e| io(&to, e))?;
        } else if ft.is_dir() {
            // Every staged folder is 0700, whatever the source's mode.
            std::fs::create_dir(&to).map_err(|e| io(&to, e))?;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| io(&to, e))?;
            copy_dir(&from, &to, &r, st, max_bytes, max_files)?;
        } else if ft.is_file() {
            let len = entry.metadata().map_err(|e| io(&from, e))?.len();
            st.bytes += len;
            if st.bytes > max_bytes {
                return Err(RigError::TooLarge(format!(
                    "the workspace holds more than {max_bytes} bytes, the bound of a rig's \
                     copy; open the rig without --workspace or from a smaller folder"
                )));
            }
            let mode = entry
                .metadata()
                .map_err(|e| io(&from, e))?
                .permissions()
                .mode();
            copy_private(&from, &to, staged_file_mode(mode))?;
        }
    }
    Ok(())
}

/// `https://user:token@host/x` → `https://host/x` on every `url =` line.
fn strip_url_credentials(config: &str) -> String {
    let mut out = String::with_capacity(config.len());
    for line in config.split_inclusive('\n') {
        let t = line.trim_start();
        if (t.starts_with("url") || t.starts_with("pushurl") || t.starts_with("pushUrl"))
            && let Some(scheme) = line.find("://")
            && let Some(at_rel) = line[scheme + 3..].find('@')
        {
            let at = scheme + 3 + at_rel;
            let slash = line[scheme + 3..].find('/').map(|s| scheme + 3 + s);
            if slash.is_none_or(|s| at < s) {
                out.push_str(&line[..scheme + 3]);
                out.push_str(&line[at + 1..]);
                continue;
            }
        }
        out.push_str(line);
    }
    out
}

fn git(dir: &Path, args: &[&str]) -> Result<String, RigError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| RigError::Unavailable(format!("git could not run: {e}")))?;
    if !out.status.success() {
        return Err(RigError::Conflict(format!(
            "git {} failed: {}",
            args.first().copied().unwrap_or(""),
            crate::text::one_line_bytes(&out.stderr, 300)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The host half of `rig fetch`: verifies `bundle` against `host_repo` and fetches its
/// branches into `refs/rigs/<rig_id>/heads/*` only (no tags, no FETCH_HEAD, no checkout).
pub fn fetch_bundle(
    host_repo: &Path,
    bundle: &Path,
    rig_id: &str,
) -> Result<FetchReport, RigError> {
    if !crate::files::valid_id(rig_id, super::store::PREFIX) {
        return Err(RigError::BadRequest(format!("{rig_id:?} is not a rig id")));
    }
    let b = bundle.to_string_lossy();
    git(host_repo, &["bundle", "verify", "--quiet", &b])?;
    let spec = format!("+refs/heads/*:refs/rigs/{rig_id}/heads/*");
    git(
        host_repo,
        &[
            "fetch",
            "--no-tags",
            "--no-write-fetch-head",
            "--quiet",
            &b,
            &spec,
        ],
    )?;
    let prefix = format!("refs/rigs/{rig_id}/");
    let listed = git(
        host_repo,
        &["for-each-ref", "--format=%(refname) %(objectname)", &prefix],
    )?;
    let refs = listed
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(n, c)| FetchedRef {
            name: n.to_string(),
            commit: c.to_string(),
        })
        .collect();
    Ok(FetchReport {
        repository: host_repo.display().to_string(),
        refs,
    })
}

/// `rig fetch`: the guest bundles `/work`'s repository, the host copies it out (bounded) into
/// the rig's folder and fetches it with [`fetch_bundle`].
pub fn fetch(
    machine: &dyn Machine,
    host_repo: &Path,
    rig_id: &str,
    rig_dir: &Path,
) -> Result<FetchReport, RigError> {
    const GUEST_BUNDLE: &str = "/tmp/proctor-fetch.bundle";
    let res = machine.exec(&ExecRequest {
        argv: [
            "git",
            "-C",
            "/work",
            "bundle",
            "create",
            GUEST_BUNDLE,
            "--all",
        ]
        .map(String::from)
        .to_vec(),
        stdin_b64: None,
        cwd: Some("/work".into()),
        timeout_secs: Some(300),
    })?;
    if res.exit_code != Some(0) {
        use base64::Engine;
        let err = base64::engine::general_purpose::STANDARD
            .decode(&res.stderr_b64)
            .unwrap_or_default();
        return Err(RigError::Conflict(format!(
            "the guest could not bundle /work: {}",
            crate::text::one_line_bytes(&err, 300)
        )));
    }
    let bytes = machine.get_file(GUEST_BUNDLE, BUNDLE_MAX)?;
    let local: PathBuf = rig_dir.join("fetch.bundle");
    crate::files::write_atomic(&local, &bytes).map_err(RigError::internal)?;
    let r = fetch_bundle(host_repo, &local, rig_id);
    let _ = std::fs::remove_file(&local);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn staging_excludes_every_secret_pattern_and_keeps_symlinks_unfollowed() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        let secrets = [
            ".env",
            ".env.local",
            "server.pem",
            "tls.key",
            "id_rsa",
            "id_rsa.pub",
            "id_ed25519",
            "id_ecdsa_sk",
            ".netrc",
            ".npmrc",
            ".pypirc",
            ".git-credentials",
            "cert.p12",
            "cert.pfx",
            "credentials.json",
            "secrets.yaml",
        ];
        for s in secrets {
            std::fs::write(src.join(s), "SECRET").unwrap();
            std::fs::write(src.join("sub").join(s), "SECRET").unwrap();
        }
        for d in [".aws", ".ssh", ".gnupg"] {
            std::fs::create_dir(src.join(d)).unwrap();
            std::fs::write(src.join(d).join("config"), "SECRET").unwrap();
        }
        std::fs::write(src.join("main.rs"), "fn main() {}").unwrap();
        std::fs::write(src.join("env.md"), "kept").unwrap();
        std::fs::write(src.join("sub").join("keys.txt"), "kept").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("link")).unwrap();
        let out = t.path().join("out");
        let st = stage(&src, &out).unwrap();
        let mut names: Vec<String> = walk(&out);
        names.sort();
        assert_eq!(names, ["env.md", "link", "main.rs", "sub", "sub/keys.txt"]);
        assert_eq!(
            std::fs::read_link(out.join("link")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert!(
            std::fs::symlink_metadata(out.join("link"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(st.excluded.len(), secrets.len() * 2 + 3);
        for p in SECRET_PATTERNS {
            let n = p.trim_end_matches('/').replace('*', "x");
            assert!(is_secret(&n, p.ends_with('/')), "{p}");
        }
    }

    fn walk(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        fn go(base: &Path, d: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(d).unwrap() {
                let e = e.unwrap();
                let p = e.path();
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
                if e.file_type().unwrap().is_dir() {
                    go(base, &p, out);
                }
            }
        }
        go(dir, dir, &mut out);
        out
    }

    #[test]
    fn staging_past_the_bound_is_refused_and_leaves_nothing() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("a"), vec![0u8; 100]).unwrap();
        let out = t.path().join("out");
        let e = stage_bounded(&src, &out, 50, 10).unwrap_err();
        assert!(e.to_string().contains("50 bytes"), "{e}");
        assert!(!out.exists());
    }

    #[test]
    fn a_staged_repo_loses_its_url_credentials_and_fetch_only_writes_refs_rigs() {
        let t = tempfile::tempdir().unwrap();
        let host = t.path().join("host");
        std::fs::create_dir(&host).unwrap();
        sh(&host, &["init", "-q", "-b", "main"]);
        std::fs::write(host.join("f"), "1").unwrap();
        sh(&host, &["add", "f"]);
        sh(&host, &["commit", "-qm", "one"]);
        sh(
            &host,
            &[
                "remote",
                "add",
                "origin",
                "https://user:s3cret@example.com/r.git",
            ],
        );
        let host_main = sh(&host, &["rev-parse", "main"]);
        let copy = t.path().join("copy");
        stage(&host, &copy).unwrap();
        let cfg = std::fs::read_to_string(copy.join(".git/config")).unwrap();
        assert!(!cfg.contains("s3cret"), "{cfg}");
        assert!(cfg.contains("https://example.com/r.git"), "{cfg}");
        // The guest's side, here on the host: a commit on main and a new branch, bundled.
        std::fs::write(copy.join("f"), "2").unwrap();
        sh(&copy, &["commit", "-qam", "two"]);
        sh(&copy, &["branch", "feature"]);
        let rig_main = sh(&copy, &["rev-parse", "main"]);
        let bundle = t.path().join("b.bundle");
        sh(
            &copy,
            &["bundle", "create", &bundle.to_string_lossy(), "--all"],
        );
        let report = fetch_bundle(&host, &bundle, "rig-0007").unwrap();
        let mut names: Vec<_> = report.refs.iter().map(|r| r.name.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "refs/rigs/rig-0007/heads/feature",
                "refs/rigs/rig-0007/heads/main"
            ]
        );
        assert!(report.refs.iter().all(|r| r.commit == rig_main));
        // Nothing else moved: the host's branch, its worktree, no FETCH_HEAD, no tags.
        assert_eq!(sh(&host, &["rev-parse", "main"]), host_main);
        assert_eq!(std::fs::read_to_string(host.join("f")).unwrap(), "1");
        assert!(!host.join(".git/FETCH_HEAD").exists());
        assert_eq!(
            sh(&host, &["for-each-ref", "refs/heads"]).lines().count(),
            1
        );
        // A bundle that is not one is refused.
        std::fs::write(&bundle, "not a bundle").unwrap();
        assert!(fetch_bundle(&host, &bundle, "rig-0007").is_err());
    }
}
