-- Run with psql -X -A against a restore of schemas-pg15.sql: its output
-- must be schemas-checks.expected, which is PostgreSQL 15's own output for
-- the same restore (scripts/ci/make-dump-fixture.sh).
SELECT nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname IN ('billing', 'inventory', 'public') ORDER BY 1;
SELECT table_schema, table_name, table_type FROM information_schema.tables WHERE table_schema IN ('billing', 'inventory', 'public') ORDER BY 1, 2;
SELECT schemaname, tablename, indexname FROM pg_indexes WHERE schemaname IN ('billing', 'inventory', 'public') ORDER BY 1, 2, 3;
SELECT * FROM inventory.parts ORDER BY id;
SELECT * FROM billing.part_totals ORDER BY label;
SELECT pg_get_serial_sequence('inventory.suppliers', 'id'), pg_get_serial_sequence('inventory.parts', 'id');
SELECT nextval('billing.invoice_no');
INSERT INTO inventory.suppliers (name) VALUES ('Initech') RETURNING id;
INSERT INTO inventory.parts (supplier_id, label) VALUES (3, 'cog') RETURNING id, qty;
INSERT INTO billing.invoices VALUES (2000, 99, 1.00);
UPDATE inventory.parts SET qty = -1 WHERE label = 'cog';
INSERT INTO inventory.suppliers (name) VALUES ('Acme');
DELETE FROM inventory.suppliers WHERE name = 'Globex';
SELECT label FROM inventory.parts ORDER BY label;
SET search_path = inventory, public;
SELECT current_schema(), current_schemas(false);
SELECT s.name, count(p.id) FROM suppliers s LEFT JOIN parts p ON p.supplier_id = s.id GROUP BY s.name ORDER BY 1;
SELECT body FROM notes;
RESET search_path;
SELECT count(*) FROM pg_tables WHERE tablename = 'parts' AND schemaname = 'public';
