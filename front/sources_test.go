package front

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestLoadShared: clients that need the sources at once share one catalog read.
func TestLoadShared(t *testing.T) {
	r := newRig(t)
	b := New(r.cat, nil)
	var reads atomic.Int32
	read := b.sourcesRead
	b.sourcesRead = func(ctx context.Context) ([]catalog.Source, []catalog.Seed, error) {
		reads.Add(1)
		time.Sleep(200 * time.Millisecond) // a slow catalog: every client arrives during the read
		return read(ctx)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if srcs, err := b.load(context.Background(), false); err != nil || len(srcs) != 1 {
				t.Errorf("load: %v %v", srcs, err)
			}
		}()
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("16 clients at once read the sources %d times, want once", n)
	}
}
