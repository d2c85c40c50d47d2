#!/usr/bin/env bash
# Makes what bench/h200/flash-attn.sh needs on the H200, on a connected machine, in .fa/ (ignored
# by git, named in the device tool's `carry`): kiln's release build, and a kiln cache seeded with
# flash-attn's sdist (checked against the recipe's sha256) and the build and run requirements as
# Python 3.12 wheels (its wheelhouse, which offline installs take with --find-links).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
url=$(sed -n 's/^sdist = "\(.*\)"/\1/p' recipes/flash-attn.toml)
sha=$(sed -n 's/^sha256 = "\(.*\)"/\1/p' recipes/flash-attn.toml)
T=$(mktemp -d)
mkdir -p "$T/sources/$sha" "$T/wheelhouse" .fa
curl -sSfL -o "$T/sources/$sha/${url##*/}" "$url"
echo "$sha  $T/sources/$sha/${url##*/}" | sha256sum -c -
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$T/wheelhouse" packaging psutil ninja wheel setuptools einops
tar -cf .fa/seed.tar -C "$T" sources wheelhouse
cp target/release/kiln .fa/kiln
rm -rf "$T"
ls -la .fa
