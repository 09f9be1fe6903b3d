//! The declared layers, checked: every `use crate::…` (and every `crate::x::` path in code)
//! between the top-level modules of `src/` must go from a layer to itself or to a layer below
//! it, and the top-level modules must not form a cycle. The layer table is the one in
//! `docs/architecture.md` (section "Layers"), read here, so the doc and the check cannot drift.
//!
//! A file belongs to the top-level module of its path (`src/tui/ui/x.rs` is `tui`). Edges
//! inside one top-level module are not checked. A re-export in `src/lib.rs`
//! (`pub use evidence::{candidate, …}`) makes `crate::candidate` an old name of a part of
//! `evidence`: such paths count as edges to `evidence`.
//!
//! Residual: `super::` paths that climb out of a top-level module (none today) are not read.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Upward edges or cycle edges too big to remove so far, each with its reason. Each must
/// still exist (a stale exception fails too), and each is named in `docs/architecture.md`
/// as a known exception to remove.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    // (from, to, reason)
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The doc's layer table: (layer, modules), lowest first.
fn layers() -> Vec<(String, Vec<String>)> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let section = doc
        .split("\n## Layers\n")
        .nth(1)
        .expect("docs/architecture.md has a `## Layers` section");
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in section.lines() {
        if line.starts_with("## ") {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | layer | modules | may use | planned |
        if cells.len() < 5 || cells[1] == "layer" || cells[1].starts_with("---") {
            continue;
        }
        let layer = cells[1].to_string();
        let modules = backticked(cells[2]);
        let may_use: Vec<String> = cells[3].split(',').map(|s| s.trim().to_string()).collect();
        let mut expected: Vec<String> = out.iter().map(|(l, _)| l.clone()).collect();
        expected.push(layer.clone());
        assert_eq!(
            may_use, expected,
            "docs/architecture.md: layer `{layer}` may use exactly itself and the layers listed \
             before it (the test enforces that order)"
        );
        out.push((layer, modules));
    }
    assert!(
        out.len() >= 3,
        "docs/architecture.md: the layer table has no rows"
    );
    out
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `pub mod x;` and the re-exports `pub use x::{a, b};` / `pub use x::a;` of src/lib.rs.
fn crate_root() -> (BTreeSet<String>, BTreeMap<String, String>) {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let mut mods = BTreeSet::new();
    let mut aliases = BTreeMap::new();
    for line in lib.lines().map(str::trim) {
        if let Some(m) = line.strip_prefix("pub mod ") {
            mods.insert(m.trim_end_matches(';').to_string());
        } else if let Some(u) = line.strip_prefix("pub use ") {
            let u = u.trim_end_matches(';');
            let (base, rest) = u.split_once("::").expect("pub use base::names");
            let names = rest.trim_start_matches('{').trim_end_matches('}');
            for n in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                aliases.insert(n.to_string(), base.to_string());
            }
        }
    }
    (mods, aliases)
}

/// The source without `//` and `/* */` comments (doc links are not dependencies).
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        if in_str {
            if b[i] == b'\\' {
                if b.get(i + 1) == Some(&b'\n') {
                    out.push('\n');
                }
                i += 2;
                continue;
            }
            if b[i] == b'\n' {
                out.push('\n');
            }
            if b[i] == b'"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        if b[i] == b'"' && (i == 0 || b[i - 1] != b'\'') {
            in_str = true;
            out.push('"');
            i += 1;
            continue;
        }
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b[i..].starts_with(b"/*") {
            let end = src[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            out.extend(std::iter::repeat_n('\n', src[i..end].matches('\n').count()));
            i = end;
            continue;
        }
        let c = src[i..].chars().next().unwrap();
        out.push(c);
        i += c.len_utf8();
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first names after `crate::` in `src` (string literals and comments excluded):
/// `crate::a::b` gives `a`; `use crate::{a::x, b}` gives `a` and `b`. Each with its line.
fn crate_names(src: &str) -> Vec<(String, usize)> {
    let code = strip_comments(src);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::") {
        let start = from + at;
        from = start + "crate::".len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // e.g. `$crate::` or `foo_crate::`
        }
        let line = code[..start].matches('\n').count() + 1;
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut part = String::new();
            let mut parts = Vec::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if c == ',' && depth == 1 {
                    parts.push(std::mem::take(&mut part));
                } else {
                    part.push(c);
                }
            }
            parts.push(part);
            for p in parts {
                let n = ident_at(p.trim());
                if !n.is_empty() && n != "self" {
                    out.push((n.to_string(), line));
                }
            }
        } else {
            let n = ident_at(rest);
            if !n.is_empty() {
                out.push((n.to_string(), line));
            }
        }
    }
    out
}

/// A found edge: from module, to module, file, line, the text of that line.
struct Edge {
    from: String,
    to: String,
    file: String,
    line: usize,
    text: String,
}

fn edges(mods: &BTreeSet<String>, aliases: &BTreeMap<String, String>) -> Vec<Edge> {
    let src = root().join("src");
    let mut files = Vec::new();
    common::rust_files(&src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        assert!(
            mods.contains(&top),
            "src/{rel}: its module `{top}` is not in src/lib.rs"
        );
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (name, line) in crate_names(&text) {
            let to = aliases.get(&name).cloned().unwrap_or(name);
            if to == top || !mods.contains(&to) {
                continue; // inside the module, or not a module (a macro, a root item)
            }
            out.push(Edge {
                from: top.clone(),
                to,
                file: format!("src/{rel}"),
                line,
                text: lines.get(line - 1).unwrap_or(&"").trim().to_string(),
            });
        }
    }
    out
}

fn is_exception(from: &str, to: &str) -> bool {
    EXCEPTIONS.iter().any(|(f, t, _)| *f == from && *t == to)
}

/// The cycles among modules (strongly connected components with more than one module).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative enough for a few dozen modules.
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(t: &mut T, v: &str) {
        t.index.insert(v.to_string(), t.next);
        t.low.insert(v.to_string(), t.next);
        t.next += 1;
        t.stack.push(v.to_string());
        t.on.insert(v.to_string());
        let next: Vec<String> =
            t.g.get(v)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default();
        for w in next {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let lw = t.low[&w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(&w);
                let done = w == v;
                scc.push(w);
                if done {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn every_module_has_one_declared_layer() {
    let (mods, aliases) = crate_root();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (layer, ms) in layers() {
        for m in ms {
            assert!(
                mods.contains(&m),
                "docs/architecture.md: layer `{layer}` names `{m}`, which is not a module in \
                 src/lib.rs{}",
                aliases
                    .get(&m)
                    .map(|b| format!(" (it is a part of `{b}`)"))
                    .unwrap_or_default()
            );
            if let Some(other) = seen.insert(m.clone(), layer.clone()) {
                panic!("docs/architecture.md: `{m}` is in two layers, `{other}` and `{layer}`");
            }
        }
    }
    let missing: Vec<&String> = mods.iter().filter(|m| !seen.contains_key(*m)).collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md: these modules of src/lib.rs have no layer in the table: {missing:?}"
    );
}

#[test]
fn no_module_uses_a_layer_above_it() {
    let (mods, aliases) = crate_root();
    let mut rank: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for (i, (layer, ms)) in layers().into_iter().enumerate() {
        for m in ms {
            rank.insert(m, (i, layer.clone()));
        }
    }
    let mut bad = Vec::new();
    for e in edges(&mods, &aliases) {
        let (Some((rf, lf)), Some((rt, lt))) = (rank.get(&e.from), rank.get(&e.to)) else {
            continue; // reported by every_module_has_one_declared_layer
        };
        if rt > rf && !is_exception(&e.from, &e.to) {
            bad.push(format!(
                "{}:{}: `{}` ({lf}) uses `{}` ({lt}), a layer above it: {}",
                e.file, e.line, e.from, e.to, e.text
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "imports from a layer above (docs/architecture.md, Layers):\n{}",
        bad.join("\n")
    );
}

#[test]
fn top_level_modules_form_no_cycle() {
    let (mods, aliases) = crate_root();
    let all = edges(&mods, &aliases);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &all {
        if !is_exception(&e.from, &e.to) {
            graph
                .entry(e.from.clone())
                .or_default()
                .insert(e.to.clone());
        }
    }
    let found = cycles(&graph);
    let mut msg = String::new();
    for scc in &found {
        msg.push_str(&format!("cycle among {scc:?}; its edges:\n"));
        for e in all.iter().filter(|e| {
            scc.contains(&e.from) && scc.contains(&e.to) && !is_exception(&e.from, &e.to)
        }) {
            msg.push_str(&format!(
                "  {}:{}: `{}` -> `{}`: {}\n",
                e.file, e.line, e.from, e.to, e.text
            ));
        }
    }
    assert!(found.is_empty(), "top-level modules form cycles:\n{msg}");
}

#[test]
fn every_exception_is_still_needed() {
    let (mods, aliases) = crate_root();
    let all = edges(&mods, &aliases);
    for (from, to, why) in EXCEPTIONS {
        assert!(
            all.iter().any(|e| e.from == *from && e.to == *to),
            "the exception `{from}` -> `{to}` ({why}) is no longer used: remove it here and in \
             docs/architecture.md"
        );
    }
}

#[test]
fn the_reader_sees_imports_and_paths_but_not_comments() {
    let src = "use crate::{a::X, b, self};\n// crate::c::Y\nfn f() { crate::d::g(); \
               let s = \"crate::e\n\"; }\n/* crate::f\n */ use crate::h;\n";
    let found = crate_names(src);
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "b", "d", "h"]);
    let lines: Vec<usize> = found.iter().map(|(_, l)| *l).collect();
    assert_eq!(lines, [1, 1, 3, 6]);
}

/// The faces that call the API (the CLI, the cockpit, the client, the demo) read its answers
/// into the contract's types (`src/api`) and build its bodies from them: no code outside
/// tests indexes JSON by a string key or builds a body with `json!`. Listed here, each with
/// its reason, are the files that read JSON that is not an API answer.
const NOT_API_JSON: &[(&str, &str)] = &[
    (
        "src/cli/ledger.rs",
        "the ledger file's own lines (every event kind's fields), read and printed as they are",
    ),
    (
        "src/tui/evidence.rs",
        "a signed receipt's in-toto statement, read from the file the local verifier checked",
    ),
];

/// A file's code before its `#[cfg(test)]` module, without comments; `None` for a test file.
fn code_outside_tests(path: &std::path::Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    if name.ends_with("tests.rs") || path.components().any(|c| c.as_os_str() == "tests") {
        return None;
    }
    let src = std::fs::read_to_string(path).ok()?;
    let code = strip_comments(&src);
    Some(match code.find("#[cfg(test)]") {
        Some(i) => code[..i].to_string(),
        None => code,
    })
}

/// The string-keyed reads and `json!` bodies in `code` (as [`strip_comments`] leaves it: a
/// string literal is its opening quote alone, so `v["ref"]` reads `v["]`): (line, text).
/// Indexing is a `["]` right after a value (a name, `]` or `)`), not an array literal.
fn string_keyed(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let keyed = line.match_indices("[\"]").any(|(i, _)| {
            line[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ']' || c == ')')
        });
        let get = line.contains(".get(\")");
        if keyed || get || line.contains("json!(") {
            out.push((n + 1, line.trim().to_string()));
        }
    }
    out
}

#[test]
fn no_face_reads_api_answers_by_string_keys() {
    let mut files = Vec::new();
    for dir in ["src/cli", "src/tui"] {
        common::rust_files(&root().join(dir), &mut files);
    }
    files.push(root().join("src/client.rs"));
    files.push(root().join("src/demo.rs"));
    let mut found = Vec::new();
    let mut used = BTreeSet::new();
    for f in &files {
        let rel = f
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .to_string();
        let Some(code) = code_outside_tests(f) else {
            continue;
        };
        let hits = string_keyed(&code);
        if hits.is_empty() {
            continue;
        }
        if NOT_API_JSON.iter().any(|(p, _)| *p == rel) {
            used.insert(rel);
            continue;
        }
        found.extend(hits.into_iter().map(|(n, l)| format!("{rel}:{n}: {l}")));
    }
    assert!(
        found.is_empty(),
        "API answers read by string key (use the contract's types in src/api):\n{}",
        found.join("\n")
    );
    for (p, why) in NOT_API_JSON {
        assert!(
            used.contains(*p),
            "{p} no longer reads such JSON ({why}): drop it from the list"
        );
    }
}

#[test]
fn the_string_key_reader_sees_indexing_gets_and_json_bodies() {
    let code = strip_comments(
        "let a = v[\"ref\"].as_str();\nlet b = v[0];\nlet c = m.get(\"seq\");\nlet d = json!({});\nlet e = [\"x\"];\nlet f = v[\"a\"][\"b\"]; // v[\"c\"]\n",
    );
    let lines: Vec<usize> = string_keyed(&code).iter().map(|h| h.0).collect();
    assert_eq!(lines, [1, 3, 4, 6], "{code}");
}
