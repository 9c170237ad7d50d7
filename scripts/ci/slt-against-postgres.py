"""Runs sqllogictest files against PostgreSQL, to show that their
expectations are PostgreSQL's answers (Eddy's test, crates/server/tests/slt.rs,
runs the same files against Eddy).

    EDDY_PORT=<port of a PostgreSQL 15> target/drivers/venv/bin/python \
        scripts/ci/slt-against-postgres.py tests/slt/sequences.slt

Understands the records Eddy's files use: `statement ok`, `statement count
<rows>`, `statement error <SQLSTATE>`, `query <types> [rowsort]` with `----`
and expected rows. A fresh database is created for each file.

`--extended` (first argument) sends each record over the extended protocol
(libpq's PQexecParams: Parse, Bind with text results, Describe portal,
Execute, Sync), as the extended run of slt.rs does. A record of several
statements, which PostgreSQL refuses to Parse (42601), is then sent as a
simple query, as slt.rs sends its statements one at a time.
"""
import os
import sys

import psycopg

port = os.environ["EDDY_PORT"]
extended = len(sys.argv) > 1 and sys.argv[1] == "--extended"
paths = sys.argv[2:] if extended else sys.argv[1:]
user = os.environ.get("EDDY_USER", "postgres")


def records(path):
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        head = line.split()
        i += 1
        sql = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            sql.append(lines[i])
            i += 1
        expected = None
        if i < len(lines) and lines[i].strip() == "----":
            i += 1
            expected = []
            while i < len(lines) and lines[i].strip():
                expected.append(lines[i].strip())
                i += 1
        yield head, "\n".join(sql), expected


def cell(v):
    if v is None:
        return "NULL"
    s = v.decode()
    return s if s != "" else "(empty)"


def execute(conn, sql):
    if not extended:
        return conn.pgconn.exec_(sql.encode())
    res = conn.pgconn.exec_params(sql.encode(), [], result_format=0)
    state = res.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
    if state == b"42601" and b"multiple commands" in (res.error_message or b""):
        print(f"several statements, refused by Parse (42601): {sql!r}")
        return conn.pgconn.exec_(sql.encode())
    return res


def run(path):
    admin = psycopg.connect(f"host=127.0.0.1 port={port} user={user} dbname=postgres", autocommit=True)
    admin.execute("DROP DATABASE IF EXISTS slt_check")
    admin.execute("CREATE DATABASE slt_check")
    conn = psycopg.connect(f"host=127.0.0.1 port={port} user={user} dbname=slt_check", autocommit=True)
    failures = 0
    for head, sql, expected in records(path):
        res = execute(conn, sql)
        state = res.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
        state = state.decode() if state else None
        if head[0] == "statement" and head[1] == "count":
            if state:
                failures += 1
                print(f"FAIL {sql!r}: error {state} {res.error_message.decode().strip()}")
            elif (res.command_tuples or 0) != int(head[2]):
                failures += 1
                print(f"FAIL {sql!r}: PostgreSQL counts {res.command_tuples}, file {head[2]}")
            continue
        if head[0] == "statement" and head[1] == "ok" or head[0] == "query":
            if state:
                failures += 1
                print(f"FAIL {sql!r}: error {state} {res.error_message.decode().strip()}")
                continue
        if head[0] == "statement" and head[1] == "error":
            if state != head[2]:
                failures += 1
                print(f"FAIL {sql!r}: wanted {head[2]}, got {state}")
            continue
        if head[0] == "query":
            got = [
                " ".join(cell(res.get_value(r, c)) for c in range(res.nfields))
                for r in range(res.ntuples)
            ]
            want = expected or []
            if "rowsort" in head:
                got, want = sorted(got), sorted(want)
            if got != want:
                failures += 1
                print(f"FAIL {sql!r}:\n  PostgreSQL: {got}\n  file:       {want}")
    conn.close()
    admin.execute("DROP DATABASE slt_check")
    return failures


total = sum(run(p) for p in paths)
print("all records match PostgreSQL" if total == 0 else f"{total} records differ")
sys.exit(1 if total else 0)
