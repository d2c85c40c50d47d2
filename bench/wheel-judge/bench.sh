#!/usr/bin/env bash
# Plan-time wheel judgement (issue 24, item 2), side by side in one run, for each wheel named:
#   kiln arch WHEEL       every CUDA binary of the wheel judged from the zip, large members
#                         streamed with only their headers kept (fatbin::sparse)
#   unzip -p WHEEL        every member decompressed and thrown away: the floor of any reader
#                         that looks at all the bytes
#   curl URL              the same wheel fetched from where kiln fetches it (when URL is given)
# Wall time and peak RSS from GNU time. Run by hand:
#   bench/wheel-judge/bench.sh KILN WHEEL [URL] [WHEEL [URL] ...]
set -euo pipefail
kiln=$1; shift
measure() { # label cmd...: "label  wall s  peak MiB"
  local label=$1; shift
  local t; t=$(mktemp)
  /usr/bin/time -f '%e %M' -o "$t" "$@" > /dev/null 2>&1 || true
  read -r wall rss < "$t"; rm -f "$t"
  printf '  %-28s %7.2f s %8.1f MiB\n' "$label" "$wall" "$(echo "$rss / 1024" | bc -l)"
}
while [ $# -gt 0 ]; do
  wheel=$1; shift
  url=
  if [ $# -gt 0 ] && [[ $1 == http* ]]; then url=$1; shift; fi
  printf '%s (%s MB)\n' "$(basename "$wheel")" "$(( $(stat -c %s "$wheel") / 1000000 ))"
  members=$(unzip -l "$wheel" | awk '$4 ~ /\.so/ {n++; s+=$1} END {printf "%d .so members, %.0f MB unpacked", n, s/1e6}')
  echo "  $members"
  measure "kiln arch (streamed)" "$kiln" arch --json "$wheel"
  measure "unzip -p (decompress all)" unzip -p "$wheel"
  if [ -n "$url" ]; then measure "curl (download)" curl -fsSL -o /dev/null "$url"; fi
  "$kiln" arch --json "$wheel" | python3 -c '
import json, sys
files = json.load(sys.stdin)["files"]
images = sum(len(f.get("sass", [])) + len(f.get("ptx", [])) for f in files)
print(f"  {len(files)} CUDA members, {images} distinct images over them")'
done
