package branches

// SetProxyAddr records the address the proxy listens on, which the admin API
// reports so that clients (`branch url`, the test helper) can build connection
// strings. Safe for concurrent use.
func (m *Manager) SetProxyAddr(addr string) {
	m.proxyAddr.Store(&addr)
	m.kickHeartbeat() // the node's address in the catalog
}

// ProxyAddr is the address given to SetProxyAddr, or "".
func (m *Manager) ProxyAddr() string {
	if p := m.proxyAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// SetProxySocket records the path of the proxy's unix socket, which the admin API
// reports. Safe for concurrent use.
func (m *Manager) SetProxySocket(path string) { m.proxySocket.Store(&path) }

// ProxySocket is the path given to SetProxySocket, or "".
func (m *Manager) ProxySocket() string {
	if p := m.proxySocket.Load(); p != nil {
		return *p
	}
	return ""
}

// SetPeerAddr records where other nodes fetch this node's seeds (the peer
// listener), which the heartbeat writes into the catalog. Safe for concurrent use.
func (m *Manager) SetPeerAddr(addr string) {
	m.peerAddr.Store(&addr)
	m.kickHeartbeat()
}

// PeerAddr is the address given to SetPeerAddr, or "".
func (m *Manager) PeerAddr() string {
	if p := m.peerAddr.Load(); p != nil {
		return *p
	}
	return ""
}
