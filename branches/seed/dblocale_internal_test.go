package seed

import "testing"

func TestDatabaseLocale(t *testing.T) {
	for script, want := range map[string]string{
		"SET x = 1;\nCREATE DATABASE intl WITH TEMPLATE = template0 ENCODING = 'UTF8' LOCALE_PROVIDER = icu LOCALE = 'C.UTF-8' ICU_LOCALE = 'en-US';\n": "TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER 'icu' LOCALE 'C.UTF-8' ICU_LOCALE 'en-US'",
		"CREATE DATABASE shop WITH TEMPLATE = template0 ENCODING = 'UTF8' LC_COLLATE = 'en_US.UTF-8' LC_CTYPE = 'en_US.UTF-8';":                         "TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'en_US.UTF-8' LC_CTYPE 'en_US.UTF-8'",
		`CREATE DATABASE "a WITH b = 'c'" WITH TEMPLATE = template0 ENCODING = 'LATIN1' LOCALE = 'C';`:                                                  "TEMPLATE template0 ENCODING 'LATIN1' LOCALE 'C'",
		"CREATE DATABASE x WITH TEMPLATE = template0 LOCALE = 'x''; DROP DATABASE postgres; --';":                                                       "TEMPLATE template0 LOCALE 'x''; DROP DATABASE postgres; --'",
		"CREATE DATABASE x WITH TEMPLATE = template0 OID = 16384 TABLESPACE = ts ENCODING = 'UTF8';":                                                    "TEMPLATE template0 ENCODING 'UTF8'",
		"CREATE DATABASE x WITH TEMPLATE = template0;":                                                                                                  "",
		"CREATE DATABASE x;":        "",
		"CREATE TABLE t (x int);\n": "",
		"CREATE DATABASE x WITH ENCODING = 'UTF8';\nCREATE DATABASE y WITH ENCODING = 'LATIN1';": "TEMPLATE template0 ENCODING 'UTF8'",
	} {
		got, err := databaseLocale([]byte(script))
		if err != nil || got != want {
			t.Errorf("databaseLocale(%q) = %q, %v; want %q", script, got, err, want)
		}
	}
}
