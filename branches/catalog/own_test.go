package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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

// TestOwnAcrossRestart: the claim of Own outlives a restart of the catalog's
// server (shut down or killed): the owner takes it again, before its next write at
// the latest, so a second server is still refused; if the second one got it
// first, the owner's writes fail until it holds it again. Release returns while
// the catalog is down.
func TestOwnAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop", "kill9"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			testOwnAcrossRestart(t, how)
		})
	}
}

func testOwnAcrossRestart(t *testing.T, how string) {
	catalog.TestNeedPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, url := startOwnServer(t, ctx)
	first, err := catalog.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	addSources(t, first, "a")
	second, err := catalog.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	release, err := first.Own(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restart := func() {
		t.Helper()
		if how == "kill9" {
			err = srv.Kill()
		} else {
			err = srv.Pause(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Resume(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	write := func(c *catalog.Catalog) error {
		n++
		_, err := c.InsertBranch(ctx, catalog.Branch{Source: "a", Name: fmt.Sprint("b", n), State: catalog.Creating}, "create")
		return err
	}

	restart()
	if err := write(first); err != nil {
		t.Fatalf("the owner's write after the restart: %v", err)
	}
	if _, err := second.Own(ctx); !errors.Is(err, catalog.ErrInUse) {
		t.Fatalf("a second Own after the restart and a write = %v, want ErrInUse", err)
	}

	// Whichever takes the claim first after a restart, exactly one writes.
	restart()
	release2, err := second.Own(ctx)
	switch {
	case errors.Is(err, catalog.ErrInUse):
		if err := write(first); err != nil {
			t.Fatalf("the owner's write after it took its claim again: %v", err)
		}
	case err != nil:
		t.Fatal(err)
	default:
		if err := write(first); !errors.Is(err, catalog.ErrUnavailable) || !errors.Is(err, catalog.ErrInUse) {
			t.Fatalf("the first owner's write while the second owns the catalog = %v, want ErrUnavailable for ErrInUse", err)
		}
		release2()
		// Release closes the lock's connection without waiting for the server to
		// end its session: the lock is free once it has.
		deadline := time.Now().Add(10 * time.Second)
		for err = write(first); errors.Is(err, catalog.ErrInUse) && time.Now().Before(deadline); err = write(first) {
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("the first owner's write once the second released: %v", err)
		}
	}

	if err := srv.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	release() // returns with the catalog down
	if err := srv.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for release2, err = second.Own(ctx); errors.Is(err, catalog.ErrInUse) && time.Now().Before(deadline); release2, err = second.Own(ctx) {
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Own after the first released: %v", err)
	}
	release2()
}

// TestOwnNode: nodes share a Postgres catalog, each holding it as itself; a
// second process of one node, and a server that owns the catalog alone, are
// refused while nodes hold it, and nodes while such a server does. SQLite
// catalogs have no nodes.
func TestOwnNode(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk backend) {
		ctx := context.Background()
		c1, dsn := bk.open(t)
		if bk.name == "sqlite" {
			if _, err := c1.OwnNode(ctx, "n1"); err == nil {
				t.Fatal("OwnNode of a SQLite catalog worked")
			}
			return
		}
		c2, c3 := openAgain(t, dsn), openAgain(t, dsn)
		r1, err := c1.OwnNode(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		r2, err := c2.OwnNode(ctx, "n2")
		if err != nil {
			t.Fatalf("a second node beside the first: %v", err)
		}
		if _, err := c3.OwnNode(ctx, "n1"); !errors.Is(err, catalog.ErrInUse) || !strings.Contains(err.Error(), "node n1") || !strings.Contains(err.Error(), "pid") {
			t.Fatalf("a second n1 = %v, want ErrInUse naming the node and its holder", err)
		}
		if _, err := c3.Own(ctx); !errors.Is(err, catalog.ErrInUse) {
			t.Fatalf("Own beside nodes = %v, want ErrInUse", err)
		}
		r1()
		r2()
		alone := ownEventually(t, func() (func(), error) { return c3.Own(ctx) })
		if _, err := c1.OwnNode(ctx, "n1"); !errors.Is(err, catalog.ErrInUse) {
			t.Fatalf("a node beside a server that owns the catalog alone = %v, want ErrInUse", err)
		}
		alone()
		ownEventually(t, func() (func(), error) { return c1.OwnNode(ctx, "n1") })()
	})
}

// ownEventually claims the catalog with own once the lock a release gave up is
// free: release closes the lock's connection without waiting for the server to
// end its session.
func ownEventually(t *testing.T, own func() (func(), error)) func() {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		release, err := own()
		if err == nil {
			return release
		}
		if !errors.Is(err, catalog.ErrInUse) || time.Now().After(deadline) {
			t.Fatalf("claim once released: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
