package branches

import "testing"

func TestURLDatabase(t *testing.T) {
	t.Setenv("PGDATABASE", "")
	for conn, want := range map[string]string{
		"postgres://repl@db.internal:5432/shop?sslmode=disable": "shop",
		"host=db.internal user=repl dbname=crm":                 "crm",
		"postgres://repl@db.internal":                           "",
		"::not a url":                                           "",
		"host=db sslrootcert=/nowhere/ca.pem dbname='my shop'":  "my shop",
		"postgres://repl@db/shop?sslrootcert=/nowhere/ca.pem":   "shop",
		"host=db options='-c dbname=x' dbname=app":              "app",
		"application_name='a dbname=evil' dbname=app":           "app",
		"dbname=a dbname=b":                                     "b",
		`dbname='it\'s'`:                                        "it's",
	} {
		if got := urlDatabase(conn); got != want {
			t.Errorf("urlDatabase(%q) = %q, want %q", conn, got, want)
		}
	}
}
