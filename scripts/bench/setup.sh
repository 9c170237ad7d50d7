#!/usr/bin/env bash
# Installs what `eddy bench` needs outside Rust:
#  * .venv-bench/ (repo root): a Python venv with the DuckDB and DataFusion
#    peers (driven by scripts/bench/peer.py) and matplotlib for the charts;
#  * PostgreSQL 15 from Debian's packages (the harness initdb's and starts a
#    private instance itself; nothing here touches a system cluster).
# Idempotent; safe to re-run. Pass --no-postgres to skip apt.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=.venv-bench
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# Keep the venv out of git even where .gitignore does not name it.
echo '*' > "$VENV/.gitignore"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q \
  'duckdb>=1.1' 'datafusion>=43' 'pyarrow>=17' 'matplotlib>=3.8'
"$VENV/bin/python" - <<'PY'
import duckdb, datafusion, pyarrow, matplotlib
print("duckdb", duckdb.__version__, "| datafusion", datafusion.__version__,
      "| pyarrow", pyarrow.__version__, "| matplotlib", matplotlib.__version__)
PY

if [ "${1:-}" != "--no-postgres" ]; then
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    else
      echo "notice: no apt-get; install PostgreSQL 15 yourself to benchmark it" >&2
    fi
  fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true
fi
