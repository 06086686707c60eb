package main

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/cluster"
)

// cluster init and issue make files that a front and a node complete a mutual
// TLS handshake with, and refuse with the exit codes scripts branch on.
func TestClusterCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	out, code, err := runRoot("cluster", "init", "--dir", dir)
	if err != nil || !strings.Contains(out, filepath.Join(dir, "ca.crt")) {
		t.Fatalf("init: %q, %v (exit %d)", out, err, code)
	}
	out, code, err = runRoot("cluster", "issue", "--dir", dir, "--role", "node", "--name", "a",
		"--host", "127.0.0.1", "--host", "node-a.internal", "--json")
	var node clusterCert
	if err != nil || json.Unmarshal([]byte(out), &node) != nil {
		t.Fatalf("issue node: %q, %v (exit %d)", out, err, code)
	}
	if node.Role != "node" || node.Name != "a" || strings.Join(node.Hosts, ",") != "node-a.internal,127.0.0.1" ||
		node.Key != filepath.Join(dir, "node-a.key") || len(node.SHA256) != 64 {
		t.Errorf("issue node --json: %+v", node)
	}
	if fi, err := os.Stat(node.Key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("node key: %v, %v", fi.Mode(), err)
	}
	if out, code, err = runRoot("cluster", "issue", "--dir", dir, "--role", "front", "--name", "f1"); err != nil {
		t.Fatalf("issue front: %q, %v (exit %d)", out, err, code)
	}
	clusterHandshake(t, dir, "a", "f1")

	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantCode int
	}{
		{"second init", []string{"init", "--dir", dir}, "already exists", exitExists},
		{"duplicate member", []string{"issue", "--dir", dir, "--role", "node", "--name", "a"}, "pass --force", exitExists},
		{"unknown role", []string{"issue", "--dir", dir, "--role", "admin", "--name", "x"}, "unknown role", exitUsage},
		{"bad name", []string{"issue", "--dir", dir, "--role", "node", "--name", "../x"}, "member name", exitUsage},
		{"bad host", []string{"issue", "--dir", dir, "--role", "node", "--name", "x", "--host", "a b"}, "host", exitUsage},
		{"negative lifetime", []string{"init", "--dir", t.TempDir(), "--lifetime", "-1h"}, "negative duration", exitUsage},
		{"no CA", []string{"issue", "--dir", t.TempDir(), "--role", "node", "--name", "x"}, "cluster init", exitNotFound},
		{"no name", []string{"issue", "--dir", dir, "--role", "node"}, `"name" not set`, exitError},
	}
	for _, tc := range tests {
		out, code, err := runRoot(append([]string{"cluster"}, tc.args...)...)
		if code != tc.wantCode || err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %q, %v (exit %d), want an error with %q and exit %d", tc.name, out, err, code, tc.wantErr, tc.wantCode)
		}
	}

	out, code, err = runRoot("cluster", "issue", "--dir", dir, "--role", "node", "--name", "a", "--force", "--json")
	var again clusterCert
	if err != nil || json.Unmarshal([]byte(out), &again) != nil || again.SHA256 == node.SHA256 || len(again.Hosts) != 0 {
		t.Fatalf("issue --force: %q, %v (exit %d)", out, err, code)
	}
	clusterHandshake(t, dir, "a", "f1")
}

// clusterHandshake has the front of name front, loaded from dir, complete a TLS
// handshake over loopback with the node of name node.
func clusterHandshake(t *testing.T, dir, node, front string) {
	t.Helper()
	n, err := cluster.Load(cluster.MemberFiles(dir, cluster.RoleNode, node), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cluster.Load(cluster.MemberFiles(dir, cluster.RoleFront, front), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := n.ListenerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := f.DialConfig(node)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, err = c.Write([]byte{1}) // after the handshake, which Write runs
			c.Close()
		}
		errc <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cli)
	if err == nil {
		_, err = io.ReadFull(c, make([]byte, 1))
		c.Close()
	}
	if srvErr := <-errc; err != nil || srvErr != nil {
		t.Fatalf("handshake between front %q and node %q: front %v, node %v", front, node, err, srvErr)
	}
}

// TestMemberTLSFingerprint: a node logs its cluster certificate's SHA-256, as
// cluster issue printed it, under sha256_fingerprint (the field held "cluster
// node-1").
func TestMemberTLSFingerprint(t *testing.T) {
	dir := t.TempDir()
	if _, err := cluster.Init(dir, cluster.Options{}); err != nil {
		t.Fatal(err)
	}
	iss, err := cluster.Issue(dir, cluster.Request{Role: cluster.RoleNode, Name: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cluster.Load(cluster.MemberFiles(dir, cluster.RoleNode, "node-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, fp, err := memberTLS(m)
	if err != nil || cfg == nil || fp != iss.Fingerprint {
		t.Fatalf("memberTLS: %q %v, want the issued fingerprint %q", fp, err, iss.Fingerprint)
	}
}
