package main

import (
	"context"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
)

// authSecret reads the catalog's secret for the stand-in logins of roles that do
// not exist (catalog.AuthSecret), which every server on the catalog shares. When
// the catalog cannot give it, this process uses a secret of its own (nil), which
// lets a client that compares the stand-in salts of two servers tell a role that
// does not exist: that is said in the log.
func authSecret(cat *catalog.Catalog, log *zap.Logger) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	secret, err := cat.AuthSecret(ctx)
	if err != nil {
		log.Warn("login secret: using one of this process; roles that do not exist get other salts than on other servers of the catalog", zap.Error(err))
		return nil
	}
	return secret
}
