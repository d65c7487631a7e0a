#!/usr/bin/env bash
# Pictures of report.html, for a person to look at (and for the screenshot in the docs,
# docs/src/report-html.png).
#
#   bash bench/screenshot.sh [BUNDLE_DIR] [OUT_DIR]
#
# Without a bundle, runs plans/backlog-workers.toml at --quick first (a few minutes).
# Re-renders the bundle's reports with this checkout's loadlab, then takes two headless
# chromium screenshots: the top of the page (the charts of the first scenario) and the whole
# page. Needs chromium (apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-}
out=${2:-bench/out/screenshots}
command -v chromium >/dev/null || { echo "chromium is needed: apt-get install chromium" >&2; exit 2; }
cargo build -q --release -p loadlab
bin=./target/release/loadlab
if [ -z "$bundle" ]; then
  bundle=bench/out/screenshot-bundle
  rm -rf "$bundle"
  "$bin" lab plans/backlog-workers.toml --quick -q --out "$bundle" > /dev/null
fi
"$bin" report "$bundle" > /dev/null 2>&1
mkdir -p "$out"
page="file://$(realpath "$bundle/report.html")"
shoot() { # NAME WIDTH HEIGHT
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="$2,$3" --screenshot="$out/$1.png" "$page" 2>/dev/null >/dev/null
  echo "$out/$1.png"
}
shoot report-top 1100 1300
shoot report-long 1100 6000
