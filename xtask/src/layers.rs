//! The `layers` stage: buddy-sim's modules import one another only downwards.
//!
//! Every file of the crate is parsed; every path that starts with `crate::`, `super::`,
//! `self::` or a child module's name outside test code (items under a `cfg` that names
//! `test`) is an import of the module it names. Three rules:
//! - no path names an item through the crate root (`crate::Zone`): a module imports from the
//!   module that defines what it uses;
//! - every module sits on one floor of [`FLOORS`] and imports only from its own floor or
//!   below;
//! - the imports have no circle, floors or not.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The floors, lowest first: a module belongs to the first floor one of whose prefixes names
/// it or a module above it (`zone` covers `zone::buddy`).
const FLOORS: [(&str, &[&str]); 7] = [
    (
        "plain types and the embedder's interfaces",
        &[
            "sync",
            "types",
            "decompose",
            "error",
            "frame",
            "frame_storage",
            "contents",
            "memory",
            "migrate",
            "reclaim",
            "migratetype",
            "cma",
            "request",
            "report_sink",
            "events",
            "fail_page_alloc",
            "free_init",
            "owner_record",
        ],
    ),
    ("the zone core", &["zone"]),
    (
        "features",
        &[
            "mobility",
            "zeroed",
            "deferred",
            "vmalloc",
            "exact",
            "reporting",
            "debugging",
        ],
    ),
    (
        "the handle's entry points",
        &["allocate", "block", "named", "huge_fault"],
    ),
    ("nodes", &["node"]),
    (
        "around the allocator",
        &["boxed", "adapters", "reference", "vmstat", "page_owner"],
    ),
    ("the crate root and test harness", &["crate", "testing"]),
];

/// The crate checked.
const CRATE: &str = "crates/buddy-sim/src";

pub fn run(root: &Path) -> Result<String, String> {
    check(&root.join(CRATE), &FLOORS).map(|n| format!("buddy-sim: {n}"))
}

type Floors<'a> = [(&'a str, &'a [&'a str])];

/// Checks the crate whose source is under `src` against `floors`.
fn check(src: &Path, floors: &Floors) -> Result<String, String> {
    let mut files = Vec::new();
    collect(src, &mut files)?;
    let modules: BTreeMap<String, PathBuf> =
        files.into_iter().map(|f| (module_of(src, &f), f)).collect();
    let mut problems = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let ast = syn::parse_file(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut paths = Paths::default();
        paths.visit_file(&ast);
        for mut path in paths.found {
            // A path that starts at a child module (`buddy::FreeArea` in `zone`).
            let child = if module == "crate" {
                path[0].clone()
            } else {
                format!("{module}::{}", path[0])
            };
            if !relative_start(&path[0]) {
                // A lone name (`cpu`) is a local or an item, not a module path.
                if path.len() < 2 || !modules.contains_key(&child) {
                    continue;
                }
                path.insert(0, "self".into());
            }
            let Some(absolute) = absolute(module, &path) else {
                problems.push(format!(
                    "{module}: `{}` climbs above the crate",
                    path.join("::")
                ));
                continue;
            };
            match target(&modules, &absolute) {
                Some(t) if t == "crate" => problems.push(format!(
                    "{module}: `crate::{}` names an item through the crate root",
                    absolute.join("::")
                )),
                Some(t) if t == *module => {}
                Some(t) => {
                    edges.entry(module.clone()).or_default().insert(t);
                }
                None => {}
            }
        }
    }
    for (module, targets) in &edges {
        let from =
            floor(floors, module).ok_or(format!("{module} is on no floor of xtask's FLOORS"))?;
        for t in targets {
            let to = floor(floors, t).ok_or(format!("{t} is on no floor of xtask's FLOORS"))?;
            if to > from {
                problems.push(format!(
                    "{module} ({}) imports {t} ({}), a floor above",
                    floors[from].0, floors[to].0
                ));
            }
        }
    }
    for circle in circles(&modules, &edges) {
        let inside: Vec<String> = circle
            .iter()
            .flat_map(|m| {
                edges[m]
                    .iter()
                    .filter(|t| circle.contains(t))
                    .map(move |t| format!("{m} -> {t}"))
            })
            .collect();
        problems.push(format!(
            "an import circle among {}: {}",
            circle.join(", "),
            inside.join(", ")
        ));
    }
    if problems.is_empty() {
        let n: usize = edges.values().map(BTreeSet::len).sum();
        Ok(format!(
            "{} modules, {n} imports, all downwards, no circle",
            modules.len()
        ))
    } else {
        Err(problems.join("\n"))
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// `zone/buddy.rs` -> `zone::buddy`, `zone/mod.rs` -> `zone`, `lib.rs` -> `crate`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        return "crate".into();
    }
    parts.join("::")
}

/// The path from the crate root that `path`, written in `module`, names (without `crate`).
fn absolute(module: &str, path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = if module == "crate" {
        Vec::new()
    } else {
        module.split("::").map(String::from).collect()
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => return Some(rest[1..].to_vec()),
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The module a path from the crate root lands in: its longest prefix that is a module.
/// `crate` when that prefix is empty and the path names an item of the root.
fn target(modules: &BTreeMap<String, PathBuf>, path: &[String]) -> Option<String> {
    for k in (1..=path.len()).rev() {
        let name = path[..k].join("::");
        if modules.contains_key(&name) {
            return Some(name);
        }
    }
    // `crate::mm_types` and friends are the crate's re-exports of other crates: still the
    // crate root.
    (!path.is_empty()).then(|| "crate".into())
}

fn floor(floors: &Floors, module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    floors
        .iter()
        .position(|(_, members)| members.contains(&top))
}

/// The strongly connected groups of more than one module (Tarjan's algorithm).
fn circles(
    modules: &BTreeMap<String, PathBuf>,
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        groups: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    group.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.groups.push(group);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for m in modules.keys() {
        if !t.index.contains_key(m.as_str()) {
            t.visit(m);
        }
    }
    t.groups
}

/// Every path outside test code, as its segments (the checker keeps those that name a
/// module of the crate).
#[derive(Default)]
struct Paths {
    found: Vec<Vec<String>>,
}

/// Whether an item's attributes put it under a `cfg` that names `test` (unit tests, loom
/// models).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let mut found = false;
            let _ = a.parse_nested_meta(|m| {
                found |= mentions_test(m);
                Ok(())
            });
            found
        }
    })
}

fn mentions_test(meta: syn::meta::ParseNestedMeta) -> bool {
    if meta.path.is_ident("test") {
        return true;
    }
    let mut found = false;
    if meta.input.peek(syn::token::Paren) {
        let _ = meta.parse_nested_meta(|m| {
            found |= mentions_test(m);
            Ok(())
        });
    } else if meta.input.peek(syn::Token![=]) {
        let _ = meta.value().and_then(|v| v.parse::<syn::Lit>());
    }
    found
}

fn relative_start(first: &str) -> bool {
    first == "crate" || first == "self" || first == "super"
}

impl Paths {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.use_leaf(prefix, &r.ident),
            syn::UseTree::Glob(_) => self.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn use_leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut path = prefix.to_vec();
        if ident != "self" {
            path.push(ident.to_string());
        }
        self.push(path);
    }

    fn push(&mut self, path: Vec<String>) {
        if !path.is_empty() {
            self.found.push(path);
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if test_only(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            self.push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `files` (path, text) into a fresh directory and checks it on two floors:
    /// `low` (`a`, `b`) under `high` (`c`, and the root).
    fn checked(name: &str, files: &[(&str, &str)]) -> Result<String, String> {
        let dir = std::env::temp_dir().join(format!("layers-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for (path, text) in files {
            let file = dir.join(path);
            fs::create_dir_all(file.parent().expect("a file has a parent")).expect("temp dir");
            fs::write(&file, text).expect("temp file");
        }
        let floors: &Floors = &[("low", &["a", "b"]), ("high", &["c", "crate"])];
        let result = check(&dir, floors);
        let _ = fs::remove_dir_all(&dir);
        result
    }

    const ROOT: (&str, &str) = ("lib.rs", "mod a; mod b; mod c; pub use c::C;");

    #[test]
    fn downward_imports_pass() {
        let ok = checked(
            "ok",
            &[
                ROOT,
                ("a.rs", "pub struct A;"),
                ("b.rs", "use crate::a::A; pub struct B(A);"),
                ("c/mod.rs", "mod d; use super::b::B; pub struct C(B, d::D);"),
                ("c/d.rs", "pub struct D(crate::a::A);"),
            ],
        );
        assert_eq!(
            ok,
            Ok("5 modules, 5 imports, all downwards, no circle".into())
        );
    }

    #[test]
    fn test_code_and_locals_are_not_imports() {
        let ok = checked(
            "tests",
            &[
                ROOT,
                (
                    "a.rs",
                    "pub fn a(b: u8) -> u8 { b }\n#[cfg(test)] mod t { use crate::c::C; }",
                ),
                ("b.rs", "#[cfg(all(test, loom))] use crate::c::C;"),
                ("c.rs", ""),
            ],
        );
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn an_upward_import_fails() {
        let e = checked(
            "up",
            &[
                ROOT,
                ("a.rs", "use crate::c::C;"),
                ("b.rs", ""),
                ("c.rs", "pub struct C;"),
            ],
        );
        assert_eq!(e, Err("a (low) imports c (high), a floor above".into()));
    }

    #[test]
    fn an_import_through_the_root_fails() {
        let e = checked(
            "root",
            &[ROOT, ("a.rs", ""), ("b.rs", "use crate::C;"), ("c.rs", "")],
        );
        assert_eq!(
            e,
            Err("b: `crate::C` names an item through the crate root".into())
        );
    }

    #[test]
    fn a_circle_fails_even_on_one_floor() {
        let e = checked(
            "circle",
            &[
                ROOT,
                ("a.rs", "pub struct A(crate::b::B);"),
                ("b.rs", "pub struct B(Option<Box<super::a::A>>);"),
                ("c.rs", ""),
            ],
        );
        assert_eq!(e, Err("an import circle among a, b: a -> b, b -> a".into()));
    }

    #[test]
    fn a_child_module_path_is_an_import() {
        let e = checked(
            "child",
            &[
                ROOT,
                ("a/mod.rs", "mod x; pub struct A(x::X);"),
                ("a/x.rs", "pub struct X(Option<Box<crate::a::A>>);"),
                ("b.rs", ""),
                ("c.rs", ""),
            ],
        );
        assert_eq!(
            e,
            Err("an import circle among a, a::x: a -> a::x, a::x -> a".into())
        );
    }
}
