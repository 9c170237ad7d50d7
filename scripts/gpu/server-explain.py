"""EXPLAIN ANALYZE of SSB queries through a running Eddy server, GPU on.

Used by scripts/gpu/device-run.sh on the lent device machine (psycopg is
carried there as wheels): prints, per query, the GPU operators of the
physical plan Eddy's server ran, and the CPU subtrees kept with their
reasons, so docs/benchmarks/gpu.md can say what ran where.

Usage: python3 server-explain.py HOST:PORT QUERY_DIR q1.1,q2.1,...
"""

import pathlib
import sys

import psycopg


def main() -> int:
    host, port = sys.argv[1].rsplit(":", 1)
    qdir = pathlib.Path(sys.argv[2])
    names = sys.argv[3].split(",")
    with psycopg.connect(host=host, port=int(port), user="eddy", dbname="eddy",
                         autocommit=True) as conn:
        conn.execute("SET eddy.gpu = on")
        for name in names:
            sql = (qdir / f"{name}.sql").read_text().strip().rstrip(";")
            print(f"== {name}")
            try:
                rows = conn.execute("EXPLAIN ANALYZE " + sql).fetchall()
            except psycopg.Error as e:
                print(f"error: {e}")
                continue
            for r in rows:
                for line in str(r[-1]).splitlines():
                    print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
