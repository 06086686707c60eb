package fail

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest/testdata/suite"
)

// TestFails fails on purpose after writing a row, so that its branch is kept.
func TestFails(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgbranchtest.URL(t, suite.Migrations))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "INSERT INTO users (email) VALUES ('left-for-debugging@example.com')"); err != nil {
		t.Fatal(err)
	}
	t.Error("deliberate failure: the branch must be kept")
}
