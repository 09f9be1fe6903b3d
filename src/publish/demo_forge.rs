//! The demo forge: a loopback fake of the one part of GitHub's REST API that proctor's forge
//! adapter ([`crate::publish::forge`]) speaks, served by the demo's server so that `proctor
//! demo` completes a real publication without leaving the machine. It is labelled demo
//! wherever it shows: its URLs are under `/demo-forge/`, its repository is `demo/lexer`, its
//! pull request pages say "proctor demo forge (not GitHub)".
//!
//! It runs inside the demo's server process (a task of the server's runtime, its state owned
//! by that task, no statics), only in a home that `proctor demo` prepared (its token file
//! exists), and it ends with the server. It listens on 127.0.0.1 only, on a port the kernel
//! picks, written to `state/demo-forge/address` (0600) for `proctor demo` to put in the forge
//! configuration.
//!
//! Routes (GitHub's shape):
//! - `POST /demo-forge/api/v3/repos/demo/lexer/pulls` `{title, head, base, body}` with
//!   `Authorization: Bearer <the demo token>`: 201 and the pull request (`number`,
//!   `html_url`, `head.ref`, `head.sha`, `base.ref`, …); 401 without the token; 422 when the
//!   head or the base branch is not in the demo's bare remote, or a pull request of that head
//!   is open already. Each pull request is recorded in `state/demo-forge/pulls.json` (0600).
//! - `GET /demo-forge/api/v3/repos/demo/lexer/pulls`: the recorded pull requests.
//! - `GET /demo-forge/demo/lexer/pull/{number}`: the pull request's page (HTML, escaped).
//!
//! The token is a demo token: random, made by `proctor demo`, kept in a 0600 file that the
//! forge configuration names (`token_file`, the real credential mechanism), read by both
//! sides through [`crate::publish::forge::read_token`], never printed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::files;
use crate::home::Home;
use crate::publish::forge as adapter;

/// The prefix of every route: the URL says it is the demo's.
pub const PREFIX: &str = "/demo-forge";
/// The only repository it serves.
pub const OWNER: &str = "demo";
pub const REPO: &str = "lexer";
/// Its name, where it shows.
pub const NAME: &str = "proctor demo forge (loopback, not GitHub)";

#[derive(Debug, thiserror::Error)]
pub enum DemoForgeError {
    #[error(transparent)]
    Files(#[from] files::FilesError),
    #[error("the demo forge cannot listen on 127.0.0.1: {0}")]
    Listen(std::io::Error),
    #[error("no randomness for the demo token: {0}")]
    Random(String),
}

/// The demo forge's folder in the home.
pub fn dir(home: &Home) -> PathBuf {
    home.state.join("demo-forge")
}

/// The demo token's file (0600).
pub fn token_path(home: &Home) -> PathBuf {
    dir(home).join("token")
}

/// Where the running forge writes its base URL (`http://127.0.0.1:PORT`).
pub fn address_path(home: &Home) -> PathBuf {
    dir(home).join("address")
}

/// The record of the pull requests opened on it.
pub fn record_path(home: &Home) -> PathBuf {
    dir(home).join("pulls.json")
}

/// The demo's bare remote, whose branches the pull requests name.
pub fn remote_path(home: &Home) -> PathBuf {
    home.state.join("demo-git").join("lexer-remote.git")
}

/// The REST base the forge configuration names, for a forge at `address`.
pub fn api_base(address: &str) -> String {
    format!("{address}{PREFIX}/api/v3")
}

/// Makes the demo token (random) in its 0600 file, for a server started after this.
pub fn prepare(home: &Home) -> Result<(), DemoForgeError> {
    files::ensure_private_dir(&dir(home))?;
    let mut bytes = zeroize::Zeroizing::new([0u8; 24]);
    getrandom::fill(&mut bytes[..]).map_err(|e| DemoForgeError::Random(e.to_string()))?;
    let token = zeroize::Zeroizing::new(format!("demo_{}\n", hex::encode(&bytes[..])));
    files::write_atomic(&token_path(home), token.as_bytes())?;
    Ok(())
}

/// True in a home `proctor demo` prepared (its demo token exists).
pub fn is_demo_home(home: &Home) -> bool {
    token_path(home).is_file()
}

struct Forge {
    home: Home,
    address: String,
    pulls: Mutex<Vec<Value>>,
}

/// Starts the demo forge on the current tokio runtime when `home` is a demo home; returns its
/// task (abort it to stop the forge) and address. None elsewhere.
pub async fn start(
    home: &Home,
) -> Result<Option<(tokio::task::JoinHandle<()>, SocketAddr)>, DemoForgeError> {
    if !is_demo_home(home) {
        return Ok(None);
    }
    // The port of the previous start when it is free: the intent recorded the forge's URL at
    // proposal, so a restarted demo server keeps answering there.
    let before = std::fs::read_to_string(address_path(home))
        .ok()
        .and_then(|a| {
            a.trim()
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok())
        });
    let listener = match before {
        Some(port) => match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => Ok(l),
            Err(_) => tokio::net::TcpListener::bind(("127.0.0.1", 0)).await,
        },
        None => tokio::net::TcpListener::bind(("127.0.0.1", 0)).await,
    }
    .map_err(DemoForgeError::Listen)?;
    let addr = listener.local_addr().map_err(DemoForgeError::Listen)?;
    let address = format!("http://{addr}");
    // A restarted server keeps the numbers it gave.
    let pulls = std::fs::read(record_path(home))
        .ok()
        .and_then(|b| serde_json::from_slice::<Vec<Value>>(&b).ok())
        .unwrap_or_default();
    files::write_atomic(&address_path(home), format!("{address}\n").as_bytes())?;
    let forge = Arc::new(Forge {
        home: home.clone(),
        address,
        pulls: Mutex::new(pulls),
    });
    let api = format!("{PREFIX}/api/v3/repos/{{owner}}/{{repo}}/pulls");
    let app = Router::new()
        .route(&api, get(list).post(create))
        .route(
            &format!("{PREFIX}/{{owner}}/{{repo}}/pull/{{number}}"),
            get(page),
        )
        .route(&format!("{PREFIX}/"), get(index))
        .fallback(|| async { not_found() })
        .with_state(forge);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(Some((task, addr)))
}

fn gh_error(status: StatusCode, message: &str, errors: &[String]) -> Response {
    let mut v = json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
    });
    if !errors.is_empty() {
        v["errors"] = errors
            .iter()
            .map(|m| json!({"resource": "PullRequest", "code": "custom", "message": m}))
            .collect();
    }
    (status, axum::Json(v)).into_response()
}

fn not_found() -> Response {
    gh_error(StatusCode::NOT_FOUND, "Not Found", &[])
}

fn ours(owner: &str, repo: &str) -> bool {
    owner == OWNER && repo == REPO
}

async fn list(
    State(f): State<Arc<Forge>>,
    Path((owner, repo)): Path<(String, String)>,
) -> Response {
    if !ours(&owner, &repo) {
        return not_found();
    }
    let pulls = f.pulls.lock().map(|p| p.clone()).unwrap_or_default();
    axum::Json(Value::Array(pulls)).into_response()
}

/// The tip of `branch` in the demo's bare remote.
fn tip(home: &Home, branch: &str) -> Option<String> {
    if branch.is_empty() || branch.starts_with('-') || branch.contains("..") {
        return None;
    }
    crate::git::Git::new(remote_path(home))
        .text(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}^{{commit}}"),
        ])
        .ok()
}

async fn create(
    State(f): State<Arc<Forge>>,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    // The token, through the same credential source the adapter reads.
    let home = f.home.clone();
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let authorized = tokio::task::spawn_blocking(move || {
        adapter::load_config(&home)
            .and_then(|cfg| adapter::read_token(&cfg.token))
            .is_ok_and(|t| t.authorizes(&given))
    })
    .await
    .unwrap_or(false);
    if !authorized {
        return gh_error(StatusCode::UNAUTHORIZED, "Bad credentials", &[]);
    }
    if !ours(&owner, &repo) {
        return not_found();
    }
    let Ok(ask) = serde_json::from_slice::<Value>(&body) else {
        return gh_error(StatusCode::BAD_REQUEST, "Problems parsing JSON", &[]);
    };
    let field = |k: &str| ask[k].as_str().map(str::to_string);
    let (Some(title), Some(head), Some(base)) = (field("title"), field("head"), field("base"))
    else {
        return gh_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Validation Failed",
            &["title, head and base are required".into()],
        );
    };
    let text = field("body").unwrap_or_default();
    let home = f.home.clone();
    let (h, b) = (head.clone(), base.clone());
    let (head_sha, base_sha) =
        tokio::task::spawn_blocking(move || (tip(&home, &h), tip(&home, &b)))
            .await
            .unwrap_or((None, None));
    let mut errors = Vec::new();
    if head_sha.is_none() {
        errors.push(format!("head {head:?} is not a branch of {OWNER}/{REPO}"));
    }
    if base_sha.is_none() {
        errors.push(format!("base {base:?} is not a branch of {OWNER}/{REPO}"));
    }
    if !errors.is_empty() {
        return gh_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Validation Failed",
            &errors,
        );
    }
    let Ok(mut pulls) = f.pulls.lock() else {
        return gh_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the demo forge failed",
            &[],
        );
    };
    if pulls
        .iter()
        .any(|p| p["state"] == "open" && p["head"]["ref"] == head.as_str())
    {
        return gh_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Validation Failed",
            &[format!("A pull request already exists for {OWNER}:{head}.")],
        );
    }
    let number = pulls.len() as u64 + 1;
    let html_url = format!("{}{PREFIX}/{OWNER}/{REPO}/pull/{number}", f.address);
    let pr = json!({
        "number": number,
        "state": "open",
        "title": title,
        "body": text,
        "head": {"ref": head, "sha": head_sha, "label": format!("{OWNER}:{head}")},
        "base": {"ref": base, "sha": base_sha, "label": format!("{OWNER}:{base}")},
        "html_url": html_url,
        "url": format!("{}/repos/{OWNER}/{REPO}/pulls/{number}", api_base(&f.address)),
        "created_at": crate::ledger::now_at(),
        "user": {"login": "proctor-demo"},
        "merged": false,
        "demo": true,
        "forge": NAME,
    });
    pulls.push(pr.clone());
    let bytes = serde_json::to_vec_pretty(&*pulls).unwrap_or_default();
    if files::write_atomic(&record_path(&f.home), &bytes).is_err() {
        pulls.pop();
        return gh_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the demo forge could not record the pull request",
            &[],
        );
    }
    (StatusCode::CREATED, axum::Json(pr)).into_response()
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const BANNER: &str = "<p><strong>proctor demo forge</strong>: a loopback fake of GitHub's REST API, \
     served by <code>proctor demo</code>'s server. This is not GitHub: nothing left this \
     machine, and nobody reviews or merges here.</p>";

async fn index(State(f): State<Arc<Forge>>) -> Response {
    let pulls = f.pulls.lock().map(|p| p.clone()).unwrap_or_default();
    let mut items = String::new();
    for p in &pulls {
        items.push_str(&format!(
            "<li><a href=\"{}\">#{}</a> {}</li>",
            escape(p["html_url"].as_str().unwrap_or("")),
            p["number"],
            escape(p["title"].as_str().unwrap_or(""))
        ));
    }
    Html(format!(
        "<!doctype html><title>proctor demo forge</title>{BANNER}<h1>{OWNER}/{REPO}: pull \
         requests</h1><ul>{items}</ul>"
    ))
    .into_response()
}

async fn page(
    State(f): State<Arc<Forge>>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
) -> Response {
    if !ours(&owner, &repo) {
        return not_found();
    }
    let pr = f
        .pulls
        .lock()
        .ok()
        .and_then(|p| p.iter().find(|p| p["number"] == number).cloned());
    let Some(pr) = pr else {
        return not_found();
    };
    let s = |v: &Value| escape(v.as_str().unwrap_or(""));
    Html(format!(
        "<!doctype html><title>proctor demo forge: {OWNER}/{REPO} #{number}</title>{BANNER}\
         <h1>{OWNER}/{REPO} #{number}: {}</h1><p>{} wants to merge <code>{}</code> ({}) into \
         <code>{}</code>. State: {} (proctor cannot merge).</p><pre>{}</pre>",
        s(&pr["title"]),
        s(&pr["user"]["login"]),
        s(&pr["head"]["ref"]),
        s(&pr["head"]["sha"]),
        s(&pr["base"]["ref"]),
        s(&pr["state"]),
        s(&pr["body"]),
    ))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::forge::{ForgeError, PullRequestAsk};

    /// A demo home (token, forge configuration, a bare remote with `main` and `fix`) and the
    /// demo forge serving it on a runtime of its own.
    fn demo_home() -> (tempfile::TempDir, Home, tokio::runtime::Runtime, String) {
        let dir = tempfile::Builder::new()
            .prefix("pf")
            .tempdir_in("/tmp")
            .unwrap();
        let home = Home::resolve(Some(dir.path())).unwrap();
        home.ensure().unwrap();
        prepare(&home).unwrap();
        let work = dir.path().join("work");
        let remote = remote_path(&home);
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&remote).unwrap();
        crate::git::Git::new(&remote)
            .run(&["init", "-q", "--bare"])
            .unwrap();
        let git = crate::git::Git::new(&work);
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["config", "user.name", "t"],
            &["config", "user.email", "t@t.invalid"],
            &["commit", "-q", "--allow-empty", "-m", "one"],
            &["branch", "fix"],
        ] {
            git.run(args).unwrap();
        }
        let url = remote.to_string_lossy().into_owned();
        git.run(&["push", "-q", &url, "main", "fix"]).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (_, addr) = rt.block_on(start(&home)).unwrap().unwrap();
        let address = format!("http://{addr}");
        assert_eq!(
            std::fs::read_to_string(address_path(&home)).unwrap().trim(),
            address
        );
        std::fs::create_dir_all(&home.config).unwrap();
        let cfg = format!(
            "api_base = \"{}\"\nrepo = \"demo/lexer\"\ntoken_file = \"{}\"\n",
            api_base(&address),
            token_path(&home).display()
        );
        files::write_atomic(&adapter::config_path(&home), cfg.as_bytes()).unwrap();
        (dir, home, rt, address)
    }

    fn ask(address: &str, head: &str) -> PullRequestAsk {
        PullRequestAsk {
            api_base: api_base(address),
            owner: OWNER.into(),
            repo: REPO.into(),
            head: head.into(),
            base: "main".into(),
            title: "a <title>".into(),
            body: "b".into(),
        }
    }

    #[test]
    fn the_real_adapter_opens_a_pull_request_on_the_demo_forge_with_the_demo_token_only() {
        let (_dir, home, _rt, address) = demo_home();
        let token = adapter::read_token(&adapter::load_config(&home).unwrap().token).unwrap();
        let pr = adapter::open_pull_request(&ask(&address, "fix"), &token).unwrap();
        assert_eq!(pr.number, 1);
        assert_eq!(
            pr.html_url,
            format!("{address}/demo-forge/demo/lexer/pull/1")
        );
        // Recorded, with the head's tip in the bare remote.
        let rec: Vec<Value> =
            serde_json::from_slice(&std::fs::read(record_path(&home)).unwrap()).unwrap();
        assert_eq!(rec.len(), 1);
        let tip = crate::git::Git::new(remote_path(&home))
            .text(&["rev-parse", "refs/heads/fix"])
            .unwrap();
        assert_eq!(rec[0]["head"]["sha"], tip.as_str());
        assert_eq!(rec[0]["demo"], true);
        // The same head again: GitHub's 422, its message carried.
        match adapter::open_pull_request(&ask(&address, "fix"), &token) {
            Err(ForgeError::Refused { status, message }) => {
                assert_eq!(status, 422);
                assert!(message.contains("already exists"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // A head the remote does not have: 422.
        match adapter::open_pull_request(&ask(&address, "nope"), &token) {
            Err(ForgeError::Refused { status, message }) => {
                assert_eq!(status, 422);
                assert!(message.contains("not a branch"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // Another token: 401, nothing recorded.
        let other = home.state.join("other-token");
        files::write_atomic(&other, b"demo_not_the_one\n").unwrap();
        let wrong = adapter::read_token(&adapter::TokenSource::File(other)).unwrap();
        match adapter::open_pull_request(&ask(&address, "fix"), &wrong) {
            Err(ForgeError::Refused { status, .. }) => assert_eq!(status, 401),
            other => panic!("{other:?}"),
        }
        let rec: Vec<Value> =
            serde_json::from_slice(&std::fs::read(record_path(&home)).unwrap()).unwrap();
        assert_eq!(rec.len(), 1);
    }

    #[test]
    fn a_restarted_forge_answers_at_the_same_address_and_keeps_its_numbers() {
        let (_dir, home, rt, address) = demo_home();
        let token = adapter::read_token(&adapter::load_config(&home).unwrap().token).unwrap();
        adapter::open_pull_request(&ask(&address, "fix"), &token).unwrap();
        drop(rt);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (_, addr) = rt.block_on(start(&home)).unwrap().unwrap();
        let now = format!("http://{addr}");
        if now != address {
            // Another process (a parallel test) took the freed port meanwhile: the forge may
            // then take another; only a free previous port must be taken again.
            let previous = address.trim_start_matches("http://");
            assert!(
                std::net::TcpListener::bind(previous).is_err(),
                "the previous port {previous} is free, yet the forge moved to {now}"
            );
        }
        match adapter::open_pull_request(&ask(&now, "fix"), &token) {
            Err(ForgeError::Refused { status, .. }) => assert_eq!(status, 422),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_home_without_the_demo_token_serves_no_forge() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(dir.path())).unwrap();
        home.ensure().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert!(rt.block_on(start(&home)).unwrap().is_none());
        assert!(!address_path(&home).exists());
    }

    #[test]
    fn pages_escape_what_they_show() {
        assert_eq!(
            escape("<script>\"x\" & 'y'</script>"),
            "&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;"
        );
        assert_eq!(
            api_base("http://127.0.0.1:1"),
            "http://127.0.0.1:1/demo-forge/api/v3"
        );
    }
}
