//! The base image (`proctor rig image build`): a Debian bookworm minbase root built by
//! `mmdebstrap` with fixed times, made into an ext4 file by `mke2fs -d` with a fixed UUID and
//! hash seed, so the same package set gives the same bytes; its digest with its recipe and
//! package manifest, cached in `data/rigs/images/<hex>/`. The guest kernel and initrd come
//! from Debian's `linux-image-cloud-amd64` package inside that root. The image's folder also
//! keeps the root's files (`root/`), which a namespace rig binds read-only.
//!
//! The recipe is [`RECIPE`], the package list [`PACKAGES`] and the guest init [`GUEST_INIT`]
//! (written to `/sbin/proctor-init`; its SHA-256 is in the manifest). A build works in
//! `data/rigs/images/.build-<pid>/` (0700) and renames it into place only once everything
//! is written: a failed build leaves no image and an unchanged `current`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::RigError;
use crate::home::Home;

/// The recipe's id, recorded with every image and rig.
pub const RECIPE: &str = "debian-bookworm-minbase/1";

/// The suite and mirror `mmdebstrap` builds from.
pub const SUITE: &str = "bookworm";
pub const MIRROR: &str = "http://deb.debian.org/debian";

/// The packages on top of minbase: `ip` (the guest init's links and address), `git` (the
/// workspace's commits), `procps` (`ps`, `free` for a person at the console), the cloud
/// kernel (virtio drivers; its initrd brings up the root disk).
pub const PACKAGES: &str = "iproute2,git,procps,linux-image-cloud-amd64";

/// Every time in the image: `SOURCE_DATE_EPOCH` for mmdebstrap, `E2FSPROGS_FAKE_TIME` for
/// mke2fs, the mtime of the files the recipe writes.
pub const EPOCH: i64 = 1_700_000_000;

/// The ext4 file system's UUID and hash seed (fixed: the same root gives the same bytes).
pub const FS_UUID: &str = "7f1c2b1e-0c4a-4e58-9d7a-70726f63746f";

/// The ext4 base's size (the root is ~370 MB; a rig writes to its own overlay).
pub const BASE_SIZE: &str = "1G";

/// The guest's pid 1 (`/sbin/proctor-init`, POSIX sh). Reads `proctor.id=`, `proctor.net=1`
/// and `proctor.hosts=NAME@ADDR,…` from the kernel's command line; mounts the tools disk
/// (label `proctor-tools`, read-only) at `/proctor` and the workspace disk (label
/// `proctor-work`) at `/work` (by label: virtio-mmio's probe order is not the command line's);
/// starts the guest agent on the virtio-serial port named `proctor.agent`; prints
/// `PROCTOR-READY <id>` on the serial line; then keeps a login shell on it.
pub const GUEST_INIT: &str = r#"#!/bin/sh
# proctor-init: pid 1 of a proctor rig (part of the image recipe; see src/rigs/image.rs).
PATH=/usr/sbin:/usr/bin:/sbin:/bin
HOME=/root
TERM=linux
LANG=C.UTF-8
export PATH HOME TERM LANG
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sys /sys 2>/dev/null
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts 2>/dev/null
mount -t tmpfs -o mode=1777,nosuid,nodev tmp /tmp
mount -t tmpfs -o mode=0755,nosuid,nodev run /run
mount -t tmpfs -o mode=1777,nosuid,nodev shm /dev/shm
dmesg -n 1 2>/dev/null
id=rig
net=0
hosts=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    proctor.id=*) id="${arg#proctor.id=}" ;;
    proctor.net=*) net="${arg#proctor.net=}" ;;
    proctor.hosts=*) hosts="${arg#proctor.hosts=}" ;;
  esac
done
echo "$id" > /proc/sys/kernel/hostname
ip link set lo up
modprobe virtio_console 2>/dev/null
if [ "$net" = 1 ]; then
  modprobe virtio_net 2>/dev/null
  n=0
  while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n+1)); done
  ip addr add 10.0.2.15/24 dev eth0
  ip link set eth0 up
fi
{
  echo "127.0.0.1 localhost"
  echo "127.0.1.1 $id"
  old_ifs=$IFS
  IFS=,
  for h in $hosts; do
    case "$h" in
      *@*) echo "${h#*@} ${h%@*}" ;;
    esac
  done
  IFS=$old_ifs
} > /etc/hosts
mkdir -p /proctor /work
tools=$(blkid -L proctor-tools 2>/dev/null)
[ -n "$tools" ] && mount -o ro "$tools" /proctor
work=$(blkid -L proctor-work 2>/dev/null)
[ -n "$work" ] && mount "$work" /work
dev=
n=0
while [ -z "$dev" ] && [ $n -lt 100 ]; do
  for p in /sys/class/virtio-ports/*; do
    [ -r "$p/name" ] || continue
    if [ "$(cat "$p/name")" = proctor.agent ] && [ -e "/dev/${p##*/}" ]; then
      dev="/dev/${p##*/}"
    fi
  done
  [ -n "$dev" ] || sleep 0.05
  n=$((n+1))
done
if [ -x /proctor/bin/proctor ] && [ -n "$dev" ]; then
  /proctor/bin/proctor rig guest-agent --device "$dev" </dev/null >/run/proctor-agent.log 2>&1 &
fi
cd /root 2>/dev/null
echo "PROCTOR-READY $id"
while :; do
  setsid -c /bin/bash -l </dev/ttyS0 >/dev/ttyS0 2>&1
  sleep 0.2
done
"#;

/// A built image on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `data/rigs/images/<hex>/`.
    pub dir: PathBuf,
    /// The ext4 base (`base.img`): opened read-only, never written.
    pub base: PathBuf,
    /// The root's files (`root/`), for a namespace rig.
    pub rootfs: PathBuf,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// `sha256:<hex>` of `base.img`.
    pub digest: String,
    pub recipe: String,
}

impl Image {
    /// The image in `dir` (its manifest read for the digest and recipe).
    pub fn open(dir: &Path) -> Result<Image, RigError> {
        let m = manifest(dir)?;
        let img = Image {
            dir: dir.to_path_buf(),
            base: dir.join("base.img"),
            rootfs: dir.join("root"),
            kernel: dir.join("vmlinuz"),
            initrd: dir.join("initrd"),
            digest: m.digest,
            recipe: m.recipe,
        };
        for p in [&img.base, &img.kernel, &img.initrd] {
            if !p.is_file() {
                return Err(RigError::Unavailable(format!(
                    "the rig image in {} is incomplete: {} is missing. Remedy: run `proctor rig image build`",
                    dir.display(),
                    p.display()
                )));
            }
        }
        Ok(img)
    }

    /// The digest's hex (the folder's name).
    pub fn hex(&self) -> &str {
        self.digest.strip_prefix("sha256:").unwrap_or(&self.digest)
    }
}

/// `data/rigs/images/<hex>/manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Manifest {
    pub digest: String,
    pub recipe: String,
    pub built_at: String,
    /// `mmdebstrap`'s suite and mirror.
    pub suite: String,
    pub mirror: String,
    /// `name=version` of every package in the root, sorted.
    pub packages: Vec<String>,
    /// The kernel's release (`6.1.0-…-cloud-amd64`).
    pub kernel_release: String,
    pub bytes: u64,
    /// `sha256:<hex>` of the guest init written into the root (`/sbin/proctor-init`).
    #[serde(default)]
    pub init_sha256: String,
}

/// `data/rigs/images`.
pub fn images_dir(home: &Home) -> PathBuf {
    home.data.join("rigs").join("images")
}

/// `sha256:<hex>` of the recipe's inputs that proctor itself fixes (the recipe id, suite,
/// packages and guest init): a cache of built images (the tests' fixture) is keyed by it.
pub fn recipe_key() -> String {
    let mut h = Sha256::new();
    for part in [RECIPE, SUITE, MIRROR, PACKAGES, GUEST_INIT] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    hex::encode(h.finalize())
}

/// The image `rig image build` last made, if any.
pub fn current(home: &Home) -> Result<Option<Image>, RigError> {
    let dir = images_dir(home);
    let hex = match std::fs::read_to_string(dir.join("current")) {
        Ok(s) => s.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(RigError::Internal(format!(
                "read {}: {e}",
                dir.join("current").display()
            )));
        }
    };
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RigError::Unavailable(format!(
            "{} does not name an image (expected 64 hex digits). Remedy: run `proctor rig image build`",
            dir.join("current").display()
        )));
    }
    Image::open(&dir.join(&hex)).map(Some)
}

/// Every built image (its folder and manifest), newest first.
pub fn list(home: &Home) -> Result<Vec<(PathBuf, Manifest)>, RigError> {
    let dir = images_dir(home);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(RigError::Internal(format!("read {}: {e}", dir.display()))),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.len() == 64
            && name.bytes().all(|b| b.is_ascii_hexdigit())
            && let Ok(m) = manifest(&e.path())
        {
            out.push((e.path(), m));
        }
    }
    out.sort_by(|a, b| b.1.built_at.cmp(&a.1.built_at));
    Ok(out)
}

/// Reads an image folder's manifest.
pub fn manifest(dir: &Path) -> Result<Manifest, RigError> {
    let path = dir.join("manifest.json");
    let bytes = std::fs::read(&path).map_err(|e| {
        RigError::Unavailable(format!(
            "no rig image manifest at {} ({e}). Remedy: run `proctor rig image build`",
            path.display()
        ))
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        RigError::Internal(format!(
            "{} is not an image manifest: {e}. Remedy: remove the folder and run `proctor rig image build`",
            path.display()
        ))
    })
}

/// A tool a build or a launch needs: its path, or an error naming the Debian package.
pub fn need_tool(name: &str, package: &str) -> Result<PathBuf, RigError> {
    let path = (
        std::ffi::OsString::from("PATH"),
        std::ffi::OsString::from(TOOL_PATH),
    );
    crate::runs::which(std::ffi::OsStr::new(name), [(&path.0, &path.1)]).ok_or_else(|| {
        RigError::Unavailable(format!(
            "{name} is not installed (looked in {TOOL_PATH}). Remedy: install the Debian package \
             {package} (`apt-get install {package}`)"
        ))
    })
}

/// Where the engines' tools are looked for.
pub const TOOL_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs `cmd`, its output to `log` (0600); an error carries the log's last lines, sanitised.
fn run_logged(what: &str, cmd: &mut Command, log: &Path) -> Result<(), RigError> {
    let file = crate::files::open_private_append(log).map_err(RigError::internal)?;
    let err_file = file.try_clone().map_err(RigError::internal)?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err_file))
        .status()
        .map_err(|e| RigError::Internal(format!("{what}: could not start: {e}")))?;
    if status.success() {
        return Ok(());
    }
    Err(RigError::Internal(format!(
        "{what} failed ({status}); the last lines of {}:\n{}",
        log.display(),
        tail_of(log, 12)
    )))
}

/// The last `n` lines of a file, sanitised for a terminal.
pub(crate) fn tail_of(path: &Path, n: usize) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(16 * 1024);
    let text = crate::text::multi_line_capped_bytes(&bytes[start..], 200);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `sha256:<hex>` of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String, RigError> {
    let mut f = std::fs::File::open(path)
        .map_err(|e| RigError::Internal(format!("open {}: {e}", path.display())))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| RigError::Internal(format!("read {}: {e}", path.display())))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("sha256:{}", hex::encode(h.finalize())))
}

/// Sets a path's access and modification times to [`EPOCH`] (not following a symlink).
fn set_epoch(path: &Path) -> Result<(), RigError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(RigError::internal)?;
    let t = libc::timespec {
        tv_sec: EPOCH as libc::time_t,
        tv_nsec: 0,
    };
    let times = [t, t];
    // SAFETY: a valid C string and two timespecs.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(RigError::Internal(format!(
            "set the time of {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// The one file in `dir` whose name starts with `prefix` (the kernel, the initrd).
fn one_file(dir: &Path, prefix: &str) -> Result<PathBuf, RigError> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| RigError::Internal(format!("read {}: {e}", dir.display())))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(RigError::Internal(format!(
            "the built root has no {prefix}* in {}: did linux-image-cloud-amd64 install?",
            dir.display()
        ))),
        _ => Err(RigError::Internal(format!(
            "the built root has several {prefix}* in {}: {found:?}",
            dir.display()
        ))),
    }
}

/// Builds the image (minutes; `progress` gets one line per step) and makes it current.
pub fn build(home: &Home, progress: &mut dyn FnMut(&str)) -> Result<(Image, Manifest), RigError> {
    let mmdebstrap = need_tool("mmdebstrap", "mmdebstrap")?;
    let mke2fs = need_tool("mke2fs", "e2fsprogs")?;
    let dpkg_query = need_tool("dpkg-query", "dpkg")?;
    home.ensure().map_err(RigError::internal)?;
    let images = images_dir(home);
    crate::files::ensure_private_dir(&home.data.join("rigs")).map_err(RigError::internal)?;
    crate::files::ensure_private_dir(&images).map_err(RigError::internal)?;
    let work = images.join(format!(".build-{}", std::process::id()));
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .map_err(|e| RigError::Internal(format!("remove the stale {}: {e}", work.display())))?;
    }
    crate::files::ensure_private_dir(&work).map_err(RigError::internal)?;
    let result = build_in(home, &work, &mmdebstrap, &mke2fs, &dpkg_query, progress);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&work);
    }
    result
}

fn build_in(
    home: &Home,
    work: &Path,
    mmdebstrap: &Path,
    mke2fs: &Path,
    dpkg_query: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(Image, Manifest), RigError> {
    let images = images_dir(home);
    let log = work.join("build.log");
    let root = work.join("root");
    progress(&format!(
        "1/5 mmdebstrap --variant=minbase {SUITE} ({PACKAGES}) from {MIRROR}: about a minute"
    ));
    run_logged(
        "mmdebstrap",
        Command::new(mmdebstrap)
            .env("SOURCE_DATE_EPOCH", EPOCH.to_string())
            .env("PATH", TOOL_PATH)
            .arg("--variant=minbase")
            .arg(format!("--include={PACKAGES}"))
            .arg("--dpkgopt=path-exclude=/usr/share/doc/*")
            .arg("--dpkgopt=path-exclude=/usr/share/man/*")
            .arg("--dpkgopt=path-exclude=/usr/share/locale/*")
            .arg(SUITE)
            .arg(&root)
            .arg(MIRROR),
        &log,
    )?;

    progress("2/5 the guest init (/sbin/proctor-init), the kernel and the initrd");
    let init = root.join("sbin/proctor-init");
    std::fs::write(&init, GUEST_INIT)
        .map_err(|e| RigError::Internal(format!("write {}: {e}", init.display())))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755))
            .map_err(RigError::internal)?;
    }
    // Folders the guest mounts on, and an empty machine-id (never one shared by every rig).
    for d in ["proctor", "work"] {
        let p = root.join(d);
        std::fs::create_dir_all(&p).map_err(RigError::internal)?;
        set_epoch(&p)?;
    }
    set_epoch(&init)?;
    set_epoch(&root.join("sbin"))?;
    set_epoch(&root)?;
    let init_sha256 = format!(
        "sha256:{}",
        hex::encode(Sha256::digest(GUEST_INIT.as_bytes()))
    );
    let boot = root.join("boot");
    let vmlinuz = one_file(&boot, "vmlinuz-")?;
    let initrd = one_file(&boot, "initrd.img-")?;
    let kernel_release = vmlinuz
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .unwrap_or_default()
        .to_string();
    copy_private(&vmlinuz, &work.join("vmlinuz"))?;
    copy_private(&initrd, &work.join("initrd"))?;

    progress("3/5 the package manifest (dpkg-query)");
    let out = Command::new(dpkg_query)
        .arg(format!(
            "--admindir={}",
            root.join("var/lib/dpkg").display()
        ))
        .args(["-W", "-f", "${Package}=${Version}\\n"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| RigError::Internal(format!("dpkg-query: {e}")))?;
    if !out.status.success() {
        return Err(RigError::Internal(format!(
            "dpkg-query failed: {}",
            crate::text::one_line_bytes(&out.stderr, 300)
        )));
    }
    let mut packages: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    packages.sort();

    progress(&format!(
        "4/5 mke2fs -d: the ext4 base ({BASE_SIZE}, fixed UUID, hash seed and times)"
    ));
    let base = work.join("base.img");
    run_logged(
        "mke2fs",
        Command::new(mke2fs)
            .env("E2FSPROGS_FAKE_TIME", EPOCH.to_string())
            .env("PATH", TOOL_PATH)
            .args(["-q", "-F", "-t", "ext4", "-d"])
            .arg(&root)
            .args(["-U", FS_UUID, "-E"])
            .arg(format!("hash_seed={FS_UUID},root_owner=0:0"))
            .args(["-L", "proctor-base"])
            .arg(&base)
            .arg(BASE_SIZE),
        &log,
    )?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o600))
            .map_err(RigError::internal)?;
    }

    progress("5/5 the digest (SHA-256 of base.img) and the manifest");
    let digest = sha256_file(&base)?;
    let bytes = std::fs::metadata(&base).map_err(RigError::internal)?.len();
    let manifest = Manifest {
        digest: digest.clone(),
        recipe: RECIPE.into(),
        built_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        suite: SUITE.into(),
        mirror: MIRROR.into(),
        packages,
        kernel_release,
        bytes,
        init_sha256,
    };
    let json = serde_json::to_vec_pretty(&manifest).map_err(RigError::internal)?;
    crate::files::write_atomic(&work.join("manifest.json"), &json).map_err(RigError::internal)?;

    let hex = digest.trim_start_matches("sha256:").to_string();
    let dest = images.join(&hex);
    if dest.join("manifest.json").is_file() {
        // The same bytes were built before: keep that folder (a rig may be using it).
        std::fs::remove_dir_all(work).map_err(RigError::internal)?;
    } else {
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(RigError::internal)?;
        }
        std::fs::rename(work, &dest).map_err(|e| {
            RigError::Internal(format!(
                "rename {} to {}: {e}",
                work.display(),
                dest.display()
            ))
        })?;
    }
    set_current(home, &hex)?;
    let image = Image::open(&dest)?;
    let manifest = self::manifest(&dest)?;
    Ok((image, manifest))
}

/// Makes the image `hex` current (`data/rigs/images/current`, written atomically).
pub fn set_current(home: &Home, hex: &str) -> Result<(), RigError> {
    let images = images_dir(home);
    if !images.join(hex).join("manifest.json").is_file() {
        return Err(RigError::NotFound(format!(
            "no image {hex} in {}",
            images.display()
        )));
    }
    crate::files::write_atomic(&images.join("current"), format!("{hex}\n").as_bytes())
        .map_err(RigError::internal)
}

fn copy_private(from: &Path, to: &Path) -> Result<(), RigError> {
    let mut src = std::fs::File::open(from)
        .map_err(|e| RigError::Internal(format!("open {}: {e}", from.display())))?;
    let mut dst = crate::files::create_private_new(to).map_err(RigError::internal)?;
    std::io::copy(&mut src, &mut dst)
        .map_err(|e| RigError::Internal(format!("copy {}: {e}", from.display())))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_is_posix_sh_that_dash_parses() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("init");
        std::fs::write(&p, GUEST_INIT).unwrap();
        let out = Command::new("sh").arg("-n").arg(&p).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn no_current_image_is_none_and_a_bad_pointer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(dir.path())).unwrap();
        assert_eq!(current(&home).unwrap(), None);
        std::fs::create_dir_all(images_dir(&home)).unwrap();
        std::fs::write(images_dir(&home).join("current"), "nothex\n").unwrap();
        let e = current(&home).unwrap_err().to_string();
        assert!(e.contains("rig image build"), "{e}");
    }
}
