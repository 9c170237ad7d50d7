"""Alembic migrations (SQLAlchemy 2 over psycopg 3) against a running server.

Alembic runs every pending migration of `alembic upgrade` in one
transaction on PostgreSQL (transactional DDL): when a later migration
fails, the tables and columns the earlier ones made are rolled back with
it, and `alembic_version` is unchanged. This script writes a real Alembic
environment (alembic.ini, env.py, three revisions) into a temporary
directory and drives it through `alembic.command`, as `alembic upgrade head`
does.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. Each check states
PostgreSQL 15's answer (scripts/ci/drivers-against-postgres.sh runs this
file against it); the script exits non-zero at the first difference.
"""
import os
from sqlalchemy_common import check, server_url
import tempfile
import textwrap

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text


url = server_url()
engine = create_engine(url)

ENV_PY = """
from alembic import context
from sqlalchemy import create_engine

config = context.config
connectable = create_engine(config.get_main_option("sqlalchemy.url"))
with connectable.connect() as connection:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()
"""

REVISIONS = {
    "a1_accounts": ("None", """
        op.create_table(
            "mig_accounts",
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("owner", sa.String(40), nullable=False),
        )
        op.execute("INSERT INTO mig_accounts (id, owner) VALUES (1, 'ann'), (2, 'bob')")
    """),
    "b2_balance": ("'a1_accounts'", """
        op.add_column("mig_accounts", sa.Column("balance", sa.Numeric(12, 2)))
        # a NOT NULL column with a server default over existing rows
        op.add_column("mig_accounts", sa.Column("tier", sa.Integer, nullable=False, server_default="1"))
        op.alter_column("mig_accounts", "owner", new_column_name="holder")
        op.execute("UPDATE mig_accounts SET balance = 10.50")
    """),
    "c3_broken": ("'b2_balance'", """
        op.create_table("mig_audit", sa.Column("id", sa.Integer, primary_key=True))
        op.execute("INSERT INTO mig_audit VALUES (1), (1)")  # duplicate key: 23505
    """),
}


def write_env(root, revisions):
    os.makedirs(os.path.join(root, "versions"), exist_ok=True)
    with open(os.path.join(root, "env.py"), "w") as f:
        f.write(ENV_PY)
    with open(os.path.join(root, "script.py.mako"), "w") as f:
        f.write("")
    for rev in revisions:
        down, body = REVISIONS[rev]
        with open(os.path.join(root, "versions", f"{rev}.py"), "w") as f:
            f.write(
                "import sqlalchemy as sa\nfrom alembic import op\n\n"
                f"revision = '{rev}'\ndown_revision = {down}\n"
                "branch_labels = None\ndepends_on = None\n\n"
                "def upgrade():\n"
                + textwrap.indent(textwrap.dedent(body).strip(), "    ")
                + "\n\ndef downgrade():\n    pass\n"
            )
    cfg = Config()
    cfg.set_main_option("script_location", root)
    cfg.set_main_option("sqlalchemy.url", url)
    return cfg


def table_exists(name):
    with engine.connect() as c:
        return c.execute(
            text("SELECT count(*) FROM information_schema.tables WHERE table_name = :n"),
            {"n": name},
        ).scalar() == 1


def version():
    if not table_exists("alembic_version"):
        return None
    with engine.connect() as c:
        return c.execute(text("SELECT version_num FROM alembic_version")).scalar()


with tempfile.TemporaryDirectory() as root:
    # 1. all three at once: the third fails, so nothing of any is left
    cfg = write_env(root, ["a1_accounts", "b2_balance", "c3_broken"])
    try:
        command.upgrade(cfg, "head")
        check("upgrade through a failing migration", "succeeded", "failed with 23505")
    except Exception as e:  # noqa: BLE001 - the driver's error, whatever its class
        check("the failing migration's SQLSTATE", getattr(getattr(e, "orig", None), "sqlstate", None), "23505")
    check("mig_accounts after the failed upgrade", table_exists("mig_accounts"), False)
    check("mig_audit after the failed upgrade", table_exists("mig_audit"), False)
    check("alembic_version after the failed upgrade", version(), None)

with tempfile.TemporaryDirectory() as root:
    # 2. the two good ones: committed together
    cfg = write_env(root, ["a1_accounts", "b2_balance"])
    command.upgrade(cfg, "head")
    check("version after upgrade", version(), "b2_balance")
    with engine.connect() as c:
        rows = c.execute(text("SELECT id, holder, balance, tier FROM mig_accounts ORDER BY id")).all()
    check("rows after the migrations", [(r[0], r[1], str(r[2]), r[3]) for r in rows],
          [(1, "ann", "10.50", 1), (2, "bob", "10.50", 1)])

with tempfile.TemporaryDirectory() as root:
    # 3. the broken one on top: rolled back alone, version unchanged
    cfg = write_env(root, ["a1_accounts", "b2_balance", "c3_broken"])
    try:
        command.upgrade(cfg, "head")
        check("upgrade through a failing migration", "succeeded", "failed with 23505")
    except Exception as e:  # noqa: BLE001
        check("the failing migration's SQLSTATE", getattr(getattr(e, "orig", None), "sqlstate", None), "23505")
    check("version after the failed step", version(), "b2_balance")
    check("mig_audit after the failed step", table_exists("mig_audit"), False)

with engine.begin() as c:
    c.execute(text("DROP TABLE mig_accounts"))
    c.execute(text("DROP TABLE alembic_version"))
print("alembic: ok")
