package integration

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFrontFollowsWinner: a new name placed on a node that then loses the name
// to another node (fronts that saw different live nodes) is served by the
// winner, not refused: node b is paused while the client's session waits on it,
// the name is made on node a meanwhile, and when b refuses the session the front
// follows the name to a.
func TestFrontFollowsWinner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, url := startCatalog(t, ctx)
	a := startServer(t, newStateDir(t), "--catalog", url, "--role", "node")
	b := startServer(t, newStateDir(t), "--catalog", url, "--role", "node")
	a.seedSQL("app", lifecycleSQL)
	fr := startFront(t, url)
	waitSeedCopy(t, b, "app")

	idA, idB := mustStateID(t, a.state), mustStateID(t, b.state)
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("race%d", i); placeRank("app", n, idB) > placeRank("app", n, idA) {
			name = n
		}
	}
	pid := b.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	done := make(chan error, 1)
	go func() {
		out, err := fr.psql(t, "app@"+name, "SELECT v FROM t WHERE id = 2")
		if err == nil && out != "seed" {
			err = fmt.Errorf("read %q", out)
		}
		done <- err
	}()
	time.Sleep(500 * time.Millisecond) // the front has placed the name on b and waits for it
	a.mustCLI("branch", "create", name, "--source", "app")
	syscall.Kill(pid, syscall.SIGCONT)
	stopped = false
	if err := <-done; err != nil {
		t.Fatalf("the client of a name another node won: %v\n%s", err, fr.logs())
	}
	if _, onB := b.branches()[name]; onB {
		t.Fatalf("%s is on node b too", name)
	}
	if !strings.Contains(fr.logs(), "it is elsewhere, and the session goes there") {
		t.Fatalf("the front did not follow the name (it was not placed on b?):\n%s", fr.logs())
	}
}

// placeRank is a front's rendezvous rank of a node for a new name (front/place.go).
func placeRank(source, name, node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(source))
	h.Write([]byte{0})
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(node))
	return h.Sum64()
}
