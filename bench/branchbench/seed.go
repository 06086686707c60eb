package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// seedScale is the size of the CH-benCHmark-shaped seed: TPC-C's tables at a reduced
// number of customers, orders and items per warehouse, plus TPC-H's region, nation
// and supplier.
type seedScale struct {
	Warehouses        int
	Districts         int // per warehouse
	Customers         int // per district
	Orders            int // per district (one per customer)
	Items             int
	Suppliers         int
	NewOrdersFraction float64 // of each district's newest orders, still undelivered
}

// defaultScale is 10 warehouses, about 17 MiB of table data.
var defaultScale = seedScale{Warehouses: 10, Districts: 10, Customers: 100, Orders: 100, Items: 1000, Suppliers: 1000, NewOrdersFraction: 0.3}

const schemaSQL = `
CREATE TABLE warehouse (w_id int NOT NULL, w_name varchar(10), w_street_1 varchar(20), w_street_2 varchar(20),
  w_city varchar(20), w_state char(2), w_zip char(9), w_tax numeric(4,4), w_ytd numeric(12,2));
CREATE TABLE district (d_id int NOT NULL, d_w_id int NOT NULL, d_name varchar(10), d_street_1 varchar(20),
  d_street_2 varchar(20), d_city varchar(20), d_state char(2), d_zip char(9), d_tax numeric(4,4),
  d_ytd numeric(12,2), d_next_o_id int);
CREATE TABLE customer (c_id int NOT NULL, c_d_id int NOT NULL, c_w_id int NOT NULL, c_first varchar(16),
  c_middle char(2), c_last varchar(16), c_street_1 varchar(20), c_street_2 varchar(20), c_city varchar(20),
  c_state char(2), c_zip char(9), c_phone char(16), c_since timestamp, c_credit char(2),
  c_credit_lim numeric(12,2), c_discount numeric(4,4), c_balance numeric(12,2), c_ytd_payment numeric(12,2),
  c_payment_cnt int, c_delivery_cnt int, c_data varchar(500));
CREATE TABLE history (h_c_id int, h_c_d_id int, h_c_w_id int, h_d_id int, h_w_id int, h_date timestamp,
  h_amount numeric(6,2), h_data varchar(24));
CREATE TABLE item (i_id int NOT NULL, i_im_id int, i_name varchar(24), i_price numeric(5,2), i_data varchar(50));
CREATE TABLE stock (s_i_id int NOT NULL, s_w_id int NOT NULL, s_quantity int, s_dist_01 char(24),
  s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24), s_dist_05 char(24), s_dist_06 char(24),
  s_dist_07 char(24), s_dist_08 char(24), s_dist_09 char(24), s_dist_10 char(24), s_ytd int,
  s_order_cnt int, s_remote_cnt int, s_data varchar(50), s_su_suppkey int);
CREATE TABLE orders (o_id int NOT NULL, o_d_id int NOT NULL, o_w_id int NOT NULL, o_c_id int,
  o_entry_d timestamp, o_carrier_id int, o_ol_cnt int, o_all_local int);
CREATE TABLE new_order (no_o_id int NOT NULL, no_d_id int NOT NULL, no_w_id int NOT NULL);
CREATE TABLE order_line (ol_o_id int NOT NULL, ol_d_id int NOT NULL, ol_w_id int NOT NULL, ol_number int NOT NULL,
  ol_i_id int, ol_supply_w_id int, ol_delivery_d timestamp, ol_quantity int, ol_amount numeric(6,2),
  ol_dist_info char(24));
CREATE TABLE region (r_regionkey int NOT NULL, r_name char(55), r_comment varchar(152));
CREATE TABLE nation (n_nationkey int NOT NULL, n_name char(25), n_regionkey int, n_comment varchar(152));
CREATE TABLE supplier (su_suppkey int NOT NULL, su_name char(25), su_address varchar(40), su_nationkey int,
  su_phone char(15), su_acctbal numeric(12,2), su_comment varchar(101));
`

const keysSQL = `
ALTER TABLE warehouse ADD PRIMARY KEY (w_id);
ALTER TABLE district ADD PRIMARY KEY (d_w_id, d_id);
ALTER TABLE customer ADD PRIMARY KEY (c_w_id, c_d_id, c_id);
ALTER TABLE item ADD PRIMARY KEY (i_id);
ALTER TABLE stock ADD PRIMARY KEY (s_w_id, s_i_id);
ALTER TABLE orders ADD PRIMARY KEY (o_w_id, o_d_id, o_id);
ALTER TABLE new_order ADD PRIMARY KEY (no_w_id, no_d_id, no_o_id);
ALTER TABLE order_line ADD PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number);
ALTER TABLE region ADD PRIMARY KEY (r_regionkey);
ALTER TABLE nation ADD PRIMARY KEY (n_nationkey);
ALTER TABLE supplier ADD PRIMARY KEY (su_suppkey);
`

// seedEpoch is the date every generated timestamp counts from.
var seedEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// gen writes COPY rows from a deterministic random stream. Not safe for concurrent use.
type gen struct {
	w   *bufio.Writer
	rng *rand.Rand
}

const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func (g *gen) str(lo, hi int) string {
	n := lo + g.rng.IntN(hi-lo+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[g.rng.IntN(len(letters))]
	}
	return string(b)
}

func (g *gen) num(lo, hi int) string { return strconv.Itoa(lo + g.rng.IntN(hi-lo+1)) }

// money is a decimal with two places in [lo, hi).
func (g *gen) money(lo, hi float64) string { return fmt.Sprintf("%.2f", lo+g.rng.Float64()*(hi-lo)) }

func (g *gen) ts(maxDays int) string {
	return seedEpoch.Add(time.Duration(g.rng.IntN(maxDays*86400)) * time.Second).Format("2006-01-02 15:04:05")
}

// row writes one tab-separated COPY line.
func (g *gen) row(fields ...string) { g.w.WriteString(strings.Join(fields, "\t") + "\n") }

// table writes a COPY block for table, with rows written by fill.
func (g *gen) table(name string, fill func()) {
	fmt.Fprintf(g.w, "COPY %s FROM stdin;\n", name)
	fill()
	g.w.WriteString("\\.\n")
}

func itoa(i int) string { return strconv.Itoa(i) }

// writeSeed writes the whole seed as SQL (schema, COPY data, keys) to w. The same
// scale always gives the same bytes.
func writeSeed(w io.Writer, s seedScale) error {
	g := &gen{w: bufio.NewWriterSize(w, 1<<20), rng: rand.New(rand.NewPCG(1, 2))}
	g.w.WriteString("SET synchronous_commit = off;\n" + schemaSQL)
	g.table("warehouse", func() {
		for w := 1; w <= s.Warehouses; w++ {
			g.row(itoa(w), g.str(6, 10), g.str(10, 20), g.str(10, 20), g.str(10, 20), g.str(2, 2), g.num(10000, 99999)+"1111",
				fmt.Sprintf("0.%04d", g.rng.IntN(2000)), "300000.00")
		}
	})
	g.table("district", func() {
		for w := 1; w <= s.Warehouses; w++ {
			for d := 1; d <= s.Districts; d++ {
				g.row(itoa(d), itoa(w), g.str(6, 10), g.str(10, 20), g.str(10, 20), g.str(10, 20), g.str(2, 2),
					g.num(10000, 99999)+"1111", fmt.Sprintf("0.%04d", g.rng.IntN(2000)), "30000.00", itoa(s.Orders+1))
			}
		}
	})
	g.table("customer", func() {
		for w := 1; w <= s.Warehouses; w++ {
			for d := 1; d <= s.Districts; d++ {
				for c := 1; c <= s.Customers; c++ {
					credit := "GC"
					if g.rng.IntN(10) == 0 {
						credit = "BC"
					}
					g.row(itoa(c), itoa(d), itoa(w), g.str(8, 16), "OE", g.str(8, 16), g.str(10, 20), g.str(10, 20),
						g.str(10, 20), g.str(2, 2), g.num(10000, 99999)+"1111", g.num(100000000, 999999999)+"1234567",
						g.ts(30), credit, "50000.00", fmt.Sprintf("0.%04d", g.rng.IntN(5000)), "-10.00", "10.00", "1", "0",
						g.str(50, 100))
				}
			}
		}
	})
	g.table("history", func() {
		for w := 1; w <= s.Warehouses; w++ {
			for d := 1; d <= s.Districts; d++ {
				for c := 1; c <= s.Customers; c++ {
					g.row(itoa(c), itoa(d), itoa(w), itoa(d), itoa(w), g.ts(30), "10.00", g.str(12, 24))
				}
			}
		}
	})
	g.table("item", func() {
		for i := 1; i <= s.Items; i++ {
			g.row(itoa(i), g.num(1, 10000), g.str(14, 24), g.money(1, 100), g.str(26, 50))
		}
	})
	g.table("stock", func() {
		for w := 1; w <= s.Warehouses; w++ {
			for i := 1; i <= s.Items; i++ {
				f := []string{itoa(i), itoa(w), g.num(10, 100)}
				for range 10 {
					f = append(f, g.str(24, 24))
				}
				f = append(f, "0", "0", "0", g.str(26, 50), itoa((w*i)%s.Suppliers+1))
				g.row(f...)
			}
		}
	})
	writeOrders(g, s)
	g.table("region", func() {
		for i, n := range []string{"AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"} {
			g.row(itoa(i), n, g.str(31, 115))
		}
	})
	g.table("nation", func() {
		for i := range 25 {
			g.row(itoa(i), "NATION"+itoa(i), itoa(i%5), g.str(31, 114))
		}
	})
	g.table("supplier", func() {
		for i := 1; i <= s.Suppliers; i++ {
			g.row(itoa(i), fmt.Sprintf("Supplier#%09d", i), g.str(10, 40), itoa(g.rng.IntN(25)),
				g.num(10, 34)+"-"+g.num(100, 999)+"-"+g.num(100, 999)+"-"+g.num(1000, 9999), g.money(-999, 9999), g.str(25, 100))
		}
	})
	g.w.WriteString(keysSQL)
	return g.w.Flush()
}

// writeOrders writes orders, their lines, and new_order for the undelivered ones.
func writeOrders(g *gen, s seedScale) {
	undelivered := s.Orders - int(float64(s.Orders)*s.NewOrdersFraction)
	lines := map[[3]int]int{}
	g.table("orders", func() {
		for w := 1; w <= s.Warehouses; w++ {
			for d := 1; d <= s.Districts; d++ {
				perm := g.rng.Perm(s.Customers)
				for o := 1; o <= s.Orders; o++ {
					n := 5 + g.rng.IntN(11)
					lines[[3]int{w, d, o}] = n
					carrier := `\N`
					if o <= undelivered {
						carrier = g.num(1, 10)
					}
					g.row(itoa(o), itoa(d), itoa(w), itoa(perm[(o-1)%s.Customers]+1), g.ts(30), carrier, itoa(n), "1")
				}
			}
		}
	})
	g.table("new_order", func() {
		for w := 1; w <= s.Warehouses; w++ {
			for d := 1; d <= s.Districts; d++ {
				for o := undelivered + 1; o <= s.Orders; o++ {
					g.row(itoa(o), itoa(d), itoa(w))
				}
			}
		}
	})
	g.table("order_line", func() {
		for w := 1; w <= s.Warehouses; w++ {
			for d := 1; d <= s.Districts; d++ {
				for o := 1; o <= s.Orders; o++ {
					for l := 1; l <= lines[[3]int{w, d, o}]; l++ {
						deliv, amount := g.ts(30), "0.00"
						if o > undelivered {
							deliv, amount = `\N`, g.money(0.01, 9999.99)
						}
						g.row(itoa(o), itoa(d), itoa(w), itoa(l), g.num(1, s.Items), itoa(w), deliv, "5", amount, g.str(24, 24))
					}
				}
			}
		}
	})
}
