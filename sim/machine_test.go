package sim

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
)

// machineLine describes the machine a run's numbers come from: CPU model and
// count, kernel, and the load average when it is called.
func machineLine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	if len(f) > 3 {
		f = f[:3]
	}
	return fmt.Sprintf("%d vCPU %s, kernel %s, load average %s", goruntime.NumCPU(), model,
		strings.TrimSpace(string(kernel)), strings.Join(f, " "))
}
