package pgbranchtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Warm has the server keep n branches of the tests' source started ahead of them
// (its warm pool, `source set --warm`) and waits until n are ready, so that the
// next n calls to URL each get a running branch instead of waiting for a server to
// start. Call it from TestMain, before m.Run, with the options the tests pass to
// URL; with WithMigrations it makes the template first. A suite of many short tests
// runs fastest with n about its number of tests: each pooled server holds tens of
// MiB while it waits. The pool stays that deep until the returned function is
// called, or for at most WarmFor if it never is (a test binary that died): Warm
// holds the pool (a hold on the source, POST /v1/sources/NAME/holds) rather than
// changing its setting, so test binaries that warm the same source at once do not
// undo each other. The returned function is returned also when the wait fails, so
// that a TestMain can call it before exiting.
func Warm(ctx context.Context, n int, opts ...Option) (restore func(context.Context) error, err error) {
	if n < 0 {
		return nil, fmt.Errorf("pgbranchtest: Warm(%d): want 0 or more branches", n)
	}
	c := newConfig(opts)
	_, _, source, admin, err := c.resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgbranchtest: %w", err)
	}
	if source == "" {
		return nil, errors.New("pgbranchtest: Warm needs the source: name it with WithSource or PGBRANCH_SOURCE")
	}
	var hold struct {
		ID string `json:"id"`
	}
	err = admin.call(ctx, http.MethodPost, "/v1/sources/"+url.PathEscape(source)+"/holds",
		map[string]any{"warm": n, "ttl": WarmFor.String()}, &hold)
	if err != nil {
		return nil, fmt.Errorf("pgbranchtest: hold the pool of %s: %w", source, err)
	}
	restore = func(ctx context.Context) error {
		return admin.call(ctx, http.MethodDelete, "/v1/sources/"+url.PathEscape(source)+"/holds/"+url.PathEscape(hold.ID), nil, nil)
	}
	if err := admin.waitPooled(ctx, source, n); err != nil {
		return restore, fmt.Errorf("pgbranchtest: %w", err)
	}
	return restore, nil
}

// WarmFor is how long Warm's hold on a pool lasts when its restore is never called.
var WarmFor = 2 * time.Hour

// waitPooled waits until source has n pooled branches ready to be claimed.
func (c *adminClient) waitPooled(ctx context.Context, source string, n int) error {
	for {
		var all []struct {
			Source string `json:"source"`
			State  string `json:"state"`
		}
		if err := c.call(ctx, http.MethodGet, "/v1/branches?all=true", nil, &all); err != nil {
			return err
		}
		ready := 0
		for _, b := range all {
			if b.Source == source && b.State == "pooled" {
				ready++
			}
		}
		if ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d pooled branches of %s ready: %w", ready, n, source, ctx.Err())
		case <-time.After(500 * time.Millisecond): // listing measures every branch: not too often
		}
	}
}
