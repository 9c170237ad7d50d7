SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b
