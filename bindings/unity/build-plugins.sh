#!/usr/bin/env bash
# Builds gsrelay's native library (crates/ffi) in release for Unity and puts it in the
# package's Plugins/ folder with the .meta file of its import settings:
# `bindings/unity/build-plugins.sh [PLATFORM...]`, PLATFORM one of
#
#   linux-x86_64    Plugins/Linux/x86_64/libgsrelay_ffi.so       (the default)
#   windows-x86_64  Plugins/Windows/x86_64/gsrelay_ffi.dll       ($WINDOWS_TARGET, default
#                   x86_64-pc-windows-msvc; x86_64-pc-windows-gnu cross-builds with mingw-w64)
#   macos           Plugins/macOS/libgsrelay_ffi.dylib           (arm64 + x86_64, lipo)
#   android-arm64   Plugins/Android/arm64-v8a/libgsrelay_ffi.so  (the NDK's linker, e.g.
#                   CARGO_TARGET_AARCH64_LINUX_ANDROID_LINKER)
#   ios             Plugins/iOS/libgsrelay_ffi.a                 (static; on macOS with Xcode)
#
# Each platform but the machine's own needs its Rust target (`rustup target add ...`) and
# that platform's linker; a missing target stops the script saying which. Only
# linux-x86_64 is built and tried on the project's machines.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"

say() { echo "build-plugins.sh: $*" >&2; }

# The release library of `triple` ("" for the machine's own target), built if needed.
build() {
  local triple="$1" file="$2"
  if [ -z "$triple" ]; then
    cargo build --release --manifest-path "$root/Cargo.toml" -p gsrelay-ffi >&2
    echo "$target_dir/release/$file"
    return
  fi
  if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$triple"; then
    say "the Rust target $triple is not installed: rustup target add $triple (and its linker)"
    exit 1
  fi
  cargo build --release --manifest-path "$root/Cargo.toml" -p gsrelay-ffi --target "$triple" >&2
  echo "$target_dir/$triple/release/$file"
}

# The import settings of a native plugin: `meta GUID` then the platformData entries.
meta() {
  local guid="$1"
  shift
  cat <<EOF
fileFormatVersion: 2
guid: $guid
PluginImporter:
  externalObjects: {}
  serializedVersion: 2
  iconMap: {}
  executionOrder: {}
  defineConstraints: []
  isPreloaded: 0
  isOverridable: 0
  isExplicitlyReferenced: 0
  validateReferences: 1
  platformData:
  - first:
      Any: 
    second:
      enabled: 0
      settings: {}
EOF
  printf '%s\n' "$@"
  cat <<EOF
  userData: 
  assetBundleName: 
  assetBundleVariant: 
EOF
}

# `entry FIRST_KEY FIRST_VALUE ENABLED [SETTING...]`: one platformData entry.
entry() {
  local key="$1" value="$2" enabled="$3"
  shift 3
  printf '  - first:\n      %s: %s\n    second:\n      enabled: %s\n' "$key" "$value" "$enabled"
  if [ "$#" = 0 ]; then
    printf '      settings: {}\n'
  else
    printf '      settings:\n'
    printf '        %s\n' "$@"
  fi
}

# Copies `from` to Plugins/`dest` and writes its .meta from the remaining arguments.
place() {
  local from="$1" dest="$2" guid="$3"
  shift 3
  mkdir -p "$(dirname "$here/Plugins/$dest")"
  cp "$from" "$here/Plugins/$dest"
  meta "$guid" "$@" >"$here/Plugins/$dest.meta"
  say "Plugins/$dest"
}

# Drops the debug information (most of the release library: the workspace's release
# profile keeps line tables) from Plugins/`dest` with `tool` and its `flag`, if the tool
# runs; says so otherwise.
strip_debug() {
  local dest="$1" tool="$2" flag="$3"
  if command -v "$tool" >/dev/null; then
    "$tool" "$flag" "$here/Plugins/$dest"
  else
    say "not stripped: no $tool (set STRIP to this platform's strip)"
  fi
}

platforms=("$@")
[ "${#platforms[@]}" -gt 0 ] || platforms=(linux-x86_64)
for platform in "${platforms[@]}"; do
  case "$platform" in
  linux-x86_64)
    if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
      lib="$(build "" libgsrelay_ffi.so)"
    else
      lib="$(build x86_64-unknown-linux-gnu libgsrelay_ffi.so)"
    fi
    place "$lib" Linux/x86_64/libgsrelay_ffi.so 4f1c0d2e8a5b4c6d9e7f1a2b3c4d5e61 \
      "$(entry Editor Editor 1 'CPU: x86_64' 'DefaultValueInitialized: true' 'OS: Linux')" \
      "$(entry Standalone Linux64 1 'CPU: x86_64')" \
      "$(entry Standalone OSXUniversal 0 'CPU: None')" \
      "$(entry Standalone Win64 0 'CPU: None')"
    strip_debug Linux/x86_64/libgsrelay_ffi.so "${STRIP:-strip}" --strip-debug
    ;;
  windows-x86_64)
    lib="$(build "${WINDOWS_TARGET:-x86_64-pc-windows-msvc}" gsrelay_ffi.dll)"
    place "$lib" Windows/x86_64/gsrelay_ffi.dll 4f1c0d2e8a5b4c6d9e7f1a2b3c4d5e62 \
      "$(entry Editor Editor 1 'CPU: x86_64' 'DefaultValueInitialized: true' 'OS: Windows')" \
      "$(entry Standalone Win64 1 'CPU: x86_64')" \
      "$(entry Standalone Linux64 0 'CPU: None')" \
      "$(entry Standalone OSXUniversal 0 'CPU: None')"
    ;;
  macos)
    arm="$(build aarch64-apple-darwin libgsrelay_ffi.dylib)"
    x64="$(build x86_64-apple-darwin libgsrelay_ffi.dylib)"
    universal="$target_dir/universal-apple-darwin/libgsrelay_ffi.dylib"
    mkdir -p "$(dirname "$universal")"
    lipo -create "$arm" "$x64" -output "$universal"
    place "$universal" macOS/libgsrelay_ffi.dylib 4f1c0d2e8a5b4c6d9e7f1a2b3c4d5e63 \
      "$(entry Editor Editor 1 'CPU: AnyCPU' 'DefaultValueInitialized: true' 'OS: OSX')" \
      "$(entry Standalone OSXUniversal 1 'CPU: AnyCPU')" \
      "$(entry Standalone Linux64 0 'CPU: None')" \
      "$(entry Standalone Win64 0 'CPU: None')"
    strip_debug macOS/libgsrelay_ffi.dylib "${STRIP:-strip}" -S
    ;;
  android-arm64)
    lib="$(build aarch64-linux-android libgsrelay_ffi.so)"
    place "$lib" Android/arm64-v8a/libgsrelay_ffi.so 4f1c0d2e8a5b4c6d9e7f1a2b3c4d5e64 \
      "$(entry Android Android 1 'CPU: ARM64')" \
      "$(entry Editor Editor 0 'CPU: AnyCPU' 'DefaultValueInitialized: true' 'OS: AnyOS')"
    strip_debug Android/arm64-v8a/libgsrelay_ffi.so "${STRIP:-llvm-strip}" --strip-debug
    ;;
  ios)
    lib="$(build aarch64-apple-ios libgsrelay_ffi.a)"
    place "$lib" iOS/libgsrelay_ffi.a 4f1c0d2e8a5b4c6d9e7f1a2b3c4d5e65 \
      "$(entry iPhone iOS 1 'AddToEmbeddedBinaries: false' 'CPU: AnyCPU' 'CompileFlags: ' 'FrameworkDependencies: ')" \
      "$(entry Editor Editor 0 'CPU: AnyCPU' 'DefaultValueInitialized: true' 'OS: AnyOS')"
    strip_debug iOS/libgsrelay_ffi.a "${STRIP:-strip}" -S
    ;;
  *)
    say "unknown platform $platform (linux-x86_64, windows-x86_64, macos, android-arm64, ios)"
    exit 2
    ;;
  esac
done
