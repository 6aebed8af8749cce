#!/usr/bin/env bash
# Installs what the tests need when the machine lacks it: a JDK 17, Maven, Go, a C compiler and Python 3
# through the system's package manager (apt, dnf or yum; as root, or through sudo), and Rust
# through rustup. Sourced by scripts/test-all.sh, so `scripts/test-all.sh` works on a fresh machine.
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(java)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v go >/dev/null 2>&1 || missing+=(go)
command -v cc >/dev/null 2>&1 || missing+=(cc)
command -v python3 >/dev/null 2>&1 || missing+=(python3)

if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing what is missing: ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  if command -v apt-get >/dev/null 2>&1; then
    declare -A apt=([java]=openjdk-17-jdk-headless [maven]=maven [go]=golang-go [cc]=build-essential [python3]=python3)
    pkgs=(); for m in "${missing[@]}"; do pkgs+=("${apt[$m]}"); done
    "${sudo_cmd[@]}" apt-get update -q
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}"
  elif command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1; then
    pm=$(command -v dnf || command -v yum)
    declare -A rpm=([java]=java-17-openjdk-devel [maven]=maven [go]=golang [cc]=gcc [python3]=python3)
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
# Versions for the log. `head` closing the pipe early must not fail the run (pipefail).
for tool in "cargo --version" "java -version" "mvn -v" "go version"; do
  { $tool 2>&1 || true; } | head -n 1 || true
done
