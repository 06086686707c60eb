package peer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
	"go.uber.org/zap"
)

// Seeds finds the seeds a node serves to its peers.
type Seeds interface {
	// SeedForPeer returns the directory of the seed with id and its manifest,
	// or an error wrapping fs.ErrNotExist when the node does not hold it.
	SeedForPeer(ctx context.Context, id int64) (dir string, m seedcopy.Manifest, err error)
}

// maxManifest bounds a manifest's encoding: a seed of a million files is
// far beyond any here.
const maxManifest = 256 << 20

// maxSends is how many seeds a node sends at once: after a refresh every other
// node asks the builder at the same moment; the ones turned away (503) ask a
// node that holds a copy, or the builder again at their next pass.
const maxSends = 2

// Handler serves GET /v1/seeds/<id> from seeds.
func Handler(seeds Seeds, log *zap.Logger) http.Handler {
	sends := make(chan struct{}, maxSends)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/seeds/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			http.Error(w, "bad seed id", http.StatusBadRequest)
			return
		}
		select {
		case sends <- struct{}{}:
			defer func() { <-sends }()
		default:
			http.Error(w, "this node is sending other seeds: ask another", http.StatusServiceUnavailable)
			return
		}
		dir, m, err := seeds.SeedForPeer(r.Context(), id)
		if errors.Is(err, fs.ErrNotExist) {
			http.Error(w, "the seed is not on this node", http.StatusNotFound)
			return
		}
		if err != nil {
			log.Warn("serve a seed to a peer", zap.Int64("seed", id), zap.Error(err))
			http.Error(w, "the seed could not be read: see the node's log", http.StatusInternalServerError)
			return
		}
		send(w, r, dir, m, id, log)
	})
	return mux
}

// send writes the length-prefixed manifest, then the seed's files.
func send(w http.ResponseWriter, r *http.Request, dir string, m seedcopy.Manifest, id int64, log *zap.Logger) {
	js, err := json.Marshal(m)
	if err != nil || len(js) > maxManifest {
		http.Error(w, "manifest too large", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(js)))
	if _, err := w.Write(append(n[:], js...)); err != nil {
		return
	}
	files, size := m.Bytes()
	if err := seedcopy.Send(w, dir, m); err != nil {
		// The status is sent: the peer sees a cut stream, which Receive refuses.
		log.Warn("send a seed to a peer", zap.Int64("seed", id), zap.Error(err))
		return
	}
	log.Info("sent a seed to a peer", zap.Int64("seed", id), zap.Int("files", files), zap.Int64("bytes", size),
		zap.String("peer", r.RemoteAddr))
}
