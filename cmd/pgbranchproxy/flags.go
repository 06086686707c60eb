package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// sizeFlag is a flag holding a byte count written like 500MB or 2GB.
type sizeFlag struct{ p *int64 }

func (f sizeFlag) String() string {
	if f.p == nil {
		return "0"
	}
	// In the largest unit that writes it whole, as Set reads it back.
	n := *f.p
	for _, u := range []struct {
		name  string
		bytes int64
	}{{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}} {
		if n != 0 && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (f sizeFlag) Set(s string) error {
	n, ok := router.ParseSize(s)
	if !ok {
		return fmt.Errorf("%q is not a size: use e.g. 500MB, 2GB or a number of bytes", s)
	}
	*f.p = n
	return nil
}

func (f sizeFlag) Type() string { return "size" }

// ttlFlag is a flag holding a time to live written as pgbranch.ttl takes it: a
// duration (90m, 12h), days (7d) or whole seconds (3600); never negative.
type ttlFlag struct{ p *time.Duration }

func (f ttlFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return "0" // what the help takes for no default
	}
	if day := 24 * time.Hour; *f.p%day == 0 {
		return strconv.FormatInt(int64(*f.p/day), 10) + "d"
	}
	return f.p.String()
}

func (f ttlFlag) Set(s string) error {
	d, ok := router.ParseTTL(s)
	if !ok {
		return fmt.Errorf("%q is not a time to live: use e.g. 90m, 12h, 7d or a number of seconds", s)
	}
	*f.p = d
	return nil
}

func (f ttlFlag) Type() string { return "duration" }
