package proxy

import "sync"

// relayBufSize is the size of a relay's buffer in each direction of a session.
const relayBufSize = 32 * 1024

// relayBufs keeps relay buffers between sessions: a client that connects for every
// transaction would otherwise allocate two of them per connection and keep the
// garbage collector busy.
var relayBufs = sync.Pool{New: func() any { b := make([]byte, relayBufSize); return &b }}

func getRelayBuf() *[]byte { return relayBufs.Get().(*[]byte) }

func putRelayBuf(b *[]byte) { relayBufs.Put(b) }
