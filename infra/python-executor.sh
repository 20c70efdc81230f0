#!/usr/bin/env bash
# Installs the reference Python executor (executors/python) into a virtual environment of its
# own and prints that environment's python, for the conformance suite:
#   export KADENCE_TEST_PYTHON_EXECUTOR=$(infra/python-executor.sh)
# The environment lives in target/python-executor (KADENCE_PYTHON_VENV overrides) and is
# reinstalled only when the package's files change (a hash of them is kept beside it).
# Everything but the path goes to standard error.
set -euo pipefail

repo_root=$(cd "$(dirname "$0")/.." && pwd)
package="$repo_root/executors/python"
venv="${KADENCE_PYTHON_VENV:-$repo_root/target/python-executor}"
stamp="$venv/.package-hash"

package_hash=$(cd "$package" && find . -type f \( -name '*.py' -o -name '*.toml' -o -name '*.avsc' \) \
  -not -path './build/*' -not -path '*.egg-info/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)

if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$package_hash" ]]; then
  echo "installing the Python executor into $venv" >&2
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$package" >&2
  echo "$package_hash" > "$stamp"
fi
echo "$venv/bin/python"
