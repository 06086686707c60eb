package branches

import "github.com/pgbranchproxy/pgbranchproxy/branches/failpoint"

// measure returns the bytes b's upper layer owns. It reads the filesystem and takes
// no lock.
func (m *Manager) measure(b *branch, upper string) (int64, error) {
	if err := m.fault(failpoint.Usage, b); err != nil {
		return 0, err
	}
	return m.usage.Owned(upper)
}
