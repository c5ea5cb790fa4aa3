#!/bin/sh
# Install every Debian package Stoke needs to build, test and run its demo.
# Quietly does nothing when they are all present, so both README commands run it.
# Needs root (or sudo) only when something is missing.
set -eu

PKGS="build-essential cmake pkg-config git
liburing-dev liblmdb-dev lmdb-utils libturbojpeg0-dev libjpeg62-turbo-dev libjpeg-turbo-progs
check zlib1g-dev libpng-dev libwebp-dev libdnnl-dev libjansson-dev strace python3 python3-lmdb python3-pil python3-numpy
python3-torch python3-torchvision python3-venv python3-dev python3-pytest librsvg2-bin
clang libclang-rt-14-dev
openmpi-bin libopenmpi-dev
dataset-fashion-mnist time
zsh groff-base"

missing=""
for p in $PKGS; do
    # dpkg-query prints "install ok installed" only for a fully installed package.
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install-deps: missing packages:$missing (run as root to install them)" >&2
        exit 1
    fi
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# Try without an update first (fast when the package lists are fresh), then update and retry.
if ! $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1; then
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
