package catalog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrInUse is returned by Own when another server has the catalog.
var ErrInUse = errors.New("catalog is in use by another server")

const ownerLock = `hashtext('pgbranchproxy.catalog.owner')`

// releaseGrace is how long a claim waits for a lock that may be held by a
// session its holder has just closed.
const releaseGrace = 3 * time.Second

// nodeLock is a node's own lock; its argument is the node id.
const nodeLock = `hashtext('pgbranchproxy.catalog.node.' || $1)`

// Own claims the catalog for this server until release is called: two servers on one
// catalog would each reconcile the other's branches as strays. On Postgres it is a
// session advisory lock held on a connection of its own. The lock goes with that
// connection (the catalog's server restarted or was killed): the owner then takes
// it again as soon as the catalog answers, and until it holds it again every write
// fails with ErrUnavailable, so that a second server that took it meanwhile is the
// only one writing. A SQLite catalog is a file of one state directory, whose own
// lock already keeps a second server out, so Own takes nothing there. release
// returns without waiting on the catalog.
func (c *Catalog) Own(ctx context.Context) (release func(), err error) {
	return c.own1(ctx, "")
}

// OwnNode claims the catalog for the node id, beside other nodes: each node
// holds the catalog's lock shared and a lock of its own exclusively, so that
// nodes run side by side (each reconciles only its own rows), while a server
// that owns the catalog alone (Own) and a second process of the same node are
// kept out. Postgres only: a SQLite catalog serves the one server of its state
// directory. Held and given up as Own's.
func (c *Catalog) OwnNode(ctx context.Context, id string) (release func(), err error) {
	if c.d.name() != "postgres" {
		return nil, errors.New("nodes share a catalog only on Postgres: serve --role node needs --catalog postgres://…")
	}
	if id == "" {
		return nil, errors.New("own the catalog as a node: empty node id")
	}
	return c.own1(ctx, id)
}

// own1 claims the catalog alone (node "") or as the node named.
func (c *Catalog) own1(ctx context.Context, node string) (release func(), err error) {
	if c.d.name() != "postgres" {
		return func() {}, nil
	}
	rctx, cancel := context.WithCancel(context.Background())
	o := &owner{dsn: c.dsn, node: node, ctx: rctx, cancel: cancel}
	// A process that just released the lock (a restart) closed its connection
	// without waiting for the server to end the session: give that a moment.
	deadline := time.Now().Add(releaseGrace)
	err = o.take(ctx)
	for errors.Is(err, ErrInUse) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		err = o.take(ctx)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	c.own.Store(o)
	return func() {
		c.own.CompareAndSwap(o, nil)
		o.release()
	}, nil
}

// owner holds the catalog's ownership lock and takes it again when its
// connection is lost.
type owner struct {
	dsn    string
	node   string          // "": the catalog is owned alone; else the node that shares it
	ctx    context.Context // ended by release
	cancel context.CancelFunc
	held   atomic.Bool
	mu     sync.Mutex // serializes take, release
	sock   net.Conn   // the lock's connection, nil while not held
	wg     sync.WaitGroup
}

// take connects, takes the lock and watches the connection. o.mu is held or o is
// not shared yet.
func (o *owner) take(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, o.dsn)
	if err != nil {
		return fmt.Errorf("claim the catalog: %w", err)
	}
	if err := o.lock(ctx, conn); err != nil {
		conn.Close(ctx)
		return err
	}
	// The session, and with it the lock, lasts as long as this socket: the owner
	// reads it to learn at once that the server went away, and closes it to
	// release the lock without waiting for an answer.
	hj, err := conn.PgConn().Hijack()
	if err != nil {
		conn.Close(ctx)
		return fmt.Errorf("claim the catalog: %w", err)
	}
	o.sock = hj.Conn
	o.held.Store(true)
	o.wg.Add(1)
	go o.watch(hj.Conn)
	return nil
}

// lock takes, on conn, the catalog's lock (shared for a node) and a node's own.
func (o *owner) lock(ctx context.Context, conn *pgx.Conn) error {
	fn := "pg_try_advisory_lock"
	if o.node != "" {
		fn = "pg_try_advisory_lock_shared"
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT `+fn+`(`+ownerLock+`)`).Scan(&got); err != nil {
		return fmt.Errorf("claim the catalog: %w", err)
	}
	if !got {
		what := "another pgbranchproxy serve owns it alone"
		if o.node == "" {
			what = "another pgbranchproxy serve holds it (alone, or as a node: serve --role node shares a catalog)"
		}
		return fmt.Errorf("%w: %s%s", ErrInUse, what, lockHolder(ctx, conn, ownerLock))
	}
	if o.node == "" {
		return nil
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+nodeLock+`)`, o.node).Scan(&got); err != nil {
		return fmt.Errorf("claim the catalog for node %s: %w", o.node, err)
	}
	if !got {
		return fmt.Errorf("%w: another pgbranchproxy serve runs as node %s (the same state directory)%s", ErrInUse, o.node,
			lockHolder(ctx, conn, nodeLock, o.node))
	}
	return nil
}

// lockHolder describes the session that holds the advisory lock key, for errors.
func lockHolder(ctx context.Context, conn *pgx.Conn, key string, args ...any) string {
	holder := ""
	_ = conn.QueryRow(ctx, `SELECT format(' (pid %s on %s, since %s)', a.pid, coalesce(host(a.client_addr), 'a local socket'), a.backend_start)
		FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'advisory' AND l.granted AND l.objid = (`+key+`)::oid AND a.pid <> pg_backend_pid()
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1`, args...).Scan(&holder)
	return holder
}

// watch waits for the lock's connection to end, then takes the lock again,
// retrying until it holds it or release is called.
func (o *owner) watch(sock net.Conn) {
	defer o.wg.Done()
	buf := make([]byte, 512)
	for {
		if _, err := sock.Read(buf); err != nil {
			break
		}
	}
	o.mu.Lock()
	if o.sock == sock {
		o.held.Store(false)
		o.sock = nil
	}
	o.mu.Unlock()
	sock.Close()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		select {
		case <-o.ctx.Done():
			return
		case <-time.After(wait):
		}
		if o.retake(o.ctx) == nil {
			return // take started the next watch
		}
	}
}

// retake takes the lock again if it is not held.
func (o *owner) retake(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ctx.Err() != nil {
		return errors.New("the catalog was released")
	}
	if o.held.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return o.take(ctx)
}

// release gives the lock up by closing its connection, and stops the watch.
func (o *owner) release() {
	o.cancel()
	o.mu.Lock()
	if o.sock != nil {
		o.sock.Close()
		o.sock = nil
	}
	o.held.Store(false)
	o.mu.Unlock()
	o.wg.Wait()
}

// owned checks, before a write, that this server still owns the catalog if it
// claimed it, taking the lock again first if its connection was lost.
func (c *Catalog) owned(ctx context.Context) error {
	o := c.own.Load()
	if o == nil || o.held.Load() {
		return nil
	}
	if err := o.retake(ctx); err != nil {
		return fmt.Errorf("%w: this server's claim on the catalog went with its connection and is not held again: %w", ErrUnavailable, err)
	}
	return nil
}
