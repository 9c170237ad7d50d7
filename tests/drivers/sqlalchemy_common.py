"""What the SQLAlchemy and Alembic scripts share: the server's URL from the
environment crates/server/tests/drivers.rs sets (EDDY_PORT, and EDDY_USER,
EDDY_PASSWORD, EDDY_DB where given), and `check`, which stops the script at
the first answer that differs from PostgreSQL 15's."""
import os
import sys


def check(what, got, want):
    if got != want:
        print(f"FAIL: {what}: got {got!r}, PostgreSQL gives {want!r}", file=sys.stderr)
        sys.exit(1)


def server_url():
    port = os.environ["EDDY_PORT"]
    user = os.environ.get("EDDY_USER", "eddy")
    password = os.environ.get("EDDY_PASSWORD", "secret")
    db = os.environ.get("EDDY_DB", "eddy")
    return f"postgresql+psycopg://{user}:{password}@127.0.0.1:{port}/{db}?sslmode=disable"
