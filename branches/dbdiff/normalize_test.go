package dbdiff_test

import (
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
