"""SQLAlchemy 2 (Core + ORM over psycopg 3) against a running server.

Run by crates/server/tests/drivers.rs with EDDY_PORT set. Each check states
PostgreSQL 15's answer (scripts/ci/drivers-against-postgres.sh runs this
file against it); the script exits non-zero at the first difference.
"""
from sqlalchemy_common import check, server_url

from sqlalchemy import (
    Integer,
    String,
    create_engine,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship


engine = create_engine(server_url())


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "sa_author"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(50))
    # no FOREIGN KEY (not enforced by Eddy yet): the join is spelled out
    books: Mapped[list["Book"]] = relationship(
        back_populates="author",
        primaryjoin="Author.id == foreign(Book.author_id)",
    )


class Book(Base):
    __tablename__ = "sa_book"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    title: Mapped[str] = mapped_column(String(100))
    author_id: Mapped[int] = mapped_column(Integer)
    author: Mapped[Author] = relationship(
        back_populates="books",
        primaryjoin="Author.id == foreign(Book.author_id)",
    )


# dialect initialisation (server version, isolation level, standard strings)
with engine.connect() as conn:
    check("select 1", conn.execute(text("select 1")).scalar(), 1)

Base.metadata.drop_all(engine)
Base.metadata.create_all(engine)
check("has_table", inspect(engine).has_table("sa_author"), True)

# ORM inserts: SERIAL ids come back through INSERT ... RETURNING
with Session(engine) as s:
    a = Author(name="Ursula")
    s.add(a)
    s.add_all([Book(title="Earthsea", author=a), Book(title="Dispossessed", author=a)])
    s.commit()
    check("serial id assigned", a.id, 1)
    check("book ids", sorted(b.id for b in a.books), [1, 2])

# a session rollback leaves nothing behind
with Session(engine) as s:
    s.add(Author(name="ghost"))
    s.flush()
    s.rollback()
with Session(engine) as s:
    check(
        "rollback leaves no row",
        s.scalar(select(func.count()).select_from(Author).where(Author.name == "ghost")),
        0,
    )
    # the sequence is not transactional: the rolled-back id is not reused
    b = Author(name="Le Guin")
    s.add(b)
    s.commit()
    check("id after rolled-back insert", b.id, 3)

# relationship loading and updates
with Session(engine) as s:
    a = s.scalars(select(Author).where(Author.name == "Ursula")).one()
    check("relationship", sorted(b.title for b in a.books), ["Dispossessed", "Earthsea"])
    a.name = "Ursula K."
    s.commit()
    check("update", s.scalar(select(Author.name).where(Author.id == a.id)), "Ursula K.")
    s.delete(s.get(Book, 2))
    s.commit()
    check("delete", s.scalar(select(func.count()).select_from(Book)), 1)

# Core: insert ... returning many rows, executemany
with engine.begin() as conn:
    rows = conn.execute(
        Author.__table__.insert().returning(Author.id, Author.name),
        [{"name": "x"}, {"name": "y"}],
    ).all()
    check("insert many returning", sorted(r.name for r in rows), ["x", "y"])

# pandas over the same engine: to_sql creates and fills a table (pandas
# sends NaN and None as NULL), read_sql reads it back
import math

import pandas as pd

frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None], "c": [1.5, 2.5, float("nan")]})
frame.to_sql("sa_frame", engine, if_exists="replace", index=False)
frame.to_sql("sa_frame", engine, if_exists="append", index=False)
back = pd.read_sql("SELECT a, b, c FROM sa_frame ORDER BY a, c NULLS LAST", engine)
check("pandas rows", len(back), 6)
check("pandas ints", list(back["a"]), [1, 1, 2, 2, 3, 3])
check("pandas None is NULL", back["b"].tolist()[4:], [None, None])
check("pandas NULL floats read as NaN", all(math.isnan(v) for v in back["c"].tolist()[4:]), True)
with engine.begin() as conn:
    check("NaN stored as NULL", conn.execute(text("SELECT count(*) FROM sa_frame WHERE c IS NULL")).scalar(), 2)
    conn.execute(text("DROP TABLE sa_frame"))

# the PostgreSQL dialect's upserts: on_conflict_do_update through a
# UNIQUE column (index_elements) and on the key, on_conflict_do_nothing
from sqlalchemy import Column, MetaData, Table
from sqlalchemy.dialects.postgresql import insert as pg_insert

meta = MetaData()
users = Table(
    "sa_users",
    meta,
    Column("id", Integer, primary_key=True),
    Column("email", String(50), unique=True),
    Column("name", String(50)),
)
meta.drop_all(engine)
meta.create_all(engine)
with engine.begin() as conn:
    conn.execute(pg_insert(users).values(id=1, email="a@x", name="A"))
    stmt = pg_insert(users).values(
        [dict(id=2, email="a@x", name="A2"), dict(id=3, email="b@x", name="B")]
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[users.c.email], set_=dict(name=stmt.excluded.name)
    ).returning(users.c.id, users.c.name)
    check("upsert through email returns", sorted(conn.execute(stmt).all()), [(1, "A2"), (3, "B")])
    stmt = pg_insert(users).values(id=3, email="c@x", name="C")
    stmt = stmt.on_conflict_do_update(
        index_elements=[users.c.id],
        set_=dict(email=stmt.excluded.email),
        where=users.c.name == "B",
    )
    conn.execute(stmt)
    # email c@x is taken now: the row is skipped
    conn.execute(pg_insert(users).values(id=4, email="c@x", name="D").on_conflict_do_nothing())
    check(
        "upserted rows",
        conn.execute(select(users).order_by(users.c.id)).all(),
        [(1, "a@x", "A2"), (3, "c@x", "B")],
    )
meta.drop_all(engine)

Base.metadata.drop_all(engine)
check("drop_all", inspect(engine).has_table("sa_author"), False)
print("sqlalchemy: ok")
