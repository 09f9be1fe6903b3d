//! `proctor digest`: the exact inventory-digest/1 document and digest, checked against
//! independent computations (the `sha256sum` binary, and node when present), the refusals,
//! the manifest rule and the exit codes, through the real binary.

use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn proctor() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_proctor"));
    c.env_remove("PROCTOR_HOME");
    c
}

fn digest(args: &[&std::ffi::OsStr]) -> Output {
    proctor().arg("digest").args(args).output().unwrap()
}

fn root_args(root: &Path) -> Vec<&std::ffi::OsStr> {
    vec!["--root".as_ref(), root.as_os_str()]
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, bytes).unwrap();
}

/// SHA-256 by the coreutils binary, never by our code.
fn sha256sum_file(p: &Path) -> String {
    let o = Command::new("sha256sum").arg(p).output().unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()[..64].to_string()
}

fn sha256sum_bytes(b: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b).unwrap();
    let o = child.wait_with_output().unwrap();
    String::from_utf8(o.stdout).unwrap()[..64].to_string()
}

/// A small tree whose order exercises every rule: UTF-16 ordinal (an astral character
/// before U+FF01), whole-path comparison ('-' < '/'), case (uppercase first, never
/// folded), CRLF bytes, an empty file, a file larger than one read chunk, skipped names.
fn tricky_tree(root: &Path) -> Vec<(&'static str, u64)> {
    let big: Vec<u8> = (0..(700 * 1024 + 3)).map(|i| (i % 253) as u8).collect();
    let files: Vec<(&'static str, Vec<u8>)> = vec![
        ("a/b", b"component a/b\n".to_vec()),
        ("a-b/x", b"whole path a-b/x\n".to_vec()),
        ("B.txt", b"upper\r\n".to_vec()),
        ("a.txt", b"lower\n".to_vec()),
        ("empty", Vec::new()),
        ("big.bin", big),
        ("z/\u{1F600}.md", b"astral\n".to_vec()),
        ("z/\u{FF01}.md", b"fullwidth\n".to_vec()),
        (
            "z/caf\u{E9}|pipe",
            "accent and a pipe\n".as_bytes().to_vec(),
        ),
    ];
    for (p, b) in &files {
        write(root, p, b);
    }
    write(root, ".git/config", b"skipped");
    write(root, "z/node_modules/m/index.js", b"skipped");
    write(root, "z/.git", b"gitdir: skipped file\n");
    // The expected recipe order, written by hand (UTF-16 code units):
    // 'B'(42) < 'a'(61); "a-b/x" < "a.txt" < "a/b" ('-' 2D < '.' 2E < '/' 2F);
    // "big.bin" < "empty" < "z/..."; in z/: 'c'(63) < U+1F600 (D83D DE00) < U+FF01.
    let order = [
        "B.txt",
        "a-b/x",
        "a.txt",
        "a/b",
        "big.bin",
        "empty",
        "z/caf\u{E9}|pipe",
        "z/\u{1F600}.md",
        "z/\u{FF01}.md",
    ];
    order
        .iter()
        .map(|p| {
            let len = files.iter().find(|(q, _)| q == p).unwrap().1.len() as u64;
            (*p, len)
        })
        .collect()
}

#[test]
fn document_and_digest_match_an_independent_computation() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("tree");
    fs::create_dir(&root).unwrap();
    let order = tricky_tree(&root);
    let doc = order
        .iter()
        .map(|(p, len)| format!("{p}|{len}|{}", sha256sum_file(&root.join(p))))
        .collect::<Vec<_>>()
        .join("\n");
    let want = sha256sum_bytes(doc.as_bytes());
    let total: u64 = order.iter().map(|(_, n)| n).sum();

    let manifest = t.path().join("inventory.txt");
    let mut args = root_args(&root);
    args.extend(["--manifest".as_ref(), manifest.as_os_str()]);
    let out = stdout(&digest(&args));
    assert_eq!(
        out,
        format!(
            "format=inventory-digest/1\nroot={}\ncount={}\nbytes={total}\n\
             digest=ordinal-path-bytes-sha256/1 {want}\nmanifest={}\n",
            root.display(),
            order.len(),
            fs::canonicalize(t.path())
                .unwrap()
                .join("inventory.txt")
                .display()
        )
    );
    // The manifest holds exactly the hashed bytes, privately.
    assert_eq!(fs::read(&manifest).unwrap(), doc.as_bytes());
    assert_eq!(sha256sum_file(&manifest), want);
    assert_eq!(fs::metadata(&manifest).unwrap().mode() & 0o777, 0o600);
}

/// An independent implementation of the recipe in JavaScript, whose string `<` is UTF-16
/// ordinal, as in the seed's `scripts/inventory-digest.mjs`.
const NODE_RECIPE: &str = r#"
const fs = require('fs'), path = require('path'), crypto = require('crypto');
const root = process.argv[1];
const lines = [];
(function walk(dir, rel) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === '.git' || e.name === 'node_modules') continue;
    const p = path.join(dir, e.name), r = rel ? rel + '/' + e.name : e.name;
    if (e.isDirectory()) walk(p, r);
    else if (e.isFile()) {
      const b = fs.readFileSync(p);
      lines.push([r, r + '|' + b.length + '|' + crypto.createHash('sha256').update(b).digest('hex')]);
    } else throw new Error('refused: ' + r);
  }
})(root, '');
lines.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
const doc = lines.map(l => l[1]).join('\n');
console.log(crypto.createHash('sha256').update(Buffer.from(doc, 'utf8')).digest('hex'));
"#;

#[test]
fn digest_matches_a_node_implementation_of_the_recipe() {
    // Needs node (JS string `<` is UTF-16 ordinal). Skipped, saying so, only when absent.
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("skipped: node is not installed; this test needs node");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    tricky_tree(t.path());
    for i in 0..50 {
        write(
            t.path(),
            &format!("gen/{}/{i}-\u{10400}\u{E000}", i % 7),
            &vec![b'x'; i * 13],
        );
    }
    let o = Command::new("node")
        .args(["-e", NODE_RECIPE])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let node = String::from_utf8(o.stdout).unwrap().trim().to_string();
    let out = stdout(&digest(&root_args(t.path())));
    assert!(
        out.contains(&format!("\ndigest=ordinal-path-bytes-sha256/1 {node}\n")),
        "node says {node}, proctor says\n{out}"
    );
}

#[test]
fn crlf_and_lf_copies_are_different_trees() {
    let lf = tempfile::tempdir().unwrap();
    let crlf = tempfile::tempdir().unwrap();
    write(lf.path(), "src/main.rs", b"fn main() {}\n");
    write(crlf.path(), "src/main.rs", b"fn main() {}\r\n");
    let a = stdout(&digest(&root_args(lf.path())));
    let b = stdout(&digest(&root_args(crlf.path())));
    let line = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("digest="))
            .unwrap()
            .to_string()
    };
    assert_ne!(line(&a), line(&b));
}

#[test]
fn json_carries_the_recipe_with_the_digest() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "f", b"abc");
    let mut args = root_args(t.path());
    args.push("--json".as_ref());
    let v: serde_json::Value = serde_json::from_str(&stdout(&digest(&args))).unwrap();
    let doc = format!("f|3|{}", sha256sum_bytes(b"abc"));
    assert_eq!(v["format"], "inventory-digest/1");
    assert_eq!(v["root"], t.path().to_str().unwrap());
    assert_eq!(v["count"], 1);
    assert_eq!(v["bytes"], 3);
    assert_eq!(v["recipe"], "ordinal-path-bytes-sha256/1");
    assert_eq!(
        v["digest"],
        format!(
            "ordinal-path-bytes-sha256/1 {}",
            sha256sum_bytes(doc.as_bytes())
        )
    );
    assert!(v.get("manifest").is_none());
    assert_eq!(v.as_object().unwrap().len(), 6);
}

#[test]
fn root_is_printed_as_given_made_absolute_and_a_symlinked_root_is_followed() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "real/f", b"1");
    symlink("real", t.path().join("alias")).unwrap();
    let o = proctor()
        .args(["digest", "--root", "alias"])
        .current_dir(t.path())
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(
        out.contains(&format!("\nroot={}\n", t.path().join("alias").display())),
        "{out}"
    );
    let real = stdout(&digest(&root_args(&t.path().join("real"))));
    assert_eq!(out.lines().nth(4), real.lines().nth(4));
    // Not a terminal: no progress, nothing at all on stderr.
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn a_symlink_inside_the_tree_stops_the_command_with_its_name() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "docs/target.md", b"inside the tree");
    symlink("target.md", t.path().join("docs/link.md")).unwrap();
    // A hostile name: the terminal must see it escaped, never as escape sequences.
    symlink("/", t.path().join("evil\x1b[2J\u{202E}name")).unwrap();
    let o = digest(&root_args(t.path()));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(err.contains("docs/link.md: symbolic link"), "{err}");
    assert!(err.contains("evil\\x1B[2J"), "{err}");
    assert!(err.contains("\\u{202E}name"), "{err}");
    assert!(
        !err.contains('\x1b') && !err.contains('\u{202E}'),
        "{err:?}"
    );
    assert!(err.contains("Remedy:"), "{err}");
}

#[test]
fn a_name_that_is_not_utf8_is_refused_escaped() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "ok", b"1");
    let name = std::ffi::OsStr::from_bytes(b"sub/r\xe9sum\xe9.txt");
    fs::create_dir(t.path().join("sub")).unwrap();
    fs::write(t.path().join(name), b"latin-1").unwrap();
    let o = digest(&root_args(t.path()));
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert!(
        stderr(&o).contains("sub/r\\xE9sum\\xE9.txt: name that is not UTF-8"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn skipped_names_are_not_listed_nor_descended() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "keep.txt", b"k");
    write(
        t.path(),
        "wt/.git",
        b"gitdir: /elsewhere/.git/worktrees/wt\n",
    );
    write(t.path(), "web/node_modules/x/package.json", b"{}");
    // A link inside a skipped folder is never seen, so it does not stop the command.
    fs::create_dir_all(t.path().join(".git/refs")).unwrap();
    symlink("/", t.path().join(".git/refs/link")).unwrap();
    let manifest = tempfile::tempdir().unwrap();
    let m = manifest.path().join("m");
    let mut args = root_args(t.path());
    args.extend(["--manifest".as_ref(), m.as_os_str()]);
    let out = stdout(&digest(&args));
    assert!(out.contains("\ncount=1\nbytes=1\n"), "{out}");
    assert_eq!(
        fs::read_to_string(&m).unwrap(),
        format!("keep.txt|1|{}", sha256sum_bytes(b"k"))
    );
}

#[test]
fn manifest_inside_the_root_is_refused_and_nothing_is_written() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    write(&root, "sub/f", b"1");
    symlink(root.join("sub"), t.path().join("link-to-sub")).unwrap();
    let cases: Vec<PathBuf> = vec![
        root.join("m.txt"),
        root.join("sub/m.txt"),
        t.path().join("root/sub/../m.txt"),
        t.path().join("link-to-sub/m.txt"),
        root.join(".git-is-not-here-but/../sub/m.txt"),
    ];
    fs::create_dir(root.join(".git-is-not-here-but")).unwrap();
    for m in cases {
        let mut args = root_args(&root);
        args.extend(["--manifest".as_ref(), m.as_os_str()]);
        let o = digest(&args);
        assert_eq!(o.status.code(), Some(2), "{}: {}", m.display(), stderr(&o));
        assert!(
            stderr(&o).contains("would land inside --root"),
            "{}",
            stderr(&o)
        );
        assert!(o.stdout.is_empty());
    }
    assert!(!root.join("m.txt").exists() && !root.join("sub/m.txt").exists());

    // A missing folder is named, with exit 2.
    let m = t.path().join("missing/m.txt");
    let mut args = root_args(&root);
    args.extend(["--manifest".as_ref(), m.as_os_str()]);
    let o = digest(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Remedy: create that folder"),
        "{}",
        stderr(&o)
    );
}

/// Bind mounts make an alias with the same device and inode. Needs mount privileges;
/// skipped, saying so, when `mount --bind` fails.
struct BindMount(PathBuf);

impl BindMount {
    fn new(from: &Path, to: &Path) -> Option<BindMount> {
        let ok = Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(to)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| BindMount(to.to_path_buf()))
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn manifest_through_a_bind_mount_alias_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    write(&root, "sub/deeper/f", b"1");
    let alias_root = t.path().join("alias-root");
    let alias_sub = t.path().join("alias-sub");
    fs::create_dir(&alias_root).unwrap();
    fs::create_dir(&alias_sub).unwrap();
    let Some(_a) = BindMount::new(&root, &alias_root) else {
        eprintln!("skipped: `mount --bind` is not permitted here");
        return;
    };
    let Some(_b) = BindMount::new(&root.join("sub"), &alias_sub) else {
        eprintln!("skipped: `mount --bind` is not permitted here");
        return;
    };
    for m in [
        alias_root.join("m.txt"),
        alias_sub.join("m.txt"),
        alias_sub.join("deeper/m.txt"),
    ] {
        let mut args = root_args(&root);
        args.extend(["--manifest".as_ref(), m.as_os_str()]);
        let o = digest(&args);
        assert_eq!(o.status.code(), Some(2), "{}: {}", m.display(), stderr(&o));
        assert!(stderr(&o).contains("would land inside --root"));
        assert!(!m.exists());
    }
    // And the other way round: the root given through its alias, the manifest by the
    // real path.
    let m = root.join("m.txt");
    let mut args = root_args(&alias_root);
    args.extend(["--manifest".as_ref(), m.as_os_str()]);
    assert_eq!(digest(&args).status.code(), Some(2));
}

#[test]
fn count_and_bytes_sum_every_file_and_hard_links_count_twice() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "a", b"12345");
    write(t.path(), "d/b", b"678");
    fs::hard_link(t.path().join("a"), t.path().join("d/a-again")).unwrap();
    let out = stdout(&digest(&root_args(t.path())));
    assert!(out.contains("\ncount=3\nbytes=13\n"), "{out}");
}

#[test]
fn a_root_that_is_missing_or_a_file_is_bad_usage() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), "f", b"1");
    let o = digest(&root_args(&t.path().join("nope")));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    let o = digest(&root_args(&t.path().join("f")));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not a folder"), "{}", stderr(&o));
}

#[test]
fn a_manifest_hard_linked_to_a_file_of_the_tree_is_replaced_not_written_through() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    write(&root, "f", b"tree bytes");
    let out = t.path().join("out");
    fs::create_dir(&out).unwrap();
    let m = out.join("m.txt");
    fs::hard_link(root.join("f"), &m).unwrap();
    let mut args = root_args(&root);
    args.extend(["--manifest".as_ref(), m.as_os_str()]);
    let first = stdout(&digest(&args));
    assert_eq!(fs::read(root.join("f")).unwrap(), b"tree bytes");
    assert_eq!(
        fs::read_to_string(&m).unwrap(),
        format!("f|10|{}", sha256sum_bytes(b"tree bytes"))
    );
    // The tree did not change: a second run names the same bytes, and overwrites the
    // manifest in place.
    let second = stdout(&digest(&args));
    assert_eq!(first, second);
}
