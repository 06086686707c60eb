-- A small shop: enough data to see branches diverge.
CREATE TABLE customers (
    id         integer PRIMARY KEY,
    name       text NOT NULL,
    email      text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE orders (
    id          bigint PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES customers (id),
    total_cents integer NOT NULL CHECK (total_cents >= 0),
    placed_at   timestamptz NOT NULL
);
CREATE INDEX orders_customer_idx ON orders (customer_id);

INSERT INTO customers (id, name, email)
SELECT g, 'customer ' || g, 'customer' || g || '@example.com'
FROM generate_series(1, 10000) AS g;

INSERT INTO orders (id, customer_id, total_cents, placed_at)
SELECT g, 1 + (g * 7919) % 10000, (g::bigint * 104729) % 50000, timestamptz '2026-01-01' + g * interval '1 minute'
FROM generate_series(1, 100000) AS g;
