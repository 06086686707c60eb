package integration

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientFloodLeavesDescriptors: clients that connect and never finish logging
// in (each sends one byte, so that the kernel hands it over, and waits) are capped
// by default at a quarter of serve's open-file limit; those beyond it are told
// 53300 at once. With more of them than serve may open files, a session begun
// before the flood goes on, the admin socket answers and a branch is created,
// and logins work again once the flood ends.
func TestClientFloodLeavesDescriptors(t *testing.T) {
	const nofile, flood = 160, 200 // cap: 40
	s := startServerUnder(t, []string{"prlimit", "--nofile=160:160"}, newStateDir(t))
	s.seedSQL("app", lifecycleSQL)
	before := s.connect(t, "app@before")

	var refused atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range flood {
		wg.Go(func() { holdHalfOpen(ctx, s.addr, &refused) })
	}
	defer func() { stop(); wg.Wait() }()
	eventually(t, 60*time.Second, "clients beyond the cap told 53300", func() bool { return refused.Load() >= flood-nofile/4 })

	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, binPath, "--state-dir", s.state, "branch", "create", "during").CombinedOutput()
	if err != nil {
		t.Fatalf("branch create during the flood: %v\n%s\nserver log:\n%s", err, out, s.logs())
	}
	var n int
	if err := before.QueryRow(cctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1000 {
		t.Fatalf("the session begun before the flood: %d rows, %v", n, err)
	}
	stop()
	wg.Wait()
	eventually(t, 30*time.Second, "a login once the flood ended", func() bool {
		_, err := s.connectErr("app@during")
		return err == nil
	})
	if bytes.Contains([]byte(s.logs()), []byte("too many open files")) {
		t.Errorf("serve ran out of file descriptors:\n%s", s.logs())
	}
}

// holdHalfOpen keeps a connection to addr open that has sent one byte of a
// startup packet, and opens another when the proxy closes it, until ctx ends. A
// connection refused with 53300 counts in refused.
func holdHalfOpen(ctx context.Context, addr string, refused *atomic.Int64) {
	for ctx.Err() == nil {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		stopRead := context.AfterFunc(ctx, func() { c.Close() })
		c.Write([]byte{0})
		b := make([]byte, 256)
		n, _ := c.Read(b)
		if n > 0 && b[0] == 'E' && bytes.Contains(b[:n], []byte("C53300")) {
			refused.Add(1)
			time.Sleep(10 * time.Millisecond) // a refused client tries again, not in a tight loop
		}
		stopRead()
		c.Close()
	}
}
