package proxy

import "context"

// refusing is how many connections past MaxClientConns are accepted at once to
// be told 53300: past that, the accept loops stop accepting until connections
// end, and new ones wait in the kernel's backlog, where they hold no file
// descriptor of the server. Without it, clients that are refused and come back
// at once (a flood) would hold a descriptor each while they are refused, past
// any cap.
func refusing(limit int) int64 {
	return int64(max(16, limit/8))
}

// waitRoom waits until the server may accept another connection without holding
// more than MaxClientConns and refusing past it; false when ctx ended first.
func (s *Server) waitRoom(ctx context.Context) bool {
	capped := s.cfg.MaxClientConns
	if capped <= 0 {
		return true
	}
	limit := int64(capped) + refusing(capped)
	for {
		if s.Stats.Active.Load() < limit {
			return true
		}
		s.runLater() // sessions that have ended may still be counted
		s.mu.Lock()
		if s.Stats.Active.Load() < limit {
			s.mu.Unlock()
			return true
		}
		if s.room == nil {
			s.room = make(chan struct{})
		}
		room := s.room
		s.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return false
		}
	}
}
