package catalog_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestAuthSecret: the login secret is made once, whoever asks first, and every
// handle on the catalog (a restart, another front) gets the same one; Copy
// carries it.
func TestAuthSecret(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c, dsn := bk.open(t)
		other, err := catalog.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		got := make([][]byte, 8)
		var wg sync.WaitGroup
		for i := range got {
			h := c
			if i%2 == 1 {
				h = other
			}
			wg.Go(func() {
				s, err := h.AuthSecret(ctx)
				if err != nil {
					t.Errorf("AuthSecret: %v", err)
				}
				got[i] = s
			})
		}
		wg.Wait()
		for _, s := range got {
			if len(s) != 32 || !bytes.Equal(s, got[0]) {
				t.Fatalf("secrets %x, want one of 32 bytes", got)
			}
		}
		dst, _ := bk.open(t)
		if _, err := catalog.Copy(ctx, c, dst, false); err != nil {
			t.Fatal(err)
		}
		if s, err := dst.AuthSecret(ctx); err != nil || !bytes.Equal(s, got[0]) {
			t.Errorf("after Copy: %x, %v; want %x", s, err, got[0])
		}
	})
}
