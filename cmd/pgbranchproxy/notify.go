package main

import (
	"net"
	"os"
)

// notify tells a service manager that follows the sd_notify protocol (systemd's
// Type=notify) how serve is doing: "READY=1" once it takes clients, "STOPPING=1"
// when it begins to stop. Without $NOTIFY_SOCKET it does nothing; a manager that
// cannot be reached is not serve's failure.
func notify(state string) {
	path := os.Getenv("NOTIFY_SOCKET") // a leading @ names the abstract namespace, as Go reads it
	if path == "" {
		return
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte(state))
}
