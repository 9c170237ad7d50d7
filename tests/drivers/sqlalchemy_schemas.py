"""SQLAlchemy 2 (Core, ORM and Inspector, over psycopg 3) with tables kept in
a schema of their own, as `__table_args__ = {"schema": ...}` and
`MetaData(schema=...)` keep them: CREATE SCHEMA from the DDL constructs,
create_all and drop_all, ORM writes and a relationship across schemas, and
reflection of the schema's tables, keys and indexes.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. Each check states
PostgreSQL 15's answer (scripts/ci/drivers-against-postgres.sh runs this
file against it); the script exits non-zero at the first difference.
"""
from sqlalchemy_common import check, server_url

from sqlalchemy import ForeignKey, Index, String, create_engine, inspect, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship
from sqlalchemy.schema import CreateSchema, DropSchema


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customers"
    __table_args__ = {"schema": "sa_crm"}
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(80), unique=True)
    orders: Mapped[list["Order"]] = relationship(back_populates="customer")


class Order(Base):
    __tablename__ = "orders"
    __table_args__ = (Index("sa_orders_total", "total"), {"schema": "sa_sales"})
    id: Mapped[int] = mapped_column(primary_key=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("sa_crm.customers.id"))
    total: Mapped[int]
    customer: Mapped[Customer] = relationship(back_populates="orders")


engine = create_engine(server_url())
with engine.begin() as c:
    for schema in ("sa_sales", "sa_crm"):
        c.execute(DropSchema(schema, cascade=True, if_exists=True))
    c.execute(CreateSchema("sa_crm"))
    c.execute(CreateSchema("sa_sales", if_not_exists=True))
Base.metadata.create_all(engine)

with Session(engine) as s:
    ann = Customer(email="ann@example.com")
    s.add_all([ann, Order(customer=ann, total=30), Order(customer=ann, total=12)])
    s.commit()
    got = s.scalars(select(Order.total).join(Order.customer).where(Customer.email == "ann@example.com").order_by(Order.total)).all()
    check("ORM join across schemas", got, [12, 30])
    check("ORM relationship", sorted(o.total for o in s.get(Customer, ann.id).orders), [12, 30])

inspector = inspect(engine)
check("get_schema_names", [n for n in inspector.get_schema_names() if n.startswith("sa_")], ["sa_crm", "sa_sales"])
check("get_table_names", inspector.get_table_names(schema="sa_sales"), ["orders"])
check("has_table", inspector.has_table("orders", schema="sa_sales"), True)
check("has_table in public", inspector.has_table("orders"), False)
check(
    "get_columns",
    [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns("orders", schema="sa_sales")],
    [("id", "INTEGER", False), ("customer_id", "INTEGER", False), ("total", "INTEGER", False)],
)
check("get_pk_constraint", inspector.get_pk_constraint("customers", schema="sa_crm")["constrained_columns"], ["id"])
fks = inspector.get_foreign_keys("orders", schema="sa_sales")
check(
    "get_foreign_keys",
    [(f["constrained_columns"], f["referred_schema"], f["referred_table"], f["referred_columns"]) for f in fks],
    [(["customer_id"], "sa_crm", "customers", ["id"])],
)
check(
    "get_indexes",
    [(i["name"], i["column_names"], i["unique"]) for i in inspector.get_indexes("orders", schema="sa_sales")],
    [("sa_orders_total", ["total"], False)],
)
check(
    "get_unique_constraints",
    [u["column_names"] for u in inspector.get_unique_constraints("customers", schema="sa_crm")],
    [["email"]],
)

# the search path finds a schema's tables by their bare names
with engine.begin() as c:
    c.execute(text("SET LOCAL search_path = sa_sales, public"))
    check("search_path", c.execute(text("SELECT count(*) FROM orders")).scalar(), 2)

Base.metadata.drop_all(engine)
with engine.begin() as c:
    c.execute(DropSchema("sa_sales"))
    c.execute(DropSchema("sa_crm"))
check("schemas gone", [n for n in inspect(engine).get_schema_names() if n.startswith("sa_")], [])
print("sqlalchemy_schemas: ok")
