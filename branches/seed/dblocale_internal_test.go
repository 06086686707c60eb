package seed

import (
	"slices"
	"testing"
)

func TestDatabaseLocales(t *testing.T) {
	for script, want := range map[string][]string{
		"SET x = 1;\nCREATE DATABASE intl WITH TEMPLATE = template0 ENCODING = 'UTF8' LOCALE_PROVIDER = icu LOCALE = 'C.UTF-8' ICU_LOCALE = 'en-US';\n": {"TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER 'icu' LOCALE 'C.UTF-8' ICU_LOCALE 'en-US'"},
		// An ICU database dumped where en_US.UTF-8 is a libc locale: then with
		// C.UTF-8 for it, its collation still ICU's.
		"CREATE DATABASE intl WITH TEMPLATE = template0 ENCODING = 'UTF8' LOCALE_PROVIDER = icu LOCALE = 'en_US.UTF-8' ICU_LOCALE = 'en-US';": {
			"TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER 'icu' LOCALE 'en_US.UTF-8' ICU_LOCALE 'en-US'",
			"TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER 'icu' LOCALE 'C.UTF-8' ICU_LOCALE 'en-US'"},
		"CREATE DATABASE intl WITH TEMPLATE = template0 ENCODING = 'UTF8' LOCALE_PROVIDER = icu LC_COLLATE = 'de_DE.UTF-8' LC_CTYPE = 'de_DE.UTF-8' ICU_LOCALE = 'de';": {
			"TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER 'icu' LC_COLLATE 'de_DE.UTF-8' LC_CTYPE 'de_DE.UTF-8' ICU_LOCALE 'de'",
			"TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER 'icu' LOCALE 'C.UTF-8' ICU_LOCALE 'de'"},
		"CREATE DATABASE shop WITH TEMPLATE = template0 ENCODING = 'UTF8' LOCALE_PROVIDER = libc LC_COLLATE = 'en_US.UTF-8' LC_CTYPE = 'en_US.UTF-8';": {"TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER 'libc' LC_COLLATE 'en_US.UTF-8' LC_CTYPE 'en_US.UTF-8'"},
		"CREATE DATABASE shop WITH TEMPLATE = template0 ENCODING = 'UTF8' LC_COLLATE = 'en_US.UTF-8' LC_CTYPE = 'en_US.UTF-8';":                        {"TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'en_US.UTF-8' LC_CTYPE 'en_US.UTF-8'"},
		"CREATE DATABASE l1 WITH TEMPLATE = template0 ENCODING = 'LATIN1' LOCALE_PROVIDER = icu LOCALE = 'de_DE' ICU_LOCALE = 'de';":                   {"TEMPLATE template0 ENCODING 'LATIN1' LOCALE_PROVIDER 'icu' LOCALE 'de_DE' ICU_LOCALE 'de'"},
		`CREATE DATABASE "a WITH b = 'c'" WITH TEMPLATE = template0 ENCODING = 'LATIN1' LOCALE = 'C';`:                                                 {"TEMPLATE template0 ENCODING 'LATIN1' LOCALE 'C'"},
		"CREATE DATABASE x WITH TEMPLATE = template0 LOCALE = 'x''; DROP DATABASE postgres; --';":                                                      {"TEMPLATE template0 LOCALE 'x''; DROP DATABASE postgres; --'"},
		"CREATE DATABASE x WITH TEMPLATE = template0 OID = 16384 TABLESPACE = ts ENCODING = 'UTF8';":                                                   {"TEMPLATE template0 ENCODING 'UTF8'"},
		"CREATE DATABASE x WITH TEMPLATE = template0;":                                                                                                 nil,
		"CREATE DATABASE x;":        nil,
		"CREATE TABLE t (x int);\n": nil,
		"CREATE DATABASE x WITH ENCODING = 'UTF8';\nCREATE DATABASE y WITH ENCODING = 'LATIN1';": {"TEMPLATE template0 ENCODING 'UTF8'"},
	} {
		got, err := databaseLocales([]byte(script))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("databaseLocales(%q) = %q, %v; want %q", script, got, err, want)
		}
	}
}
