package main

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
	"os"
	"path/filepath"
	"syscall"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
)

// client talks to a running server's admin socket.
type client struct {
	socket string
	http   *http.Client
}

func newClient(g *globalFlags) *client {
	sock := filepath.Join(g.stateDir, "admin.sock")
	return &client{socket: sock, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

func (c *client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://pgbranchproxy"+path, rd)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("no server is running on %s (start one with: pgbranchproxy serve --state-dir %s)", c.socket, filepath.Dir(c.socket))
		}
		if errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("permission denied on %s: run as the user that runs the server", c.socket)
		}
		return nil, err
	}
	return resp, nil
}

// call does a request and decodes a JSON answer into out (if not nil).
func (c *client) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e admin.Error
		if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("server answered %s", resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// stream reads newline-delimited progress until the final line.
func (c *client) stream(ctx context.Context, path string, body any, progress func(string)) (*admin.Progress, error) {
	resp, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e admin.Error
		json.NewDecoder(resp.Body).Decode(&e)
		return nil, errors.New(e.Error)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var p admin.Progress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, err
		}
		switch {
		case p.Error != "":
			return nil, errors.New(p.Error)
		case p.Source != nil:
			return &p, nil
		default:
			progress(p.Progress)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the server closed the connection before the seed was ready")
}
