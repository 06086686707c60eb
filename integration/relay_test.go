package integration

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// stallRelay passes TCP connections through to the Postgres catalog at
// catalogURL (a unix-socket URL, as catalogtest makes them) until stalled: then
// it forwards nothing and closes nothing, as a catalog host that stops answering
// would. It returns the URL to reach the catalog through it and a switch.
func stallRelay(t *testing.T, catalogURL string) (string, func(stalled bool)) {
	t.Helper()
	u, err := url.Parse(catalogURL)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(u.Query().Get("host"), ".s.PGSQL.5432")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	stalled := false
	gate := sync.NewCond(&mu)
	pass := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			mu.Lock()
			for stalled {
				gate.Wait()
			}
			mu.Unlock()
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", sock)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go pass(s, c)
			go pass(c, s)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		stalled = false
		gate.Broadcast()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	db := strings.TrimPrefix(u.Path, "/")
	relayURL := "postgres://" + u.Query().Get("user") + "@" + ln.Addr().String() + "/" + db + "?sslmode=disable"
	return relayURL, func(s bool) {
		mu.Lock()
		stalled = s
		gate.Broadcast()
		mu.Unlock()
	}
}
