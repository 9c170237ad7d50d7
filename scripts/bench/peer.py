#!/usr/bin/env python3
"""Peer runner for `eddy bench`: runs a benchmark's queries on DuckDB or DataFusion.

Usage (the harness calls it; it is also handy by hand):

  peer.py run --engine duckdb|datafusion|datafusion-mem --data DIR \
      --tables lineorder,customer,... --runs 3 --out result.json Q1.sql Q2.sql ...
  peer.py chart --input ssb-sf1.json --out ssb-sf1.png

`run` loads every table from DIR/<table>/*.parquet (DuckDB: into native
tables; datafusion: registered over the Parquet files; datafusion-mem: copied
into in-memory tables), runs each query once as a warm-up and then --runs
times, and writes JSON: engine, version, load_s, and per query the times, the
column names and the result rows (values as JSON strings/numbers, NULL as
null). A failing query records its error and the run goes on.
"""
import argparse
import datetime
import decimal
import json
import os
import sys
import time

MAX_ROWS = 1000


def cell(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    return str(v)


class DuckDb:
    def __init__(self, threads):
        import duckdb
        self.version = duckdb.__version__
        self.con = duckdb.connect()
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")

    def load(self, name, path):
        self.con.execute(
            f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM read_parquet(\'{path}/*.parquet\')')

    def query(self, sql):
        cur = self.con.execute(sql)
        cols = [d[0] for d in cur.description] if cur.description else []
        return cols, cur.fetchall()


class DataFusion:
    def __init__(self, threads, in_memory):
        import datafusion
        self.version = datafusion.__version__
        cfg = datafusion.SessionConfig()
        if threads:
            cfg = cfg.with_target_partitions(int(threads))
        self.ctx = datafusion.SessionContext(cfg)
        self.in_memory = in_memory

    def load(self, name, path):
        if self.in_memory:
            src = f"__src_{name}"
            self.ctx.register_parquet(src, path + "/")
            self.ctx.sql(f'CREATE TABLE "{name}" AS SELECT * FROM "{src}"').collect()
            self.ctx.deregister_table(src)
        else:
            self.ctx.register_parquet(name, path + "/")

    def query(self, sql):
        import pyarrow as pa
        df = self.ctx.sql(sql)
        batches = df.collect()
        schema = df.schema()
        table = pa.Table.from_batches(batches, schema=schema)
        cols = table.column_names
        rows = [tuple(r[c] for c in cols) for r in table.slice(0, MAX_ROWS).to_pylist()]
        return cols, rows


def make_engine(name, threads):
    if name == "duckdb":
        return DuckDb(threads)
    if name == "datafusion":
        return DataFusion(threads, in_memory=False)
    if name == "datafusion-mem":
        return DataFusion(threads, in_memory=True)
    raise SystemExit(f"unknown engine {name}")


def split_statements(sql):
    return [s.strip() for s in sql.split(";") if s.strip()]


def run(args):
    eng = make_engine(args.engine, args.threads)
    t0 = time.perf_counter()
    for t in args.tables.split(","):
        eng.load(t, os.path.join(args.data, t))
    load_s = time.perf_counter() - t0
    out = {"engine": args.engine, "version": eng.version, "load_s": load_s, "queries": []}
    for path in args.queries:
        name = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            stmts = split_statements(f.read())
        q = {"name": name, "times_s": [], "error": None, "columns": [], "rows": []}
        try:
            for i in range(args.runs + 1):
                start = time.perf_counter()
                cols, rows = [], []
                for s in stmts:
                    cols, rows = eng.query(s)
                elapsed = time.perf_counter() - start
                if i == 0:
                    q["warmup_s"] = elapsed
                else:
                    q["times_s"].append(elapsed)
            q["columns"] = list(cols)
            q["rows"] = [[cell(v) for v in r] for r in rows[:MAX_ROWS]]
        except Exception as e:  # a failing query is reported, not fatal
            q["error"] = f"{type(e).__name__}: {e}"
        print(f"{args.engine} {name}: {q['times_s'] or q['error']}", file=sys.stderr, flush=True)
        out["queries"].append(q)
    with open(args.out, "w") as f:
        json.dump(out, f)


def chart(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(args.input) as f:
        rep = json.load(f)
    queries = [q["name"] for q in rep["queries"]]
    engines = [e for e in rep.get("engine_order", list(rep["engines"])) if not rep["engines"][e].get("error")]
    width = 0.8 / max(1, len(engines))
    fig, ax = plt.subplots(figsize=(max(8, len(queries) * 0.8), 4.5))
    for i, e in enumerate(engines):
        xs, ys = [], []
        for j, q in enumerate(rep["queries"]):
            r = q["engines"].get(e)
            if r and r.get("median_s"):
                xs.append(j + i * width)
                ys.append(r["median_s"] * 1000.0)
        ax.bar(xs, ys, width, label=e)
    ax.set_yscale("log")
    ax.set_xticks([j + width * (len(engines) - 1) / 2 for j in range(len(queries))])
    ax.set_xticklabels(queries, rotation=45 if len(queries) > 13 else 0)
    ax.set_ylabel("median time (ms, log scale)")
    ax.set_title(f"{rep['benchmark'].upper()} SF{rep['scale_factor']} — {rep.get('machine', '')}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--engine", required=True)
    r.add_argument("--data", required=True)
    r.add_argument("--tables", required=True)
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--threads", type=int, default=0)
    r.add_argument("--out", required=True)
    r.add_argument("queries", nargs="+")
    c = sub.add_parser("chart")
    c.add_argument("--input", required=True)
    c.add_argument("--out", required=True)
    a = p.parse_args()
    if a.cmd == "run":
        run(a)
    else:
        chart(a)


if __name__ == "__main__":
    main()
