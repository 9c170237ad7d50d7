"""SQLAlchemy 2's Inspector reflection and pandas' read_sql_table (psycopg 3)
against a running server: the catalog queries Alembic autogenerate, pandas
and most Python tools send to learn a table's shape.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. Each check states
PostgreSQL 15's answer (scripts/ci/drivers-against-postgres.sh runs this
file against it); the script exits non-zero at the first difference.
"""
from sqlalchemy_common import check, server_url

import pandas as pd
from sqlalchemy import MetaData, Table, create_engine, inspect, select


engine = create_engine(server_url())

with engine.begin() as c:
    c.exec_driver_sql("DROP TABLE IF EXISTS insp_items")
    c.exec_driver_sql(
        "CREATE TABLE insp_items (id serial PRIMARY KEY, name varchar(40) NOT NULL UNIQUE,"
        " price numeric(10,2) DEFAULT 0, qty bigint, note text,"
        " made timestamp DEFAULT now(), ok boolean)"
    )
    c.exec_driver_sql("CREATE INDEX insp_items_price_qty ON insp_items (price, qty)")
    c.exec_driver_sql("CREATE UNIQUE INDEX insp_items_note ON insp_items (note)")
    c.exec_driver_sql("COMMENT ON TABLE insp_items IS 'things to sell'")
    c.exec_driver_sql("COMMENT ON COLUMN insp_items.qty IS 'how many'")
    c.exec_driver_sql(
        "INSERT INTO insp_items (name, price, qty, note, ok) VALUES"
        " ('a', 1.50, 3, 'x', true), ('b', 2.25, NULL, NULL, false)"
    )

inspector = inspect(engine)
check("has_table", inspector.has_table("insp_items"), True)
check("has_table of a missing table", inspector.has_table("insp_nothing"), False)

columns = [
    (c["name"], str(c["type"]), c["nullable"], c["default"], c["autoincrement"], c.get("comment"))
    for c in inspector.get_columns("insp_items")
]
check(
    "get_columns",
    columns,
    [
        ("id", "INTEGER", False, "nextval('insp_items_id_seq'::regclass)", True, None),
        ("name", "VARCHAR(40)", False, None, False, None),
        ("price", "NUMERIC(10, 2)", True, "0", False, None),
        ("qty", "BIGINT", True, None, False, "how many"),
        ("note", "TEXT", True, None, False, None),
        ("made", "TIMESTAMP", True, "now()", False, None),
        ("ok", "BOOLEAN", True, None, False, None),
    ],
)
check(
    "get_pk_constraint",
    inspector.get_pk_constraint("insp_items"),
    {
        "constrained_columns": ["id"],
        "name": "insp_items_pkey",
        "comment": None,
        "dialect_options": {"postgresql_include": []},
    },
)
indexes = sorted(
    (i["name"], i["unique"], i["column_names"], i.get("duplicates_constraint"))
    for i in inspector.get_indexes("insp_items")
)
check(
    "get_indexes",
    indexes,
    [
        ("insp_items_name_key", True, ["name"], "insp_items_name_key"),
        ("insp_items_note", True, ["note"], None),
        ("insp_items_price_qty", False, ["price", "qty"], None),
    ],
)
check(
    "get_unique_constraints",
    [(u["name"], u["column_names"]) for u in inspector.get_unique_constraints("insp_items")],
    [("insp_items_name_key", ["name"])],
)
check("get_table_comment", inspector.get_table_comment("insp_items"), {"text": "things to sell"})
check("get_foreign_keys", inspector.get_foreign_keys("insp_items"), [])
check("get_check_constraints", inspector.get_check_constraints("insp_items"), [])
check("sequence listed", "insp_items_id_seq" in inspector.get_sequence_names(), True)

# MetaData reflection builds a Table that Core queries use as written
meta = MetaData()
items = Table("insp_items", meta, autoload_with=engine)
check("reflected columns", [c.name for c in items.columns], ["id", "name", "price", "qty", "note", "made", "ok"])
check("reflected primary key", [c.name for c in items.primary_key], ["id"])
with engine.connect() as c:
    names = c.execute(select(items.c.name).where(items.c.price > 2).order_by(items.c.id)).scalars().all()
check("query through the reflected table", names, ["b"])

# pandas reads a whole table through the same reflection
frame = pd.read_sql_table("insp_items", engine, columns=["name", "qty", "ok"])
check("read_sql_table", frame.sort_values("name")["name"].tolist(), ["a", "b"])
check("read_sql_table integers with NULL", [None if pd.isna(v) else int(v) for v in frame.sort_values("name")["qty"]], [3, None])

# a view: listed apart from the tables, its columns reflected, read as a
# table by Core and pandas
with engine.begin() as c:
    c.exec_driver_sql("DROP VIEW IF EXISTS insp_cheap")
    c.exec_driver_sql("CREATE VIEW insp_cheap AS SELECT id, name, price * 2 AS double FROM insp_items WHERE price < 2")
inspector = inspect(engine)
check("get_view_names", inspector.get_view_names(), ["insp_cheap"])
check("views are not tables", "insp_cheap" in inspector.get_table_names(), False)
check(
    "get_columns of a view",
    [(c["name"], str(c["type"])) for c in inspector.get_columns("insp_cheap")],
    [("id", "INTEGER"), ("name", "VARCHAR(40)"), ("double", "NUMERIC")],
)
check("get_view_definition names the table", "insp_items" in inspector.get_view_definition("insp_cheap"), True)
cheap = Table("insp_cheap", MetaData(), autoload_with=engine)
with engine.connect() as c:
    check("query through a reflected view", c.execute(select(cheap.c.name, cheap.c.double)).all(), [("a", 3)])
frame = pd.read_sql_table("insp_cheap", engine)
check("read_sql_table of a view", frame["name"].tolist(), ["a"])

with engine.begin() as c:
    c.exec_driver_sql("DROP TABLE insp_items CASCADE")
print("sqlalchemy inspector: ok")
