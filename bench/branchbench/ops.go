package main

import (
	"fmt"
	"math/rand/v2"
)

// The SQL a step runs. Data mutations are the statements of TPC-C's New-Order,
// Payment and Delivery transactions, each its own statement; schema changes add a
// column or an index; eval queries are CH-benCHmark analytical queries (Q1, Q6).

// mutation returns one data mutation, chosen and parameterised by rng.
func mutation(rng *rand.Rand, s seedScale) string {
	w, d := 1+rng.IntN(s.Warehouses), 1+rng.IntN(s.Districts)
	c, i := 1+rng.IntN(s.Customers), 1+rng.IntN(s.Items)
	amount := fmt.Sprintf("%d.%02d", 1+rng.IntN(5000), rng.IntN(100))
	switch rng.IntN(6) {
	case 0: // New-Order: stock
		return fmt.Sprintf("UPDATE stock SET s_quantity = CASE WHEN s_quantity > 15 THEN s_quantity - 5 ELSE s_quantity + 86 END, "+
			"s_ytd = s_ytd + 5, s_order_cnt = s_order_cnt + 1 WHERE s_w_id = %d AND s_i_id = %d", w, i)
	case 1: // New-Order: a new order with one line
		return fmt.Sprintf("WITH o AS (UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = %d AND d_id = %d RETURNING d_next_o_id - 1 AS id), "+
			"oo AS (INSERT INTO orders SELECT id, %d, %d, %d, now(), NULL, 1, 1 FROM o), "+
			"nn AS (INSERT INTO new_order SELECT id, %d, %d FROM o) "+
			"INSERT INTO order_line SELECT id, %d, %d, 1, %d, %d, NULL, 5, %s, 'bench-dist-info-00000000' FROM o",
			w, d, d, w, c, d, w, d, w, i, w, amount)
	case 2: // Payment: customer
		return fmt.Sprintf("UPDATE customer SET c_balance = c_balance - %s, c_ytd_payment = c_ytd_payment + %s, "+
			"c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d", amount, amount, w, d, c)
	case 3: // Payment: history
		return fmt.Sprintf("INSERT INTO history VALUES (%d, %d, %d, %d, %d, now(), %s, 'bench payment')", c, d, w, d, w, amount)
	case 4: // Payment: warehouse and district
		return fmt.Sprintf("UPDATE district SET d_ytd = d_ytd + %s WHERE d_w_id = %d AND d_id = %d", amount, w, d)
	default: // Delivery: the oldest undelivered order of a district
		return fmt.Sprintf("WITH n AS (DELETE FROM new_order WHERE (no_w_id, no_d_id, no_o_id) = "+
			"(SELECT no_w_id, no_d_id, min(no_o_id) FROM new_order WHERE no_w_id = %d AND no_d_id = %d GROUP BY 1, 2) RETURNING no_o_id) "+
			"UPDATE order_line SET ol_delivery_d = now() FROM n WHERE ol_w_id = %d AND ol_d_id = %d AND ol_o_id = n.no_o_id", w, d, w, d)
	}
}

// schemaChange returns the k-th schema change of a step; tag makes its names unique
// in the tree (a child inherits its ancestors' changes).
func schemaChange(k int, tag string) string {
	switch k % 3 {
	case 0:
		return fmt.Sprintf("ALTER TABLE customer ADD COLUMN c_x_%s_%d int", tag, k)
	case 1:
		return fmt.Sprintf("CREATE INDEX ix_%s_%d ON orders (o_c_id, o_entry_d)", tag, k)
	default:
		return fmt.Sprintf("ALTER TABLE history ADD COLUMN h_x_%s_%d text DEFAULT 'x'", tag, k)
	}
}

// evalQueries are the queries a step evaluates its branch with, used in turn.
var evalQueries = []string{
	// CH-benCHmark Q1: pricing summary over order lines.
	`SELECT ol_number, sum(ol_quantity) AS sum_qty, sum(ol_amount) AS sum_amount, avg(ol_quantity) AS avg_qty,
	        avg(ol_amount) AS avg_amount, count(*) AS count_order
	 FROM order_line WHERE ol_delivery_d > timestamp '2007-01-02 00:00:00'
	 GROUP BY ol_number ORDER BY ol_number`,
	// CH-benCHmark Q6: revenue of a quantity band.
	`SELECT sum(ol_amount) AS revenue FROM order_line
	 WHERE ol_delivery_d >= timestamp '1999-01-01 00:00:00' AND ol_delivery_d < timestamp '2030-01-01 00:00:00'
	   AND ol_quantity BETWEEN 1 AND 100000`,
}

// crossQuery is what a cross-branch query asks of every live branch; the driver sums
// the answers.
const crossQuery = `SELECT coalesce(sum(ol_amount), 0)::float8 FROM order_line`
