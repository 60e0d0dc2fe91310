//! The JavaScript client as an npm package (`web/client/`): its `package.json` (name,
//! ESM, `exports` with the types first, the relay's version, no dependencies), what `npm
//! pack` puts in it, the package installed from that tarball into a fresh project and
//! imported by name in Node, its TypeScript declarations type-checked by `tsc --strict`
//! with a page using the package (`web/test/usage.ts`) and on their own without the DOM
//! library, and the declarations against the module's exports, member by member
//! (`web/test/declarations.mjs`). Needs `node`, `npm` and TypeScript in the tools
//! directory (scripts/test.sh installs them).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn package_dir() -> PathBuf {
    root().join("web/client")
}

/// The Node tools directory (`GSRELAY_NODE_TOOLS`, else `.tools`), where scripts/test.sh
/// installs TypeScript.
fn tools() -> PathBuf {
    std::env::var_os("GSRELAY_NODE_TOOLS").map_or_else(|| root().join(".tools"), PathBuf::from)
}

/// TypeScript's `tsc`; panics saying how to install it if it is missing.
fn typescript() -> PathBuf {
    let tsc = tools().join("node_modules/typescript/bin/tsc");
    assert!(
        tsc.is_file(),
        "TypeScript is missing: no {} (scripts/test.sh installs it; or set GSRELAY_NODE_TOOLS \
         to a directory whose node_modules has typescript)",
        tsc.display()
    );
    tsc
}

/// `tsc`, run by node.
fn tsc() -> Command {
    let mut cmd = Command::new("node");
    cmd.arg(typescript());
    cmd
}

/// Runs `cmd` to its end; panics naming the program if it cannot start.
fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| {
        panic!(
            "cannot run {:?} ({e}): scripts/test.sh installs node and npm",
            cmd.get_program()
        )
    })
}

/// Asserts `out` succeeded, showing its output otherwise; returns its standard output.
fn succeeded(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn package_json() -> (String, Value) {
    let text = std::fs::read_to_string(package_dir().join("package.json")).unwrap();
    let json = serde_json::from_str(&text).expect("package.json is JSON");
    (text, json)
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("gsrelay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn package_json_describes_the_module_at_the_relays_version() {
    let (text, p) = package_json();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(p["name"], "gsrelay");
    assert_eq!(p["version"], version, "package.json follows Cargo.toml");
    assert_eq!(p["type"], "module");
    assert_eq!(
        p["private"], true,
        "not for a registry, as Cargo.toml's publish = false"
    );
    let main = &p["exports"]["."];
    assert_eq!(main["types"], "./gsrelay.d.ts");
    assert_eq!(main["default"], "./gsrelay.js");
    // Conditions match in order: "types" after "default" would never be reached.
    let conditions = text.find(r#"".": {"#).expect("exports has \".\"");
    let types_at = text[conditions..].find(r#""types""#).unwrap();
    let default_at = text[conditions..].find(r#""default""#).unwrap();
    assert!(
        types_at < default_at,
        "\"types\" comes first in exports[\".\"]"
    );
    assert_eq!(p["main"], "./gsrelay.js");
    assert_eq!(p["types"], "./gsrelay.d.ts");
    for field in [
        "dependencies",
        "devDependencies",
        "peerDependencies",
        "optionalDependencies",
        "bundleDependencies",
    ] {
        assert!(p.get(field).is_none(), "the module has no {field}");
    }
    let files: Vec<&str> = p["files"]
        .as_array()
        .expect("a files list")
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(files, ["gsrelay.js", "gsrelay.d.ts"]);
    for f in files {
        assert!(package_dir().join(f).is_file(), "{f} is in web/client");
    }
    // The module says the same version (the viewer shows it).
    let js = std::fs::read_to_string(package_dir().join("gsrelay.js")).unwrap();
    assert!(
        js.contains(&format!("export const VERSION = \"{version}\";")),
        "gsrelay.js's VERSION is {version}"
    );
}

#[test]
fn declarations_match_the_modules_exports_member_by_member() {
    let script = root().join("web/test/declarations.mjs");
    // The script parses the declarations with TypeScript from the tools directory.
    typescript();
    let out = run(Command::new("node")
        .arg(&script)
        .env("GSRELAY_NODE_TOOLS", tools()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let closing = stdout
        .lines()
        .rev()
        .find(|l| l.ends_with(" failed"))
        .expect("declarations.mjs prints its tally");
    assert!(closing.ends_with(" 0 failed"), "{closing}");
    assert!(out.status.success());
    // Every export and every member of the nine classes was compared.
    let passed: u64 = closing.split(' ').next().unwrap().parse().unwrap();
    assert!(passed > 300, "only {passed} checks ran");
}

#[test]
fn packed_package_installs_imports_and_type_checks_with_a_page_using_it() {
    typescript();
    let scratch = Scratch::new("js-package");
    let packs = scratch.0.join("packs");
    let app = scratch.0.join("app");
    std::fs::create_dir_all(&packs).unwrap();
    std::fs::create_dir_all(&app).unwrap();

    // What `npm pack` ships: the module, its declarations, the manifest and the README.
    let out = run(Command::new("npm")
        .args(["pack", "--json", "--pack-destination"])
        .arg(&packs)
        .current_dir(package_dir()));
    let packed: Value =
        serde_json::from_str(&succeeded("npm pack", &out)).expect("npm pack --json");
    let packed = &packed[0];
    let mut files: Vec<&str> = packed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    files.sort_unstable();
    assert_eq!(
        files,
        ["README.md", "gsrelay.d.ts", "gsrelay.js", "package.json"]
    );
    assert_eq!(packed["name"], "gsrelay");
    assert_eq!(packed["version"], env!("CARGO_PKG_VERSION"));
    let tarball = packs.join(packed["filename"].as_str().unwrap());
    assert!(tarball.is_file(), "npm pack wrote {}", tarball.display());

    // A fresh ESM project installs the tarball (nothing to fetch: it has no dependencies).
    std::fs::write(
        app.join("package.json"),
        r#"{"name": "app", "private": true, "type": "module"}"#,
    )
    .unwrap();
    succeeded(
        "npm install of the packed client",
        &run(Command::new("npm")
            .args([
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .arg(&tarball)
            .current_dir(&app)),
    );
    // Node resolves the package by name through its exports.
    let out = run(Command::new("node")
        .args([
            "--input-type=module",
            "-e",
            "import * as gs from 'gsrelay'; import p from 'gsrelay/package.json' with { type: 'json' }; \
             const r = gs.decode(gs.encode([{ type: 'HeadIPD1', ipd: 0.0625 }])); \
             console.log(gs.VERSION, p.version, r.ok && r.objects[0].ipd);",
        ])
        .current_dir(&app));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        succeeded("importing the installed package", &out).trim(),
        format!("{version} {version} 0.0625")
    );

    // The page, with the DOM library, through the package's "types" condition, also
    // importing the relay's copy of the module. Every `@ts-expect-error` in it must meet
    // an error, so misuses are refused too.
    for file in ["usage.ts", "relay-module.d.ts"] {
        std::fs::copy(root().join("web/test").join(file), app.join(file)).unwrap();
    }
    let strict = [
        "--noEmit",
        "--strict",
        "--target",
        "es2022",
        "--module",
        "nodenext",
        "--moduleResolution",
        "nodenext",
    ];
    let out = run(tsc()
        .args(strict)
        .args(["--lib", "es2022,dom", "usage.ts", "relay-module.d.ts"])
        .current_dir(&app));
    succeeded("tsc --strict over web/test/usage.ts", &out);
    // The declarations alone need no DOM library (Node apps use the codec and room state).
    let out = run(tsc()
        .args(strict)
        .args(["--lib", "es2022", "node_modules/gsrelay/gsrelay.d.ts"])
        .current_dir(&app));
    succeeded(
        "tsc --strict over gsrelay.d.ts without the DOM library",
        &out,
    );
}
