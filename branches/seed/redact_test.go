package seed

import "testing"

func TestRedactPasswords(t *testing.T) {
	for in, want := range map[string]string{
		`pg_basebackup: error: invalid URI "postgres://repl:S3CRET@[::1/app"`: `pg_basebackup: error: invalid URI "postgres://repl:****@[::1/app"`,
		`could not connect: host=db user=repl password=S3CRET dbname=x`:       `could not connect: host=db user=repl password=**** dbname=x`,
		`password = 'a b\'c' sslmode=disable`:                                 `password = **** sslmode=disable`,
		`postgres://repl@db/app: connection refused`:                          `postgres://repl@db/app: connection refused`,
		`invalid URI "postgres://repl:p@ss@db/app"`:                           `invalid URI "postgres://repl:****@db/app"`,
		`password='unterminated secret`:                                       `password=****`,
		`creating TABLE sales.customers`:                                      `creating TABLE sales.customers`,
	} {
		if got := redactPasswords(in); got != want {
			t.Errorf("redactPasswords(%q) = %q, want %q", in, got, want)
		}
	}
}
