package catalog_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestOwn: a Postgres catalog is owned by one server at a time; a SQLite file is
// kept to one server by its state directory's lock instead.
func TestOwn(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		first, dsn := bk.open(t)
		release, err := first.Own(ctx)
		if err != nil {
			t.Fatalf("first Own: %v", err)
		}
		second, err := catalog.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		release2, err := second.Own(ctx)
		if bk.name == "sqlite" {
			if err != nil {
				t.Fatalf("Own of a SQLite catalog: %v", err)
			}
			release2()
			release()
			return
		}
		if !errors.Is(err, catalog.ErrInUse) || !strings.Contains(err.Error(), "pid") {
			t.Fatalf("second Own = %v, want ErrInUse naming the holder", err)
		}
		release()
		release2, err = second.Own(ctx)
		if err != nil {
			t.Fatalf("Own after the first released: %v", err)
		}
		release2()
	})
}
