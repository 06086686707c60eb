package pgbranchtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// adminClient talks to the server's admin API, over its unix socket or TCP.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

func newAdminClient(addr, token string) *adminClient {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return &adminClient{base: strings.TrimRight(addr, "/"), token: token, http: &http.Client{}}
	}
	sock := strings.TrimPrefix(addr, "unix:")
	return &adminClient{base: "http://pgbranchproxy", token: token, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

// statusError is an answer with an error status.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return fmt.Sprintf("admin API: %s (HTTP %d)", e.msg, e.status) }

func isStatus(err error, status int) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == status
}

// destroy destroys the branch at path (branchPath), or finds it gone. A session its
// caller has just closed ends on the server a moment later, and the server refuses
// to destroy a branch with open sessions (409): destroy tries again for up to 10 s.
func (c *adminClient) destroy(ctx context.Context, path string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.call(ctx, http.MethodDelete, path, nil, nil)
		switch {
		case err == nil || isStatus(err, http.StatusNotFound):
			return nil
		case !isStatus(err, http.StatusConflict) || time.Now().After(deadline):
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *adminClient) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin API: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&e)
		return nil, &statusError{status: resp.StatusCode, msg: e.Error}
	}
	return resp, nil
}

func (c *adminClient) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// sourceInfo is the part of GET /v1/sources this package reads.
type sourceInfo struct {
	Name       string   `json:"name"`
	Generation int      `json:"generation"`
	Databases  []string `json:"databases"`
	From       string   `json:"from"` // a source seeded from a branch: SOURCE/BRANCH
}

func (c *adminClient) sources(ctx context.Context) ([]sourceInfo, error) {
	var out []sourceInfo
	return out, c.call(ctx, http.MethodGet, "/v1/sources", nil, &out)
}

// addSourceFromBranch seeds source name from branch (SOURCE/BRANCH) and waits until
// the seed is ready.
func (c *adminClient) addSourceFromBranch(ctx context.Context, name, branch string) error {
	resp, err := c.do(ctx, http.MethodPost, "/v1/sources", map[string]string{"Name": name, "Kind": "branch", "Branch": branch})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var p struct {
			Source *sourceInfo `json:"source"`
			Error  string      `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return err
		}
		if p.Error != "" {
			return fmt.Errorf("seed template %s from %s: %s", name, branch, p.Error)
		}
		if p.Source != nil {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("seed template %s: the server closed the connection before the seed was ready", name)
}

func branchPath(source, name string) string {
	return "/v1/branches/" + url.PathEscape(name) + "?source=" + url.QueryEscape(source)
}
