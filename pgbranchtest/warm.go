package pgbranchtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
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
// undo each other; through a front, whose clients claim from every node's pool, it
// changes the source's warm setting and the returned function sets it back. The
// returned function is returned also when the wait fails, so that a TestMain can
// call it before exiting.
func Warm(ctx context.Context, n int, opts ...Option) (restore func(context.Context) error, err error) {
	if n < 0 {
		return nil, fmt.Errorf("pgbranchtest: Warm(%d): want 0 or more branches", n)
	}
	c := newConfig(opts)
	c.needAdmin = true
	_, _, source, admin, err := c.resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgbranchtest: %w", err)
	}
	if source == "" {
		return nil, errors.New("pgbranchtest: Warm needs the source: name it with WithSource or PGBRANCH_SOURCE")
	}
	restore, err = hold(ctx, admin, source, n)
	if err != nil {
		return nil, fmt.Errorf("pgbranchtest: %w", err)
	}
	if err := admin.waitPooled(ctx, source, n); err != nil {
		return restore, fmt.Errorf("pgbranchtest: %w", err)
	}
	return restore, nil
}

// WarmFor is how long Warm's hold on a pool lasts when its restore is never called.
var WarmFor = 2 * time.Hour

// warmSetting is a source's own warm setting in GET /v1/sources (-1: the server's).
type warmSetting struct {
	Name string `json:"name"`
	Warm int    `json:"warm_setting"`
}

// hold holds source's pool n deep for WarmFor and returns what releases the hold.
// A server that keeps no holds (a front, whose clients claim from every node's
// pool; a server older than holds) gets the source's warm setting changed instead,
// and set back by the function returned, as Warm did before holds.
func hold(ctx context.Context, admin *adminClient, source string, n int) (func(context.Context) error, error) {
	path := "/v1/sources/" + url.PathEscape(source)
	var h struct {
		ID string `json:"id"`
	}
	err := admin.call(ctx, http.MethodPost, path+"/holds", map[string]any{"warm": n, "ttl": WarmFor.String()}, &h)
	switch {
	case err == nil:
		return func(ctx context.Context) error {
			err := admin.call(ctx, http.MethodDelete, path+"/holds/"+url.PathEscape(h.ID), nil, nil)
			if isStatus(err, http.StatusNotFound) {
				return nil // gone with a restart of the server, or released already
			}
			return err
		}, nil
	case !isStatus(err, http.StatusNotImplemented) && !isStatus(err, http.StatusNotFound) && !isStatus(err, http.StatusMethodNotAllowed):
		return nil, fmt.Errorf("hold the pool of %s: %w", source, err)
	}
	var before []warmSetting
	if err := admin.call(ctx, http.MethodGet, "/v1/sources", nil, &before); err != nil {
		return nil, err
	}
	i := slices.IndexFunc(before, func(s warmSetting) bool { return s.Name == source })
	if i < 0 {
		return nil, fmt.Errorf("no source %q", source)
	}
	setWarm := func(ctx context.Context, n int) error {
		return admin.call(ctx, http.MethodPatch, path, map[string]int{"warm": n}, nil)
	}
	if err := setWarm(ctx, n); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return setWarm(ctx, before[i].Warm) }, nil
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
