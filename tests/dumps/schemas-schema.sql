-- A PostgreSQL database that keeps its tables in schemas of its own
-- (scripts/ci/make-dump-fixture.sh dumps it into schemas-pg15.sql).
CREATE SCHEMA inventory;
COMMENT ON SCHEMA inventory IS 'stock and suppliers';
CREATE SCHEMA billing;
CREATE TABLE inventory.suppliers (id serial PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE inventory.parts (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  supplier_id int NOT NULL REFERENCES inventory.suppliers (id) ON DELETE CASCADE,
  label text NOT NULL,
  qty int NOT NULL DEFAULT 0 CHECK (qty >= 0)
);
CREATE INDEX parts_label_idx ON inventory.parts (label);
CREATE TABLE billing.invoices (no int PRIMARY KEY, part_id bigint REFERENCES inventory.parts (id), amount numeric(10,2));
CREATE SEQUENCE billing.invoice_no START 1000;
CREATE VIEW billing.part_totals AS SELECT p.label, sum(i.amount) AS total FROM billing.invoices i JOIN inventory.parts p ON p.id = i.part_id GROUP BY p.label;
CREATE TABLE public.notes (id int PRIMARY KEY, body text);
INSERT INTO inventory.suppliers (name) VALUES ('Acme'), ('Globex');
INSERT INTO inventory.parts (supplier_id, label, qty) VALUES (1, 'bolt', 10), (1, 'nut', 25), (2, 'gear', 3);
INSERT INTO billing.invoices VALUES (1000, 1, 12.50), (1001, 1, 7.25), (1002, 3, 99.00);
SELECT setval('billing.invoice_no', 1002);
INSERT INTO public.notes VALUES (1, 'kept in public');
