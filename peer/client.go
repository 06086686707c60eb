package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
)

// Timeouts of a fetch: to connect; for the answer to start (a node lists a
// seed settled before manifests first); and for the stream to move at all.
const (
	dialTimeout   = 10 * time.Second
	headerTimeout = 5 * time.Minute
	stallTimeout  = time.Minute
)

// Client fetches seeds from other nodes.
type Client struct {
	// TLS returns the client configuration for the node named node; nil TLS
	// (or a nil configuration) fetches over plain HTTP.
	TLS func(node string) (*tls.Config, error)
}

// Fetch copies the seed with id from the node named node, whose peer listener
// is at addr, into dir (which must not exist; see seedcopy.Receive), checking
// the manifest against digest unless it is "", and returns the manifest.
func (c *Client) Fetch(ctx context.Context, node, addr string, id int64, digest, dir string, uid, gid int) (seedcopy.Manifest, error) {
	var m seedcopy.Manifest
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr := &http.Transport{
		Proxy:                 nil,
		DisableCompression:    true,
		DialContext:           (&net.Dialer{Timeout: dialTimeout}).DialContext,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: headerTimeout,
	}
	scheme := "http"
	if c.TLS != nil {
		cfg, err := c.TLS(node)
		if err != nil {
			return m, err
		}
		if cfg != nil {
			tr.TLSClientConfig, scheme = cfg, "https"
		}
	}
	defer tr.CloseIdleConnections()
	url := fmt.Sprintf("%s://%s/v1/seeds/%d", scheme, addr, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return m, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return m, fmt.Errorf("node %s: %w", node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return m, fmt.Errorf("node %s: %s: %s", node, resp.Status, strings.TrimSpace(string(msg)))
	}
	body := bufio.NewReaderSize(newStallReader(resp.Body, stallTimeout, cancel), 1<<20)
	if m, err = readManifest(body); err != nil {
		return m, fmt.Errorf("node %s: %w", node, err)
	}
	if digest != "" && m.Digest() != digest {
		return m, fmt.Errorf("node %s: %w: its manifest of seed %d is not the one the catalog records", node, seedcopy.ErrCorrupt, id)
	}
	if err := seedcopy.Receive(body, dir, m, uid, gid); err != nil {
		return m, fmt.Errorf("seed %d from node %s: %w", id, node, err)
	}
	return m, nil
}

// readManifest reads the length-prefixed manifest that starts an answer.
func readManifest(r io.Reader) (seedcopy.Manifest, error) {
	var m seedcopy.Manifest
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return m, fmt.Errorf("%w: the manifest's length: %w", seedcopy.ErrCorrupt, err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxManifest {
		return m, fmt.Errorf("%w: a manifest of %d bytes", seedcopy.ErrCorrupt, size)
	}
	js := make([]byte, size)
	if _, err := io.ReadFull(r, js); err != nil {
		return m, fmt.Errorf("%w: the manifest: %w", seedcopy.ErrCorrupt, err)
	}
	if err := json.Unmarshal(js, &m); err != nil {
		return m, fmt.Errorf("%w: the manifest: %w", seedcopy.ErrCorrupt, err)
	}
	return m, nil
}

// stallReader cancels a fetch whose stream has not moved for d.
type stallReader struct {
	r     io.Reader
	d     time.Duration
	timer *time.Timer
}

func newStallReader(r io.Reader, d time.Duration, cancel func()) *stallReader {
	return &stallReader{r: r, d: d, timer: time.AfterFunc(d, cancel)}
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.d)
	}
	if err != nil {
		s.timer.Stop()
	}
	return n, err
}
