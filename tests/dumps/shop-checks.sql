-- Run with psql -X -A against a restore of shop-pg15.sql: its output must
-- be shop-checks.expected, which is PostgreSQL 15's own output for the same
-- restore (scripts/ci/make-dump-fixture.sh).
SELECT * FROM customers ORDER BY id;
SELECT * FROM products ORDER BY sku;
SELECT * FROM orders ORDER BY id;
SELECT * FROM order_lines ORDER BY order_id, line;
SELECT * FROM audit_log ORDER BY id;
SELECT * FROM big_spenders ORDER BY id;
SELECT obj_description('customers'::regclass, 'pg_class');
SELECT pg_get_serial_sequence('customers', 'id'), pg_get_serial_sequence('products', 'sku'), pg_get_serial_sequence('orders', 'id');
SELECT column_name, data_type, is_nullable, is_identity, identity_generation FROM information_schema.columns WHERE table_name = 'products' ORDER BY ordinal_position;
SELECT conname, contype FROM pg_constraint WHERE conrelid = 'orders'::regclass ORDER BY conname;
SELECT indexname FROM pg_indexes WHERE tablename IN ('orders', 'products') ORDER BY indexname;
SELECT nextval('invoice_numbers');
INSERT INTO customers (email) VALUES ('new@example.com') RETURNING id, country, balance, vip;
INSERT INTO products (title, price, uid) VALUES ('Spoon', 1.00, 'd3eebc99-9c0b-4ef8-bb6d-6bb9bd380a44') RETURNING sku, stock;
INSERT INTO orders (customer_id, placed_on) VALUES (5, '2024-08-01') RETURNING id;
INSERT INTO audit_log (at) VALUES ('2024-09-01 00:00:00+00') RETURNING id;
DELETE FROM customers WHERE id = 1;
SELECT count(*) FROM orders;
SELECT count(*) FROM order_lines;
SELECT id, spent FROM big_spenders ORDER BY id;
