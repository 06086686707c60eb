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
// MiB while it waits. The returned function sets the source's pool back to the
// setting it had (the server's --warm, unless the source had its own); it is
// returned also when the wait fails, so that a TestMain can call it before exiting.
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
	before, err := admin.source(ctx, source)
	if err != nil {
		return nil, fmt.Errorf("pgbranchtest: %w", err)
	}
	if err := admin.setWarm(ctx, source, n); err != nil {
		return nil, fmt.Errorf("pgbranchtest: %w", err)
	}
	restore = func(ctx context.Context) error { return admin.setWarm(ctx, source, before.Warm) }
	if err := admin.waitPooled(ctx, source, n); err != nil {
		return restore, fmt.Errorf("pgbranchtest: %w", err)
	}
	return restore, nil
}

// source returns one source's entry of GET /v1/sources.
func (c *adminClient) source(ctx context.Context, name string) (sourceInfo, error) {
	all, err := c.sources(ctx)
	if err != nil {
		return sourceInfo{}, err
	}
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return sourceInfo{}, fmt.Errorf("no source %q", name)
}

func (c *adminClient) setWarm(ctx context.Context, source string, n int) error {
	return c.call(ctx, http.MethodPatch, "/v1/sources/"+url.PathEscape(source), map[string]int{"warm": n}, nil)
}

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
