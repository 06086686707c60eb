package proxy

import (
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// errKernelLoadFails stands in for a kernel that refuses the relay's programs.
var errKernelLoadFails = errors.New("kernel relay programs refused (simulated)")

// maxKernelSessions bounds the sessions spliced at once; more go to the pumps.
const maxKernelSessions = 16384

// startKernelRelay loads the kernel relay for RelayAuto and RelayKernel. With
// RelayAuto a kernel that refuses it leaves the pumps; with RelayKernel it is an
// error.
func (s *Server) startKernelRelay() error {
	if s.cfg.Relay != RelayAuto && s.cfg.Relay != RelayKernel {
		return nil
	}
	var err error
	if s.cfg.KernelLoadFails {
		err = errKernelLoadFails
	} else {
		s.kernel, err = newKernelRelay(maxKernelSessions, uint64(s.cfg.KernelBacklog))
	}
	if err != nil {
		s.relayStats.LoadError = err.Error()
		if s.cfg.Relay == RelayKernel {
			return fmt.Errorf("proxy: --relay kernel: %w", err)
		}
		s.log.Warn("kernel relay unavailable: plaintext sessions use the epoll pump", zap.Error(err))
		return nil
	}
	s.relayStats.KernelLoaded = true
	s.relayStats.sockets = s.kernel.entries
	return nil
}
