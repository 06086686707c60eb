package catalog_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, path := bk.open(t)
		ci := catalog.Token{Name: "github", Role: "ci", Prefix: "pr-", Hash: []byte{1, 2, 3}, CreatedAt: at(1)}
		if err := c.AddToken(ctx, ci); err != nil {
			t.Fatal(err)
		}
		if err := c.AddToken(ctx, catalog.Token{Name: "grafana", Role: "read", Hash: []byte{4}, CreatedAt: at(2)}); err != nil {
			t.Fatal(err)
		}
		if err := c.AddToken(ctx, catalog.Token{Name: "github", Role: "admin", Hash: []byte{5}}); !errors.Is(err, catalog.ErrExists) {
			t.Errorf("second token named github: %v, want ErrExists", err)
		}
		// A token outlives a restart.
		c.Close()
		c, err := catalog.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got, err := c.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Name != "github" || got[1].Name != "grafana" {
			t.Fatalf("tokens %+v", got)
		}
		g := got[0]
		if g.Role != "ci" || g.Prefix != "pr-" || !bytes.Equal(g.Hash, ci.Hash) || !g.CreatedAt.Equal(ci.CreatedAt) {
			t.Errorf("round trip: %+v, want %+v", g, ci)
		}
		if err := c.RemoveToken(ctx, "github"); err != nil {
			t.Fatal(err)
		}
		if err := c.RemoveToken(ctx, "github"); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("second remove: %v, want ErrNotFound", err)
		}
		if got, err := c.Tokens(ctx); err != nil || len(got) != 1 || got[0].Name != "grafana" {
			t.Errorf("after remove: %+v %v", got, err)
		}
	})
}

func TestAudit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, _ := bk.open(t)
		for i, e := range []catalog.AuditEntry{
			{At: at(3), Actor: "local", Action: "branch.create", Target: "main", Result: "ok"},
			{At: at(1), Actor: "github", Action: "branch.reset", Target: "main", Result: "403 Forbidden", Remote: "10.0.0.1:5555"},
			{At: at(3), Actor: "github", Action: "branch.destroy", Target: "pr-1", Result: "ok"},
		} {
			if err := c.AppendAudit(ctx, e); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
		all, err := c.Audit(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		// Oldest first; entries at the same instant in the order they were written.
		var order []string
		for _, e := range all {
			order = append(order, e.Action)
		}
		if len(all) != 3 || order[0] != "branch.reset" || order[1] != "branch.create" || order[2] != "branch.destroy" {
			t.Fatalf("order %v", order)
		}
		if e := all[0]; e.Actor != "github" || e.Target != "main" || e.Result != "403 Forbidden" || e.Remote != "10.0.0.1:5555" || !e.At.Equal(at(1)) {
			t.Errorf("round trip: %+v", e)
		}
		since, err := c.Audit(ctx, at(2))
		if err != nil {
			t.Fatal(err)
		}
		if len(since) != 2 || since[0].Action != "branch.create" {
			t.Errorf("since %v: %+v", at(2), since)
		}
	})
}
