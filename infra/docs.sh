#!/usr/bin/env bash
# The book (docs/): built with mdBook into docs/book, every warning an error, then every
# internal link and anchor of the built pages checked with hyperlink (links to other sites are
# not followed: the test command must not depend on them). Installs both from the crate
# registry when missing, at pinned versions (cargo install --locked: their own lock files).
#
#   infra/docs.sh            build and check
#   infra/docs.sh --install  only install what is missing
#
# The reference pages (docs/src/reference/{configuration,metrics,http-api,cli}.md) are
# generated from the code and checked by `cargo test -p kadence-tests --test reference_docs`;
# `UPDATE_EXPECT=1` there writes them anew.
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo_root"
export PATH="$HOME/.cargo/bin:$PATH"

mdbook_version=0.5.4
hyperlink_version=0.3.2

install_when_missing() {
  local tool=$1 version=$2
  if ! "$tool" --version 2>/dev/null | grep -qF "$version"; then
    echo "docs: installing $tool $version (cargo install, once)"
    cargo install --quiet --locked "$tool" --version "$version"
  fi
}
install_when_missing mdbook "$mdbook_version"
install_when_missing hyperlink "$hyperlink_version"
[ "${1:-}" = "--install" ] && exit 0

# mdBook reports a missing include or a malformed page as ERROR or WARN lines and still
# exits 0: any such line fails the build here.
output=$(mdbook build docs 2>&1) || { echo "$output"; exit 1; }
if grep -E '^\s*(WARN|ERROR)' <<<"$output"; then
  echo "docs: mdbook build printed warnings or errors (above)" >&2
  exit 1
fi
hyperlink docs/book --check-anchors

# The README is read on the forge, outside the book: its relative links must name files that
# exist (it links pages, not anchors, so that is all there is to check).
python3 - <<'PY'
import pathlib, re, sys
readme = pathlib.Path("README.md")
targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme.read_text())
missing = [t for t in targets if "://" not in t and not pathlib.Path(t).exists()]
if missing:
    sys.exit("README.md links to files that do not exist: " + ", ".join(missing))
PY
