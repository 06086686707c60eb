CREATE TABLE orders (id bigserial PRIMARY KEY, user_id bigint NOT NULL REFERENCES users, total numeric(12,2) NOT NULL);
CREATE INDEX orders_user_id ON orders (user_id);
