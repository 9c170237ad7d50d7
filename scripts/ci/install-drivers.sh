#!/usr/bin/env bash
# Installs the real PostgreSQL client drivers the end-to-end driver tests use
# (crates/server/tests/drivers.rs), from the package registries, into
# target/drivers/ (git-ignored). Idempotent: a second run only checks.
#
#   python: psycopg 3, psycopg2, asyncpg, SQLAlchemy 2, pandas, Alembic, Django -> target/drivers/venv
#   node:   node-postgres (pg)                          -> target/drivers/node
#   java:   pgjdbc                                      -> target/drivers/jars
#
# Each part is skipped with a notice when its runtime (python3, npm, mvn) is
# missing; the driver tests then fail in CI (CI=1) and skip elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=target/drivers
mkdir -p "$DEST"

PY_PKGS=("psycopg[binary]==3.2.10" "psycopg2-binary==2.9.10" "asyncpg==0.30.0" "SQLAlchemy==2.0.43" "pandas==2.2.3" "alembic==1.14.0" "Django==5.1.4")
NODE_PKGS=("pg@8.16.3")
PGJDBC=org.postgresql:postgresql:42.7.14

if command -v python3 >/dev/null 2>&1; then
  if [ ! -x "$DEST/venv/bin/python" ]; then
    python3 -m venv "$DEST/venv"
  fi
  if ! "$DEST/venv/bin/python" -c 'import psycopg, psycopg2, asyncpg, sqlalchemy, pandas, alembic, django' 2>/dev/null; then
    "$DEST/venv/bin/pip" install --quiet --disable-pip-version-check "${PY_PKGS[@]}"
  fi
  echo "python drivers: $DEST/venv/bin/python"
else
  echo "notice: python3 missing; python driver tests cannot run"
fi

if command -v npm >/dev/null 2>&1; then
  if [ ! -d "$DEST/node/node_modules/pg" ]; then
    mkdir -p "$DEST/node"
    npm install --silent --no-audit --no-fund --prefix "$DEST/node" "${NODE_PKGS[@]}" >/dev/null
  fi
  echo "node-postgres: $DEST/node/node_modules/pg"
else
  echo "notice: npm missing; node-postgres tests cannot run"
fi

if command -v mvn >/dev/null 2>&1; then
  if ! ls "$DEST"/jars/postgresql-*.jar >/dev/null 2>&1; then
    mvn -q dependency:copy -Dartifact="$PGJDBC" -DoutputDirectory="$DEST/jars" >/dev/null
  fi
  echo "pgjdbc: $(ls "$DEST"/jars/postgresql-*.jar)"
else
  echo "notice: mvn missing; pgjdbc tests cannot run"
fi
