// node-postgres against a running Eddy: BEGIN/COMMIT/ROLLBACK, 25P02 after an
// error, savepoints, parameters. Exits non-zero on a broken check.
const { Client } = require('pg');

function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
}

function client() {
  return new Client({
    host: '127.0.0.1', port: Number(process.env.EDDY_PORT), user: process.env.EDDY_USER || 'eddy',
    password: process.env.EDDY_PASSWORD || 'secret', database: process.env.EDDY_DB || 'eddy', ssl: false,
  });
}

(async () => {
  const c = client();
  const o = client();
  await c.connect();
  await o.connect();
  await c.query('DROP TABLE IF EXISTS node_t');
  await c.query('CREATE TABLE node_t (id int PRIMARY KEY, v numeric(10,2), s varchar(20))');

  await c.query('BEGIN');
  await c.query('INSERT INTO node_t VALUES ($1, $2, $3)', [1, '1.50', 'one']);
  await c.query('INSERT INTO node_t VALUES ($1, $2, $3)', [2, '2.25', 'two']);
  check((await o.query('SELECT count(*)::int AS n FROM node_t')).rows[0].n === 0, 'invisible before COMMIT');
  await c.query('COMMIT');
  const r = await o.query('SELECT id, v::text AS v, s FROM node_t ORDER BY id');
  check(JSON.stringify(r.rows) === JSON.stringify([{ id: 1, v: '1.50', s: 'one' }, { id: 2, v: '2.25', s: 'two' }]),
    `committed rows: ${JSON.stringify(r.rows)}`);

  await c.query('BEGIN');
  await c.query('DELETE FROM node_t WHERE id = $1', [1]);
  await c.query('ROLLBACK');
  check((await o.query('SELECT count(*)::int AS n FROM node_t')).rows[0].n === 2, 'ROLLBACK undid the delete');

  await c.query('BEGIN');
  await c.query('UPDATE node_t SET v = v + 1');
  await c.query('SAVEPOINT a');
  await c.query('UPDATE node_t SET v = 0');
  await c.query('ROLLBACK TO SAVEPOINT a');
  let err = null;
  try { await c.query('SELECT 1/0'); } catch (e) { err = e; }
  check(err && err.code === '22012', `division by zero: ${err && err.code}`);
  err = null;
  try { await c.query('SELECT $1::int', [1]); } catch (e) { err = e; }
  check(err && err.code === '25P02', `in failed transaction: ${err && err.code}`);
  await c.query('ROLLBACK TO SAVEPOINT a');
  await c.query('COMMIT');
  const sum = await o.query('SELECT sum(v)::text AS s FROM node_t');
  check(sum.rows[0].s === '5.75', `savepoint work committed: ${sum.rows[0].s}`);

  await c.end();
  await o.end();
  console.log('node-postgres: ok');
})().catch((e) => { console.error('FAIL:', e); process.exit(1); });
