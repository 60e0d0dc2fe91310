//! The C ABI from C# (`bindings/`, `docs/csharp-client.md`), under Mono: the binding's
//! sources (`bindings/unity/Runtime/`, the Unity package's, the one copy) compiled by `mcs
//! -langversion:7` into `GsRelay.dll` with warnings as errors, and the test program
//! (`bindings/csharp/Tests/`) against it, run by `mono` against the codec and a real
//! `gsrelay serve`; its last line is `N passed, M failed`. The Unity package's sample
//! compiles against the binding and a stub of the few UnityEngine types it uses (Unity
//! itself cannot run here). The hand-written P/Invoke declarations (`Native.cs`) are held
//! to the generated header: every function with parameters of matching types, every
//! constant's value, and every struct's size and each field's offset as gcc lays them out.
//! Without the native library, the first use is a `GsRelayException` naming the file.
//!
//! Needs Debian's `mono-mcs` and `mono-runtime` (scripts/test.sh installs them).

mod support;

use gsrelay::token::Rights;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::ffi::{include_dir, lib_dir, out_dir, root, succeeded};
use support::serve::Serve;

fn unity() -> PathBuf {
    root().join("bindings/unity")
}

/// `tool` (`mcs`, `mono`, `gcc`) as a command; panics saying how to install it if it is
/// missing, never skips.
fn tool(name: &str) -> Command {
    let found = Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{name} is missing: the C# tests need Debian's mono-mcs (mcs) and mono-runtime (mono), \
         which scripts/test.sh installs (apt-get install mono-mcs mono-runtime)"
    );
    Command::new(name)
}

/// Runs `cmd` to its end; panics with its output unless it succeeded.
fn run(what: &str, cmd: &mut Command) -> String {
    let output = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e}"));
    succeeded(what, &output)
}

/// The `.cs` files under `dir`, sorted, at any depth.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("read {}: {e}", d.display())) {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "cs") {
                out.push(path);
            }
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no .cs files under {}", dir.display());
    out
}

/// `mcs` in C# 7 with warnings as errors: `sources` into `out` (a library unless it ends
/// in `.exe`), referencing `references`.
fn mcs(sources: &[PathBuf], out: &Path, references: &[&Path]) {
    let mut cmd = tool("mcs");
    cmd.args(["-langversion:7", "-warnaserror+", "-warn:4", "-debug"]);
    if out.extension().is_some_and(|e| e == "dll") {
        cmd.arg("-target:library");
    }
    cmd.arg(format!("-out:{}", out.display()));
    for r in references {
        cmd.arg(format!("-r:{}", r.display()));
    }
    cmd.args(sources);
    run(&format!("mcs -out:{}", out.display()), &mut cmd);
}

/// `GsRelay.dll`, built in `dir` from the Unity package's Runtime/ (no UnityEngine).
fn binding(dir: &Path) -> PathBuf {
    let dll = dir.join("GsRelay.dll");
    mcs(&sources(&unity().join("Runtime")), &dll, &[]);
    dll
}

/// The test program, built in `dir` against the binding.
fn test_program(dir: &Path) -> PathBuf {
    let dll = binding(dir);
    let exe = dir.join("GsRelayTests.exe");
    mcs(
        &sources(&root().join("bindings/csharp/Tests")),
        &exe,
        &[&dll],
    );
    exe
}

/// `mono exe args`, with the native library's folder on the library path.
fn mono(exe: &Path, args: &[&str]) -> Output {
    tool("mono")
        .arg("--debug")
        .arg(exe)
        .args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run mono")
}

#[test]
fn the_csharp_binding_passes_its_tests_against_the_codec_and_a_real_relay() {
    let exe = test_program(&out_dir("csharp_relay"));
    let relay = Serve::dev(&[]);
    let room = "csharp";
    let rights = Rights {
        publish: true,
        subscribe: true,
        admin: false,
    };
    let tokens: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|who| relay.token(room, who, rights))
        .collect();
    let version = env!("CARGO_PKG_VERSION");
    let output = mono(
        &exe,
        &[
            "run",
            &relay.base,
            room,
            &tokens[0],
            &tokens[1],
            &tokens[2],
            version,
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    let (passed, failed) = last
        .split_once(" passed, ")
        .and_then(|(p, f)| Some((p.parse::<u32>().ok()?, f.strip_suffix(" failed")?)))
        .unwrap_or_else(|| {
            panic!(
                "the last line is not `N passed, M failed`: {last:?}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    assert_eq!(
        failed,
        "0",
        "C# cases failed:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(passed > 0, "no case ran");
    assert!(output.status.success(), "{}", output.status);
}

/// The first `csharp` code block of the guide's "Quick start" section.
fn quick_start() -> String {
    let guide = std::fs::read_to_string(root().join("docs/csharp-client.md")).expect("the guide");
    let section = guide
        .split_once("\n## Quick start\n")
        .expect("a Quick start section")
        .1;
    let code = section
        .split_once("```csharp\n")
        .expect("a csharp block in Quick start")
        .1;
    code.split_once("\n```")
        .expect("the block's end")
        .0
        .to_owned()
}

#[test]
fn the_guides_quick_start_compiles_and_runs_as_written_two_in_a_room() {
    let dir = out_dir("csharp_quickstart");
    let source = dir.join("QuickStart.cs");
    std::fs::write(&source, quick_start()).expect("write QuickStart.cs");
    let dll = binding(&dir);
    let exe = dir.join("QuickStart.exe");
    mcs(&[source], &exe, &[&dll]);
    let relay = Serve::dev(&[]);
    let room = "quickstart";
    let rights = Rights {
        publish: true,
        subscribe: true,
        admin: false,
    };
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|who| {
            tool("mono")
                .arg(&exe)
                .args([&relay.base, &relay.token(room, who, rights), room])
                .env("LD_LIBRARY_PATH", lib_dir())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start the quick start")
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().expect("the quick start ends");
        let stdout = succeeded("QuickStart.exe", &output);
        for want in [
            "joined as SSRC",
            "snapshot complete",
            "'s head 1 at",
            "ended (Left)",
        ] {
            assert!(stdout.contains(want), "{want:?} not in:\n{stdout}");
        }
    }
}

#[test]
fn without_the_native_library_the_first_use_names_the_file_the_platform_and_the_architecture() {
    let dir = out_dir("csharp_noload");
    let exe = test_program(&dir);
    let output = tool("mono")
        .arg(&exe)
        .arg("noload")
        .env_remove("LD_LIBRARY_PATH")
        .current_dir(&dir)
        .output()
        .expect("run mono");
    let stdout = succeeded("GsRelayTests.exe noload", &output);
    for want in [
        "could not be loaded",
        "libgsrelay_ffi.so",
        "Plugins/Linux/x86_64/",
        "Linux",
        "X64",
        "64-bit",
    ] {
        assert!(stdout.contains(want), "{want:?} not in {stdout:?}");
    }
}

/// A C declaration's type, without `struct `, spaces normalised (`const uint8_t **`).
fn c_type(text: &str) -> String {
    let t = text.replace("struct ", "").replace('*', " * ");
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    t.replace("* *", "**")
}

/// The header's functions: name → (return type, parameter types).
fn header_functions(header: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let block = header
        .split_once("extern \"C\" {")
        .expect("the header's extern \"C\" block")
        .1;
    let code: String = block
        .lines()
        .filter(|l| !l.trim_start().starts_with("//") && !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = BTreeMap::new();
    for statement in code.split(';') {
        let Some((head, params)) = statement.split_once('(') else {
            continue;
        };
        let head = head.trim();
        let name_at = head.rfind([' ', '*']).map_or(0, |i| i + 1);
        let (ret, name) = (c_type(&head[..name_at]), head[name_at..].to_owned());
        let params = params.trim().trim_end_matches(')');
        let types = if params.trim() == "void" {
            Vec::new()
        } else {
            params
                .split(',')
                .map(|p| {
                    let p = p.trim();
                    let at = p.rfind([' ', '*']).expect("a named parameter") + 1;
                    c_type(&p[..at])
                })
                .collect()
        };
        out.insert(name, (ret, types));
    }
    out
}

/// `text` without its attributes (`[In, Out]`, `[DllImport(...)]`), keeping `[]`.
fn strip_attributes(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '[' && (depth > 0 || chars.peek().is_some_and(|n| n.is_ascii_alphabetic())) {
            depth += 1;
        } else if c == ']' && depth > 0 {
            depth -= 1;
        } else if depth == 0 {
            out.push(c);
        }
    }
    out
}

/// Native.cs's P/Invoke declarations: name → (return type, parameter types).
fn csharp_functions(native: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let code = strip_attributes(native);
    let mut out = BTreeMap::new();
    for part in code.split("static extern ").skip(1) {
        let decl = part.split(';').next().expect("a declaration");
        let (head, params) = decl.split_once('(').expect("a parameter list");
        let (ret, name) = head.trim().rsplit_once(' ').expect("a return type");
        let params = params.trim().trim_end_matches(')');
        let types = if params.trim().is_empty() {
            Vec::new()
        } else {
            params
                .split(',')
                .map(|p| {
                    let p = p.split_whitespace().collect::<Vec<_>>();
                    p[..p.len() - 1].join(" ")
                })
                .collect()
        };
        out.insert(name.to_owned(), (ret.to_owned(), types));
    }
    out
}

/// Whether the C# type `cs` passes the C type `c` as the ABI needs (integers of the same
/// width, pointers as IntPtr, refs, outs or arrays of the same struct).
fn compatible(c: &str, cs: &str) -> bool {
    let handle = |t: &str| matches!(t, "gsr_client" | "gsr_encoder" | "gsr_decoder");
    match c {
        "gsr_status" | "int32_t" => cs == "int",
        "gsr_dialect" | "uint32_t" => cs == "uint",
        "size_t" => cs == "UIntPtr",
        "size_t *" => cs == "out UIntPtr",
        "uint8_t *" => cs == "out byte",
        "const uint8_t *" => matches!(cs, "IntPtr" | "byte[]"),
        "const uint8_t **" => cs == "out IntPtr",
        "const char *" => matches!(cs, "IntPtr" | "byte[]"),
        t if handle(t) || t == "uint64_t" => cs == "ulong",
        t => {
            if t.strip_suffix(" *").is_some_and(handle) {
                return cs == "out ulong";
            }
            let (constant, pointee) = match t.strip_prefix("const ") {
                Some(rest) => (true, rest),
                None => (false, t),
            };
            let Some(s) = pointee.strip_suffix(" *").filter(|s| s.starts_with("gsr_")) else {
                return false;
            };
            cs == format!("ref {s}")
                || cs == format!("{s}[]")
                || (!constant && cs == format!("out {s}"))
        }
    }
}

/// `#define NAME value` (header) or `const T NAME = value;` (C#) of every GSR_ constant.
fn constants(text: &str, csharp: bool) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        let (name, value) = if csharp {
            let Some(rest) = line.split_once(" const ").map(|(_, r)| r) else {
                continue;
            };
            let Some((left, value)) = rest.split_once(" = ") else {
                continue;
            };
            let name = left.split_whitespace().last().unwrap_or_default();
            (name, value.trim_end_matches(';'))
        } else {
            let Some(rest) = line.strip_prefix("#define ") else {
                continue;
            };
            let Some((name, value)) = rest.split_once(' ') else {
                continue;
            };
            (name, value)
        };
        if let (true, Ok(v)) = (name.starts_with("GSR_"), value.trim().parse::<i64>()) {
            out.insert(name.to_owned(), v);
        }
    }
    out
}

#[test]
fn every_function_and_constant_of_the_header_is_declared_in_native_cs() {
    let header = std::fs::read_to_string(include_dir().join("gsrelay.h")).expect("the header");
    let native = std::fs::read_to_string(unity().join("Runtime/Native.cs")).expect("Native.cs");
    let c = header_functions(&header);
    let cs = csharp_functions(&native);
    assert!(c.len() > 20, "the header's functions were not found: {c:?}");
    let c_names: BTreeSet<_> = c.keys().collect();
    let cs_names: BTreeSet<_> = cs.keys().collect();
    let missing: Vec<_> = c_names.difference(&cs_names).collect();
    let extra: Vec<_> = cs_names.difference(&c_names).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "Native.cs and crates/ffi/include/gsrelay.h differ: not declared in C#: {missing:?}; \
         not in the header: {extra:?}"
    );
    let mut wrong = Vec::new();
    for (name, (c_ret, c_params)) in &c {
        let (cs_ret, cs_params) = &cs[name];
        if !compatible(c_ret, cs_ret) {
            wrong.push(format!("{name} returns {c_ret}, C# {cs_ret}"));
        }
        if c_params.len() != cs_params.len() {
            wrong.push(format!("{name} takes {c_params:?}, C# {cs_params:?}"));
            continue;
        }
        for (i, (c_t, cs_t)) in c_params.iter().zip(cs_params).enumerate() {
            if !compatible(c_t, cs_t) {
                wrong.push(format!("{name} parameter {i}: {c_t} in C, {cs_t} in C#"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "parameter types differ:\n{}",
        wrong.join("\n")
    );

    let c_constants = constants(&header, false);
    let cs_constants = constants(&native, true);
    assert!(c_constants.len() > 40, "{c_constants:?}");
    let names: BTreeSet<_> = c_constants.keys().chain(cs_constants.keys()).collect();
    let differ: Vec<String> = names
        .into_iter()
        .filter(|n| c_constants.get(*n) != cs_constants.get(*n))
        .map(|n| {
            format!(
                "{n}: {:?} in C, {:?} in C#",
                c_constants.get(n),
                cs_constants.get(n)
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "the GSR_ constants of the header and Native.cs differ:\n{}",
        differ.join("\n")
    );
}

/// A field of a header struct: its name, its type's name, and whether it is a pointer or
/// an array (a leaf either way).
struct Field {
    name: String,
    ty: String,
    leaf: bool,
}

/// The header's structs and unions, by name, their fields in order.
fn header_structs(header: &str) -> BTreeMap<String, Vec<Field>> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, Vec<Field>)> = None;
    for line in header.lines() {
        let line = line.trim();
        if let Some(rest) = line
            .strip_prefix("typedef struct ")
            .or_else(|| line.strip_prefix("typedef union "))
            && let Some(name) = rest.strip_suffix(" {")
        {
            current = Some((name.to_owned(), Vec::new()));
        } else if let Some((name, fields)) = current.as_mut() {
            if line.starts_with('}') {
                out.insert(std::mem::take(name), std::mem::take(fields));
                current = None;
            } else if let Some(decl) = line.strip_suffix(';')
                && !line.starts_with("//")
            {
                let array = decl.contains('[');
                let decl = decl.split('[').next().unwrap_or_default();
                let at = decl.rfind([' ', '*']).expect("a named field") + 1;
                let ty = c_type(&decl[..at]);
                fields.push(Field {
                    name: decl[at..].to_owned(),
                    leaf: array || ty.contains('*'),
                    ty: ty
                        .trim_start_matches("const ")
                        .trim_start_matches("union ")
                        .to_owned(),
                });
            }
        }
    }
    out
}

/// The paths of `ty`'s leaf fields (`object.u.head1.location.x`), depth first.
fn leaves(structs: &BTreeMap<String, Vec<Field>>, ty: &str, prefix: &str, out: &mut Vec<String>) {
    for f in &structs[ty] {
        let path = if prefix.is_empty() {
            f.name.clone()
        } else {
            format!("{prefix}.{}", f.name)
        };
        if !f.leaf && structs.contains_key(&f.ty) {
            leaves(structs, &f.ty, &path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn the_csharp_structs_have_the_size_and_field_offsets_gcc_gives_the_header() {
    let dir = out_dir("csharp_layout");
    let header = std::fs::read_to_string(include_dir().join("gsrelay.h")).expect("the header");
    let structs = header_structs(&header);
    assert!(structs.contains_key("gsr_event"), "{:?}", structs.keys());

    // A C program printing, for every struct, its size and each leaf field's offset and
    // size, in the lines the C# program prints.
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"gsrelay.h\"\nint main(void) {\n",
    );
    for ty in structs.keys() {
        c += &format!("    printf(\"{ty} size %zu\\n\", sizeof({ty}));\n");
        let mut paths = Vec::new();
        leaves(&structs, ty, "", &mut paths);
        for p in paths {
            c += &format!(
                "    printf(\"{ty}.{p} %zu %zu\\n\", offsetof({ty}, {p}), sizeof((({ty} *)0)->{p}));\n"
            );
        }
    }
    c += "    return 0;\n}\n";
    let source = dir.join("layout.c");
    std::fs::write(&source, c).expect("write layout.c");
    let exe = dir.join("layout");
    run(
        "gcc layout.c",
        Command::new("gcc")
            .args(["-std=c11", "-Wall", "-Werror", "-I"])
            .arg(include_dir())
            .arg(&source)
            .arg("-o")
            .arg(&exe),
    );
    let c_lines = run("layout", &mut Command::new(&exe));

    let program = test_program(&dir);
    let output = mono(&program, &["layout"]);
    let cs_lines = succeeded("GsRelayTests.exe layout", &output);

    let by_type = |text: &str| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines() {
            let ty = line.split(['.', ' ']).next().unwrap_or_default().to_owned();
            m.entry(ty).or_default().insert(line.to_owned());
        }
        m
    };
    let c_types = by_type(&c_lines);
    let cs_types = by_type(&cs_lines);
    // Every struct a function takes is declared in C#, and every C# one is the header's
    // to the byte: its size and each field's offset and size.
    for needed in [
        "gsr_join_options",
        "gsr_event",
        "gsr_object",
        "gsr_object_ref",
        "gsr_client_info",
    ] {
        assert!(
            cs_types.contains_key(needed),
            "{needed} is not in Native.cs"
        );
    }
    let mut wrong = Vec::new();
    for (ty, lines) in &cs_types {
        let Some(want) = c_types.get(ty) else {
            wrong.push(format!("{ty} is not a struct of the header"));
            continue;
        };
        for missing in want.difference(lines) {
            wrong.push(format!("C:  {missing}"));
        }
        for extra in lines.difference(want) {
            wrong.push(format!("C#: {extra}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "Native.cs's layouts differ from the header's (offset size):\n{}",
        wrong.join("\n")
    );
}

/// The public type names a C# file declares (`class X`, `struct X`, `enum X`).
fn declared_types(text: &str) -> Vec<String> {
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| matches!(w[0], "class" | "struct" | "enum"))
        .map(|w| w[1].to_owned())
        .collect()
}

#[test]
fn the_unity_package_and_its_sample_compile_with_mcs_against_a_unityengine_stub() {
    let dir = out_dir("csharp_unity");
    let package = unity();

    // The package's manifest, assembly definition and linker file.
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(package.join("package.json")).expect("package.json"),
    )
    .expect("package.json is JSON");
    assert_eq!(manifest["name"], "com.gsrelay.client");
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert!(manifest["unity"].is_string(), "{manifest}");
    let samples = manifest["samples"].as_array().expect("samples");
    for s in samples {
        let path = s["path"].as_str().expect("a sample's path");
        assert!(
            package.join(path).is_dir(),
            "sample folder {path} is missing"
        );
    }
    let asmdef: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(package.join("Runtime/GsRelay.asmdef")).expect("the asmdef"),
    )
    .expect("GsRelay.asmdef is JSON");
    assert_eq!(asmdef["name"], "GsRelay");
    assert_eq!(
        asmdef["noEngineReferences"], true,
        "Runtime/ is engine-free"
    );
    assert_eq!(asmdef["allowUnsafeCode"], false);
    let link = std::fs::read_to_string(package.join("link.xml")).expect("link.xml");
    assert!(
        link.contains("<assembly fullname=\"GsRelay\" preserve=\"all\""),
        "{link}"
    );
    let plugins =
        std::fs::read_to_string(package.join("Plugins/README.md")).expect("Plugins/README.md");
    for place in [
        "Linux/x86_64/libgsrelay_ffi.so",
        "Windows/x86_64/gsrelay_ffi.dll",
        "macOS/libgsrelay_ffi.dylib",
        "Android/arm64-v8a/libgsrelay_ffi.so",
        "iOS/libgsrelay_ffi.a",
    ] {
        assert!(
            plugins.contains(place),
            "Plugins/README.md does not name {place}"
        );
        let folder = Path::new(place).parent().expect("a folder");
        assert!(
            package.join("Plugins").join(folder).is_dir(),
            "Plugins/{} is missing",
            folder.display()
        );
    }

    // Every asset Unity imports has its .meta (an installed package is read-only: Unity
    // ignores a file without one), each with its own GUID, and no .meta is left without
    // its asset. Folders ending in `~` and dotfiles are not imported; the native libraries
    // and theirs are build-plugins.sh's, not checked in.
    let mut guids = BTreeMap::new();
    let mut stack = vec![package.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("a package folder") {
            let path = entry.expect("an entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            if name.starts_with('.') || name.ends_with('~') {
                continue;
            }
            let built = [".so", ".dll", ".dylib", ".a"]
                .iter()
                .any(|ext| name.ends_with(ext) || name.ends_with(&format!("{ext}.meta")));
            if built {
                continue;
            }
            if let Some(asset) = name.strip_suffix(".meta") {
                assert!(d.join(asset).exists(), "{} has no asset", path.display());
                let text = std::fs::read_to_string(&path).expect("a .meta");
                let guid = text
                    .lines()
                    .find_map(|l| l.strip_prefix("guid: "))
                    .unwrap_or_else(|| panic!("{} has no guid", path.display()));
                assert!(
                    guid.len() == 32 && guid.chars().all(|c| c.is_ascii_hexdigit()),
                    "{}: guid {guid:?}",
                    path.display()
                );
                if let Some(other) = guids.insert(guid.to_owned(), path.clone()) {
                    panic!("{} and {} share a guid", path.display(), other.display());
                }
                continue;
            }
            let meta = d.join(format!("{name}.meta"));
            assert!(
                meta.is_file(),
                "{} has no .meta (Unity ignores it in an installed package): add one with a \
                 new 32-hex-digit guid, as the others",
                path.display()
            );
            if path.is_dir() {
                stack.push(path);
            }
        }
    }

    // The stub holds only types the sample uses, and is compiled on its own, as Unity's
    // UnityEngine.dll would be referenced.
    let stub_dir = package.join("Stubs~");
    let sample_dir = package.join("Samples~/Basic");
    let sample_text: String = sources(&sample_dir)
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("a sample source"))
        .collect();
    for stub in sources(&stub_dir) {
        let text = std::fs::read_to_string(&stub).expect("the stub");
        for ty in declared_types(&text) {
            // `[Tooltip(...)]` uses TooltipAttribute.
            let used = ty.strip_suffix("Attribute").unwrap_or(&ty);
            assert!(
                sample_text.contains(used),
                "{} stubs {ty}, which the sample does not use",
                stub.display()
            );
        }
    }
    let engine = dir.join("UnityEngine.dll");
    mcs(&sources(&stub_dir), &engine, &[]);
    // Runtime/ as Unity compiles it for iOS (DllImport "__Internal") and Android players.
    let dll = binding(&dir);
    for define in ["UNITY_IOS", "UNITY_ANDROID"] {
        let out = dir.join(define).join("GsRelay.dll");
        std::fs::create_dir_all(out.parent().expect("a folder")).expect("a folder");
        let mut cmd = tool("mcs");
        cmd.args(["-langversion:7", "-warnaserror+", "-target:library"])
            .arg(format!("-define:{define}"))
            .arg(format!("-out:{}", out.display()))
            .args(sources(&package.join("Runtime")));
        run(&format!("mcs -define:{define}"), &mut cmd);
    }
    let sample = dir.join("GsRelay.Samples.Basic.dll");
    mcs(&sources(&sample_dir), &sample, &[&dll, &engine]);
    assert!(sample.is_file());
}
