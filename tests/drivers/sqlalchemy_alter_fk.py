"""SQLAlchemy 2 (over psycopg 3): foreign keys added by ALTER TABLE (issue 14).

Two tables that reference each other: `metadata.create_all` creates both,
then adds the `use_alter=True` constraint with ALTER TABLE ... ADD
CONSTRAINT ... FOREIGN KEY; `metadata.drop_all` drops it with ALTER TABLE
... DROP CONSTRAINT before the tables. Run by crates/server/tests/drivers.rs
with EDDY_PORT set; each check states PostgreSQL 15's answer
(scripts/ci/drivers-against-postgres.sh runs this file against it).
"""
from sqlalchemy_common import check, server_url

from sqlalchemy import (
    Column,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    exc,
    inspect,
    text,
)


engine = create_engine(server_url())

statements = []


@event.listens_for(engine, "before_cursor_execute")
def record(conn, cursor, statement, parameters, context, executemany):
    statements.append(" ".join(statement.split()))


metadata = MetaData()
# a department has a manager (an employee); an employee has a department
department = Table(
    "sa_department",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(50)),
    Column(
        "manager_id",
        Integer,
        ForeignKey("sa_employee.id", use_alter=True, name="fk_department_manager"),
    ),
)
employee = Table(
    "sa_employee",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(50)),
    Column("department_id", Integer, ForeignKey("sa_department.id")),
)

metadata.create_all(engine)
alters = [s for s in statements if s.startswith("ALTER TABLE")]
check(
    "create_all adds the cyclic constraint by ALTER TABLE",
    alters,
    [
        "ALTER TABLE sa_department ADD CONSTRAINT fk_department_manager "
        "FOREIGN KEY(manager_id) REFERENCES sa_employee (id)"
    ],
)

fks = inspect(engine).get_foreign_keys("sa_department")
check(
    "the inspector sees the added constraint",
    [(f["name"], f["constrained_columns"], f["referred_table"], f["referred_columns"]) for f in fks],
    [("fk_department_manager", ["manager_id"], "sa_employee", ["id"])],
)

with engine.begin() as conn:
    conn.execute(department.insert(), [{"id": 1, "name": "eng", "manager_id": None}])
    conn.execute(employee.insert(), [{"id": 10, "name": "ada", "department_id": 1}])
    conn.execute(department.update().where(department.c.id == 1).values(manager_id=10))

# the added constraint is enforced: a manager who does not exist
try:
    with engine.begin() as conn:
        conn.execute(department.insert(), [{"id": 2, "name": "ops", "manager_id": 99}])
    check("orphan manager insert", "accepted", "IntegrityError")
except exc.IntegrityError as e:
    check("orphan manager SQLSTATE", e.orig.sqlstate, "23503")
    check(
        "orphan manager message",
        str(e.orig).splitlines()[0],
        'insert or update on table "sa_department" violates foreign key constraint "fk_department_manager"',
    )

# ... and on the referenced table: the manager cannot go
try:
    with engine.begin() as conn:
        conn.execute(employee.delete().where(employee.c.id == 10))
    check("delete of a referenced manager", "accepted", "IntegrityError")
except exc.IntegrityError as e:
    check("referenced manager SQLSTATE", e.orig.sqlstate, "23503")

with engine.connect() as conn:
    check(
        "rows after the failures",
        conn.execute(text("SELECT id, manager_id FROM sa_department ORDER BY id")).all(),
        [(1, 10)],
    )

statements.clear()
metadata.drop_all(engine)
check(
    "drop_all drops the cyclic constraint first",
    [s for s in statements if s.startswith("ALTER TABLE")],
    ["ALTER TABLE sa_department DROP CONSTRAINT fk_department_manager"],
)
with engine.connect() as conn:
    check(
        "tables left",
        conn.execute(
            text("SELECT count(*) FROM pg_class WHERE relname IN ('sa_department', 'sa_employee')")
        ).scalar(),
        0,
    )
print("sqlalchemy use_alter: ok")
