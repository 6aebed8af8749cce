#!/usr/bin/env bash
# Installs what the tests need when the machine lacks it: a JDK 17, Maven, Go, a C compiler, Python 3
# (with venv) and Node.js with npm through the system's package manager (apt, dnf or yum; as root, or
# through sudo), Rust through rustup, and the pinned Python and Node.js RocketMQ clients into the
# repository (compat-tests/grpc-clients). Sourced by scripts/test-all.sh, so `scripts/test-all.sh`
# works on a fresh machine.
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(java)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v go >/dev/null 2>&1 || missing+=(go)
command -v cc >/dev/null 2>&1 || missing+=(cc)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# Debian's python3 makes venvs only with python3-venv (ensurepip).
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(venv)
command -v node >/dev/null 2>&1 || missing+=(node)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing what is missing: ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  if command -v apt-get >/dev/null 2>&1; then
    declare -A apt=([java]=openjdk-17-jdk-headless [maven]=maven [go]=golang-go [cc]=build-essential [python3]=python3
                 [venv]=python3-venv [node]=nodejs [npm]=npm)
    pkgs=(); for m in "${missing[@]}"; do pkgs+=("${apt[$m]}"); done
    "${sudo_cmd[@]}" apt-get update -q
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}"
  elif command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1; then
    pm=$(command -v dnf || command -v yum)
    declare -A rpm=([java]=java-17-openjdk-devel [maven]=maven [go]=golang [cc]=gcc [python3]=python3 [venv]=python3
                 [node]=nodejs [npm]=npm)
    pkgs=(); for m in "${missing[@]}"; do pkgs+=("${rpm[$m]}"); done
    "${sudo_cmd[@]}" "$pm" install -y -q "${pkgs[@]}"
  else
    echo "no apt-get, dnf or yum: install ${missing[*]} by hand" >&2
    exit 1
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "== installing Rust with rustup"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  . "$HOME/.cargo/env"
fi
# The format and lint checks need rustfmt and clippy (rustup's minimal profile has neither).
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    echo "== adding rustfmt and clippy"
    rustup component add rustfmt clippy
  else
    echo "cargo fmt and cargo clippy are needed: install rustfmt and clippy" >&2
    exit 1
  fi
fi

# The official RocketMQ 5 Python and Node.js clients that compat-tests/java GrpcClientsTest drives, at the
# versions pinned in compat-tests/grpc-clients (requirements.txt: every package pinned; package-lock.json:
# every package with its hash), into a venv and a node_modules there, not globally. Each is reinstalled
# only when its pin file changed since the last install (a copy of it is kept beside the install).
grpc_clients="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/compat-tests/grpc-clients"
if ! cmp -s "$grpc_clients/python/requirements.txt" "$grpc_clients/python/.venv/installed-requirements.txt"; then
  echo "== installing the pinned Python client into compat-tests/grpc-clients/python/.venv"
  python3 -m venv --clear "$grpc_clients/python/.venv"
  "$grpc_clients/python/.venv/bin/pip" install -q --disable-pip-version-check --no-deps \
    -r "$grpc_clients/python/requirements.txt"
  "$grpc_clients/python/.venv/bin/pip" check --disable-pip-version-check  # the pins cover every dependency
  cp "$grpc_clients/python/requirements.txt" "$grpc_clients/python/.venv/installed-requirements.txt"
fi
if ! cmp -s "$grpc_clients/node/package-lock.json" "$grpc_clients/node/node_modules/installed-package-lock.json"; then
  echo "== installing the pinned Node.js client into compat-tests/grpc-clients/node/node_modules"
  (cd "$grpc_clients/node" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  cp "$grpc_clients/node/package-lock.json" "$grpc_clients/node/node_modules/installed-package-lock.json"
fi

# Versions for the log. `head` closing the pipe early must not fail the run (pipefail).
for tool in "cargo --version" "java -version" "mvn -v" "go version" "python3 --version" "node --version"; do
  { $tool 2>&1 || true; } | head -n 1 || true
done
