package main

import (
	"context"
	"io"
	"net"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/proxy"
)

// prewarmer opens server sessions on pooled branches with the proxy's startup
// handshake, for the keys the engine asks for and for serve's --warm-user list.
type prewarmer struct {
	users []string // USER or USER@DATABASE
}

func (p prewarmer) Open(ctx context.Context, dial func(context.Context) (net.Conn, error), key string) (io.Closer, error) {
	return proxy.OpenIdle(ctx, dial, key)
}

// UserKeys returns the startup keys of a session with only user and database set,
// as drivers such as pgx send by default.
func (p prewarmer) UserKeys(database string) []string {
	var keys []string
	for _, u := range p.users {
		user, db, ok := strings.Cut(u, "@")
		if !ok {
			db = database
		}
		if user == "" || db == "" {
			continue
		}
		keys = append(keys, proxy.KeyOf(map[string]string{"user": user, "database": db}))
	}
	return keys
}
