package dbdiff_test

import (
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/dbdiff"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	a := `--
-- PostgreSQL database dump
--
\restrict abc123

-- Dumped from database version 15.14
SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);


CREATE TABLE public.t (
    id integer
);   


--
-- Name: t_id; Type: INDEX
--

CREATE INDEX t_id ON public.t USING btree (id);

\unrestrict abc123
`
	b := "\\restrict zzz\nCREATE TABLE public.t (\n    id integer\n);\n\nCREATE INDEX t_id ON public.t USING btree (id);\n"
	want := "CREATE TABLE public.t (\n    id integer\n);\n\nCREATE INDEX t_id ON public.t USING btree (id);\n"
	if got := dbdiff.Normalize([]byte(a)); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if dbdiff.Normalize([]byte(a)) != dbdiff.Normalize([]byte(b)) {
		t.Error("equal schemas normalize differently")
	}
}

func TestCompareTables(t *testing.T) {
	t.Parallel()
	base := dbdiff.Snapshot{"app": {Tables: []dbdiff.Table{{Name: "public.a", Rows: 1}, {Name: "public.gone", Rows: 2}}}}
	cur := dbdiff.Snapshot{"app": {Tables: []dbdiff.Table{{Name: "public.a", Rows: 3}, {Name: "public.new", Rows: 0}}}}
	got := dbdiff.CompareTables(base, cur)
	want := []string{"public.a changed", "public.gone removed", "public.new added"}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i, d := range got {
		if d.Table+" "+d.Status != want[i] {
			t.Errorf("%d: %s %s, want %s", i, d.Table, d.Status, want[i])
		}
	}
}

// Lines inside a function's body or a comment's text are the schema's, whatever
// they start with: two functions that differ only in such a line differ.
func TestNormalizeKeepsLiterals(t *testing.T) {
	t.Parallel()
	fn := func(workMem string) string {
		return `--
-- Name: heavy(); Type: FUNCTION; Schema: public; Owner: postgres
--

CREATE FUNCTION public.heavy() RETURNS void
    LANGUAGE plpgsql
    AS $_$
BEGIN
-- the report needs room
SET LOCAL work_mem = '` + workMem + `';

  PERFORM 1; -- it's $1 here
END
$_$;


SET default_tablespace = '';

--
-- Name: FUNCTION heavy(); Type: COMMENT
--

COMMENT ON FUNCTION public.heavy() IS 'runs heavy
-- reports
SET nothing';
CREATE TABLE public."odd$x$" (a$b$ integer);
SET default_table_access_method = heap;
`
	}
	a, b := dbdiff.Normalize([]byte(fn("64MB"))), dbdiff.Normalize([]byte(fn("1GB")))
	if a == b {
		t.Fatal("functions differing in a body line that starts with SET normalize alike")
	}
	for _, keep := range []string{"-- the report needs room\n", "SET LOCAL work_mem = '64MB';\n", "\n\n  PERFORM 1;", "-- reports\nSET nothing';\n",
		"SET default_tablespace = '';\n", "SET default_table_access_method = heap;\n"} {
		if !strings.Contains(a, keep) {
			t.Errorf("normalized dump lost %q:\n%s", keep, a)
		}
	}
	for _, drop := range []string{"-- Name:", "SET statement_timeout"} {
		if strings.Contains(a, drop) {
			t.Errorf("normalized dump kept pg_dump's %q:\n%s", drop, a)
		}
	}
}

// A table moved to another tablespace differs only in the SET line pg_dump writes
// before it; it must not normalize as unchanged.
func TestNormalizeKeepsTablespace(t *testing.T) {
	t.Parallel()
	dump := func(ts string) string {
		return "SET statement_timeout = 0;\nSET default_tablespace = '';\n\nCREATE TABLE public.a (id integer);\n\n" +
			"SET default_tablespace = " + ts + ";\n\nCREATE TABLE public.b (id integer);\n"
	}
	moved, stayed := dbdiff.Normalize([]byte(dump("fast"))), dbdiff.Normalize([]byte(dump("''")))
	if moved == stayed {
		t.Fatalf("a table in another tablespace normalizes alike:\n%s", moved)
	}
	if dbdiff.Normalize([]byte(dump("fast"))) != moved {
		t.Fatal("the same dump normalizes differently")
	}
	v2 := "CREATE TABLE public.a (id integer);\n\nCREATE TABLE public.b (id integer);\n"
	for _, n := range []string{moved, stayed} {
		if got := dbdiff.AsVersion(n, 2); got != v2 {
			t.Errorf("AsVersion(%q, 2) = %q, want version 2's %q", n, got, v2)
		}
	}
	if got := dbdiff.AsVersion(moved, dbdiff.NormalizeVersion); got != moved {
		t.Errorf("AsVersion to the current version changed the text: %q", got)
	}
}

// Before3 keeps a line inside a literal that looks like a schema SET line.
func TestBefore3KeepsLiterals(t *testing.T) {
	t.Parallel()
	dump := "CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\nSET default_tablespace = '';\nEND\n$$;\n\nSET default_tablespace = fast;\n\nCREATE TABLE t (a int);\n"
	want := "CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\nSET default_tablespace = '';\nEND\n$$;\n\nCREATE TABLE t (a int);\n"
	if got := dbdiff.Before3(dbdiff.Normalize([]byte(dump))); got != want {
		t.Errorf("Before3 = %q, want %q", got, want)
	}
}

// Legacy of Normalize's text is what version 1 made of the same dump.
func TestLegacy(t *testing.T) {
	t.Parallel()
	dump := "--\n-- Name: f\n--\n\nCREATE FUNCTION f() RETURNS void AS $$\nBEGIN\n-- note\nSET LOCAL work_mem = '1GB';\n\n\n  PERFORM 1;   \nEND\n$$;\n\n\nSET default_tablespace = '';\nCREATE TABLE t (a int);\n"
	v1 := "CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\n\n  PERFORM 1;\nEND\n$$;\n\nCREATE TABLE t (a int);\n"
	if got := dbdiff.Legacy(dbdiff.Normalize([]byte(dump))); got != v1 {
		t.Errorf("Legacy(Normalize(dump)) = %q, want version 1's %q", got, v1)
	}
}
