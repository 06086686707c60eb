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
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
)

// client talks to a running server's admin API: its unix socket, or --admin-url.
type client struct {
	socket string // "" when base is a remote URL
	base   string // "http://pgbranchproxy" for the socket
	token  string
	http   *http.Client
}

func newClient(g *globalFlags) *client {
	if g.adminURL != "" {
		return &client{base: strings.TrimRight(g.adminURL, "/"), token: g.adminToken, http: &http.Client{}}
	}
	sock := filepath.Join(g.stateDir, "admin.sock")
	return &client{socket: sock, base: "http://pgbranchproxy", token: g.adminToken, http: &http.Client{Transport: &http.Transport{
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
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if noAnswer(err) {
			return nil, fmt.Errorf("%s: the server closed the connection before answering (did serve stop? its log says); the command may or may not have taken effect: branch ls and source ls show, once serve runs again", c.where())
		}
		if c.socket == "" {
			return nil, fmt.Errorf("admin API at %s: %w", c.base, err)
		}
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			dir := filepath.Dir(c.socket)
			if pid := servePID(dir); pid > 0 {
				return nil, fmt.Errorf("pgbranchproxy serve (pid %d) holds %s but does not answer on %s yet: it is starting (reconciling its branches) or stopping; try again in a moment", pid, dir, c.socket)
			}
			return nil, fmt.Errorf("no server is running on %s (start one with: pgbranchproxy serve --state-dir %s)", c.socket, dir)
		}
		if errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("permission denied on %s: run as the user that runs the server", c.socket)
		}
		return nil, err
	}
	return resp, nil
}

// noAnswer reports whether err is a request's connection closed by the server
// before it answered: serve stopped or died while it worked on the request.
func noAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// where names the server c talks to, for errors.
func (c *client) where() string {
	if c.socket == "" {
		return "admin API at " + c.base
	}
	return c.socket
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
			return &apiError{status: resp.StatusCode, msg: e.Error}
		}
		return &apiError{status: resp.StatusCode, msg: "server answered " + resp.Status}
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
		if json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error == "" {
			e.Error = "server answered " + resp.Status
		}
		return nil, &apiError{status: resp.StatusCode, msg: e.Error}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var p admin.Progress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, err
		}
		switch {
		case p.Error != "" && p.Status != 0:
			return nil, &apiError{status: p.Status, msg: p.Error}
		case p.Error != "":
			return nil, errors.New(p.Error)
		case p.Source != nil:
			return &p, nil
		default:
			progress(p.Progress)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return nil, errors.New("the server closed the connection before the seed was ready (did serve stop? its log says)")
}

// apiError is a request the server answered with an error status.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// isStatus reports whether err is an answer with that HTTP status.
func isStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status == status
}

// servePID is the pid of a live pgbranchproxy serve that holds the state
// directory dir (its serve.lock names it), or 0. It only reads: a lock probe could
// make a serve that is starting find the directory in use.
func servePID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "serve.lock"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0
	}
	args := strings.Split(string(cmdline), "\x00")
	if !strings.Contains(filepath.Base(args[0]), "pgbranchproxy") || !slices.Contains(args, "serve") {
		return 0 // the pid of a serve that has exited, now another process's
	}
	return pid
}
